// The controller's idle step (engine/idle/step.ts), the effective suspend the planners read
// (engine/spec/defaults.ts) and the policies' durations (engine/spec/policy-durations.ts):
// tables for each transition, and properties for any fleet: a fleet without a policy is left
// exactly as it is, and the step's CocoonHibernations always follow the record it writes.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import {
  idleHibernationName,
  idleStepApplies,
  planIdleStep,
  type IdleStepInput,
} from "../../../engine/idle/index.js";
import {
  effectiveSuspend,
  formatFailure,
  policyDurations,
  suspendView,
  validateCocoonSetSpec,
  type CocoonHibernation,
  type CocoonSet,
  type Pod,
} from "../../../engine/spec/index.js";
import { planPass } from "../../../engine/planner/index.js";

const T0 = Date.parse("2026-12-01T12:00:00Z");
const MIN = 60_000;
const iso = (minutes: number) => new Date(T0 + minutes * MIN).toISOString().replace(/\.\d+Z$/, "Z");
const UID = "uid-1";

function fleet(spec: Partial<CocoonSet["spec"]> = {}, status: Partial<CocoonSet["status"]> = {}) {
  const replicas = spec.agent?.replicas ?? 1;
  const vms: Record<string, { vm: string; podUID: string }> = {};
  for (let s = 0; s <= replicas; s++) vms[String(s)] = { vm: `vk-ns-f-${s}`, podUID: `p${s}` };
  return {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonSet",
    metadata: {
      name: "f",
      namespace: "ns",
      uid: UID,
      generation: 1,
      resourceVersion: "10",
      creationTimestamp: iso(0),
    },
    spec: { idle: { after: "10m" }, ...spec, agent: { image: "img", replicas } },
    status: {
      readyAgents: replicas + 1,
      desiredAgents: replicas + 1,
      readyToolboxes: 0,
      desiredToolboxes: 0,
      ...status,
      vms: { ...vms, ...(status.vms ?? {}) },
    },
  } as CocoonSet;
}

function pod(slot: number, created = 0, annotations: Record<string, string> = {}): Pod {
  return {
    metadata: {
      name: `f-${slot}`,
      namespace: "ns",
      uid: `p${slot}`,
      creationTimestamp: iso(created),
      labels: {
        "cocoonset.cocoonstack.io/name": "f",
        "cocoonset.cocoonstack.io/role": slot === 0 ? "main" : "sub-agent",
        "cocoonset.cocoonstack.io/slot": String(slot),
        "app.kubernetes.io/managed-by": "cocoonset",
      },
      annotations,
      ownerReferences: [
        {
          apiVersion: "cocoonset.cocoonstack.io/v1",
          kind: "CocoonSet",
          name: "f",
          uid: UID,
          controller: true,
        },
      ],
    },
    spec: { containers: [] },
    status: { phase: "Running", conditions: [{ type: "Ready", status: "True" }] },
  };
}

const lease = (slot: number, minutes: number) => ({
  metadata: { name: `f-${slot}-activity` },
  spec: { renewTime: new Date(T0 + minutes * MIN).toISOString() },
});

function ours(slot: number, desire: "Hibernate" | "Wake"): CocoonHibernation {
  return {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonHibernation",
    metadata: {
      name: idleHibernationName(`f-${slot}`),
      namespace: "ns",
      ownerReferences: [
        { apiVersion: "cocoonset.cocoonstack.io/v1", kind: "CocoonSet", name: "f", uid: UID },
      ],
    },
    spec: { podRef: { name: `f-${slot}` }, desire },
  };
}

const input = (
  cs: CocoonSet,
  minutes: number,
  extra: Partial<IdleStepInput> = {},
): IdleStepInput => ({
  cocoonSet: cs,
  pods: [pod(0), pod(1)],
  hibernations: [],
  leases: [],
  nowMs: T0 + minutes * MIN,
  ...extra,
});

describe("the idle step", () => {
  it("hibernates an idle sub-agent through a CocoonHibernation of its own, recorded in idleSince", () => {
    const step = planIdleStep(input(fleet(), 11, { leases: [lease(0, 6)] }));
    assert.deepEqual(step.status, { vms: { "1": { idleSince: iso(11), lastActivity: iso(0) } } });
    assert.deepEqual(step.hibernations, [
      { name: "f-1-idle", pod: "f-1", member: "1", desire: "Hibernate", op: "create" },
    ]);
    assert.deepEqual(
      step.events.map((e) => [e.type, e.reason]),
      [["Normal", "IdleHibernated"]],
    );
    assert.deepEqual(step.counts, { hibernated: 1, woken: 0, idleHibernated: 1 });
    // Next: the whole fleet idle, 10 minutes after the main agent's renewal.
    assert.equal(step.nextCheckAtMs, T0 + 16 * MIN);
  });

  it("wakes an idle-hibernated member on activity after idleSince, and counts the wake as activity", () => {
    const cs = fleet(
      {},
      { vms: { "1": { vm: "vk-ns-f-1", idleSince: iso(11), lastActivity: iso(0) } } },
    );
    const at = { hibernations: [ours(1, "Hibernate")], leases: [lease(0, 6)] };
    assert.equal(planIdleStep(input(cs, 12, at)).status, undefined, "no activity since: kept");
    const step = planIdleStep(input(cs, 13, { ...at, leases: [lease(0, 6), lease(1, 12.5)] }));
    assert.deepEqual(step.status, { vms: { "1": { idleSince: null, lastActivity: iso(13) } } });
    assert.deepEqual(step.hibernations, [
      { name: "f-1-idle", pod: "f-1", member: "1", desire: "Wake", op: "patch" },
    ]);
    assert.deepEqual(
      step.events.map((e) => e.reason),
      ["WokenOnActivity"],
    );
    assert.equal(step.counts.woken, 1);
    // Once the wake is over the CR goes: asking Wake, it would withdraw a later suspend's request.
    const awake = fleet({}, { vms: { "1": { vm: "vk-ns-f-1", lastActivity: iso(13) } } });
    const active = { ...ours(1, "Wake"), status: { phase: "Active" as const } };
    assert.deepEqual(
      planIdleStep(input(awake, 14, { hibernations: [active], leases: [lease(0, 13)] }))
        .hibernations,
      [{ name: "f-1-idle", pod: "f-1", member: "1", desire: "Wake", op: "delete" }],
    );
    const waking = planIdleStep(
      input(awake, 14, { hibernations: [ours(1, "Wake")], leases: [lease(0, 13)] }),
    );
    assert.deepEqual(waking.hibernations, [], "kept while it wakes");
    const suspended = fleet({ suspend: true }, { vms: { "1": { vm: "vk-ns-f-1" } } });
    assert.deepEqual(
      planIdleStep(input(suspended, 14, { hibernations: [ours(1, "Wake")] })).hibernations.map(
        (h) => h.op,
      ),
      ["delete"],
      "a suspended fleet keeps no CR that asks Wake",
    );
  });

  it("suspends a fleet idle as a whole through status.idleSuspendedSince, and wakes it on activity", () => {
    const step = planIdleStep(input(fleet(), 11));
    assert.equal(step.status?.idleSuspendedSince, iso(11));
    assert.deepEqual(step.hibernations, [], "no CocoonHibernation: the suspend path");
    assert.deepEqual(
      step.events.map((e) => e.reason),
      ["IdleSuspended"],
    );
    const asleep = fleet({}, { idleSuspendedSince: iso(11) });
    // Pods created while suspended (a retain suspend's main agent) are no activity.
    assert.equal(planIdleStep(input(asleep, 30, { pods: [pod(0, 20), pod(1)] })).status, undefined);
    const woken = planIdleStep(input(asleep, 31, { leases: [lease(1, 30)] }));
    assert.equal(woken.status?.idleSuspendedSince, null);
    assert.deepEqual(
      woken.events.map((e) => e.reason),
      ["IdleWoken"],
    );
  });

  it("announces an expiry a tenth of `after` ahead (at most an hour), then suspends or deletes", () => {
    const spec = { idle: undefined, expiry: { after: "2h" } };
    const far = planIdleStep(input(fleet(spec), 100));
    assert.equal(far.status?.expiresAt, iso(120));
    assert.equal(far.nextCheckAtMs, T0 + 108 * MIN, "announced 12 minutes ahead");
    const cond = (s: typeof far) =>
      (s.status?.conditions as { status: string; reason: string }[] | undefined)?.map((c) => [
        c.status,
        c.reason,
      ]);
    assert.deepEqual(cond(far), [["False", "ExpiryFar"]]);
    const near = planIdleStep(input(fleet(spec), 109));
    assert.deepEqual(cond(near), [["True", "ExpiryNear"]]);
    assert.deepEqual(
      near.events.map((e) => e.reason),
      ["Expiring"],
    );
    const due = planIdleStep(input(fleet(spec), 120));
    assert.equal(due.status?.idleSuspendedSince, iso(120));
    assert.deepEqual(
      due.events.map((e) => e.message),
      [`the fleet expired at ${iso(120)}: suspended`],
    );
    const gone = planIdleStep(
      input(fleet({ ...spec, expiry: { after: "2h", action: "delete" } }), 121),
    );
    assert.equal(gone.deleteFleet, true);
    // A long `after`: an hour ahead.
    const day = planIdleStep(input(fleet({ idle: undefined, expiry: { after: "24h" } }), 0));
    assert.equal(day.nextCheckAtMs, T0 + 23 * 60 * MIN);
  });

  it("a due suspend expiry holds the fleet whatever the activity; since: idle is pushed back by it", () => {
    const asleep = fleet({ expiry: { after: "1h" } }, { idleSuspendedSince: iso(60) });
    assert.equal(
      planIdleStep(input(asleep, 70, { leases: [lease(0, 69)] })).status?.idleSuspendedSince,
      undefined,
    );
    const idle = fleet(
      { idle: undefined, expiry: { after: "1h", since: "idle" } },
      { idleSuspendedSince: iso(60) },
    );
    const step = planIdleStep(input(idle, 70, { leases: [lease(0, 69)] }));
    assert.equal(step.status?.idleSuspendedSince, null, "activity moved the expiry: awake again");
    assert.equal(step.status?.expiresAt, iso(129));
  });

  it("a policy removed wakes what it held and clears its record; a duration under a minute is refused", () => {
    const left = fleet(
      { idle: undefined },
      {
        idleSuspendedSince: iso(11),
        expiresAt: iso(60),
        vms: { "1": { vm: "vk-ns-f-1", idleSince: iso(5) } },
      },
    );
    const step = planIdleStep(input(left, 20, { hibernations: [ours(1, "Hibernate")] }));
    assert.equal(step.status?.idleSuspendedSince, null);
    assert.equal(step.status?.expiresAt, null);
    assert.deepEqual(
      step.hibernations.map((h) => h.desire),
      ["Wake"],
    );
    const bad = planIdleStep(input(fleet({ idle: { after: "30s" } }), 100));
    assert.equal(bad.status, undefined);
    assert.deepEqual(
      bad.events.map((e) => [e.type, e.message]),
      [
        [
          "Warning",
          '[spec.idle.after] must be at least 60s (got "30s"); the policy is not applied',
        ],
      ],
    );
  });

  it("leaves a member another CocoonHibernation holds alone, and does not let it keep the fleet awake", () => {
    const theirs = {
      ...ours(1, "Hibernate"),
      metadata: { name: "mine", namespace: "ns" },
    } as CocoonHibernation;
    const step = planIdleStep(
      input(fleet(), 11, { hibernations: [theirs], leases: [lease(0, 6)] }),
    );
    assert.equal(step.status, undefined);
    assert.deepEqual(step.hibernations, []);
    const later = planIdleStep(
      input(fleet(), 17, { hibernations: [theirs], leases: [lease(0, 6)] }),
    );
    assert.equal(later.status?.idleSuspendedSince, iso(17), "the held member is not waited for");
  });

  it("waits for the fleet's first status (the pass writes it, with its counts)", () => {
    const cs = { ...fleet(), status: undefined } as CocoonSet;
    const step = planIdleStep(input(cs, 11));
    assert.equal(step.status, undefined);
    assert.equal(step.nextCheckAtMs, T0 + 11 * MIN);
  });

  it("property: a fleet without a policy or its record is left exactly as it is", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 10_000 }),
        fc.integer({ min: 0, max: 3 }),
        (minutes, replicas) => {
          const cs = fleet({ idle: undefined, agent: { image: "img", replicas } });
          assert.equal(idleStepApplies(cs), false);
          const step = planIdleStep(input(cs, minutes, { leases: [lease(0, minutes)] }));
          assert.deepEqual(step, {
            hibernations: [],
            events: [],
            counts: { hibernated: 0, woken: 0, idleHibernated: 0 },
            deleteFleet: false,
          });
        },
      ),
    );
  });

  it("property: the CocoonHibernations follow the record as written", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 60 }),
        fc.option(fc.integer({ min: 0, max: 60 }), { nil: undefined }),
        fc.option(fc.integer({ min: 0, max: 60 }), { nil: undefined }),
        fc.constantFrom<("Hibernate" | "Wake" | undefined)[]>("Hibernate", "Wake", undefined),
        (now, mainLease, subLease, existing) => {
          const cs = fleet();
          const leases = [
            ...(mainLease === undefined ? [] : [lease(0, Math.min(mainLease, now))]),
            ...(subLease === undefined ? [] : [lease(1, Math.min(subLease, now))]),
          ];
          const step = planIdleStep(
            input(cs, now, { leases, hibernations: existing ? [ours(1, existing)] : [] }),
          );
          const vm1 = (
            step.status?.vms as Record<string, { idleSince?: string | null }> | undefined
          )?.["1"];
          const idle = vm1 && "idleSince" in vm1 ? Boolean(vm1.idleSince) : false;
          const ch = step.hibernations.find((h) => h.member === "1");
          const want = idle ? "Hibernate" : "Wake";
          if (existing === undefined) assert.equal(ch?.desire, idle ? "Hibernate" : undefined);
          else assert.equal(ch?.desire ?? existing, want);
          assert.ok(!step.hibernations.some((h) => h.member === "0"), "never the main agent");
        },
      ),
    );
  });
});

describe("the effective suspend and the policies' durations", () => {
  it("spec.suspend or status.idleSuspendedSince suspends; the view never changes a stored spec", () => {
    const awake = fleet();
    assert.equal(effectiveSuspend(awake), false);
    assert.equal(suspendView(awake), awake);
    const idle = fleet({}, { idleSuspendedSince: iso(5) });
    assert.equal(effectiveSuspend(idle), true);
    assert.equal(suspendView(idle).spec.suspend, true);
    assert.equal(idle.spec.suspend, undefined, "a view only");
  });

  it("the planner suspends an idle-suspended fleet as it would spec.suspend", () => {
    const pods = [pod(0), pod(1)];
    const facts = { hibernate: new Set<string>(), latest: new Set<string>() };
    const opts = { pods, nowMs: T0, snapshots: facts } as unknown as Parameters<typeof planPass>[0];
    const bySpec = planPass({ ...opts, cocoonSet: fleet({ suspend: true }) });
    const byStatus = planPass({ ...opts, cocoonSet: fleet({}, { idleSuspendedSince: iso(5) }) });
    const decisions = (p: typeof bySpec) => p.steps.map((s) => `${s.podName} ${s.decision}`);
    assert.deepEqual(decisions(byStatus), decisions(bySpec));
    assert.ok(decisions(byStatus).length > 0, "every member asked to hibernate");
  });

  it("durations parse and have a floor of a minute; the validator names the field", () => {
    assert.deepEqual(policyDurations({ idle: { after: "30m" }, expiry: { after: "1h" } }), {
      idleAfterMs: 30 * MIN,
      expiryAfterMs: 60 * MIN,
      failures: [],
    });
    const v = validateCocoonSetSpec({
      agent: { image: "img" },
      idle: { after: "59s" },
      expiry: { after: "10s" },
    });
    assert.equal(v.ok, false);
    if (v.ok) return;
    assert.deepEqual(
      v.failures.map((f) => formatFailure({ ...f, property: `spec.${f.property}` })),
      [
        '[spec.idle.after] must be at least 60s (got "59s")',
        '[spec.expiry.after] must be at least 60s (got "10s")',
      ],
    );
    assert.equal(
      validateCocoonSetSpec({ agent: { image: "img" }, idle: { after: "1m" } }).ok,
      true,
    );
  });
});
