// The one finalizer idiom of the plans: finalizerActions decides, planPass puts it in the
// pass's setup for a caller that keeps one, the hibernation planner in its actions.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { finalizerActions, type FinalizerAction } from "../../../engine/plan/index.js";
import { planPass } from "../../../engine/planner/index.js";
import { FINALIZER } from "../../../engine/spec/index.js";
import { NOW, cocoonSet, convergedPods } from "./fixtures.js";

const F = "example.com/finalizer";
const add: FinalizerAction = { kind: "add-finalizer", finalizer: F };
const remove: FinalizerAction = { kind: "remove-finalizer", finalizer: F };

describe("finalizerActions", () => {
  const table: [string, Parameters<typeof finalizerActions>, FinalizerAction[]][] = [
    ["live, no finalizers: add", [{}, F, "live"], [add]],
    ["live, another's only: add", [{ finalizers: ["other/x"] }, F, "live"], [add]],
    ["live, ours there: nothing", [{ finalizers: ["other/x", F] }, F, "live"], []],
    ["being deleted and lacking it: never added", [{ deletionTimestamp: "t" }, F, "live"], []],
    [
      "released, ours there: remove",
      [{ finalizers: [F], deletionTimestamp: "t" }, F, "released"],
      [remove],
    ],
    // The copy may predate the finalizer: the executor checks the live object.
    ["released, the copy lacks it: remove all the same", [{}, F, "released"], [remove]],
    ["no finalizer kept (pulumi up): nothing, live", [{}, undefined, "live"], []],
    [
      "no finalizer kept (pulumi up): nothing, released",
      [{ finalizers: [F] }, undefined, "released"],
      [],
    ],
  ];
  for (const [what, args, want] of table)
    it(what, () => assert.deepEqual(finalizerActions(...args), want));
});

describe("planPass: the finalizer as the plan's setup", () => {
  const cs = cocoonSet({}, { replicas: 2 });
  const withOurs = { ...cs, metadata: { ...cs.metadata, finalizers: [FINALIZER] } };
  const table: [string, Parameters<typeof planPass>[0], FinalizerAction[]][] = [
    [
      "the controller's pass on a CocoonSet without it: added first",
      { cocoonSet: cs, pods: [], nowMs: NOW, finalizer: FINALIZER },
      [{ kind: "add-finalizer", finalizer: FINALIZER }],
    ],
    [
      "the controller's pass on a converged one without it: added, nothing else",
      { cocoonSet: cs, pods: convergedPods(cs), nowMs: NOW, finalizer: FINALIZER },
      [{ kind: "add-finalizer", finalizer: FINALIZER }],
    ],
    [
      "the controller's pass on one that has it: no setup",
      { cocoonSet: withOurs, pods: [], nowMs: NOW, finalizer: FINALIZER },
      [],
    ],
    ["pulumi up's pass (no finalizer kept): no setup", { cocoonSet: cs, pods: [], nowMs: NOW }, []],
  ];
  for (const [what, input, want] of table)
    it(what, () => assert.deepEqual(planPass(input).setup, want));

  it("a toolbox-name refusal still adds the finalizer (setup runs whatever the steps)", () => {
    const bad = cocoonSet({ toolboxes: [{ name: "7", image: "x" }] }, { replicas: 0 });
    const p = planPass({ cocoonSet: bad, pods: [], nowMs: NOW, finalizer: FINALIZER });
    assert.ok(p.refusals.length > 0);
    assert.deepEqual(p.setup, [{ kind: "add-finalizer", finalizer: FINALIZER }]);
  });
});
