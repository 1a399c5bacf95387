/**
 * A Fleet (no Operator: the CRD is installed for the tier) through the real pulumi CLI on
 * the embedded cluster, with no controller running: drift outside Pulumi, bad input, and what
 * `up` waits for before it returns.
 * Every assertion reads the cluster's objects. (The Operator's lifecycle with a fleet is
 * fleet-operator.test.ts.)
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { paths, waitForList, waitForObject, type KubeObject } from "../../engine/kube/index.js";
import { adminClient, suffix, withNamespace } from "../support/cluster.js";
import {
  destroyOnFailure,
  expectSlots,
  fleetProgram as program,
  previewSlots,
  range,
  wholeSlotKeys,
} from "../support/fleet-program.js";
import { workerObjects } from "../support/language-program.js";
import { poolNode, setAllocatable } from "../support/pool-node.js";
import { programStack, failure } from "../support/pulumi.js";

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

interface PodObject extends KubeObject {
  status?: {
    phase?: string;
    conditions?: { type: string; status: string; lastTransitionTime?: string }[];
  };
}

test("up returns only once every member is Ready (a toolbox held Pending until its node grows), with outputs that say Running; a timeout names the member and why; skipAwait returns at once and alone changes nothing", async (t) => {
  const client = adminClient();
  await ensureCrd(client);
  const ns = await withNamespace(t, "e2e-ready");
  // A node pool of the test's own: a toolbox that asks for more cpu than its one node has is
  // left Pending by the scheduler until the test grows the node.
  const pool = `ready-${suffix()}`;
  const node = await poolNode(t, pool, { cpu: "4", memory: "16Gi", pods: "20" });
  const toolbox = (name: string, cpu: string) => ({
    name,
    image: "tools/big:1",
    resources: { requests: { cpu } },
  });
  const { stack } = await programStack(t, program, {
    namespace: { value: ns },
    replicas: { value: "1" },
    nodePool: { value: pool },
    // The forecast would refuse the toolbox: the point is a member that comes late.
    capacityCheck: { value: "off" },
    toolboxes: { value: JSON.stringify([toolbox("big", "8")]) },
    timeoutSeconds: { value: "10" },
  });
  const pod = (name: string) => client.get<PodObject>(paths.pod(ns, name));
  const readySince = (p: PodObject) =>
    p.status?.conditions?.find((c) => c.type === "Ready" && c.status === "True")
      ?.lastTransitionTime;

  await destroyOnFailure(stack, async () => {
    // Out of time: `up` fails naming the member that is not Ready, with the scheduler's words.
    const failed = await failure(stack.up());
    assert.match(
      failed,
      new RegExp(
        `fleet ${ns}/fleet was not Ready within 10s \\(timeoutSeconds\\): 2 of 3 member\\(s\\) Ready; fleet-big \\(toolbox big\\): phase Pending, PodScheduled False \\(Unschedulable: .*Insufficient cpu.*\\), last Warning event FailedScheduling: .*Insufficient cpu.*[^.]\\. The fleet is left as it is`,
      ),
      failed,
    );
    assert.doesNotMatch(failed, /fleet-0 \(|fleet-1 \(/, "the Ready members are not named");
    assert.equal(readySince(await pod("fleet-big")), undefined, "fleet-big is not Ready");

    // `up` waits: it says what it waits for, and returns only after the node grew and the
    // toolbox became Ready.
    await stack.setConfig("timeoutSeconds", { value: "120" });
    let settled = false;
    let seenWaiting: () => void = () => undefined;
    const waiting = new Promise<void>((resolve) => (seenWaiting = resolve));
    const up = stack
      .up({
        onEvent: (e) => {
          if (e.diagnosticEvent?.message.includes("Ready; waiting for fleet-big")) seenWaiting();
        },
      })
      .finally(() => (settled = true));
    await Promise.race([waiting, up]);
    assert.equal(settled, false, "up is still running while it waits for fleet-big");
    assert.equal(readySince(await pod("fleet-big")), undefined, "fleet-big is not Ready yet");
    const grownAt = new Date();
    await setAllocatable(node, { cpu: "16", memory: "16Gi", pods: "20" });
    const result = await up;
    const returnedAt = new Date();
    assert.equal(result.summary.result, "succeeded");
    const readyAt = readySince(await pod("fleet-big"));
    assert.ok(readyAt, "fleet-big is Ready once up returned");
    // The condition's time has second precision.
    assert.ok(new Date(readyAt).getTime() >= Math.floor(grownAt.getTime() / 1000) * 1000);
    assert.ok(new Date(readyAt).getTime() <= returnedAt.getTime());
    const status = result.outputs.status.value as Record<string, unknown>;
    assert.equal(result.outputs.phase.value, "Running");
    assert.deepEqual(
      [status.readyAgents, status.desiredAgents, status.readyToolboxes, status.desiredToolboxes],
      [2, 2, 1, 1],
    );
    const live = await client.get<KubeObject & { status?: { phase?: string } }>(
      paths.cocoonSet(ns, "fleet"),
    );
    assert.equal(live.status?.phase, "Running", "the outputs agree with the cluster");

    // skipAwait alone changes nothing.
    await stack.setConfig("skipAwait", { value: "true" });
    const alone = await stack.preview();
    assert.deepEqual(
      [alone.changeSummary.update ?? 0, alone.changeSummary.replace ?? 0],
      [0, 0],
      alone.stdout,
    );

    // With skipAwait, `up` returns while a new toolbox the node has no room for is Pending.
    await stack.setConfig("toolboxes", {
      value: JSON.stringify([toolbox("big", "8"), toolbox("huge", "12")]),
    });
    const quick = await stack.up();
    assert.equal(quick.summary.result, "succeeded");
    const huge = await pod("fleet-huge");
    assert.equal(huge.status?.phase, "Pending");
    assert.equal(readySince(huge), undefined);
    const partial = quick.outputs.status.value as Record<string, unknown>;
    assert.equal(quick.outputs.phase.value, "Scaling");
    assert.deepEqual([partial.readyToolboxes, partial.desiredToolboxes], [1, 2]);
  });
  assert.equal((await stack.destroy()).summary.result, "succeeded");
});
