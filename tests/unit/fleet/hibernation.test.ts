// The CocoonHibernation planner, with a fake clock: finalizer, pending, duplicates, no
// registry, hibernate (gate, tag, timeout), wake (running with a VM id, timeout), reversed
// desires, retries after Failed, deletion with the last-holder tag GC.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import {
  DEFAULT_HIBERNATE_TIMEOUT_MS,
  DEFAULT_WAKE_TIMEOUT_MS,
} from "../../../engine/spec/constants.js";
import {
  HIBERNATION_POLL_MS,
  goDuration,
  hibernateDeadlineMs,
} from "../../../engine/hibernation/hibernation.js";
import {
  hibernationProbe,
  hibernationRefusalMessage,
  planHibernation,
  type HibernationAction,
  type HibernationInput,
  type HibernationPlan,
} from "../../../engine/hibernation/index.js";
import type { CocoonHibernationPhase } from "../../../engine/spec/generated/hibernation-types.js";
import { HIBERNATION_FINALIZER } from "../../../engine/spec/hibernation-schema.js";
import {
  ANNOTATIONS,
  LABELS,
  MANAGED_BY,
  type CocoonHibernation,
  type Pod,
} from "../../../engine/spec/index.js";
import { annotateOf, eventsOf, kindsOf, observeOf, statusOf, tagOf } from "./hibernation-view.js";
import { cocoonSet } from "./fixtures.js";

const NOW = Date.parse("2025-06-01T12:00:00Z");
const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
const VM = "vk-team-demo-1";

function cr(
  desire: "Hibernate" | "Wake",
  phase?: CocoonHibernationPhase,
  opts: { since?: number; name?: string; created?: string; finalizer?: boolean; uid?: string } = {},
): CocoonHibernation {
  const name = opts.name ?? "h";
  return {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonHibernation",
    metadata: {
      name,
      namespace: "team",
      uid: opts.uid ?? `uid-${name}`,
      generation: 1,
      creationTimestamp: opts.created ?? "2025-06-01T11:00:00Z",
      finalizers: opts.finalizer === false ? [] : [HIBERNATION_FINALIZER],
    },
    spec: { podRef: { name: "demo-1" }, desire },
    ...(phase
      ? {
          status: {
            observedGeneration: 1,
            phase,
            vmName: VM,
            conditions: [
              {
                type: "Ready",
                status: phase === "Hibernated" || phase === "Active" ? "True" : "False",
                reason:
                  phase === "Hibernated" || phase === "Active"
                    ? "Done"
                    : phase === "Failed"
                      ? "Failed"
                      : "Pending",
                message: phase,
                observedGeneration: 1,
                lastTransitionTime: iso(opts.since ?? NOW - 10_000),
              },
            ],
          },
        }
      : {}),
  };
}

function pod(a: Record<string, string> = {}, running = true): Pod {
  return {
    metadata: {
      name: "demo-1",
      namespace: "team",
      uid: "pod-uid",
      annotations: {
        [ANNOTATIONS.vmName]: VM,
        [ANNOTATIONS.generation]: "3",
        ...a,
      },
    },
    status: {
      phase: "Running",
      containerStatuses: [{ name: "agent", state: running ? { running: {} } : {} }],
    },
  };
}

const live = (extra: Record<string, string> = {}) =>
  pod({ [ANNOTATIONS.vmID]: "vm-1", [ANNOTATIONS.lifecycleState]: "ready", ...extra });
const hibernating = () =>
  pod({ [ANNOTATIONS.hibernate]: "true", [ANNOTATIONS.lifecycleState]: "hibernating" });
const hibernated = (observed = "3") =>
  pod({
    [ANNOTATIONS.hibernate]: "true",
    [ANNOTATIONS.lifecycleState]: "hibernated",
    [ANNOTATIONS.lifecycleObservedGeneration]: observed,
  });

function plan(c: CocoonHibernation, p: Pod | undefined, extra: Partial<HibernationInput> = {}) {
  return planHibernation({ cr: c, pod: p, all: [c], registry: true, nowMs: NOW, ...extra });
}
const reasons = (pl: HibernationPlan) => eventsOf(pl).map((e) => e.reason);
const hibernateRequest = (value: "true" | null) => ({
  kind: "annotate-pod",
  name: "demo-1",
  uid: "pod-uid",
  annotations: { [ANNOTATIONS.hibernate]: value },
});

describe("CocoonHibernation plan: before any transition", () => {
  it("adds the finalizer first and does nothing else", () => {
    const p = plan(cr("Hibernate", undefined, { finalizer: false }), live());
    assert.deepEqual(p.actions, [{ kind: "add-finalizer", finalizer: HIBERNATION_FINALIZER }]);
    assert.equal(p.requeueAfterMs, 0);
  });

  const cases: [string, Pod | undefined, RegExp][] = [
    ["no pod", undefined, /pod team\/demo-1 not yet present/],
    [
      "no VM name",
      { metadata: { name: "demo-1", namespace: "team" } },
      /has no vm\.cocoonstack\.io\/name/,
    ],
  ];
  for (const [what, p, message] of cases) {
    it(`${what}: Pending, polled`, () => {
      const pl = plan(cr("Hibernate"), p);
      assert.equal(statusOf(pl)?.phase, "Pending");
      assert.match(statusOf(pl)?.conditions?.[0].message ?? "", message);
      assert.equal(pl.requeueAfterMs, HIBERNATION_POLL_MS);
    });
  }

  it("never demotes Hibernated or Waking to Pending (they carry restore intent)", () => {
    for (const phase of ["Hibernated", "Waking"] as const) {
      assert.equal(statusOf(plan(cr("Hibernate", phase), undefined)), undefined, phase);
    }
  });

  it("refuses a second CR for the pod: Failed and a Warning naming the holder", () => {
    const holder = cr("Hibernate", "Hibernated", {
      name: "first",
      created: "2025-06-01T10:00:00Z",
    });
    const second = cr("Wake", undefined, { name: "second" });
    const pl = plan(second, live(), { all: [second, holder] });
    assert.equal(statusOf(pl)?.phase, "Failed");
    assert.equal(annotateOf(pl), undefined);
    assert.deepEqual(reasons(pl), ["DuplicateHibernation"]);
    assert.match(eventsOf(pl)[0].message, /already targeted by CocoonHibernation first/);
    // Written once: a second reconcile changes nothing and says nothing.
    const again = { ...second, status: statusOf(pl) };
    const quiet = plan(again, live(), { all: [again, holder] });
    assert.equal(statusOf(quiet), undefined);
    assert.deepEqual(eventsOf(quiet), []);
  });

  it("within one second of creation, the CR that already acted holds the pod", () => {
    const at = "2025-06-01T11:00:00Z";
    const holder = cr("Hibernate", "Hibernated", { name: "zz", created: at });
    const second = cr("Wake", undefined, { name: "aa", created: at });
    assert.equal(plan(second, live(), { all: [second, holder] }).decision, "refuse-duplicate");
    assert.notEqual(plan(holder, live(), { all: [second, holder] }).decision, "refuse-duplicate");
  });

  it("without a registry: Failed, saying so once", () => {
    const pl = plan(cr("Hibernate"), live(), { registry: false });
    assert.equal(statusOf(pl)?.phase, "Failed");
    assert.deepEqual(reasons(pl), ["RegistryNotConfigured"]);
    assert.match(statusOf(pl)?.conditions?.[0].message ?? "", /--oci-registry/);
  });
});

describe("CocoonHibernation plan: hibernate", () => {
  it("asks the pod to hibernate and enters Hibernating with the clock at now", () => {
    const pl = plan(cr("Hibernate", "Active", { since: NOW - 3_600_000 }), live());
    assert.deepEqual(annotateOf(pl), hibernateRequest("true"));
    assert.deepEqual(kindsOf(pl), ["annotate-pod", "write-status"], "the request, then the phase");
    assert.equal(statusOf(pl)?.phase, "Hibernating");
    assert.equal(statusOf(pl)?.conditions?.[0].lastTransitionTime, iso(NOW));
    assert.equal(pl.requeueAfterMs, HIBERNATION_POLL_MS);
  });

  it("a managed pod's answer comes by its watch: looked at again at the deadline, not polled", () => {
    const managed = (x: Pod): Pod => ({
      ...x,
      metadata: { ...x.metadata, labels: { [LABELS.managedBy]: MANAGED_BY } },
    });
    const timeout = DEFAULT_HIBERNATE_TIMEOUT_MS;
    // Entering Hibernating: the whole timeout (and the second the transition time drops).
    const entered = plan(cr("Hibernate", "Active"), managed(live()));
    assert.equal(entered.requeueAfterMs, timeout + 1000);
    // Waiting 60 s in: what is left of it.
    const waiting = plan(
      cr("Hibernate", "Hibernating", { since: NOW - 60_000 }),
      managed(hibernating()),
    );
    assert.equal(waiting.decision, "wait-hibernated");
    assert.equal(waiting.requeueAfterMs, timeout - 60_000 + 1000);
    assert.equal(
      hibernateDeadlineMs(timeout, timeout),
      HIBERNATION_POLL_MS,
      "never under the poll",
    );
    // The registry is not watched: hibernated but the tag not seen yet is polled.
    const untagged = plan(cr("Hibernate", "Hibernating"), managed(hibernated()), {
      tag: { exists: false },
    });
    assert.equal(untagged.requeueAfterMs, HIBERNATION_POLL_MS);
    // A pod the controller does not watch (not managed by it) is polled as before.
    assert.equal(
      plan(cr("Hibernate", "Hibernating"), hibernating()).requeueAfterMs,
      HIBERNATION_POLL_MS,
    );
  });

  it("asks the registry only once the node agent reports hibernated for this generation", () => {
    const base = { all: [] as CocoonHibernation[], registry: true, nowMs: NOW };
    const c = cr("Hibernate", "Hibernating");
    assert.equal(hibernationProbe({ ...base, cr: c, all: [c], pod: hibernating() }), undefined);
    assert.equal(hibernationProbe({ ...base, cr: c, all: [c], pod: hibernated("2") }), undefined);
    assert.equal(hibernationProbe({ ...base, cr: c, all: [c], pod: hibernated() }), VM);
  });

  it("Hibernated once the tag exists: event, histogram, no requeue", () => {
    const pl = plan(cr("Hibernate", "Hibernating", { since: NOW - 12_000 }), hibernated(), {
      tag: { exists: true },
    });
    assert.equal(annotateOf(pl), undefined);
    assert.equal(statusOf(pl)?.phase, "Hibernated");
    assert.equal(statusOf(pl)?.conditions?.[0].status, "True");
    assert.deepEqual(reasons(pl), ["Hibernated"]);
    assert.deepEqual(observeOf(pl), {
      kind: "observe-duration",
      metric: "hibernate_phase_duration_seconds",
      result: "ok",
      seconds: 12,
    });
    assert.equal(pl.requeueAfterMs, undefined);
  });

  it("a missing tag keeps it Hibernating; a probe error retries with backoff", () => {
    const c = cr("Hibernate", "Hibernating");
    assert.equal(plan(c, hibernated(), { tag: { exists: false } }).decision, "wait-hibernated");
    const failed = plan(c, hibernated(), { tag: { error: "probe: 503" } });
    assert.deepEqual(failed.refusal, {
      kind: "snapshot-registry-unanswered",
      vm: VM,
      detail: "probe: 503",
    });
    assert.equal(
      hibernationRefusalMessage(failed.refusal),
      `probe hibernate snapshot ${VM}: probe: 503`,
    );
    assert.deepEqual(failed.actions, [], "nothing is written on an unanswered probe");
  });

  it("Hibernated and its tag gone: kept Hibernated, Ready False SnapshotLost naming the VM, a Warning once", () => {
    const c = cr("Hibernate", "Hibernated");
    const pl = plan(c, hibernated(), { tag: { exists: false } });
    assert.equal(pl.decision, "snapshot-lost");
    assert.equal(statusOf(pl)?.phase, "Hibernated", "the restore intent of a rebuilt pod stays");
    const ready = statusOf(pl)?.conditions?.[0];
    assert.equal(ready?.status, "False");
    assert.equal(ready?.reason, "SnapshotLost");
    assert.match(ready?.message ?? "", new RegExp(`^snapshot ${VM}:hibernate was recorded`));
    assert.deepEqual(
      eventsOf(pl).map((e) => `${e.type} ${e.reason}`),
      ["Warning SnapshotLost"],
    );
    const again = plan({ ...c, status: statusOf(pl) }, hibernated(), { tag: { exists: false } });
    assert.equal(statusOf(again), undefined);
    assert.deepEqual(eventsOf(again), [], "said once");
  });

  it("times out after the hibernate timeout: Failed, HibernateTimedOut, histogram timeout", () => {
    const since = NOW - DEFAULT_HIBERNATE_TIMEOUT_MS - 1;
    const pl = plan(cr("Hibernate", "Hibernating", { since }), hibernating());
    assert.equal(statusOf(pl)?.phase, "Failed");
    assert.match(statusOf(pl)?.conditions?.[0].message ?? "", /within 3m0s/);
    assert.deepEqual(reasons(pl), ["HibernateTimedOut"]);
    assert.equal(observeOf(pl)?.result, "timeout");
    // A registry that keeps failing meets the deadline too.
    const probeFails = plan(cr("Hibernate", "Hibernating", { since }), hibernated(), {
      tag: { error: "down" },
    });
    assert.equal(statusOf(probeFails)?.phase, "Failed");
  });

  it("a configured timeout is honoured and spelt in the message", () => {
    const pl = plan(cr("Hibernate", "Hibernating", { since: NOW - 2_500 }), hibernating(), {
      hibernateTimeoutMs: 2_000,
    });
    assert.match(eventsOf(pl)[0].message, /within 2s/);
  });

  it("a retry after Failed says RetryRequested and restarts the clock", () => {
    const pl = plan(cr("Hibernate", "Failed", { since: NOW - 3_600_000 }), hibernating());
    assert.deepEqual(reasons(pl), ["RetryRequested"]);
    assert.equal(statusOf(pl)?.phase, "Hibernating");
    assert.equal(statusOf(pl)?.conditions?.[0].lastTransitionTime, iso(NOW));
  });
});

describe("CocoonHibernation plan: wake", () => {
  it("withdraws the hibernate request and waits in Waking", () => {
    const pl = plan(cr("Wake", "Hibernated"), hibernated());
    assert.deepEqual(annotateOf(pl), hibernateRequest(null));
    assert.equal(statusOf(pl)?.phase, "Waking");
    assert.equal(tagOf(pl), undefined);
  });

  it("Active once the container runs with a VM id: the tag is dropped", () => {
    const pl = plan(cr("Wake", "Waking", { since: NOW - 4_000 }), live());
    assert.equal(statusOf(pl)?.phase, "Active");
    assert.equal(tagOf(pl), VM);
    assert.deepEqual(reasons(pl), ["WokenActive"]);
    assert.deepEqual(observeOf(pl), {
      kind: "observe-duration",
      metric: "wake_phase_duration_seconds",
      result: "ok",
      seconds: 4,
    });
  });

  it("a running container without a VM id is not awake", () => {
    const p = pod({ [ANNOTATIONS.lifecycleState]: "creating" });
    assert.equal(statusOf(plan(cr("Wake", "Waking"), p)), undefined);
  });

  it("times out after the wake timeout", () => {
    const since = NOW - DEFAULT_WAKE_TIMEOUT_MS - 1;
    const pl = plan(cr("Wake", "Waking", { since }), pod({}, false));
    assert.equal(statusOf(pl)?.phase, "Failed");
    assert.deepEqual(reasons(pl), ["WakeTimedOut"]);
    assert.match(statusOf(pl)?.conditions?.[0].message ?? "", /after 5m0s/);
  });
});

describe("CocoonHibernation plan: reversed desires finish the transition in flight", () => {
  it("Wake while Hibernating keeps hibernating", () => {
    const pl = plan(cr("Wake", "Hibernating"), hibernating());
    assert.equal(annotateOf(pl), undefined, "the hibernate request stays");
    assert.equal(statusOf(pl), undefined, "still Hibernating");
    assert.equal(pl.decision, "wait-hibernated");
    const done = plan(cr("Wake", "Hibernating"), hibernated(), { tag: { exists: true } });
    assert.equal(statusOf(done)?.phase, "Hibernated");
    assert.equal(done.requeueAfterMs, 0, "looked at again at once: the wake is asked for");
    // Then the wake starts.
    const next = plan({ ...cr("Wake"), status: statusOf(done) }, hibernated());
    assert.equal(statusOf(next)?.phase, "Waking");
  });

  it("Hibernate while Waking keeps waking", () => {
    const pl = plan(cr("Hibernate", "Waking"), pod({}, false));
    assert.equal(annotateOf(pl), undefined);
    assert.equal(pl.decision, "wait-woken");
    const done = plan(cr("Hibernate", "Waking"), live());
    assert.equal(statusOf(done)?.phase, "Active");
    assert.equal(done.requeueAfterMs, 0, "then the hibernation starts at once");
  });

  it("a transition as asked ends with no requeue", () => {
    const done = plan(cr("Hibernate", "Hibernating"), hibernated(), { tag: { exists: true } });
    assert.equal(done.requeueAfterMs, undefined);
    assert.equal(plan(cr("Wake", "Waking"), live()).requeueAfterMs, undefined);
  });
});

describe("CocoonHibernation plan: deletion", () => {
  const deleting = (c: CocoonHibernation): CocoonHibernation => ({
    ...c,
    metadata: { ...c.metadata, deletionTimestamp: iso(NOW) },
  });

  it("the last holder drops the tag, then releases the finalizer", () => {
    const c = deleting(cr("Hibernate", "Hibernated"));
    const pl = plan(c, hibernated());
    assert.deepEqual(pl.actions, [
      { kind: "delete-snapshot-tag", vm: VM, tag: "hibernate", bestEffort: true },
      { kind: "remove-finalizer", finalizer: HIBERNATION_FINALIZER },
    ]);
  });

  it("a CR deleted once Active drops no tag: its wake dropped its own, any tag now is another's", () => {
    const c = deleting(cr("Wake", "Active"));
    const pl = plan(c, hibernated());
    assert.equal(tagOf(pl), undefined);
    assert.deepEqual(kindsOf(pl), ["remove-finalizer"]);
    assert.equal(pl.decision, "keep-tag");
  });

  it("a CR deleted before it was Active keeps the tag while its VM's fleet is suspended: the suspend holds it", () => {
    // Woken by its fleet (the idle policy's wake on demand) and deleted before its own wake
    // ran, then the fleet suspended: the tag is the suspend's snapshot.
    const c = deleting(cr("Wake", "Hibernated"));
    const fleet = (spec: Parameters<typeof cocoonSet>[0]) => cocoonSet(spec, { replicas: 1 });
    const suspended = plan(c, hibernated(), { fleets: [fleet({ suspend: true })] });
    assert.equal(tagOf(suspended), undefined);
    assert.equal(suspended.decision, "keep-tag");
    const idle = fleet({});
    idle.status = { idleSuspendedSince: iso(NOW) } as NonNullable<typeof idle.status>;
    assert.equal(plan(c, hibernated(), { fleets: [idle] }).decision, "keep-tag", "idle-suspended");
    // Running, the fleet holds no snapshot of it: the CR's own is dropped.
    const running = plan(c, hibernated(), { fleets: [fleet({})] });
    assert.equal(running.decision, "drop-tag");
    // A suspended fleet of another namespace, or one that does not name the VM, holds nothing.
    const other = fleet({ suspend: true });
    other.metadata = { ...other.metadata, name: "other" };
    assert.equal(plan(c, hibernated(), { fleets: [other] }).decision, "drop-tag");
  });

  it("keeps the tag while another live CR tracks the pod", () => {
    const c = deleting(cr("Hibernate", "Hibernated"));
    const other = cr("Hibernate", undefined, { name: "other" });
    const pl = plan(c, hibernated(), { all: [c, other] });
    assert.equal(tagOf(pl), undefined);
    assert.deepEqual(kindsOf(pl), ["remove-finalizer"]);
  });

  it("without a registry it only releases the finalizer", () => {
    const pl = plan(deleting(cr("Hibernate", "Hibernated")), undefined, { registry: false });
    assert.deepEqual(kindsOf(pl), ["remove-finalizer"]);
  });
});

describe("goDuration", () => {
  it("spells durations as Go does", () => {
    assert.deepEqual([180_000, 300_000, 2_000, 1_500, 3_723_000, 250].map(goDuration), [
      "3m0s",
      "5m0s",
      "2s",
      "1.5s",
      "1h2m3s",
      "250ms",
    ]);
  });
});

describe("CocoonHibernation plan: properties over any CR, pod and registry answer", () => {
  /** Where each kind may stand in a plan: the old executor's order, kept. */
  const RANK: Record<HibernationAction["kind"], number> = {
    "add-finalizer": 0,
    "annotate-pod": 1,
    "delete-snapshot-tag": 2,
    "write-status": 3,
    event: 4,
    "observe-duration": 5,
    "remove-finalizer": 6,
  };
  const stateArb = fc.record({
    desire: fc.constantFrom("Hibernate" as const, "Wake" as const),
    phase: fc.constantFrom(
      undefined,
      "Pending" as const,
      "Hibernating" as const,
      "Hibernated" as const,
      "Waking" as const,
      "Active" as const,
      "Failed" as const,
    ),
    sinceAgoMs: fc.integer({ min: 0, max: 2 * DEFAULT_WAKE_TIMEOUT_MS }),
    finalizer: fc.boolean(),
    deleting: fc.boolean(),
    pod: fc.constantFrom(
      "none",
      "no-vm-name",
      "live",
      "hibernating",
      "hibernated",
      "stale",
      "down",
    ),
    older: fc.boolean(),
    registry: fc.boolean(),
    tag: fc.constantFrom(undefined, { exists: true }, { exists: false }, { error: "503" }),
  });
  const podOf = (kind: string): Pod | undefined => {
    switch (kind) {
      case "none":
        return undefined;
      case "no-vm-name":
        return { metadata: { name: "demo-1", namespace: "team", uid: "pod-uid" } };
      case "live":
        return live();
      case "hibernating":
        return hibernating();
      case "hibernated":
        return hibernated();
      case "stale":
        return hibernated("2");
      default:
        return pod({}, false);
    }
  };

  it("keeps the executor's order, the finalizer rules, and refuses only without a write", () => {
    fc.assert(
      fc.property(stateArb, (st) => {
        const c = cr(st.desire, st.phase, { since: NOW - st.sinceAgoMs, finalizer: st.finalizer });
        if (st.deleting) c.metadata.deletionTimestamp = iso(NOW);
        // Another live CR of the same pod, created earlier or later.
        const other = cr("Hibernate", undefined, {
          name: "other",
          created: st.older ? "2025-06-01T10:00:00Z" : "2025-06-01T11:30:00Z",
        });
        const p = podOf(st.pod);
        const input = { all: [c, other], registry: st.registry, tag: st.tag };
        const pl = plan(c, p, input);
        const kinds = kindsOf(pl);
        const ranks = kinds.map((k) => RANK[k]);
        assert.deepEqual(
          ranks,
          [...ranks].sort((a, b) => a - b),
          `in order: ${kinds.join()}`,
        );
        for (const k of kinds.filter((k) => k !== "event"))
          assert.equal(kinds.filter((x) => x === k).length, 1, `one ${k}`);

        const addsFinalizer = !st.deleting && !st.finalizer;
        assert.equal(kinds.includes("add-finalizer"), addsFinalizer);
        if (addsFinalizer) assert.deepEqual(kinds, ["add-finalizer"], "nothing else first");
        assert.equal(kinds.includes("remove-finalizer"), st.deleting && st.finalizer);
        if (st.deleting)
          assert.ok(kinds.every((k) => k === "delete-snapshot-tag" || k === "remove-finalizer"));

        // Only the CR holding the pod acts on the pod and its tag while live.
        if (!st.deleting && st.older) {
          assert.ok(!kinds.includes("annotate-pod") && !kinds.includes("delete-snapshot-tag"));
        }
        if (!st.registry) assert.ok(!kinds.includes("delete-snapshot-tag"));

        if (pl.refusal) {
          assert.equal(pl.decision, "probe-failed");
          assert.deepEqual(pl.refusal.kind, "snapshot-registry-unanswered");
          assert.ok(!kinds.includes("write-status"), "a refusal writes no status");
        }
        const status = statusOf(pl);
        if (status) assert.equal(status.observedGeneration, c.metadata.generation);
      }),
      { numRuns: 500 },
    );
  });
});
