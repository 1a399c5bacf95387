/**
 * A Fleet (no Operator: the CRD is installed for the tier) through the real pulumi CLI on
 * the embedded cluster, with no controller running: drift outside Pulumi and bad input.
 * Every assertion reads the cluster's objects. (The Operator's lifecycle with a fleet is
 * fleet-operator.test.ts.)
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { paths, waitForList, waitForObject, type KubeObject } from "../../engine/kube/index.js";
import { adminClient, withNamespace } from "../support/cluster.js";
import {
  destroyOnFailure,
  expectSlots,
  fleetProgram as program,
  previewSlots,
  range,
  wholeSlotKeys,
} from "../support/fleet-program.js";
import { workerObjects } from "../support/language-program.js";
import { programStack } from "../support/pulumi.js";

test("a slot pod deleted outside Pulumi shows in a refreshing preview and comes back on up; destroy releases the pods' Jobs and ConfigMaps before it returns", async (t) => {
  const client = adminClient();
  await ensureCrd(client);
  const ns = await withNamespace(t, "e2e-drift");
  const { stack } = await programStack(t, program, {
    namespace: { value: ns },
    replicas: { value: "3" },
    toolboxes: { value: JSON.stringify([{ name: "browser", image: "tools/browser:1" }]) },
  });

  await destroyOnFailure(stack, async () => {
    await stack.up();
    await expectSlots(ns, "fleet", range(0, 3), ["browser"]);
    const before = await client.get<KubeObject>(paths.pod(ns, "fleet-2"));

    await client.delete(paths.pod(ns, "fleet-2"));
    await waitForObject(client, paths.pods(ns), "fleet-2", (p) => p === undefined, {
      timeoutMs: 30_000,
      description: "pod fleet-2 to be gone",
    });
    const refreshed = await previewSlots(stack, { refresh: true });
    assert.equal(refreshed.step?.op, "update", "the missing slot makes the Slots resource change");
    assert.deepEqual(wholeSlotKeys(refreshed.step, "add"), [2]);

    await stack.up();
    const restored = await client.get<KubeObject>(paths.pod(ns, "fleet-2"));
    assert.notEqual(restored.metadata.uid, before.metadata.uid, "slot 2 is a new pod");

    for (const name of ["fleet-1", "fleet-2"]) {
      const pod = await client.get<KubeObject>(paths.pod(ns, name));
      await workerObjects(ns, { name, uid: pod.metadata.uid ?? "" });
    }
    // The Job controller has started each Job's pod: the tree is three levels deep.
    await waitForList(client, paths.pods(ns), (items) => items.length === 2, {
      labelSelector: "e2e.cocoonset.cocoonstack.io/worker",
      timeoutMs: 30_000,
      description: "the worker Jobs' pods",
    });
  });

  const destroyed = await stack.destroy();
  assert.equal(destroyed.summary.result, "succeeded");
  // No wait: destroy returns only once the whole tree is gone.
  const pods = await client.list(paths.pods(ns));
  assert.deepEqual(
    pods.items.map((p) => p.metadata.name),
    [],
    "no agent, toolbox or Job pod is left",
  );
  assert.deepEqual((await client.list(paths.jobs(ns))).items, [], "no Job is left");
  const configMaps = await client.list(paths.configMaps(ns));
  assert.deepEqual(
    configMaps.items.map((c) => c.metadata.name).filter((n) => n !== "kube-root-ca.crt"),
    [],
    "no ConfigMap is left",
  );
  assert.deepEqual((await client.list(paths.cocoonSets(ns))).items, [], "no CocoonSet is left");
});

test("bad input fails preview naming the field, and nothing is created", async (t) => {
  const client = adminClient();
  await ensureCrd(client);
  const ns = await withNamespace(t, "e2e-bad");
  const { stack } = await programStack(t, program, { namespace: { value: ns } });

  const cases: [string, Record<string, string>, RegExp][] = [
    ["negative replicas", { replicas: "-1" }, /spec\.agent\.replicas/],
    ["empty image", { image: "" }, /spec\.agent\.image/],
    [
      "numeric toolbox name",
      { toolboxes: JSON.stringify([{ name: "42", image: "tools/x:1" }]) },
      /spec\.toolboxes\[0\]\.name/,
    ],
  ];
  for (const [what, config, message] of cases) {
    await stack.setAllConfig({
      namespace: { value: ns },
      replicas: { value: config.replicas ?? "2" },
      image: { value: config.image ?? "agents/coder:1" },
      toolboxes: { value: config.toolboxes ?? "[]" },
    });
    await assert.rejects(stack.preview(), message, what);
  }

  // up with a negative count also stops before anything exists.
  await stack.setConfig("replicas", { value: "-1" });
  await stack.setConfig("image", { value: "agents/coder:1" });
  await stack.setConfig("toolboxes", { value: "[]" });
  await assert.rejects(stack.up(), /spec\.agent\.replicas/);
  assert.deepEqual((await client.list(paths.cocoonSets(ns))).items, [], "no CocoonSet");
  assert.deepEqual((await client.list(paths.pods(ns))).items, [], "no pod");
});
