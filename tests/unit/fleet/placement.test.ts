// Placement (issue 39, finding 4): sub-agents are bound by name to their main agent's node, so
// the scheduler never sees them; the engine does not create them on a cordoned node or past a
// NoSchedule/NoExecute taint they do not tolerate, and says why the slots wait (condition
// PlacementBlocked, one Warning NodeUnfit, `cocoonset plan`). A main agent the scheduler cannot
// place says so in the progress deadline's message. Behaviour: docs/behaviour.md §3.22.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { placementProblem, type PlacementNode } from "../../../engine/capacity/index.js";
import { placementNodeToRead } from "../../../engine/lifecycle/index.js";
import { renderPlan } from "../../../engine/plan/index.js";
import { planPass } from "../../../engine/planner/index.js";
import { buildAgentPod } from "../../../engine/pods/index.js";
import type { Pod } from "../../../engine/spec/index.js";
import { NOW, cocoonSet, decisions, live, mainPod, subPod } from "./fixtures.js";

const taint = (key: string, effect: string, value?: string) => ({ key, effect, value });
const nodeOf = (
  spec: NonNullable<NonNullable<PlacementNode["node"]>["spec"]>,
  name = "node-a",
): PlacementNode => ({ name, node: { spec } });

describe("placementProblem: what the scheduler would have refused", () => {
  const pod = buildAgentPod(cocoonSet({}, { replicas: 1 }), 1, {
    mainVMName: "vk-team-demo-0",
    mainNodeName: "node-a",
  });
  const table: [string, PlacementNode, string | undefined][] = [
    ["a plain node", nodeOf({}), undefined],
    ["cordoned", nodeOf({ unschedulable: true }), 'node "node-a" is cordoned (unschedulable)'],
    [
      "an untolerated NoSchedule taint",
      nodeOf({ taints: [taint("gpu", "NoSchedule", "a100")] }),
      'node "node-a" has the taint gpu=a100:NoSchedule, which the pod does not tolerate',
    ],
    [
      "an untolerated NoExecute taint",
      nodeOf({ taints: [taint("maintenance", "NoExecute")] }),
      'node "node-a" has the taint maintenance:NoExecute, which the pod does not tolerate',
    ],
    ["a PreferNoSchedule taint", nodeOf({ taints: [taint("x", "PreferNoSchedule")] }), undefined],
    [
      "the virtual kubelet's own taint (tolerated)",
      nodeOf({ taints: [taint("virtual-kubelet.io/provider", "NoSchedule", "cocoon")] }),
      undefined,
    ],
    [
      "not-ready NoExecute (tolerated)",
      nodeOf({ taints: [taint("node.kubernetes.io/not-ready", "NoExecute")] }),
      undefined,
    ],
    ["a node that could not be read", { name: "node-a", error: "forbidden" }, undefined],
    ["a node that does not exist", { name: "node-a" }, undefined],
  ];
  for (const [what, node, want] of table)
    it(what, () => assert.equal(placementProblem(pod, node), want));

  it("a pod that tolerates everything lands anywhere", () => {
    const tolerant = { spec: { tolerations: [{ operator: "Exists" }] } };
    assert.equal(placementProblem(tolerant, nodeOf({ unschedulable: true })), undefined);
  });
});

describe("the planner with the main agent's node read", () => {
  const cs = cocoonSet({}, { replicas: 3 });
  const main = mainPod(cs); // on node-a
  const pods: Pod[] = [main, subPod(cs, 1)];

  it("the executor reads the main agent's node only when a sub-agent is to be created", () => {
    assert.equal(placementNodeToRead(cs, pods), "node-a");
    assert.equal(
      placementNodeToRead(cs, [main, subPod(cs, 1), subPod(cs, 2), subPod(cs, 3)]),
      undefined,
    );
    assert.equal(placementNodeToRead(cs, []), undefined);
  });

  it("the executor reads it too when a terminal sub-agent is rebuilt (its replacement is created in the same pass), not for a dead-lettered one", () => {
    const full = [main, subPod(cs, 1), subPod(cs, 2), subPod(cs, 3)];
    const failedSlot: Pod = { ...subPod(cs, 2), status: { phase: "Failed" } };
    assert.equal(
      placementNodeToRead(cs, [main, subPod(cs, 1), failedSlot, subPod(cs, 3)]),
      "node-a",
    );
    const dead: Pod = {
      ...failedSlot,
      metadata: {
        ...failedSlot.metadata,
        annotations: { "cocoonset.cocoonstack.io/dead-letter": "true" },
      },
    };
    assert.equal(placementNodeToRead(cs, [main, subPod(cs, 1), dead, subPod(cs, 3)]), undefined);
    assert.equal(placementNodeToRead(cs, full), undefined);
  });

  it("a cordoned node: a rebuild deletes its Failed pod and leaves the create to a later pass", () => {
    const node = nodeOf({ unschedulable: true });
    const failedSlot: Pod = { ...subPod(cs, 1), status: { phase: "Failed" } };
    const p = planPass({
      cocoonSet: cs,
      pods: [pods[0], failedSlot],
      nowMs: NOW,
      placementNode: node,
    });
    const rebuild = p.steps.find((s) => s.decision === "rebuild");
    assert.deepEqual(
      rebuild?.actions.map((a) => a.kind),
      ["write-history", "delete-pod", "count-metric", "event"],
    );
    assert.equal(rebuild?.createRecord, undefined);
  });

  it("a cordoned node: no sub-agent is created; the slots wait, said once", () => {
    const node = nodeOf({ unschedulable: true });
    const p = planPass({ cocoonSet: cs, pods, nowMs: NOW, placementNode: node });
    assert.deepEqual(decisions(p), ["demo-2:wait-placement", "demo-3:wait-placement"]);
    assert.equal(p.mutatesPods, false);
    assert.equal(p.requeueAfterMs, 30_000);
    const message =
      'sub-agent slot(s) 2, 3 not created: node "node-a" is cordoned (unschedulable) (sub-agents are bound to the main agent\'s node)';
    const c = p.status?.conditions?.find((x) => x.type === "PlacementBlocked");
    assert.deepEqual([c?.status, c?.reason, c?.message], ["True", "NodeUnfit", message]);
    const events = p.steps.flatMap((s) =>
      s.actions.flatMap((a) => (a.kind === "event" ? [a] : [])),
    );
    assert.deepEqual(
      events.map((e) => [e.type, e.reason, e.message]),
      [["Warning", "NodeUnfit", message]],
    );
    assert.match(
      renderPlan(p),
      /^slot 2: wait \(placement: pod demo-2 is not created: node "node-a" is cordoned/m,
    );
    // Said once; then, uncordoned, the slots are created and the condition turns False.
    const again = planPass({
      cocoonSet: { ...cs, status: p.status },
      pods,
      nowMs: NOW,
      placementNode: node,
    });
    assert.equal(
      again.steps.some((s) => s.actions.length > 0),
      false,
    );
    const fit = planPass({
      cocoonSet: { ...cs, status: p.status },
      pods,
      nowMs: NOW,
      placementNode: nodeOf({}),
    });
    assert.deepEqual(decisions(fit), ["demo-2:create", "demo-3:create"]);
    const after = planPass({
      cocoonSet: { ...cs, status: p.status },
      pods: [main, subPod(cs, 1), subPod(cs, 2), subPod(cs, 3)],
      nowMs: NOW,
      placementNode: nodeOf({}),
    });
    assert.equal(
      after.status?.conditions?.find((x) => x.type === "PlacementBlocked")?.status,
      "False",
    );
  });

  it("the node read is another than the main agent's (it moved): not judged", () => {
    const p = planPass({
      cocoonSet: cs,
      pods,
      nowMs: NOW,
      placementNode: nodeOf({ unschedulable: true }, "node-z"),
    });
    assert.deepEqual(decisions(p), ["demo-2:create", "demo-3:create"]);
  });

  it("a main agent the scheduler cannot place is named in the progress deadline", () => {
    const pinned = cocoonSet({ nodeName: "node-c" });
    const pending = live(buildAgentPod(pinned, 0), false);
    delete pending.spec!.nodeName;
    pending.status = {
      phase: "Pending",
      conditions: [
        {
          type: "PodScheduled",
          status: "False",
          reason: "Unschedulable",
          message: "0/2 nodes are available: 1 node(s) had untolerated taint {gpu: a100}.",
        },
      ],
    };
    const first = planPass({ cocoonSet: pinned, pods: [pending], nowMs: NOW });
    const late = planPass({
      cocoonSet: { ...pinned, status: first.status },
      pods: [pending],
      nowMs: NOW + 600_000,
    });
    const progressing = late.status?.conditions?.find((x) => x.type === "Progressing");
    assert.equal(progressing?.reason, "ProgressDeadlineExceeded");
    assert.match(
      progressing?.message ?? "",
      /waiting for: main agent: pod demo-0 cannot be scheduled: 0\/2 nodes are available: 1 node\(s\) had untolerated taint/,
    );
  });
});
