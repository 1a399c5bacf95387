// What a pass leaves to wait for: stated by the plan's main-agent step, settled with what the
// pass did (engine/plan/plan-wait.ts); the one loop of engine/execute/converge.ts waits for it.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { describeWait, passWait, type PassWait, type Plan } from "../../../engine/plan/index.js";
import { planPass } from "../../../engine/planner/index.js";
import type { PlanStep, StepWait } from "../../../engine/plan/index.js";
import { NOW, cocoonSet, mainPod, subPod } from "./fixtures.js";

/** A plan of these steps only. */
function planOf(...steps: PlanStep[]): Plan {
  const base = planPass({ cocoonSet: cocoonSet(), pods: [mainPod(cocoonSet())], nowMs: NOW });
  return { ...base, steps };
}

const main = (wait?: StepWait): PlanStep => ({
  target: { role: "main", slot: 0 },
  decision: "wait-main",
  podName: "demo-0",
  actions: [],
  ...(wait ? { wait } : {}),
});
const sub: PlanStep = {
  target: { role: "sub-agent", slot: 1 },
  decision: "create",
  podName: "demo-1",
  actions: [],
  wait: { kind: "stuck", message: "a sub-agent's wait is not the fleet's" },
};

describe("the wait a pass leaves", () => {
  const cases: {
    what: string;
    plan: Plan;
    outcome: { created?: string[]; stalled?: boolean; requeueAfterMs?: number };
    wait: PassWait;
  }[] = [
    {
      what: "the main agent created: wait until it is Ready",
      plan: planOf(main({ kind: "pod-ready", pod: "demo-0", created: true })),
      outcome: { created: ["demo-0"], requeueAfterMs: 0 },
      wait: { kind: "pod-ready", pod: "demo-0", created: true },
    },
    {
      what: "its create met a pod of that name: wait until that one is gone",
      plan: planOf(main({ kind: "pod-ready", pod: "demo-0", created: true })),
      outcome: { created: [], requeueAfterMs: 0 },
      wait: { kind: "pod-gone", pod: "demo-0" },
    },
    {
      what: "a main agent not Ready yet: wait for it",
      plan: planOf(main({ kind: "pod-ready", pod: "demo-0" })),
      outcome: { requeueAfterMs: 2000 },
      wait: { kind: "pod-ready", pod: "demo-0" },
    },
    {
      what: "a failed main agent: nothing waiting changes",
      plan: planOf(main({ kind: "stuck", message: "failed" })),
      outcome: { requeueAfterMs: 0 },
      wait: { kind: "stuck", message: "failed" },
    },
    {
      what: "a wake: the restored VM live",
      plan: planOf(main({ kind: "vm-live", pod: "demo-0" })),
      outcome: { requeueAfterMs: 5000 },
      wait: { kind: "vm-live", pod: "demo-0" },
    },
    {
      what: "a migration: the node agent's next report, at most the planner's delay",
      plan: planOf(main({ kind: "pod-change", pod: "demo-0", maxMs: 5000 })),
      outcome: { requeueAfterMs: 1500 },
      wait: { kind: "pod-change", pod: "demo-0", maxMs: 1500 },
    },
    {
      what: "a migration whose pass changed pods: the next pass at once",
      plan: planOf(main({ kind: "pod-change", pod: "demo-0", maxMs: 5000 })),
      outcome: { requeueAfterMs: 0 },
      wait: { kind: "next-pass" },
    },
    {
      what: "every create met a terminating pod: wait until they are gone",
      plan: planOf(),
      outcome: { stalled: true, requeueAfterMs: 1000 },
      wait: { kind: "terminating-gone" },
    },
    {
      what: "only a sub-agent's step states a wait: not the fleet's",
      plan: planOf(sub),
      outcome: { requeueAfterMs: 30_000 },
      wait: { kind: "none", maxMs: 30_000 },
    },
    {
      what: "a main agent step without a wait hides a later one",
      plan: planOf(main(), main({ kind: "stuck", message: "later" })),
      outcome: {},
      wait: { kind: "none" },
    },
  ];
  for (const c of cases)
    it(c.what, () => {
      assert.deepEqual(passWait(c.plan, { created: [], ...c.outcome }), c.wait);
    });
});

describe("the waits the planner states", () => {
  const cs = cocoonSet({}, { replicas: 1 });
  const stated = (pods: ReturnType<typeof mainPod>[]) =>
    planPass({ cocoonSet: cs, pods, nowMs: NOW }).steps.find((s) => s.target.role === "main")?.wait;

  it("no main agent: its create, then Ready", () => {
    assert.deepEqual(stated([]), { kind: "pod-ready", pod: "demo-0", created: true });
  });
  it("a main agent not Ready: Ready", () => {
    assert.deepEqual(stated([mainPod(cs, false)]), { kind: "pod-ready", pod: "demo-0" });
  });
  it("a failed main agent: stuck, saying what to do", () => {
    const failed = mainPod(cs);
    failed.status = { phase: "Failed" };
    assert.deepEqual(stated([failed]), {
      kind: "stuck",
      message:
        "main agent pod team/demo-0 failed; it is not rebuilt automatically (delete it or change the spec)",
    });
  });
  it("a converged fleet: none", () => {
    assert.equal(stated([mainPod(cs), subPod(cs, 1)]), undefined);
  });
});

describe("what a wait is described as (a timeout names it)", () => {
  const cases: [PassWait, string][] = [
    [{ kind: "pod-ready", pod: "demo-0" }, "pod demo-0 of CocoonSet team/demo to be Ready"],
    [{ kind: "terminating-gone" }, "terminating pods of CocoonSet team/demo to be gone"],
    [
      { kind: "hibernations-done", pods: ["demo-1", "demo-2"] },
      "the hibernations in flight of CocoonSet team/demo to end (demo-1, demo-2)",
    ],
    [{ kind: "stuck", message: "said as is" }, "said as is"],
    [
      {
        kind: "objects-gone",
        owner: "CocoonSet team/demo",
        ownerUid: "u1",
        timeoutMs: 1000,
        sets: [
          { kind: "pod", uids: ["p1"], ownerUids: [] },
          { kind: "configmap", uids: ["c1"], ownerUids: [] },
        ],
      },
      "pods, configmaps of CocoonSet team/demo to be gone",
    ],
  ];
  for (const [wait, text] of cases)
    it(wait.kind, () => assert.equal(describeWait(wait, "team/demo"), text));
});
