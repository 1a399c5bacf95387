/**
 * A sub-agent its node refused (engine/pods/node-refusal.ts, docs/behaviour.md §3.6): which
 * terminal pods are refusals, the messages that name one, and what planPass and the status
 * make of it (the Warning `NodeRefused` once per refused pod, the rebuild and dead-letter
 * reports, the slot's status entry), with a plain failure left exactly as it was.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Plan, PlanStep } from "../../../engine/plan/index.js";
import { planToJSON, renderPlan } from "../../../engine/plan/plan-render.js";
import { deriveStatus } from "../../../engine/plan/status.js";
import { planPass } from "../../../engine/planner/index.js";
import {
  deadLetterMessage,
  isAdmissionRefusalReason,
  nodeRefusal,
  nodeRefusedMessage,
  rebuildingMessage,
  refusedIt,
  type NodeRefusal,
} from "../../../engine/pods/node-refusal.js";
import type { CocoonSet, Pod } from "../../../engine/spec/index.js";
import { NOW, cocoonSet, convergedPods, failed, subPod, withHistory } from "./fixtures.js";

const CPU_MESSAGE =
  "Pod was rejected: Node didn't have enough resource: cpu, requested: 250, used: 1800, capacity: 2000";

/** The pod as its node's kubelet leaves one it refused (or any Failed pod, by reason). */
function refused(pod: Pod, reason = "OutOfcpu", message = CPU_MESSAGE): Pod {
  const out = failed(pod);
  out.status = { ...out.status, reason, message };
  return out;
}

const at = (msAgo: number): string => new Date(NOW - msAgo).toISOString();

const cs = cocoonSet({}, { replicas: 3 });
const pods = convergedPods(cs);

function withSlot(slot: number, pod: Pod): Pod[] {
  const name = `demo-${slot}`;
  return pods.map((p) => (p.metadata?.name === name ? pod : p));
}

function plan(c: CocoonSet, ps: Pod[]): Plan {
  return planPass({ cocoonSet: c, pods: ps, nowMs: NOW });
}

function slotStep(p: Plan, slot: number): PlanStep | undefined {
  return p.steps.find((s) => s.target.role === "sub-agent" && s.target.slot === slot);
}

const events = (step: PlanStep | undefined) =>
  (step?.actions ?? []).flatMap((a) =>
    a.kind === "event" ? [`${a.type} ${a.reason}: ${a.message}`] : [],
  );

const history = (slot: number, count: number, msAgo: number) =>
  withHistory(cs, JSON.stringify({ [slot]: { count, lastDeleted: at(msAgo) } }));

describe("which terminal pods are refusals by their node", () => {
  const table: [string, string | undefined, boolean][] = [
    ["cpu", "OutOfcpu", true],
    ["memory", "OutOfmemory", true],
    ["the pods count", "OutOfpods", true],
    ["ephemeral storage", "OutOfephemeral-storage", true],
    ["an extended resource", "OutOfexample.com/gpu", true],
    ["a node selector or affinity the node no longer matches", "NodeAffinity", true],
    ["a device plugin that could not allocate", "UnexpectedAdmissionError", true],
    ["no resource named", "OutOf", false],
    ["an eviction (the pod ran)", "Evicted", false],
    ["a deadline (the pod ran)", "DeadlineExceeded", false],
    ["the simulated nodes' default failure", "Error", false],
    ["a case that is not the kubelet's", "outofcpu", false],
    ["no reason", undefined, false],
  ];
  for (const [what, reason, expected] of table) {
    it(`${String(reason)} (${what}): ${expected ? "refused" : "not a refusal"}`, () => {
      assert.equal(isAdmissionRefusalReason(reason), expected);
      const pod = failed(subPod(cs, 1));
      pod.status = { ...pod.status, reason, message: "m" };
      assert.deepEqual(
        nodeRefusal(pod),
        expected ? { node: "node-a", reason, message: "m" } : undefined,
      );
    });
  }

  it("only a Failed pod bound to a node: the reason on a pod in another phase, or unbound, is not one", () => {
    const running = subPod(cs, 1);
    running.status = { ...running.status, reason: "OutOfcpu" };
    assert.equal(nodeRefusal(running), undefined);
    const unbound = refused(subPod(cs, 1));
    delete unbound.spec?.nodeName;
    assert.equal(nodeRefusal(unbound), undefined);
    // A Failed pod with no reason is terminal, not refused.
    assert.equal(nodeRefusal(failed(subPod(cs, 1))), undefined);
  });

  it("takes the node, the reason and the message as the kubelet wrote them; a missing message is empty", () => {
    assert.deepEqual(nodeRefusal(refused(subPod(cs, 2))), {
      node: "node-a",
      reason: "OutOfcpu",
      message: CPU_MESSAGE,
    });
    const bare = failed(subPod(cs, 2));
    bare.status = { ...bare.status, reason: "OutOfpods" };
    assert.deepEqual(nodeRefusal(bare), { node: "node-a", reason: "OutOfpods", message: "" });
  });
});

describe("the messages that name a refusal", () => {
  const r: NodeRefusal = { node: "n1", reason: "OutOfcpu", message: CPU_MESSAGE };
  const bare: NodeRefusal = { node: "n1", reason: "OutOfpods", message: "" };
  const table: [string, string, string][] = [
    ["refusedIt", refusedIt(r), `node n1 refused it (OutOfcpu: ${CPU_MESSAGE})`],
    ["refusedIt without a message", refusedIt(bare), "node n1 refused it (OutOfpods)"],
    [
      "NodeRefused before a rebuild",
      nodeRefusedMessage(13, "fleet-13", r, 2),
      `slot 13: node n1 refused pod fleet-13 (OutOfcpu: ${CPU_MESSAGE}); rebuilding it, attempt 2/4`,
    ],
    [
      "NodeRefused at dead-letter",
      nodeRefusedMessage(13, "fleet-13", bare, "dead-letter"),
      "slot 13: node n1 refused pod fleet-13 (OutOfpods); no rebuild left (4 done): left in dead-letter",
    ],
    ["SubAgentRebuilding, plain", rebuildingMessage(13, 2), "slot 13 attempt 2/4"],
    [
      "SubAgentRebuilding, refused",
      rebuildingMessage(13, 2, r),
      "slot 13 attempt 2/4 (node n1 refused it: OutOfcpu)",
    ],
    [
      "SubAgentDeadLetter, plain",
      deadLetterMessage(13, "fleet-13"),
      "slot 13 exhausted 4 rebuilds; pod fleet-13 left in dead-letter",
    ],
    [
      "SubAgentDeadLetter, refused",
      deadLetterMessage(13, "fleet-13", r),
      `slot 13 exhausted 4 rebuilds: node n1 refused it (OutOfcpu: ${CPU_MESSAGE}); pod fleet-13 left in dead-letter`,
    ],
  ];
  for (const [what, got, want] of table) it(what, () => assert.equal(got, want));
});

describe("planPass and the status with a refused sub-agent", () => {
  const r = { node: "node-a", reason: "OutOfcpu", message: CPU_MESSAGE };

  it("a rebuild: the Warning NodeRefused after the delete, the rebuild event names the node's reason, the step carries the refusal", () => {
    const p = plan(history(2, 1, 1_000), withSlot(2, refused(subPod(cs, 2))));
    const step = slotStep(p, 2);
    assert.equal(step?.decision, "rebuild");
    assert.deepEqual(step?.nodeRefusal, r);
    assert.deepEqual(
      step?.actions.map((a) => a.kind),
      ["write-history", "delete-pod", "count-metric", "event", "event", "create-pod"],
    );
    assert.deepEqual(events(step), [
      `Warning NodeRefused: slot 2: node node-a refused pod demo-2 (OutOfcpu: ${CPU_MESSAGE}); rebuilding it, attempt 2/4`,
      "Normal SubAgentRebuilding: slot 2 attempt 2/4 (node node-a refused it: OutOfcpu)",
    ]);
    assert.match(
      renderPlan(p),
      /^slot 2: rebuild \(attempt 2\/4; node node-a refused it: OutOfcpu\)$/m,
    );
    assert.deepEqual(planToJSON(p).changes.find((c) => c.slot === 2)?.nodeRefusal, r);
  });

  it("in its backoff: no event (the pass that acts on the pod posts it once), the wait names the refusal", () => {
    const p = plan(history(1, 2, 1_500), withSlot(1, refused(subPod(cs, 1), "OutOfmemory", "m")));
    const step = slotStep(p, 1);
    assert.equal(step?.decision, "wait-backoff");
    assert.deepEqual(step?.actions, []);
    assert.match(
      renderPlan(p),
      /^slot 1: wait 4s \(backoff; node node-a refused it: OutOfmemory\)$/m,
    );
  });

  it("dead-letter: NodeRefused, then SubAgentDeadLetter naming the node, the reason and the message", () => {
    const p = plan(history(3, 4, 60_000), withSlot(3, refused(subPod(cs, 3))));
    const step = slotStep(p, 3);
    assert.equal(step?.decision, "dead-letter");
    assert.deepEqual(events(step), [
      `Warning NodeRefused: slot 3: node node-a refused pod demo-3 (OutOfcpu: ${CPU_MESSAGE}); no rebuild left (4 done): left in dead-letter`,
      `Warning SubAgentDeadLetter: slot 3 exhausted 4 rebuilds: node node-a refused it (OutOfcpu: ${CPU_MESSAGE}); pod demo-3 left in dead-letter`,
    ]);
    assert.match(renderPlan(p), /^slot 3: dead-letter \(node node-a refused it: OutOfcpu\)$/m);
  });

  it("a pod that ran and failed is reported as before: no NodeRefused, no refusal on the step", () => {
    const plain = failed(subPod(cs, 2));
    plain.status = { ...plain.status, reason: "Error", message: "exit 1" };
    const rebuild = slotStep(plan(history(2, 1, 1_000), withSlot(2, plain)), 2);
    assert.equal(rebuild?.nodeRefusal, undefined);
    assert.deepEqual(events(rebuild), ["Normal SubAgentRebuilding: slot 2 attempt 2/4"]);
    const dead = slotStep(plan(history(2, 4, 60_000), withSlot(2, plain)), 2);
    assert.deepEqual(events(dead), [
      "Warning SubAgentDeadLetter: slot 2 exhausted 4 rebuilds; pod demo-2 left in dead-letter",
    ]);
  });

  it("the slot's status entry carries the refusal while its pod is the refused one; other entries have none", () => {
    const status = deriveStatus({
      cocoonSet: cs,
      pods: withSlot(2, refused(subPod(cs, 2))),
      nowMs: NOW,
    });
    const entries = status.agents ?? [];
    assert.deepEqual(
      entries.map((a) => [a.slot, a.phase, a.nodeRefusal]),
      [
        [0, "Running", undefined],
        [1, "Running", undefined],
        [2, "Failed", r],
        [3, "Running", undefined],
      ],
    );
    // No key at all on the other entries (the wire output of a fleet without refusals is unchanged).
    assert.equal(Object.hasOwn(entries[1], "nodeRefusal"), false);
    const plain = deriveStatus({
      cocoonSet: cs,
      pods: withSlot(2, failed(subPod(cs, 2))),
      nowMs: NOW,
    });
    assert.equal(Object.hasOwn(plain.agents?.[2] ?? {}, "nodeRefusal"), false);
  });
});
