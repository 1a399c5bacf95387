/**
 * `pulumi up` and the controller converge the same fleet at the same time: the provider's
 * fan-out and the controller's passes race for the same slots, and the result must be
 * exactly the desired pods, none deleted on the way (no duplicates, no flapping).
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { LABELS } from "../../engine/spec/index.js";
import { paths, type WatchEvent } from "../../engine/kube/index.js";
import { adminClient, testKubeconfig } from "../support/cluster.js";
import { Cleanup, controllerNamespace, startController } from "../support/controller-process.js";
import { programStack, repoRoot } from "../support/pulumi.js";

const program = join(repoRoot, "tests", "e2e", "programs", "fleet");

test("pulumi up racing a running controller ends with exactly the desired pods and deletes none", async (t) => {
  const client = adminClient();
  await ensureCrd(client);
  const c = new Cleanup(t);
  const ns = await controllerNamespace(c, "race");
  const controller = await startController(c, { kubeconfig: testKubeconfig(), namespaces: [ns] });
  await controller.synced();

  // Record every pod event of the fleet while both writers work.
  const events: WatchEvent[] = [];
  const watching = new AbortController();
  const list = await client.list(paths.pods(ns));
  const watch = client
    .watch(
      paths.pods(ns),
      { resourceVersion: list.metadata.resourceVersion, labelSelector: `${LABELS.name}=race` },
      (ev) => void events.push(ev),
      watching.signal,
    )
    .catch(() => undefined);

  const { stack } = await programStack(t, program, {
    namespace: { value: ns },
    name: { value: "race" },
    replicas: { value: "40" },
  });
  try {
    const up = await stack.up();
    assert.equal(up.summary.result, "succeeded");
    const scaled = await stack.setConfig("replicas", { value: "60" }).then(() => stack.up());
    assert.equal(scaled.summary.result, "succeeded");

    const pods = (await client.list(paths.pods(ns), { labelSelector: `${LABELS.name}=race` }))
      .items;
    assert.deepEqual(
      pods.map((p) => p.metadata.name).sort(),
      Array.from({ length: 61 }, (_, s) => `race-${s}`).sort(),
      "exactly slots 0..60",
    );
    watching.abort();
    await watch;
    const deleted = events.filter((e) => e.type === "DELETED").map((e) => e.object.metadata.name);
    assert.deepEqual(deleted, [], "no pod was deleted while both converged the fleet");
    const creates = events.filter((e) => e.type === "ADDED").length;
    assert.equal(creates, 61, "each slot was created once");

    const again = await stack.preview();
    assert.deepEqual(
      Object.keys(again.changeSummary).filter((op) => op !== "same"),
      [],
      "no changes afterwards",
    );
  } finally {
    watching.abort();
    await stack.destroy();
  }
});
