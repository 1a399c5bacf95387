// Restore intent and the unsuspend exception: the CocoonSet pass reads the CocoonHibernations
// of its namespace as an input. A pod rebuilt while its CR is Hibernated (or Waking) boots
// from its snapshot when the tag exists; a registry that did not answer fails closed; an
// unsuspend leaves the hibernate request of a pod a CR wants hibernated.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  needsHibernationTargets,
  restoreProbes,
  type SnapshotFacts,
} from "../../../engine/lifecycle/index.js";
import type { Plan } from "../../../engine/plan/index.js";
import { planPass } from "../../../engine/planner/index.js";
import { hibernationHeld, restoreIntended } from "../../../engine/snapshots/hibernation-targets.js";
import { hibernationTargets, type HibernationTarget } from "../../../engine/snapshots/index.js";
import {
  ANNOTATIONS,
  type CocoonHibernation,
  type CocoonSet,
  type Pod,
} from "../../../engine/spec/index.js";
import { NOW, cocoonSet, convergedPods, failed, mainPod, withAnnotations } from "./fixtures.js";

function plan(
  cs: CocoonSet,
  pods: Pod[],
  hibernations: HibernationTarget[],
  snapshots: SnapshotFacts | undefined = { hibernate: new Set() },
): Plan {
  return planPass({ cocoonSet: cs, pods, nowMs: NOW, snapshots, hibernations });
}

const createdPod = (p: Plan, name: string) => {
  const step = p.steps.find((s) => s.podName === name && s.decision === "create");
  const action = step?.actions.find((a) => a.kind === "create-pod");
  return action?.kind === "create-pod" ? action.pod : undefined;
};
const restores = (pod: Pod | undefined) =>
  pod?.metadata?.annotations?.[ANNOTATIONS.restoreFromHibernate];

describe("restore intent of a pod rebuilt under a CocoonHibernation", () => {
  const cs = cocoonSet({}, { replicas: 2 });
  const [main, , two] = convergedPods(cs);
  const VM1 = "vk-team-demo-1";

  const table: [string, HibernationTarget[], SnapshotFacts, string | undefined][] = [
    [
      "Hibernated, tag present",
      [{ pod: "demo-1", phase: "Hibernated" }],
      { hibernate: new Set([VM1]) },
      "true",
    ],
    [
      "Waking, tag present",
      [{ pod: "demo-1", phase: "Waking" }],
      { hibernate: new Set([VM1]) },
      "true",
    ],
    [
      "Hibernated, no tag",
      [{ pod: "demo-1", phase: "Hibernated" }],
      { hibernate: new Set() },
      undefined,
    ],
    [
      "Active with a leaked tag",
      [{ pod: "demo-1", phase: "Active" }],
      { hibernate: new Set([VM1]) },
      undefined,
    ],
    [
      "Hibernating (not confirmed)",
      [{ pod: "demo-1", phase: "Hibernating" }],
      { hibernate: new Set([VM1]) },
      undefined,
    ],
    [
      "a CR of another pod",
      [{ pod: "demo-2", phase: "Hibernated" }],
      { hibernate: new Set([VM1]) },
      undefined,
    ],
  ];
  for (const [what, targets, facts, want] of table) {
    it(`${what}: restore-from-hibernate ${want ?? "not set"}`, () => {
      const p = plan(cs, [main, two], targets, facts);
      const pod = createdPod(p, "demo-1");
      assert.ok(pod, "the slot is created");
      assert.equal(restores(pod), want);
      assert.deepEqual(
        p.refusals.map((r) => r.message),
        [],
      );
    });
  }

  it("a registry that did not answer fails that create closed, naming the error", () => {
    const p = plan(cs, [main, two], [{ pod: "demo-1", phase: "Hibernated" }], {
      error: "probe: 503",
    });
    assert.equal(createdPod(p, "demo-1"), undefined);
    assert.match(p.refusals.map((r) => r.message).join(), /demo-1.*did not answer: probe: 503/);
  });

  it("without registry facts nothing is marked (no registry: no restore)", () => {
    const p = plan(cs, [main, two], [{ pod: "demo-1", phase: "Hibernated" }], undefined);
    assert.equal(restores(createdPod(p, "demo-1")), undefined);
  });

  it("the main agent restores too", () => {
    const p = plan(cs, [], [{ pod: "demo-0", phase: "Hibernated" }], {
      hibernate: new Set(["vk-team-demo-0"]),
    });
    assert.equal(restores(createdPod(p, "demo-0")), "true");
  });

  it("probes only restorable members whose pod is missing or terminal", () => {
    const targets: HibernationTarget[] = [
      { pod: "demo-1", phase: "Hibernated" },
      { pod: "demo-2", phase: "Hibernated" },
      { pod: "demo-0", phase: "Active" },
    ];
    assert.deepEqual(restoreProbes(cs, [main, two], targets), [VM1]);
    assert.deepEqual(restoreProbes(cs, [main, failed(two)], targets), [VM1, "vk-team-demo-2"]);
    assert.deepEqual(restoreProbes(cs, convergedPods(cs), targets), []);
  });

  it("a steady fleet does not even list the CRs", () => {
    assert.equal(needsHibernationTargets(cs, convergedPods(cs)), false);
    assert.equal(needsHibernationTargets(cs, [main, two]), true);
  });
});

describe("unsuspend leaves the pods a CocoonHibernation wants hibernated", () => {
  const cs = cocoonSet({ suspend: false }, { replicas: 1 });
  const asked = (pod: Pod) => withAnnotations(pod, { [ANNOTATIONS.hibernate]: "true" });
  const [main, one] = convergedPods(cs);

  const table: [string, HibernationTarget[], string[]][] = [
    ["no CR", [], ["demo-0:wake", "demo-1:wake"]],
    [
      "desire Hibernate",
      [{ pod: "demo-1", desire: "Hibernate", phase: "Hibernated" }],
      ["demo-0:wake"],
    ],
    [
      "phase Hibernating (desire flipped)",
      [{ pod: "demo-1", desire: "Wake", phase: "Hibernating" }],
      ["demo-0:wake"],
    ],
    [
      "desire Wake, Waking",
      [{ pod: "demo-1", desire: "Wake", phase: "Waking" }],
      ["demo-0:wake", "demo-1:wake"],
    ],
  ];
  for (const [what, targets, want] of table) {
    it(`${what}: ${want.join(", ")}`, () => {
      const p = plan(cs, [asked(main), asked(one)], targets);
      assert.deepEqual(
        p.steps.filter((s) => s.decision === "wake").map((s) => `${s.podName}:${s.decision}`),
        want,
      );
    });
  }

  it("needs the CRs while a pod still asks to hibernate", () => {
    assert.equal(needsHibernationTargets(cs, [asked(mainPod(cs)), one]), true);
  });
});

describe("the pass's view of the CocoonHibernations", () => {
  const cr = (name: string, pod: string, deleting: boolean): CocoonHibernation => ({
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonHibernation",
    metadata: {
      name,
      namespace: "team",
      ...(deleting ? { deletionTimestamp: "2026-01-01T00:00:00Z", finalizers: ["f"] } : {}),
    },
    spec: { podRef: { name: pod }, desire: "Hibernate" },
    status: { phase: "Hibernated" },
  });

  it("a CR being deleted still holds its pod and its restore until it is gone (as upstream)", () => {
    const targets = hibernationTargets([cr("nap", "demo-1", true), cr("other", "demo-2", false)]);
    assert.deepEqual(
      targets.map((t) => t.pod),
      ["demo-1", "demo-2"],
    );
    assert.ok(hibernationHeld(targets, "demo-1"));
    assert.ok(restoreIntended(targets, "demo-1"));
    assert.ok(!hibernationHeld(hibernationTargets([]), "demo-1"));
  });
});
