/**
 * Placement of sub-agents (issue 39, finding 4), with the controller on a clock the test
 * moves: sub-agents are bound by name to their main agent's node, so the scheduler never
 * checks them and the kubelet admits them on a cordoned node or past a NoSchedule taint. The
 * controller now reads that node first: cordoned, or with a NoSchedule taint the pods do not
 * tolerate, the slots are not created, and a Warning `NodeUnfit` and the condition
 * `PlacementBlocked` say why; once the node takes them again, the slots are created.
 *
 * The fleet runs in a node pool of its own: one simulated node this test adds and changes.
 */
import assert from "node:assert/strict";
import { before, test } from "node:test";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import type { CocoonSet } from "../../engine/spec/index.js";
import { PatchType, paths, waitForObject } from "../../engine/kube/index.js";
import { adminClient, suffix } from "../support/cluster.js";
import {
  createCocoonSet,
  fleetPods,
  patchSpec,
  waitForConverged,
  waitForEvent,
  statusCondition as condition,
} from "../support/controller-fleet.js";
import { startInProcessController } from "../support/controller-in-process.js";
import { Cleanup, controllerNamespace } from "../support/controller-process.js";
import { WarpClock } from "../support/fake-clock.js";
import { poolNode } from "../support/pool-node.js";

const client = adminClient();

before(async () => {
  await ensureCrd(client);
});

test("sub-agents wait, said, while their main agent's node is cordoned or tainted; created once it takes them", async (t) => {
  const c = new Cleanup(t);
  const ns = await controllerNamespace(c, "placement");
  const pool = `place-${suffix()}`;
  const node = await poolNode(t, pool, { cpu: "8", memory: "16Gi", pods: "20" });
  const setNode = (spec: Record<string, unknown>) =>
    client.patch(`${paths.nodes()}/${node}`, { spec }, PatchType.merge);
  const clock = new WarpClock();
  const proc = await startInProcessController(c, { namespaces: [ns], clock });
  await proc.synced();
  await createCocoonSet(ns, "pl", { replicas: 0, nodePool: pool });
  await waitForConverged(ns, "pl", { replicas: 0 }, 90_000);

  // Cordoned: scaling up creates nothing next to the main agent.
  await setNode({ unschedulable: true });
  await patchSpec(ns, "pl", { agent: { replicas: 2 } });
  const cordoned = `sub-agent slot(s) 1, 2 not created: node "${node}" is cordoned (unschedulable) (sub-agents are bound to the main agent's node)`;
  const [warning] = await waitForEvent(ns, "pl", "NodeUnfit", cordoned);
  assert.equal(warning.type, "Warning");
  const waiting = (await waitForObject(
    client,
    paths.cocoonSets(ns),
    "pl",
    (o) => condition(o as unknown as CocoonSet, "PlacementBlocked")?.message === cordoned,
    { timeoutMs: 60_000, description: "PlacementBlocked naming the cordon" },
  )) as unknown as CocoonSet;
  assert.equal(condition(waiting, "PlacementBlocked")?.reason, "NodeUnfit");
  assert.equal(waiting.status?.phase, "Scaling");
  assert.deepEqual(
    (await fleetPods(client, ns, "pl")).map((p) => p.metadata?.name),
    ["pl-0"],
    "no sub-agent pod was created",
  );

  // Uncordoned but tainted with a NoSchedule the pods do not tolerate: still waiting, said.
  await setNode({
    unschedulable: null,
    taints: [
      { key: "virtual-kubelet.io/provider", value: "cocoon", effect: "NoSchedule" },
      { key: "maintenance", value: "now", effect: "NoSchedule" },
    ],
  });
  clock.advance(30_000);
  const tainted = `sub-agent slot(s) 1, 2 not created: node "${node}" has the taint maintenance=now:NoSchedule, which the pod does not tolerate (sub-agents are bound to the main agent's node)`;
  await waitForEvent(ns, "pl", "NodeUnfit", tainted);
  assert.equal((await fleetPods(client, ns, "pl")).length, 1);

  // The node takes them again: the slots are created, and the condition turns False.
  await setNode({
    taints: [{ key: "virtual-kubelet.io/provider", value: "cocoon", effect: "NoSchedule" }],
  });
  clock.advance(30_000);
  const { cs: done } = await waitForConverged(ns, "pl", { replicas: 2 }, 90_000);
  assert.equal(condition(done, "PlacementBlocked")?.status, "False");
  for (const p of await fleetPods(client, ns, "pl")) assert.equal(p.spec?.nodeName, node);
  await proc.stop();
});
