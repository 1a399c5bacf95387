// hibernatePolicy release (slot release): the suspend frees the seat once every VM's
// snapshot is confirmed (names and node recorded first, keep-snapshot flagged, pods deleted,
// Suspended with the deletes); the wake restores the main agent (Waking before the create,
// preferring the node hint unless spec.nodeName pins it), reports an unschedulable main
// (WakeNoCapacity) and, once the VM is live, drops the tag, counts the placement and clears
// the hint. The registry is an input: a suspend without one fails with a message.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import type { SnapshotFacts } from "../../../engine/lifecycle/index.js";
import { HINT_AFFINITY_WEIGHT, slotReleaseProbes } from "../../../engine/lifecycle/slot-release.js";
import { SUSPEND_POLL_MS } from "../../../engine/lifecycle/suspend.js";
import { renderPlan, type Plan, type PlanAction } from "../../../engine/plan/index.js";
import { planPass, snapshotProbes } from "../../../engine/planner/index.js";
import { EVENT_REASONS, MAIN_RETRY_MS } from "../../../engine/spec/constants.js";
import type { CocoonSetPhase } from "../../../engine/spec/generated/types.js";
import { ANNOTATIONS, PLAN_METRICS, type CocoonSet, type Pod } from "../../../engine/spec/index.js";
import { NOW, cocoonSet, decisions, failed, mainPod, tags, withAnnotations } from "./fixtures.js";

const VM0 = "vk-team-demo-0";
const HINT = "node-a";

/** A main-only release set; `suspend` and the phase and hint it is in. */
function releaseSet(
  opts: {
    suspend?: boolean;
    phase?: CocoonSetPhase;
    hint?: string;
    nodeName?: string;
    stash?: string;
  } = {},
): CocoonSet {
  const cs = cocoonSet({
    suspend: opts.suspend ?? true,
    hibernatePolicy: "release",
    ...(opts.nodeName ? { nodeName: opts.nodeName } : {}),
  });
  const annotations: Record<string, string> = {};
  if (opts.hint) annotations[ANNOTATIONS.hibernatedOnNode] = opts.hint;
  if (opts.stash) annotations[ANNOTATIONS.deleteVmNames] = opts.stash;
  cs.metadata.annotations = annotations;
  if (opts.phase)
    cs.status = {
      phase: opts.phase,
      readyAgents: 0,
      desiredAgents: 1,
      readyToolboxes: 0,
      desiredToolboxes: 0,
    };
  return cs;
}

const plan = (cs: CocoonSet, pods: Pod[], snapshots?: SnapshotFacts): Plan =>
  planPass({ cocoonSet: cs, pods, nowMs: NOW, snapshots });
const actionsOf = (p: Plan, decision: string): PlanAction[] =>
  p.steps.find((s) => s.decision === decision)?.actions ?? [];

/** The main pod as the node agent leaves it hibernated at generation 3. */
const hibernated = (pod: Pod, generation = "3"): Pod =>
  withAnnotations(pod, {
    [ANNOTATIONS.hibernate]: "true",
    [ANNOTATIONS.lifecycleState]: "hibernated",
    [ANNOTATIONS.lifecycleObservedGeneration]: generation,
  });

/** A restored main that is not live yet (no VM id, container not running). */
function restoring(cs: CocoonSet, opts: { unschedulable?: string; node?: string } = {}): Pod {
  const pod = withAnnotations(mainPod(cs, false), {
    [ANNOTATIONS.restoreFromHibernate]: "true",
  });
  if (pod.spec) pod.spec.nodeName = opts.node;
  if (opts.unschedulable !== undefined) {
    pod.status = {
      phase: "Pending",
      conditions: [
        {
          type: "PodScheduled",
          status: "False",
          reason: "Unschedulable",
          message: opts.unschedulable,
        },
      ],
    };
  }
  return pod;
}

/** A restored main whose VM is live on `node`. */
function liveOn(cs: CocoonSet, node: string): Pod {
  const pod = withAnnotations(mainPod(cs), {
    [ANNOTATIONS.restoreFromHibernate]: "true",
    [ANNOTATIONS.vmID]: "vm-new",
    [ANNOTATIONS.lifecycleState]: "ready",
  });
  if (pod.spec) pod.spec.nodeName = node;
  pod.status = {
    ...pod.status,
    containerStatuses: [{ name: "agent", state: { running: {} } }],
  };
  return pod;
}

describe("slot release: the suspend", () => {
  it("without a registry fails with the message cocoon-operator gives, and plans nothing", () => {
    const cs = releaseSet();
    const p = plan(cs, [mainPod(cs)]);
    assert.deepEqual(p.steps, []);
    assert.deepEqual(
      p.refusals.map((r) => r.message),
      ["hibernatePolicy=release on team/demo requires a configured registry"],
    );
    assert.equal(p.status, undefined);
  });

  const notDone: [string, (cs: CocoonSet) => Pod, SnapshotFacts, string[]][] = [
    ["a running main is asked to hibernate", (cs) => mainPod(cs), tags(), ["demo-0:hibernate"]],
    [
      "hibernated but its tag is not in the registry yet",
      (cs) => hibernated(mainPod(cs)),
      tags(),
      ["demo-0:wait-hibernation"],
    ],
    [
      "hibernated for an earlier generation (a stale state and tag)",
      (cs) => hibernated(mainPod(cs), "2"),
      tags(VM0),
      ["demo-0:wait-hibernation"],
    ],
  ];
  it("not done: a main whose CocoonHibernation is being deleted is not asked until it is gone", () => {
    const cs = releaseSet();
    const p = planPass({
      cocoonSet: cs,
      pods: [mainPod(cs)],
      nowMs: NOW,
      snapshots: tags(),
      hibernations: [{ pod: "demo-0", phase: "Hibernated", deleting: { name: "nap" } }],
    });
    assert.deepEqual(decisions(p), ["demo-0:wait-hibernation"]);
    assert.match(p.steps[0].why ?? "", /waits for CocoonHibernation nap to be deleted/);
    assert.equal(p.status?.phase, "Suspending");
  });

  for (const [name, pod, facts, want] of notDone) {
    it(`not done: ${name}: Suspending, polled, nothing deleted`, () => {
      const cs = releaseSet();
      const p = plan(cs, [pod(cs)], facts);
      assert.deepEqual(decisions(p), want);
      assert.equal(p.mutatesPods, false);
      assert.equal(p.status?.phase, "Suspending");
      assert.equal(p.requeueAfterMs, SUSPEND_POLL_MS);
    });
  }

  it("a registry that did not answer fails closed", () => {
    const cs = releaseSet();
    const p = plan(cs, [hibernated(mainPod(cs))], { error: "HEAD …: connect ECONNREFUSED" });
    assert.deepEqual(p.steps, []);
    assert.match(
      p.refusals.map((r) => r.message)[0],
      /^\[spec\.suspend\] cannot tell which VMs have hibernated/,
    );
  });

  it("done: names and node recorded, then keep-snapshot flagged (best effort), deleted, counted; Suspended with the deletes", () => {
    const cs = releaseSet();
    const main = hibernated(mainPod(cs));
    const p = plan(cs, [main], tags(VM0));
    assert.deepEqual(decisions(p), ["demo-0:release-stash", "demo-0:release"]);
    assert.deepEqual(actionsOf(p, "release-stash"), [
      {
        kind: "annotate-cocoonset",
        annotations: { [ANNOTATIONS.deleteVmNames]: VM0, [ANNOTATIONS.hibernatedOnNode]: HINT },
      },
    ]);
    assert.deepEqual(actionsOf(p, "release"), [
      {
        kind: "annotate-pod",
        name: "demo-0",
        uid: "pod-uid-demo-0",
        annotations: { [ANNOTATIONS.keepSnapshotOnDelete]: "true" },
        bestEffort: true,
      },
      { kind: "delete-pod", name: "demo-0", uid: "pod-uid-demo-0" },
      { kind: "count-metric", metric: PLAN_METRICS.slotReleasePodsDeleted },
    ]);
    assert.equal(p.mutatesPods, true);
    // The status of what is left: no agent, Suspended.
    assert.equal(p.status?.phase, "Suspended");
    assert.deepEqual(p.status?.agents, []);
    assert.equal(p.status?.readyAgents, 0);
    assert.match(renderPlan(p), /^main: delete \(slot release: VM hibernated, seat freed\)$/m);
  });

  it("done with the names and node already recorded: only the release", () => {
    const cs = releaseSet({ hint: HINT, stash: VM0 });
    const p = plan(cs, [hibernated(mainPod(cs))], tags(VM0));
    assert.deepEqual(decisions(p), ["demo-0:release"]);
  });

  it("no pod: Suspended at once, nothing asked of the registry", () => {
    const cs = releaseSet({ phase: "Suspending", hint: HINT });
    assert.deepEqual(snapshotProbes(cs, []), []);
    const p = plan(cs, [], tags());
    assert.deepEqual(p.steps, []);
    assert.equal(p.status?.phase, "Suspended");
    assert.equal(p.requeueAfterMs, undefined);
  });

  it("released, the main still terminating: Suspended, and the pod waited out (the seat is free once it is gone)", () => {
    const cs = releaseSet({ phase: "Suspended", hint: HINT, stash: VM0 });
    const main = hibernated(mainPod(cs));
    main.metadata = { ...main.metadata, deletionTimestamp: "2025-06-01T11:59:59Z" };
    const p = plan(cs, [main], tags(VM0));
    assert.deepEqual(decisions(p), ["demo-0:wait-release"]);
    assert.deepEqual(p.steps[0]?.target, { role: "main", slot: 0 });
    assert.equal(p.status?.phase, "Suspended");
    assert.equal(p.requeueAfterMs, SUSPEND_POLL_MS);
    assert.equal(p.mutatesPods, false);
    assert.match(renderPlan(p), /^main: wait \(released pod still terminating\)$/m);
  });

  it("a failed main is left to the normal triage (Failed), as upstream triages it first", () => {
    const cs = releaseSet();
    const p = plan(cs, [failed(mainPod(cs))], tags());
    assert.deepEqual(decisions(p), ["demo-0:main-failed"]);
    assert.deepEqual(snapshotProbes(cs, [failed(mainPod(cs))]), []);
  });

  it("probes: the gate's VMs (hibernated for this generation) only", () => {
    const cs = releaseSet();
    assert.deepEqual(snapshotProbes(cs, [mainPod(cs)]), []);
    assert.deepEqual(snapshotProbes(cs, [hibernated(mainPod(cs))]), [VM0]);
  });
});

describe("slot release: the wake", () => {
  const engaged: [string, Partial<Parameters<typeof releaseSet>[0]>][] = [
    ["Suspended", { phase: "Suspended", hint: HINT }],
    ["Suspended with no hint (the pod was never scheduled)", { phase: "Suspended" }],
    [
      "Suspending with the hint (the deletes ran before Suspended landed)",
      { phase: "Suspending", hint: HINT },
    ],
    ["Waking (a pass cut short after Waking was written)", { phase: "Waking", hint: HINT }],
  ];
  for (const [name, opts = {}] of engaged) {
    it(`no main, ${name}: probes slot 0; Waking written before the restore create`, () => {
      const cs = releaseSet({ suspend: false, ...opts });
      assert.deepEqual(snapshotProbes(cs, []), [VM0]);
      const p = plan(cs, [], tags(VM0));
      assert.deepEqual(decisions(p), ["demo-0:wake-restore"]);
      const [status, create] = actionsOf(p, "wake-restore");
      if (status.kind === "write-status") {
        // Once that Waking is written, the next pass goes straight to the create.
        const again = plan({ ...cs, status: status.status }, [], tags(VM0));
        assert.deepEqual(
          actionsOf(again, "wake-restore").map((a) => a.kind),
          ["create-pod"],
        );
      }
      assert.equal(status.kind, "write-status");
      assert.equal(status.kind === "write-status" && status.status.phase, "Waking");
      assert.equal(create.kind, "create-pod");
      const pod = create.kind === "create-pod" ? create.pod : undefined;
      assert.equal(pod?.metadata.annotations?.[ANNOTATIONS.restoreFromHibernate], "true");
      assert.equal(create.kind === "create-pod" && create.onAlreadyExists, "retry-later");
      assert.equal(p.status, undefined, "no status after a pod create");
    });
  }

  it("hint affinity: preferred (weight 100), never required, when no nodeName pin", () => {
    const cs = releaseSet({ suspend: false, phase: "Suspended", hint: HINT });
    const create = actionsOf(plan(cs, [], tags(VM0)), "wake-restore").find(
      (a) => a.kind === "create-pod",
    );
    const affinity = create?.kind === "create-pod" ? create.pod.spec.affinity : undefined;
    assert.deepEqual(affinity, {
      nodeAffinity: {
        preferredDuringSchedulingIgnoredDuringExecution: [
          {
            weight: HINT_AFFINITY_WEIGHT,
            preference: {
              matchExpressions: [{ key: "kubernetes.io/hostname", operator: "In", values: [HINT] }],
            },
          },
        ],
      },
    });
    assert.equal(create?.kind === "create-pod" && create.pod.spec.nodeName, undefined);
  });

  it("a spec.nodeName pin wins over the hint: the restore is the migration's, as upstream orders them (required affinity, no preferred one)", () => {
    const cs = releaseSet({ suspend: false, phase: "Suspended", hint: HINT, nodeName: "node-b" });
    const p = plan(cs, [], tags(VM0));
    assert.deepEqual(actionsOf(p, "wake-restore"), []);
    const create = actionsOf(p, "migrate-restore").find((a) => a.kind === "create-pod");
    assert.equal(
      create?.kind === "create-pod" &&
        create.pod.metadata.annotations?.[ANNOTATIONS.restoreFromHibernate],
      "true",
    );
    const affinity = create?.kind === "create-pod" ? create.pod.spec.affinity : undefined;
    assert.equal(
      affinity?.nodeAffinity?.preferredDuringSchedulingIgnoredDuringExecution,
      undefined,
    );
    assert.deepEqual(
      affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms[0]
        .matchExpressions?.[0].values,
      ["node-b"],
    );
  });

  it("no snapshot (suspended before the first boot): the normal flow boots fresh", () => {
    const cs = releaseSet({ suspend: false, phase: "Suspended" });
    const p = plan(cs, [], tags());
    assert.deepEqual(decisions(p), ["demo-0:create"]);
    const create = p.steps[0].actions[0];
    assert.equal(
      create.kind === "create-pod" &&
        create.pod.metadata.annotations?.[ANNOTATIONS.restoreFromHibernate],
      undefined,
    );
  });

  it("a probe error fails closed: never a fresh boot over a snapshot", () => {
    const cs = releaseSet({ suspend: false, phase: "Suspended", hint: HINT });
    const p = plan(cs, [], { error: "probe hibernate snapshot vk-team-demo-0: boom" });
    assert.deepEqual(p.steps, []);
    assert.deepEqual(
      p.refusals.map((r) => r.message),
      ["wake: probe hibernate snapshot vk-team-demo-0: boom"],
    );
  });

  const notEngaged: [string, Partial<Parameters<typeof releaseSet>[0]>][] = [
    ["Running", { phase: "Running" }],
    ["Suspending without the hint", { phase: "Suspending" }],
    ["Pending with no hint", { phase: "Pending" }],
  ];
  for (const [name, opts] of notEngaged) {
    it(`not engaged when ${name}: the registry is not asked`, () => {
      const cs = releaseSet({ suspend: false, ...opts });
      assert.deepEqual(slotReleaseProbes(cs, []), []);
      const p = plan(cs, [], { error: "must not be consulted" });
      assert.deepEqual(decisions(p), ["demo-0:create"]);
      assert.deepEqual(
        p.refusals.map((r) => r.message),
        [],
      );
    });
  }

  it("without a registry the wake is not engaged (the normal flow runs)", () => {
    const cs = releaseSet({ suspend: false, phase: "Suspended", hint: HINT });
    assert.deepEqual(decisions(plan(cs, [])), ["demo-0:create"]);
  });

  it("Waking, main not live: waits (Waking, 5 s), tag kept", () => {
    const cs = releaseSet({ suspend: false, phase: "Waking", hint: HINT });
    const p = plan(cs, [restoring(cs, { node: HINT })], tags(VM0));
    assert.deepEqual(decisions(p), ["demo-0:wait-wake"]);
    assert.deepEqual(actionsOf(p, "wait-wake"), []);
    assert.equal(p.status?.phase, "Waking");
    assert.equal(p.requeueAfterMs, SUSPEND_POLL_MS);
  });

  it("Waking, main unschedulable: counted and reported as Warning WakeNoCapacity, still Waking", () => {
    const cs = releaseSet({ suspend: false, phase: "Waking", hint: HINT });
    const msg = "0/2 nodes are available: 2 node(s) were unschedulable.";
    const p = plan(cs, [restoring(cs, { unschedulable: msg })], tags(VM0));
    assert.deepEqual(actionsOf(p, "wait-wake"), [
      { kind: "count-metric", metric: PLAN_METRICS.slotReleaseWakeUnschedulable },
      {
        kind: "event",
        type: "Warning",
        reason: EVENT_REASONS.wakeNoCapacity,
        message: `main pod demo-0 unschedulable: ${msg}`,
      },
    ]);
    assert.equal(p.status?.phase, "Waking");
    assert.match(renderPlan(p), /^main: wait \(wake: unschedulable, no capacity\)$/m);
  });

  const landed: [string, string, "hint-node" | "pool"][] = [
    ["on the hint node", HINT, "hint-node"],
    ["elsewhere in the pool", "node-c", "pool"],
  ];
  for (const [name, node, placement] of landed) {
    it(`live ${name}: tag deleted, wake counted as ${placement}, hint cleared, phase derived`, () => {
      const cs = releaseSet({ suspend: false, phase: "Waking", hint: HINT });
      const p = plan(cs, [liveOn(cs, node)], tags(VM0));
      assert.deepEqual(decisions(p), ["demo-0:wake-complete"]);
      assert.deepEqual(actionsOf(p, "wake-complete"), [
        { kind: "delete-snapshot-tag", vm: VM0, tag: "hibernate" },
        { kind: "count-metric", metric: PLAN_METRICS.slotReleaseWake, labels: { placement } },
        { kind: "annotate-cocoonset", annotations: { [ANNOTATIONS.hibernatedOnNode]: null } },
      ]);
      assert.equal(p.status?.phase, "Running");
      assert.equal(p.requeueAfterMs, 0);
    });
  }

  it("a stale Waking after the hint was cleared: the tag is deleted again, the wake not counted twice", () => {
    const cs = releaseSet({ suspend: false, phase: "Waking" });
    const p = plan(cs, [liveOn(cs, HINT)], tags());
    assert.deepEqual(actionsOf(p, "wake-complete"), [
      { kind: "delete-snapshot-tag", vm: VM0, tag: "hibernate" },
    ]);
  });

  it("an overwritten phase with a restored main and the hint set is still an unfinished wake", () => {
    const cs = releaseSet({ suspend: false, phase: "Pending", hint: HINT });
    assert.deepEqual(decisions(plan(cs, [liveOn(cs, HINT)], tags(VM0))), ["demo-0:wake-complete"]);
    assert.deepEqual(decisions(plan(cs, [restoring(cs)], tags(VM0))), ["demo-0:wait-wake"]);
  });

  it("done: a restored main with no hint left is the normal flow's (no re-engage)", () => {
    const cs = releaseSet({ suspend: false, phase: "Running" });
    const p = plan(cs, [liveOn(cs, HINT)], { error: "must not be consulted" });
    assert.deepEqual(
      p.refusals.map((r) => r.message),
      [],
    );
    assert.ok(!p.steps.some((s) => s.decision === "wake-complete"));
  });

  it("released but the main is still terminating: waited out, not recreated", () => {
    const cs = releaseSet({ suspend: false, phase: "Suspended", hint: HINT });
    const main = hibernated(mainPod(cs));
    main.metadata = { ...main.metadata, deletionTimestamp: "2025-06-01T11:59:59Z" };
    const p = plan(cs, [main], tags(VM0));
    assert.deepEqual(decisions(p), ["demo-0:wait-release"]);
    assert.equal(p.requeueAfterMs, MAIN_RETRY_MS);
    assert.equal(p.status, undefined);
  });

  it("released but the main lives (its delete never ran): woken in place by the normal flow", () => {
    const cs = releaseSet({ suspend: false, phase: "Suspending", hint: HINT });
    const p = plan(cs, [hibernated(mainPod(cs))], tags(VM0));
    assert.deepEqual(decisions(p), ["demo-0:wake"]);
  });
});

describe("slot release: properties", () => {
  const lifecycle = fc.constantFrom("", "creating", "ready", "hibernating", "hibernated");
  const podArb = fc.record({
    present: fc.boolean(),
    asked: fc.boolean(),
    state: lifecycle,
    observed: fc.integer({ min: 1, max: 4 }),
    tag: fc.boolean(),
    terminating: fc.boolean(),
  });

  it("a release suspend deletes the main only when its VM hibernated for this generation and its tag exists", () => {
    fc.assert(
      fc.property(podArb, (x) => {
        const cs = releaseSet();
        let pod = withAnnotations(mainPod(cs), {
          [ANNOTATIONS.hibernate]: x.asked ? "true" : undefined,
          [ANNOTATIONS.lifecycleState]: x.state || undefined,
          [ANNOTATIONS.lifecycleObservedGeneration]: String(x.observed),
        });
        if (x.terminating) pod = { ...pod, metadata: { ...pod.metadata, deletionTimestamp: "t" } };
        const pods = x.present ? [pod] : [];
        const p = plan(cs, pods, x.tag ? tags(VM0) : tags());
        const deletes = p.steps.flatMap((s) => s.actions.filter((a) => a.kind === "delete-pod"));
        const confirmed = x.asked && x.state === "hibernated" && x.observed >= 3 && x.tag;
        if (deletes.length > 0) assert.ok(confirmed && !x.terminating);
        // The node hint is recorded before the first delete.
        if (deletes.length > 0) assert.equal(p.steps[0].decision, "release-stash");
        if (!x.present) assert.equal(p.status?.phase, "Suspended");
      }),
    );
  });

  it("a missing main is restored exactly when the wake is engaged and its snapshot exists, else booted fresh", () => {
    const phases = fc.constantFrom<CocoonSetPhase>(
      "Suspended",
      "Suspending",
      "Waking",
      "Running",
      "Pending",
    );
    fc.assert(
      fc.property(phases, fc.boolean(), fc.boolean(), (phase, hint, tag) => {
        const cs = releaseSet({ suspend: false, phase, hint: hint ? HINT : undefined });
        const p = plan(cs, [], tag ? tags(VM0) : tags());
        const created = p.steps.flatMap((s) => s.actions.filter((a) => a.kind === "create-pod"));
        assert.equal(created.length, 1);
        const restore =
          created[0].kind === "create-pod" &&
          created[0].pod.metadata.annotations?.[ANNOTATIONS.restoreFromHibernate] === "true";
        const engaged =
          phase === "Suspended" || phase === "Waking" || (phase === "Suspending" && hint);
        assert.equal(restore, tag && engaged);
      }),
    );
  });
});
