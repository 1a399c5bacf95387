// spec.suspend with hibernatePolicy retain: the plan asks every owned pod to hibernate, is
// Suspending until each VM has (state hibernated for this generation and its :hibernate tag
// in the registry) and Suspended after; unsuspending withdraws the asks and the normal pass
// takes over. The registry is an input: without it a suspend plans nothing.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { SnapshotFacts } from "../../../engine/lifecycle/index.js";
import { SUSPEND_POLL_MS, hibernationGate } from "../../../engine/lifecycle/suspend.js";
import { renderPlan, type Plan } from "../../../engine/plan/index.js";
import { planPass, snapshotProbes } from "../../../engine/planner/index.js";
import { ANNOTATIONS, type CocoonSet, type Pod } from "../../../engine/spec/index.js";
import {
  NOW,
  cocoonSet,
  convergedPods,
  decisions,
  failed,
  mainPod,
  subPod,
  tags,
  toolbox,
  withAnnotations,
} from "./fixtures.js";

const suspended = (extra: Parameters<typeof cocoonSet>[0] = {}, replicas = 2): CocoonSet =>
  cocoonSet({ suspend: true, ...extra }, { replicas });

function plan(cs: CocoonSet, pods: Pod[], snapshots?: SnapshotFacts): Plan {
  return planPass({ cocoonSet: cs, pods, nowMs: NOW, snapshots });
}

const vmOf = (pod: Pod) => pod.metadata?.annotations?.[ANNOTATIONS.vmName] ?? "";

/** The pod as the node agent leaves it once hibernated at `generation`. */
function hibernatedPod(pod: Pod, generation = "3"): Pod {
  return withAnnotations(pod, {
    [ANNOTATIONS.hibernate]: "true",
    [ANNOTATIONS.lifecycleState]: "hibernated",
    [ANNOTATIONS.lifecycleObservedGeneration]: generation,
  });
}

const asked = (pod: Pod) => withAnnotations(pod, { [ANNOTATIONS.hibernate]: "true" });

describe("suspend (retain): the plan", () => {
  it("asks every owned pod to hibernate, in slot order, and is Suspending", () => {
    const cs = suspended({ toolboxes: [toolbox("db")] });
    const p = plan(cs, convergedPods(cs), tags());
    assert.deepEqual(decisions(p), [
      "demo-0:hibernate",
      "demo-1:hibernate",
      "demo-2:hibernate",
      "demo-db:hibernate",
    ]);
    for (const s of p.steps)
      assert.deepEqual(s.actions, [
        {
          kind: "annotate-pod",
          name: s.podName,
          uid: `pod-uid-${s.podName}`,
          annotations: { [ANNOTATIONS.hibernate]: "true" },
        },
      ]);
    assert.equal(p.mutatesPods, false);
    assert.equal(p.status?.phase, "Suspending");
    assert.equal(p.requeueAfterMs, SUSPEND_POLL_MS);
    assert.equal(
      p.status?.conditions?.find((c) => c.type === "Progressing")?.reason,
      "Stable",
      "Progressing is False/Stable while suspending, as upstream",
    );
    assert.match(renderPlan(p), /^main: hibernate \(suspend\)$/m);
  });

  it("does not ask a pod whose CocoonHibernation is being deleted until it is gone: its finalizer drops the VM's tag", () => {
    const cs = suspended();
    const pods = convergedPods(cs);
    const deleting = [
      { pod: "demo-1", desire: "Wake", phase: "Hibernated", deleting: { name: "nap" } },
    ];
    const p = planPass({
      cocoonSet: cs,
      pods,
      nowMs: NOW,
      snapshots: tags(),
      hibernations: deleting,
    });
    assert.deepEqual(decisions(p), [
      "demo-0:hibernate",
      "demo-1:wait-hibernation",
      "demo-2:hibernate",
    ]);
    assert.match(p.steps[1].why ?? "", /waits for CocoonHibernation nap to be deleted/);
    assert.equal(p.status?.phase, "Suspending");
    // A CR of the pod that is not being deleted changes nothing of the suspend's asks.
    const live = [{ pod: "demo-1", desire: "Wake", phase: "Active" }];
    const q = planPass({ cocoonSet: cs, pods, nowMs: NOW, snapshots: tags(), hibernations: live });
    assert.deepEqual(decisions(q), ["demo-0:hibernate", "demo-1:hibernate", "demo-2:hibernate"]);
  });

  it("waits, without asking again, while some VM has not hibernated", () => {
    const cs = suspended();
    const [main, one, two] = convergedPods(cs);
    const pods = [hibernatedPod(main), asked(one), hibernatedPod(two)];
    const p = plan(cs, pods, tags(vmOf(main), vmOf(two)));
    assert.deepEqual(decisions(p), ["demo-1:wait-hibernation"]);
    assert.equal(p.status?.phase, "Suspending");
    assert.equal(p.requeueAfterMs, SUSPEND_POLL_MS);
  });

  it("is Suspended once every VM reports hibernated for this generation and its tag exists", () => {
    const cs = suspended();
    const pods = convergedPods(cs).map((p) => hibernatedPod(p));
    const p = plan(cs, pods, tags(...pods.map(vmOf)));
    assert.deepEqual(p.steps, []);
    assert.equal(p.status?.phase, "Suspended");
    assert.equal(p.requeueAfterMs, undefined, "nothing left to poll");
    const progressing = p.status?.conditions?.find((c) => c.type === "Progressing");
    assert.equal(progressing?.status, "False");
    assert.equal(progressing?.message, "Suspended", "the phase, as cocoon-operator writes it");
    // Settled: the same pass over the written status changes nothing.
    const again = plan({ ...cs, status: p.status }, pods, tags(...pods.map(vmOf)));
    assert.equal(again.status, undefined);
  });

  const gateTable: [string, (p: Pod) => Pod, boolean][] = [
    ["hibernated at this generation with its tag: done", (p) => hibernatedPod(p), true],
    ["hibernated at a later generation: done", (p) => hibernatedPod(p, "4"), true],
    [
      "hibernated at an older generation (a stale round): pending",
      (p) => hibernatedPod(p, "2"),
      false,
    ],
    [
      "still hibernating: pending",
      (p) => withAnnotations(hibernatedPod(p), { [ANNOTATIONS.lifecycleState]: "hibernating" }),
      false,
    ],
    ["a terminal pod has no VM to wait for: skipped", (p) => failed(asked(p)), true],
    [
      "an unmanaged pod has no VM lifecycle: skipped",
      (p) => withAnnotations(asked(p), { [ANNOTATIONS.managed]: undefined }),
      true,
    ],
  ];
  for (const [name, change, done] of gateTable)
    it(`the gate: ${name}`, () => {
      const cs = suspended({}, 1);
      const [main, one] = convergedPods(cs);
      const pods = [hibernatedPod(main), change(one)];
      const gate = hibernationGate(cs, pods, new Set(pods.map(vmOf)));
      assert.deepEqual(gate.pending, done ? [] : ["demo-1"]);
    });

  it("the gate: a hibernated VM whose tag is not in the registry is pending", () => {
    const cs = suspended({}, 1);
    const pods = convergedPods(cs).map((p) => hibernatedPod(p));
    assert.deepEqual(hibernationGate(cs, pods, new Set([vmOf(pods[0])])).pending, ["demo-1"]);
    const p = plan(cs, pods, tags(vmOf(pods[0])));
    assert.equal(p.status?.phase, "Suspending");
  });

  it("creates a missing main agent first, restoring it when its snapshot exists", () => {
    const cs = suspended();
    const withTag = plan(cs, [], tags("vk-team-demo-0"));
    assert.deepEqual(decisions(withTag), ["demo-0:create"]);
    const create = withTag.steps[0].actions[0];
    assert.equal(create.kind, "create-pod");
    assert.equal(
      create.kind === "create-pod" &&
        create.pod.metadata.annotations?.[ANNOTATIONS.restoreFromHibernate],
      "true",
    );
    assert.equal(withTag.mutatesPods, true);
    assert.equal(withTag.status, undefined, "the status waits for the pod");
    const fresh = plan(cs, [], tags()).steps[0].actions[0];
    assert.equal(
      fresh.kind === "create-pod" &&
        fresh.pod.metadata.annotations?.[ANNOTATIONS.restoreFromHibernate],
      undefined,
      "no snapshot: a plain boot",
    );
  });

  it("creates no missing sub-agent and rebuilds no failed one while suspended", () => {
    const cs = suspended({}, 3);
    const [main, one, , three] = convergedPods(cs);
    const p = plan(
      cs,
      [hibernatedPod(main), failed(hibernatedPod(one)), hibernatedPod(three)],
      tags(vmOf(main), vmOf(three)),
    );
    assert.deepEqual(p.steps, []);
    assert.equal(p.status?.phase, "Suspended");
  });

  it("a failed main agent is triaged first: the fleet is Failed, not Suspended", () => {
    const cs = suspended({}, 0);
    const p = plan(cs, [failed(mainPod(cs))], tags());
    assert.deepEqual(decisions(p), ["demo-0:main-failed"]);
    assert.equal(p.status?.phase, "Failed");
  });

  it("a registry that did not answer fails the suspend closed: nothing planned, the error said", () => {
    const cs = suspended();
    const p = plan(cs, convergedPods(cs), { error: "HEAD …: connect ECONNREFUSED" });
    assert.deepEqual(p.steps, []);
    assert.equal(p.status, undefined);
    assert.deepEqual(
      p.refusals.map((r) => r.message),
      [
        "[spec.suspend] cannot tell which VMs have hibernated: the snapshot registry did not answer: HEAD …: connect ECONNREFUSED",
      ],
    );
  });

  it("an executor that knows no registry keeps spec.suspend stored but not acted on", () => {
    const cs = suspended();
    const [main, one] = convergedPods(cs);
    const p = plan(cs, [main, one]);
    assert.deepEqual(decisions(p), ["demo-2:create"], "the normal pass, as before");
    const woken = plan(cocoonSet({}, { replicas: 1 }), [hibernatedPod(main), one]);
    assert.deepEqual(woken.steps, [], "and no unsuspend either");
  });

  it("the release policy is planned by the slot release (tests/unit/fleet/slot-release.test.ts)", () => {
    const cs = suspended({ hibernatePolicy: "release" }, 0);
    const p = plan(cs, [hibernatedPod(mainPod(cs))], tags(vmOf(mainPod(cs))));
    assert.ok(
      p.steps.some((s) => s.decision === "release"),
      "its pod is released, not kept",
    );
  });
});

describe("unsuspend (retain): the plan", () => {
  it("withdraws every hibernate ask and runs the normal pass in the same plan", () => {
    const cs = cocoonSet({ suspend: false }, { replicas: 2 });
    const [main, one, two] = convergedPods(cs);
    const pods = [hibernatedPod(main), hibernatedPod(one), two];
    // The pass asked for the tags of the VMs it wakes (wakeProbes); both are there.
    const p = plan(cs, pods, tags(vmOf(main), vmOf(one)));
    assert.deepEqual(decisions(p), ["demo-0:wake", "demo-1:wake"]);
    assert.deepEqual(p.steps[0].actions, [
      {
        kind: "annotate-pod",
        name: "demo-0",
        uid: "pod-uid-demo-0",
        annotations: { [ANNOTATIONS.hibernate]: null },
      },
    ]);
    assert.match(renderPlan(p), /^slot 1: wake \(unsuspend\)$/m);
    // The pods are kept (retain): the phase is derived as usual, with no Waking phase.
    assert.equal(p.status?.phase, "Running");
  });

  it("a missing sub-agent is created again once unsuspended", () => {
    const cs = cocoonSet({}, { replicas: 2 });
    const p = plan(cs, [hibernatedPod(mainPod(cs)), subPod(cs, 1)], tags(vmOf(mainPod(cs))));
    assert.deepEqual(decisions(p), ["demo-0:wake", "demo-2:create"]);
  });

  it("a fleet that was never suspended plans nothing new", () => {
    const cs = cocoonSet({}, { replicas: 2 });
    assert.deepEqual(plan(cs, convergedPods(cs), tags()).steps, []);
  });
});

describe("the registry facts a pass needs (what the executor asks before planning)", () => {
  it("a fleet that is not suspended asks nothing, however its pods look", () => {
    const cs = cocoonSet({}, { replicas: 2 });
    assert.deepEqual(
      snapshotProbes(
        cs,
        convergedPods(cs).map((p) => hibernatedPod(p)),
      ),
      [],
    );
  });

  it("a missing main agent: only its own tag (the restore intent)", () => {
    const cs = suspended();
    assert.deepEqual(snapshotProbes(cs, []), ["vk-team-demo-0"]);
    const [, one] = convergedPods(cs);
    assert.deepEqual(snapshotProbes(cs, [hibernatedPod(one)]), ["vk-team-demo-0"]);
  });

  it("only the VMs reported hibernated for this generation: a VM still hibernating costs no request", () => {
    const cs = suspended({ toolboxes: [toolbox("db")] });
    const [main, one, two, db] = convergedPods(cs);
    const pods = [hibernatedPod(main), asked(one), hibernatedPod(two, "2"), hibernatedPod(db)];
    assert.deepEqual(snapshotProbes(cs, pods), [vmOf(db), vmOf(main)].sort());
  });

  it("probes exactly what the gate reads: given those tags, the plan is Suspended", () => {
    const cs = suspended();
    const pods = convergedPods(cs).map((p) => hibernatedPod(p));
    const probes = snapshotProbes(cs, pods);
    assert.equal(probes.length, 3);
    assert.equal(plan(cs, pods, tags(...probes)).status?.phase, "Suspended");
    assert.equal(plan(cs, pods, tags(...probes.slice(1))).status?.phase, "Suspending");
  });

  it("skips terminal, terminating and foreign pods, and a terminal main agent asks nothing", () => {
    const cs = suspended();
    const [main, one, two] = convergedPods(cs);
    const gone = hibernatedPod(two);
    gone.metadata = { ...gone.metadata, deletionTimestamp: "2026-01-01T00:00:00Z" };
    const foreign = hibernatedPod(one);
    foreign.metadata = { ...foreign.metadata, ownerReferences: [] };
    assert.deepEqual(snapshotProbes(cs, [hibernatedPod(main), failed(hibernatedPod(one)), gone]), [
      vmOf(main),
    ]);
    assert.deepEqual(snapshotProbes(cs, [hibernatedPod(main), foreign]), [vmOf(main)]);
    assert.deepEqual(snapshotProbes(cs, [failed(hibernatedPod(main)), hibernatedPod(one)]), []);
  });
});

describe("a suspended fleet whose :hibernate tag disappears (issue 39, finding 6)", () => {
  it("goes Suspending, names the missing tag, and past the deadline says ProgressDeadlineExceeded with a Warning", () => {
    const cs = suspended({}, 1);
    const pods = convergedPods(cs).map((p) => hibernatedPod(p));
    const [main, one] = pods.map(vmOf);
    // Suspended once both tags were there.
    const rested = plan(cs, pods, tags(main, one));
    assert.equal(rested.status?.phase, "Suspended");
    assert.equal(rested.status?.lastProgressTime, undefined);
    // The registry loses slot 1's tag: Suspending, the step says why, the clock starts.
    const atRest = { ...cs, status: rested.status };
    const lost = planPass({ cocoonSet: atRest, pods, nowMs: NOW, snapshots: tags(main) });
    assert.equal(lost.status?.phase, "Suspending");
    const wait = lost.steps.find((s) => s.decision === "wait-hibernation");
    assert.equal(
      wait?.why,
      `slot 1: pod demo-1: its VM reports hibernated but the snapshot tag ${one}:hibernate is not in the registry (removed since it was pushed); the node agent pushes no second one: put the tag back, or wake the fleet (suspend: false) and suspend it again`,
    );
    assert.match(
      renderPlan(lost),
      /^slot 1: wait \(hibernating: pod demo-1: its VM reports hibernated but the snapshot tag/m,
    );
    const progressing = (p: Plan) => p.status?.conditions?.find((c) => c.type === "Progressing");
    assert.equal(progressing(lost)?.reason, "Stable", "as before, until the deadline");
    // Ten minutes later, nothing moved.
    const stored = { ...cs, status: lost.status };
    const late = planPass({ cocoonSet: stored, pods, nowMs: NOW + 600_000, snapshots: tags(main) });
    assert.equal(progressing(late)?.status, "False");
    assert.equal(progressing(late)?.reason, "ProgressDeadlineExceeded");
    assert.match(
      progressing(late)?.message ?? "",
      new RegExp(
        `phase Suspending: waiting for: slot 1: pod demo-1: its VM reports hibernated but the snapshot tag ${one}:hibernate is not in the registry`,
      ),
    );
    assert.deepEqual(
      late.steps.flatMap((s) =>
        s.actions.flatMap((a) => (a.kind === "event" ? [[a.type, a.reason]] : [])),
      ),
      [["Warning", "ProgressDeadlineExceeded"]],
    );
  });
});
