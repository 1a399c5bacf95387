/**
 * One kubeconfig, given once, through the real pulumi CLI: a program that targets the
 * cluster through an explicit Kubernetes provider (and has no usable `$KUBECONFIG`) deploys
 * and destroys a Fleet, its slots taking the provider's kubeconfig. And the slots resource
 * acts only on the CocoonSet its Fleet created: a same-named one with another uid (what a
 * kubeconfig reaching another cluster would find) is never released.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { API_VERSION } from "../../engine/kube/api-names.js";
import { KIND, LABELS } from "../../engine/spec/index.js";
import { paths, waitForObject, type KubeObject } from "../../engine/kube/index.js";
import { adminClient, testKubeconfig, withNamespace } from "../support/cluster.js";
import { programStack, repoRoot } from "../support/pulumi.js";

const program = join(repoRoot, "tests", "e2e", "programs", "fleet");

async function podNames(ns: string): Promise<string[]> {
  const list = await adminClient().list(paths.pods(ns), {
    labelSelector: `${LABELS.name}=fleet`,
  });
  return list.items
    .filter((p) => !p.metadata.deletionTimestamp)
    .map((p) => p.metadata.name ?? "")
    .sort();
}

test("a Fleet given a Kubernetes provider takes its kubeconfig, and its slots never release a CocoonSet with another uid", async (t) => {
  const client = adminClient();
  await ensureCrd(client);
  const ns = await withNamespace(t, "e2e-kubeconfig");
  const { stack } = await programStack(t, program, {
    namespace: { value: ns },
    replicas: { value: "2" },
    providerKubeconfig: { value: readFileSync(testKubeconfig(), "utf8"), secret: true },
  });
  // Nothing to fall back on: the only kubeconfig the program has is the provider's.
  stack.workspace.envVars.KUBECONFIG = join(tmpdir(), `${ns}-no-such-kubeconfig`);

  try {
    const up = await stack.up();
    assert.equal(up.summary.result, "succeeded");
    assert.deepEqual(await podNames(ns), ["fleet-0", "fleet-1", "fleet-2"]);

    // Another CocoonSet of the same name (another uid) in place of the Fleet's, recreated
    // outside Pulumi from the same spec (a different spec written by another field manager
    // would stop `up --refresh` below at a server-side apply conflict).
    const ours = await client.get<KubeObject>(paths.cocoonSet(ns, "fleet"));
    await client.patch(paths.cocoonSet(ns, "fleet"), { metadata: { finalizers: null } });
    await client.delete(paths.cocoonSet(ns, "fleet"));
    await waitForObject(client, paths.cocoonSets(ns), "fleet", (o) => o === undefined, {
      timeoutMs: 30_000,
      description: "the Fleet's CocoonSet to be gone",
    });
    const other = await client.create<KubeObject>(paths.cocoonSets(ns), {
      apiVersion: API_VERSION,
      kind: KIND,
      // As a saved manifest re-applied: with the Fleet's created-by stamp (without it the
      // Fleet's claim guard refuses the new one until the program says adoptCocoonSet).
      metadata: { name: "fleet", namespace: ns, annotations: ours.metadata.annotations },
      spec: ours.spec,
    });

    await assert.rejects(
      stack.destroy(),
      new RegExp(
        `\\[kubeconfig\\] cannot release the fleet: the CocoonSet ${ns}/fleet in the cluster the slots resource's kubeconfig reaches \\(\\S+\\) has uid ${other.metadata.uid}, not ${ours.metadata.uid}, the one this Fleet created; nothing was changed`,
      ),
    );
    const still = await client.get<KubeObject>(paths.cocoonSet(ns, "fleet"));
    assert.equal(still.metadata.uid, other.metadata.uid);
    assert.equal(still.metadata.deletionTimestamp, undefined, "the other CocoonSet is untouched");

    // The way out the message gives: `up --refresh` takes the new CocoonSet over.
    await stack.up({ refresh: true });
    assert.deepEqual(await podNames(ns), ["fleet-0", "fleet-1", "fleet-2"]);
  } catch (e) {
    await stack.destroy().catch(() => undefined);
    throw e;
  }
  const destroyed = await stack.destroy();
  assert.equal(destroyed.summary.result, "succeeded");
  assert.equal(await client.getOrUndefined(paths.cocoonSet(ns, "fleet")), undefined);
  assert.deepEqual(await podNames(ns), []);
});
