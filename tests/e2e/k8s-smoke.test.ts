/**
 * The real pulumi CLI (built by the toolchain) against the embedded cluster, with
 * @pulumi/kubernetes: create, an idempotent preview, a one-resource update, destroy.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import { paths, waitForList, type KubeObject } from "../../engine/kube/index.js";
import { adminClient, isReady, withNamespace } from "../support/cluster.js";
import { programStack, repoRoot } from "../support/pulumi.js";

const program = join(repoRoot, "tests", "e2e", "programs", "k8s-smoke");

test("a Pulumi program creates a ConfigMap and a Ready Deployment, updates one resource and destroys everything", async (t) => {
  const ns = await withNamespace(t, "smoke");
  const client = adminClient();
  const { stack } = await programStack(t, program, { namespace: { value: ns } });

  const up = await stack.up();
  assert.equal(up.summary.result, "succeeded");
  assert.equal(up.outputs.readyReplicas?.value, 2, "the Deployment was awaited until Ready");
  const cm = await client.get<{ data: Record<string, string> }>(paths.configMap(ns, "settings"));
  assert.equal(cm.data.purpose, "smoke");
  const pods = await client.list(paths.pods(ns), { labelSelector: "app=smoke" });
  assert.equal(pods.items.filter(isReady).length, 2);

  const again = await stack.preview();
  assert.deepEqual(
    Object.keys(again.changeSummary).filter((op) => op !== "same"),
    [],
    "a second preview has no changes",
  );

  await stack.setConfig("greeting", { value: "bonjour" });
  const preview = await stack.preview();
  assert.equal(preview.changeSummary.update, 1, "exactly one update");
  assert.deepEqual(
    Object.keys(preview.changeSummary)
      .filter((op) => op !== "same")
      .sort(),
    ["update"],
  );
  await stack.up();
  const updated = await client.get<KubeObject>(paths.deployment(ns, "web"));
  assert.equal(updated.metadata.annotations?.greeting, "bonjour");

  const destroyed = await stack.destroy();
  assert.equal(destroyed.summary.result, "succeeded");
  assert.equal(await client.getOrUndefined(paths.configMap(ns, "settings")), undefined);
  assert.equal(await client.getOrUndefined(paths.deployment(ns, "web")), undefined);
  // Foreground deletion: the Deployment is gone only after its ReplicaSet and pods.
  const left = await waitForList(client, paths.pods(ns), (items) => items.length === 0, {
    labelSelector: "app=smoke",
    timeoutMs: 30_000,
    description: "the Deployment's pods to be gone",
  });
  assert.equal(left.length, 0);
});
