// engine/attribution: membership, a member's VM, the deletion's VMs and who else holds a VM
// come from the engine's record only (docs/security.md). Tables for the rules, properties for
// arbitrary forged metadata and names with dashes.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import {
  CREATE_TOKEN_ANNOTATION,
  attributedView,
  attributePodVm,
  hibernationHolds,
  memberOf,
  mayNameVm,
  memberPodVm,
  otherHolders,
  podVmName,
  predatesRecord,
  recordedVms,
  recordedWakeProbes,
  recordUpdate,
  standaloneCandidates,
  standaloneHold,
  tokenDigest,
  vmsFreeToDrop,
  withHibernationMarks,
} from "../../../engine/attribution/index.js";
import { classifyPods } from "../../../engine/pods/index.js";
import { cocoonSetsNaming } from "../../../engine/execute/index.js";
import { planPass } from "../../../engine/planner/index.js";
import { UNRECORDED_GRACE_MS } from "../../../engine/planner/plan.js";
import { NOW } from "./fixtures.js";
import { teardownVmNames } from "../../../engine/snapshots/index.js";
import {
  ANNOTATIONS,
  KIND,
  LABELS,
  ROLES,
  type CocoonHibernation,
  type CocoonSet,
  type Pod,
} from "../../../engine/spec/index.js";
import type { VMRecord } from "../../../engine/spec/generated/types.js";

function fleet(
  ns: string,
  name: string,
  vms?: Record<string, VMRecord>,
  extra: Partial<CocoonSet["status"]> = {},
): CocoonSet {
  return {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: KIND,
    metadata: { name, namespace: ns, uid: `uid-${ns}-${name}`, generation: 1 },
    spec: { agent: { image: "ghcr.io/acme/agent:1", replicas: 1 } },
    ...(vms !== undefined || Object.keys(extra).length > 0
      ? {
          status: {
            readyAgents: 0,
            desiredAgents: 2,
            readyToolboxes: 0,
            desiredToolboxes: 0,
            ...extra,
            ...(vms !== undefined ? { vms } : {}),
          },
        }
      : {}),
  };
}

/** A pod that claims to be member `member` of `cs` the way the engine's own pods are labelled. */
function claimant(cs: CocoonSet, member: string, uid: string, vm?: string): Pod {
  const role = member === "0" ? ROLES.main : /^\d+$/.test(member) ? ROLES.subAgent : ROLES.toolbox;
  return {
    metadata: {
      name: `${cs.metadata.name}-${member}`,
      namespace: cs.metadata.namespace,
      uid,
      labels: { [LABELS.name]: cs.metadata.name ?? "", [LABELS.role]: role, [LABELS.slot]: member },
      annotations: {
        [ANNOTATIONS.vmName]: vm ?? `vk-${cs.metadata.namespace}-${cs.metadata.name}-${member}`,
      },
      ownerReferences: [
        {
          apiVersion: "cocoonset.cocoonstack.io/v1",
          kind: KIND,
          name: cs.metadata.name ?? "",
          uid: cs.metadata.uid ?? "",
          controller: true,
        },
      ],
    },
    status: { phase: "Running" },
  };
}

describe("attribution: who is a member", () => {
  const cs = fleet("q", "web", {
    "0": { vm: "vk-q-web-0", podUID: "u0" },
    "3": { vm: "vk-q-web-3" },
  });
  const table: { title: string; pod: Pod; member?: string }[] = [
    { title: "the pod whose uid the record names", pod: claimant(cs, "0", "u0"), member: "0" },
    {
      title: "a pod with every label and the owner reference, not recorded",
      pod: claimant(cs, "1", "forged"),
    },
    { title: "a recorded uid under another member's name", pod: { ...claimant(cs, "1", "u0") } },
    {
      title: "a recorded member's pod whose annotation names another VM",
      pod: claimant(cs, "0", "u0", "vk-q-x-yy-0"),
      member: "0",
    },
    { title: "a slot scaled away: its VM recorded, no pod", pod: claimant(cs, "3", "u3") },
  ];
  for (const row of table)
    it(row.title, () => {
      assert.equal(memberOf(cs, row.pod), row.member);
      assert.equal(
        memberPodVm(cs, row.pod),
        row.member === undefined ? "" : `vk-q-web-${row.member}`,
      );
    });

  it("a new CocoonSet (no status) adopts nothing, whatever its pods claim", () => {
    const fresh = fleet("q", "web");
    const view = attributedView(fresh, [claimant(fresh, "0", "a"), claimant(fresh, "1", "b")]);
    assert.deepEqual(view.status?.vms, {});
    assert.equal(classifyPods(view, [claimant(fresh, "0", "a")]).main, undefined);
  });

  it("a status that predates the record adopts its labelled pods once, and its old VMs", () => {
    const old = fleet("q", "web", undefined, {
      observedGeneration: 1,
      agents: [
        { slot: 5, role: "sub-agent", vmName: "vk-q-web-5" },
        { slot: 6, role: "sub-agent", vmName: "vk-q-x-yy-0" },
      ],
    });
    assert.equal(predatesRecord(old), true);
    const view = attributedView(old, [claimant(old, "0", "a")]);
    assert.deepEqual(view.status?.vms, {
      "0": { vm: "vk-q-web-0", podUID: "a" },
      "5": { vm: "vk-q-web-5" },
    });
    assert.deepEqual(recordUpdate(old, view), view.status?.vms);
    assert.equal(recordUpdate(view, view), undefined);
  });

  it("the pods this process created count until the status says so", () => {
    const view = attributedView(cs, [], new Map([["1", { vm: "vk-q-web-1", podUID: "u1" }]]));
    assert.equal(memberOf(view, claimant(cs, "1", "u1")), "1");
    assert.deepEqual(recordUpdate(cs, view), { "1": { vm: "vk-q-web-1", podUID: "u1" } });
  });

  it("a record entry that is not the member's own VM is ignored", () => {
    const bad = fleet("q", "web", { "0": { vm: "vk-q-other-0", podUID: "u0" } });
    assert.equal(memberOf(bad, claimant(bad, "0", "u0")), undefined);
    assert.deepEqual(recordedVms(bad), []);
  });
});

describe("attribution: who else holds a VM", () => {
  it("splits a VM name into every (namespace, pod) it could be", () => {
    assert.deepEqual(standaloneCandidates("vk-acme-prod-db"), [
      { namespace: "acme", name: "prod-db" },
      { namespace: "acme-prod", name: "db" },
    ]);
    assert.deepEqual(standaloneCandidates("vm-x"), []);
  });

  it("a deletion keeps a VM another fleet recorded, a CocoonHibernation recorded, or a standalone pod runs", () => {
    const gone = fleet("acme", "prod", {
      db: { vm: "vk-acme-prod-db" },
      "0": { vm: "vk-acme-prod-0" },
    });
    const holderFleet = fleet("acme-prod", "x", { "0": { vm: "vk-acme-prod-x-0" } });
    const db: Pod = {
      metadata: {
        name: "db",
        namespace: "acme-prod",
        uid: "d",
        annotations: { [ANNOTATIONS.vmName]: "vk-acme-prod-db" },
      },
    };
    const hold = standaloneHold(db, [gone, holderFleet]);
    assert.deepEqual(hold, { namespace: "acme-prod", name: "db", vm: "vk-acme-prod-db" });
    const decision = vmsFreeToDrop(
      gone,
      ["vk-acme-prod-0", "vk-acme-prod-db", "vk-acme-prod-x-0"],
      {
        fleets: [gone, holderFleet],
        hibernations: [{ namespace: "acme-prod", name: "db-nap", vm: "vk-acme-prod-db" }],
        standalone: [hold],
      },
    );
    assert.deepEqual(decision.drop, ["vk-acme-prod-0"]);
    assert.deepEqual(decision.kept, [
      {
        vm: "vk-acme-prod-db",
        holders: ["CocoonHibernation acme-prod/db-nap", "Pod acme-prod/db"],
      },
      { vm: "vk-acme-prod-x-0", holders: ["CocoonSet acme-prod/x"] },
    ]);
  });

  it("a pod a fleet recorded as its member is no standalone holder", () => {
    const cs = fleet("acme", "prod", { db: { vm: "vk-acme-prod-db", podUID: "m" } });
    assert.equal(standaloneHold(claimant(cs, "db", "m"), [cs]), undefined);
  });

  it("a CocoonHibernation's pod: a recorded member's VM, else its own standalone name no fleet claims", () => {
    const cs = fleet("tb", "victim", { "1": { vm: "vk-tb-victim-1", podUID: "v1" } });
    assert.deepEqual(attributePodVm(claimant(cs, "1", "v1"), [cs]), { vm: "vk-tb-victim-1" });
    // A forged member (labels, owner reference, the victim's VM name) is a standalone pod.
    const evil = { ...claimant(cs, "1", "evil") };
    evil.metadata = { ...evil.metadata, name: "evil" };
    assert.match(
      (attributePodVm(evil, [cs]) as { refusal: string }).refusal,
      /its VM is vk-tb-evil/,
    );
    // Under the member's own name, unrecorded: the fleet holds that name.
    assert.match(
      (attributePodVm(claimant(cs, "1", "other"), [cs]) as { refusal: string }).refusal,
      /held by CocoonSet tb\/victim/,
    );
    assert.deepEqual(otherHolders(cs, "vk-tb-victim-1", { fleets: [cs] }), []);
  });
});

describe("attribution: properties over forged metadata", () => {
  const segment = fc.stringMatching(/^[a-z]([a-z0-9-]{0,6}[a-z0-9])?$/);
  const member = fc.oneof(
    fc.constantFrom("0", "1", "2", "9"),
    segment.filter((s) => !/^\d+$/.test(s)),
  );
  const forgedPod = fc.record({
    ns: segment,
    fleetName: segment,
    member,
    uid: fc.constantFrom("u0", "u1", "forged", ""),
    vm: fc.oneof(
      fc.constant(undefined),
      segment.map((s) => `vk-${s}`),
    ),
    ownerUid: fc.constantFrom("uid-q-x-yy", "uid-q-x-zz", "other"),
    withLabels: fc.boolean(),
  });

  it("a pod is a member only under a uid the record names, and its VM is its member's own", () => {
    fc.assert(
      fc.property(
        forgedPod,
        fc.dictionary(member, fc.constantFrom("u0", "u1", undefined)),
        (f, rec) => {
          const cs = fleet("q-x", "yy", {});
          const vms: Record<string, VMRecord> = {};
          for (const [m, uid] of Object.entries(rec))
            vms[m] = { vm: `vk-q-x-yy-${m}`, ...(uid ? { podUID: uid } : {}) };
          cs.status = { ...cs.status!, vms };
          const pod = claimant(
            {
              ...cs,
              metadata: { ...cs.metadata, name: f.fleetName, namespace: f.ns, uid: f.ownerUid },
            },
            f.member,
            f.uid,
            f.vm,
          );
          if (!f.withLabels) pod.metadata!.labels = {};
          const m = memberOf(cs, pod);
          if (m !== undefined) {
            assert.equal(vms[m]?.podUID, f.uid);
            assert.equal(pod.metadata?.name, `yy-${m}`);
            assert.equal(memberPodVm(cs, pod), `vk-q-x-yy-${m}`);
          }
          // The deletion's VMs are the record's, whatever the pods say.
          const recorded = new Set(Object.values(vms).map((e) => e.vm));
          for (const vm of teardownVmNames(cs, [pod])) assert.ok(recorded.has(vm), vm);
        },
      ),
    );
  });

  it("a deletion never drops a VM another live fleet recorded or a CocoonHibernation holds", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(segment, segment, member), { minLength: 1, maxLength: 4 }),
        fc.array(fc.tuple(segment, segment), { maxLength: 3 }),
        (others, crs) => {
          const gone = fleet("q", "x-yy", { "0": { vm: "vk-q-x-yy-0" } });
          const fleets = others.map(([ns, name, m]) =>
            fleet(ns, name, { [m]: { vm: `vk-${ns}-${name}-${m}` } }),
          );
          const hibernations = crs.map(([ns, name]) => ({
            namespace: ns,
            name,
            vm: `vk-${ns}-${name}`,
          }));
          const candidates = [
            "vk-q-x-yy-0",
            ...fleets.flatMap((f) => recordedVms(f)),
            ...hibernations.map((h) => h.vm),
          ];
          const { drop } = vmsFreeToDrop(gone, candidates, {
            fleets: [gone, ...fleets],
            hibernations,
          });
          for (const vm of drop) {
            assert.ok(
              !fleets.some(
                (f) => f.metadata.uid !== gone.metadata.uid && recordedVms(f).includes(vm),
              ),
              vm,
            );
            assert.ok(!hibernations.some((h) => h.vm === vm), vm);
          }
        },
      ),
    );
  });
});

describe("attribution: the fleets a CocoonHibernation's pass is given", () => {
  // Short segments with dashes, so that names of different fleets run into each other.
  const part = fc.constantFrom("a", "b", "a-b", "b-a", "a-b-a");
  const slot = fc.constantFrom("0", "1", "a", "b-1");

  it("those that could name the pod's VM or the CR's decide as all of them do", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(part, part, slot, fc.boolean()), { minLength: 1, maxLength: 6 }),
        fc.tuple(part, part, slot),
        fc.constantFrom("", "vk-a-b-a-1", "vk-a-a-b-0"),
        fc.boolean(),
        (specs, [ns, owner, m], recorded, forged) => {
          const fleets = specs.map(([fns, name, fm, tokened]) =>
            fleet(fns, name, {
              [fm]: { vm: `vk-${fns}-${name}-${fm}`, ...(tokened ? { podUID: "u1" } : {}) },
            }),
          );
          const pod = claimant(fleet(ns, owner), m, "u1", forged ? "vk-a-b-a-1" : undefined);
          const podName = pod.metadata?.name ?? "";
          const given = cocoonSetsNaming(
            fleets,
            [podVmName(ns, podName), recorded].filter((vm) => vm !== ""),
          );
          assert.deepEqual(
            attributePodVm(pod, given, recorded),
            attributePodVm(pod, fleets, recorded),
          );
        },
      ),
      { numRuns: 2000 },
    );
  });

  it("a fleet may name only VMs that begin with its namespace and name", () => {
    const table: [string, string, string, boolean][] = [
      ["a", "b", "vk-a-b-1", true],
      ["a", "b", "vk-a-b-tools", true],
      ["a-b", "c", "vk-a-b-c-1", true],
      ["a", "b-c", "vk-a-b-c-1", true],
      ["a", "b", "vk-a-bc-1", false],
      ["a", "b", "vk-a-b", false],
      ["b", "a", "vk-a-b-1", false],
    ];
    for (const [ns, name, vm, want] of table) assert.equal(mayNameVm(ns, name, vm), want, vm);
  });
});

describe("attribution: a pod that claims a slot without being recorded", () => {
  const cs = fleet("q", "web", {});
  cs.spec.agent.replicas = 0;
  const plan = (ageMs: number) => {
    const pod = claimant(cs, "0", "forged");
    pod.metadata!.creationTimestamp = new Date(NOW - ageMs).toISOString();
    return planPass({ cocoonSet: cs, pods: [pod], nowMs: NOW });
  };
  it("is never adopted: nothing is created, deleted or annotated for it", () => {
    for (const p of [plan(1000), plan(UNRECORDED_GRACE_MS + 1000)]) {
      assert.deepEqual(
        p.steps.map((s) => [s.podName, s.decision]),
        [["web-0", "blocked"]],
      );
      assert.ok(
        p.steps[0].actions.every((a) => a.kind === "event"),
        "at most a Warning",
      );
    }
  });
  it("is waited for quietly at first (another writer's create not recorded yet), then reported", () => {
    const slotBlocked = (p: ReturnType<typeof plan>) =>
      p.status?.conditions?.find((c) => c.type === "SlotBlocked")?.status;
    assert.equal(slotBlocked(plan(1000)), undefined);
    assert.equal(slotBlocked(plan(UNRECORDED_GRACE_MS + 1000)), "True");
  });
});

describe("attribution: a create announced in the record, and the hibernation marks", () => {
  const withToken = (pod: Pod, token: string): Pod => ({
    ...pod,
    metadata: {
      ...pod.metadata,
      annotations: { ...pod.metadata?.annotations, [CREATE_TOKEN_ANNOTATION]: token },
    },
  });

  it("a pod carrying the announced token is the member's, and its uid gets recorded", () => {
    const cs = fleet("q", "web", {
      "0": { vm: "vk-q-web-0", podUID: "old", createToken: tokenDigest("secret") },
    });
    const mine = withToken(claimant(cs, "0", "new"), "secret");
    assert.equal(memberOf(cs, mine), "0");
    assert.equal(memberOf(cs, withToken(claimant(cs, "0", "new"), "guess")), undefined);
    // The digest itself, copied onto a pod, is no token.
    assert.equal(
      memberOf(cs, withToken(claimant(cs, "0", "new"), tokenDigest("secret"))),
      undefined,
    );
    const view = attributedView(cs, [mine]);
    assert.deepEqual(recordUpdate(cs, view), {
      "0": { vm: "vk-q-web-0", podUID: "new", createToken: tokenDigest("secret") },
    });
  });

  const state = (pod: Pod, s: string, asked = false): Pod => ({
    ...pod,
    metadata: {
      ...pod.metadata,
      annotations: {
        ...pod.metadata?.annotations,
        [ANNOTATIONS.lifecycleState]: s,
        ...(asked ? { [ANNOTATIONS.hibernate]: "true" } : {}),
      },
    },
  });

  it("marks a member hibernated when its pod reports it and its own tag is there; clears it once running", () => {
    const cs = fleet("q", "web", { "0": { vm: "vk-q-web-0", podUID: "u0" } });
    const hib = withHibernationMarks(
      cs,
      [state(claimant(cs, "0", "u0"), "hibernated", true)],
      new Set(["vk-q-web-0"]),
    );
    assert.equal(hib.status?.vms?.["0"]?.hibernated, true);
    // No tag (or the registry not asked): no mark.
    assert.equal(
      withHibernationMarks(cs, [state(claimant(cs, "0", "u0"), "hibernated", true)], undefined),
      cs,
    );
    // Its pod gone: the mark stays, and the pass asks for the tag to restore the next pod.
    assert.deepEqual(recordedWakeProbes(hib, []), ["vk-q-web-0"]);
    assert.deepEqual(recordedWakeProbes({ ...hib, spec: { ...hib.spec, suspend: true } }, []), []);
    // Woken: cleared, and the clear is written as null.
    const woken = withHibernationMarks(hib, [state(claimant(cs, "0", "u0"), "ready")], new Set());
    assert.equal(woken.status?.vms?.["0"]?.hibernated, undefined);
    assert.deepEqual(recordUpdate(hib, woken), {
      "0": { vm: "vk-q-web-0", podUID: "u0", hibernated: null },
    });
    // A forged pod reporting hibernated marks nothing.
    assert.equal(
      withHibernationMarks(
        cs,
        [state(claimant(cs, "0", "forged"), "hibernated")],
        new Set(["vk-q-web-0"]),
      ),
      cs,
    );
  });

  it("a member the spec no longer asks for loses its mark", () => {
    const cs = fleet("q", "web", { "7": { vm: "vk-q-web-7", hibernated: true } });
    assert.equal(withHibernationMarks(cs, [], undefined).status?.vms?.["7"]?.hibernated, undefined);
  });

  it("a pod created for a marked member restores from the fleet's tag, or reports it lost", () => {
    const cs = fleet("q", "web", { "0": { vm: "vk-q-web-0", hibernated: true } });
    cs.spec.agent.replicas = 0;
    const restore = planPass({
      cocoonSet: cs,
      pods: [],
      nowMs: NOW,
      snapshots: { hibernate: new Set(["vk-q-web-0"]) },
    });
    const create = restore.steps.find((s) => s.decision === "create")?.actions[0];
    assert.ok(create?.kind === "create-pod");
    assert.equal(create.pod.metadata.annotations?.[ANNOTATIONS.restoreFromHibernate], "true");
    const lost = planPass({
      cocoonSet: cs,
      pods: [],
      nowMs: NOW,
      snapshots: { hibernate: new Set() },
    });
    assert.equal(lost.steps.find((s) => s.decision === "create")?.lostSnapshot?.vm, "vk-q-web-0");
  });
});

describe("attribution: a VM a CocoonHibernation holds", () => {
  it("a fleet that asks for it (a toolbox, through the dash) is refused and creates nothing", () => {
    const cs = fleet("acme", "prod", {});
    cs.spec.toolboxes = [{ name: "db", image: "evil/image:1" }];
    const holds = [{ namespace: "acme-prod", name: "db-nap", vm: "vk-acme-prod-db" }];
    const p = planPass({
      cocoonSet: cs,
      pods: [],
      nowMs: NOW,
      fleets: [cs],
      hibernationHolds: holds,
    });
    assert.equal(p.mutatesPods, false);
    assert.match(
      p.refusals[0]?.message ?? "",
      /vk-acme-prod-db .* held by CocoonHibernation acme-prod\/db-nap/,
    );
    // One it recorded itself (it held the name first) is its own.
    const first = fleet("acme", "prod", { db: { vm: "vk-acme-prod-db" } });
    first.spec.toolboxes = cs.spec.toolboxes;
    assert.equal(
      planPass({ cocoonSet: first, pods: [], nowMs: NOW, fleets: [first], hibernationHolds: holds })
        .refusals.length,
      0,
    );
    // And the CocoonHibernation that recorded the VM first keeps it, whoever asks for it later.
    const db = {
      metadata: {
        name: "db",
        namespace: "acme-prod",
        uid: "d",
        annotations: { [ANNOTATIONS.vmName]: "vk-acme-prod-db" },
      },
    } as Pod;
    assert.ok("refusal" in attributePodVm(db, [cs]));
    assert.deepEqual(attributePodVm(db, [cs], "vk-acme-prod-db"), { vm: "vk-acme-prod-db" });
  });
});

describe("attribution: the holds of CocoonHibernations", () => {
  const cr = (name: string, vmName?: string, deleting = false): CocoonHibernation => ({
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonHibernation",
    metadata: {
      name,
      namespace: "acme",
      ...(deleting ? { deletionTimestamp: "2026-12-05T00:00:00Z" } : {}),
    },
    spec: { podRef: { name: "p" }, desire: "Hibernate" },
    ...(vmName === undefined ? {} : { status: { vmName } }),
  });
  const cases: { what: string; crs: CocoonHibernation[]; holds: string[] }[] = [
    { what: "none", crs: [], holds: [] },
    { what: "a recorded VM holds it", crs: [cr("a", "vk-acme-p")], holds: ["acme/a vk-acme-p"] },
    { what: "no VM recorded yet: nothing held", crs: [cr("b"), cr("c", "")], holds: [] },
    { what: "a deleted CR holds nothing", crs: [cr("d", "vk-acme-p", true)], holds: [] },
  ];
  for (const c of cases)
    it(c.what, () => {
      assert.deepEqual(
        hibernationHolds(c.crs).map((h) => `${h.namespace}/${h.name} ${h.vm}`),
        c.holds,
      );
    });
});
