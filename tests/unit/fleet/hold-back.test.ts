// holdBackSteps: what a pass on a lagging cache leaves out of the planner's plan. Steps
// touching a pod with an outstanding expectation are held back with the plan's status; the
// others run as planned.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { holdBackSteps } from "../../../engine/plan/index.js";
import { planPass } from "../../../engine/planner/index.js";
import { NOW, cocoonSet, convergedPods, decisions, failed, mainPod, subPod } from "./fixtures.js";

const fleet = cocoonSet({}, { replicas: 3 });

describe("holdBackSteps", () => {
  it("holds back the create of a pod the cache has not shown yet, and keeps the others", () => {
    // The cache shows the main agent only: every sub-agent looks missing.
    const plan = planPass({ cocoonSet: fleet, pods: [mainPod(fleet)], nowMs: NOW });
    assert.deepEqual(decisions(plan), ["demo-1:create", "demo-2:create", "demo-3:create"]);
    const { plan: held, heldBack } = holdBackSteps(plan, new Set(["demo-1", "demo-3"]));
    assert.deepEqual(heldBack, ["demo-1", "demo-3"]);
    assert.deepEqual(decisions(held), ["demo-2:create"]);
    assert.equal(held.mutatesPods, true);
    assert.equal(held.status, undefined);
  });

  it("holds back the rebuild of a Failed pod whose delete the cache has not shown", () => {
    const pods = [mainPod(fleet), failed(subPod(fleet, 1)), subPod(fleet, 2), subPod(fleet, 3)];
    const plan = planPass({ cocoonSet: fleet, pods, nowMs: NOW });
    assert.deepEqual(decisions(plan), ["demo-1:rebuild"]);
    const { plan: held, heldBack } = holdBackSteps(plan, new Set(["demo-1"]));
    assert.deepEqual(heldBack, ["demo-1"]);
    assert.deepEqual(held.steps, []);
    assert.equal(held.mutatesPods, false, "nothing left to change: no stall is reported");
  });

  it("changes nothing when no step touches an outstanding pod", () => {
    const plan = planPass({ cocoonSet: fleet, pods: convergedPods(fleet), nowMs: NOW });
    for (const outstanding of [new Set<string>(), new Set(["demo-9"])]) {
      const r = holdBackSteps(plan, outstanding);
      assert.equal(r.plan, plan, "the very plan, status and all");
      assert.deepEqual(r.heldBack, []);
    }
  });
});
