/**
 * A stack whose stored kubeconfig went stale (here: the service account whose token it
 * carries was deleted, as a cluster re-created by `cocoonset-dev cluster down` and `up` would
 * leave it): `pulumi destroy` fails with a message that says so and how to proceed, and
 * the recipe it gives (`pulumi up` with the current kubeconfig, then `destroy`) works.
 */
import type { LocalWorkspace } from "@pulumi/pulumi/automation/index.js";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { LABELS } from "../../engine/spec/index.js";
import { KubeApiError, KubeClient, paths, waitForList } from "../../engine/kube/index.js";
import { adminClient, suffix, testKubeconfig, withNamespace } from "../support/cluster.js";
import { programStack, repoRoot } from "../support/pulumi.js";

const program = join(repoRoot, "tests", "e2e", "programs", "fleet");

/** Polls (every 500 ms, at most 60 s) until the kubeconfig's credentials get a 401. */
async function untilRejected(kubeconfig: string, ns: string): Promise<void> {
  const stale = new KubeClient({ kubeconfig });
  try {
    const deadline = Date.now() + 60_000;
    for (;;) {
      try {
        await stale.get(paths.namespace(ns));
      } catch (e) {
        if (KubeApiError.isInstance(e) && e.status === 401) return;
        throw e;
      }
      if (Date.now() > deadline) assert.fail("the deleted account's token is still accepted");
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  } finally {
    stale.close();
  }
}

test("destroy with a stale stored kubeconfig explains itself, and `pulumi up` then `destroy` recovers", async (t) => {
  const client = adminClient();
  await ensureCrd(client);
  const ns = await withNamespace(t, "e2e-stale");
  const name = `stale-${suffix()}`;
  const { stack, backend } = await programStack(t, program, {
    namespace: { value: ns },
    name: { value: name },
    replicas: { value: "2" },
  });

  // A kubeconfig with a service account token that stops working once the account is gone.
  const sa = `deployer-${suffix()}`;
  await client.create(paths.serviceAccounts(ns), {
    apiVersion: "v1",
    kind: "ServiceAccount",
    metadata: { name: sa },
  });
  const binding = `e2e-stale-${sa}`;
  await client.create(paths.clusterRoleBindings(), {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "ClusterRoleBinding",
    metadata: { name: binding },
    roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "cluster-admin" },
    subjects: [{ kind: "ServiceAccount", name: sa, namespace: ns }],
  });
  t.after(async () => {
    await client.delete(paths.clusterRoleBinding(binding));
  });
  const tr = await client.create<{ status: { token: string } }>(paths.serviceAccountToken(ns, sa), {
    apiVersion: "authentication.k8s.io/v1",
    kind: "TokenRequest",
    spec: { expirationSeconds: 3600 },
  });
  const cluster = client.config.getCurrentCluster()!;
  const staleFile = join(backend, "..", "deployer-kubeconfig.json");
  writeFileSync(
    staleFile,
    JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [
        {
          name: "c",
          cluster: { server: cluster.server, "certificate-authority-data": cluster.caData },
        },
      ],
      users: [{ name: sa, user: { token: tr.status.token } }],
      contexts: [{ name: "c", context: { cluster: "c", user: sa } }],
      "current-context": "c",
    }),
    { mode: 0o600 },
  );

  const podsOfFleet = (items: { metadata: { deletionTimestamp?: string } }[]) =>
    items.filter((p) => !p.metadata.deletionTimestamp).length;
  try {
    (stack.workspace as LocalWorkspace).envVars.KUBECONFIG = staleFile;
    const up = await stack.up();
    assert.equal(up.summary.result, "succeeded");
    await client.delete(`${paths.serviceAccounts(ns)}/${sa}`);
    // The apiserver caches a token's successful authentication for a few seconds: wait until
    // it really rejects the stale token, so destroy meets what a re-created cluster does.
    await untilRejected(staleFile, ns);

    // The stored kubeconfig is now rejected; the current one is the admin's.
    (stack.workspace as LocalWorkspace).envVars.KUBECONFIG = testKubeconfig();
    let message = "";
    await assert.rejects(stack.destroy(), (e: Error) => {
      message = e.message;
      return true;
    });
    assert.match(message, /uses the kubeconfig the stack stored at its last `pulumi up`/);
    assert.match(message, /it rejects the credentials/);
    assert.ok(message.includes(cluster.server), message);
    assert.match(message, /run `pulumi up` with the current kubeconfig first/);
    assert.match(message, /pulumi state delete/);
    const stillThere = await client.list(paths.pods(ns), {
      labelSelector: `${LABELS.name}=${name}`,
    });
    assert.equal(
      podsOfFleet(stillThere.items),
      3,
      "nothing was released by the failed destroy (main + 2)",
    );

    // The recipe: `pulumi up` with the current kubeconfig stores it; destroy then works.
    const again = await stack.up();
    assert.equal(again.summary.result, "succeeded");
    const down = await stack.destroy();
    assert.equal(down.summary.result, "succeeded");
    await waitForList(client, paths.pods(ns), (items) => podsOfFleet(items) === 0, {
      labelSelector: `${LABELS.name}=${name}`,
      timeoutMs: 30_000,
      description: "the fleet's pods to be gone",
    });
  } catch (e) {
    (stack.workspace as LocalWorkspace).envVars.KUBECONFIG = testKubeconfig();
    await stack.destroy().catch(() => undefined);
    throw e;
  }
});
