// Who owns a VM name (vm-names.ts) and which snapshots a fleet took (snapshot-owner.ts):
// clashing fleets across namespaces, the refusal plan, a deletion that keeps another fleet's
// tags, a CocoonHibernation that only acts on an attributable VM name, the snapshot record
// and the hibernations a deletion waits for.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { HIBERNATION_EVENTS } from "../../../engine/hibernation/hibernation.js";
import { hibernationProbe, planHibernation } from "../../../engine/hibernation/index.js";
import {
  SNAPSHOT_OWNER_ANNOTATION,
  ownSnapshotFacts,
  snapshotRecordUpdate,
} from "../../../engine/lifecycle/index.js";
import { recordedSnapshots } from "../../../engine/lifecycle/snapshot-owner.js";
import { planPass } from "../../../engine/planner/index.js";
import { buildAgentPod } from "../../../engine/pods/index.js";
import {
  hibernationsInFlight,
  teardownVmNames,
  vmNameClash,
} from "../../../engine/snapshots/index.js";
import { mayShareVmNames, vmsFreeToDrop } from "../../../engine/attribution/index.js";
import {
  VM_NAME_CONDITION,
  VM_NAME_CONFLICT_REASON,
  attributePodVm,
  claimedVmNames,
} from "../../../engine/snapshots/vm-names.js";
import { HIBERNATION_FINALIZER } from "../../../engine/spec/hibernation-schema.js";
import {
  ANNOTATIONS,
  type CocoonHibernation,
  type CocoonSet,
  type Pod,
} from "../../../engine/spec/index.js";
import { annotateOf, eventsOf, kindsOf, statusOf, tagOf } from "./hibernation-view.js";
import { NOW, live } from "./fixtures.js";

function fleet(
  ns: string,
  name: string,
  opts: {
    replicas?: number;
    toolboxes?: string[];
    created?: string;
    uid?: string;
    ran?: boolean;
    deleting?: boolean;
  } = {},
): CocoonSet {
  const cs: CocoonSet = {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonSet",
    metadata: {
      name,
      namespace: ns,
      uid: opts.uid ?? `uid-${ns}-${name}`,
      generation: 1,
      ...(opts.created ? { creationTimestamp: opts.created } : {}),
      ...(opts.deleting ? { deletionTimestamp: "2025-06-01T12:00:00Z" } : {}),
    },
    spec: {
      agent: { image: "ghcr.io/acme/agent:1", replicas: opts.replicas ?? 0 },
      ...(opts.toolboxes
        ? { toolboxes: opts.toolboxes.map((t) => ({ name: t, image: "x" })) }
        : {}),
    },
  };
  if (opts.ran) {
    cs.status = {
      readyAgents: 0,
      desiredAgents: 1,
      readyToolboxes: 0,
      desiredToolboxes: 0,
      agents: [{ slot: 0, role: "main", vmName: `vk-${ns}-${name}-0` }],
      // What the engine recorded when it created the main agent's pod.
      vms: { "0": { vm: `vk-${ns}-${name}-0`, podUID: `uid-${name}-0` } },
    };
  }
  return cs;
}

const T1 = "2025-06-01T10:00:00Z";
const T2 = "2025-06-01T11:00:00Z";

describe("VM names across fleets", () => {
  it("namespace q-x fleet yy and namespace q fleet x-yy claim the same VM name", () => {
    const a = fleet("q-x", "yy");
    const b = fleet("q", "x-yy");
    assert.ok(claimedVmNames(a).has("vk-q-x-yy-0"));
    assert.ok(claimedVmNames(b).has("vk-q-x-yy-0"));
  });

  const table: {
    title: string;
    cs: CocoonSet;
    others: CocoonSet[];
    holder?: string;
  }[] = [
    {
      title: "the younger of two clashing fleets is refused",
      cs: fleet("q", "x-yy", { created: T2 }),
      others: [fleet("q-x", "yy", { created: T1 })],
      holder: "q-x/yy",
    },
    {
      title: "the older one is not",
      cs: fleet("q-x", "yy", { created: T1 }),
      others: [fleet("q", "x-yy", { created: T2 })],
    },
    {
      title: "a fleet not created yet is the youngest",
      cs: fleet("r-s", "tt"),
      others: [fleet("r", "s-tt", { created: T2 })],
      holder: "r/s-tt",
    },
    {
      title: "a fleet that ran the VM wins over an older one that did not",
      cs: fleet("q-x", "yy", { created: T1 }),
      others: [fleet("q", "x-yy", { created: T2, ran: true })],
      holder: "q/x-yy",
    },
    {
      title: "a fleet being deleted holds nothing",
      cs: fleet("q", "x-yy", { created: T2 }),
      others: [fleet("q-x", "yy", { created: T1, deleting: true })],
    },
    {
      title: "a toolbox name can clash inside one namespace",
      cs: fleet("ns", "a-b", { created: T2 }),
      others: [fleet("ns", "a", { created: T1, toolboxes: ["b-0"] })],
      holder: "ns/a",
    },
    {
      title: "the fleet itself is not a clash",
      cs: fleet("q", "x-yy", { created: T2 }),
      others: [fleet("q", "x-yy", { created: T2 })],
    },
    {
      title: "a sub-agent's VM name can clash with a toolbox's",
      cs: fleet("ns", "x-y", { created: T2, replicas: 1 }),
      others: [fleet("ns", "x", { created: T1, toolboxes: ["y-1"] })],
      holder: "ns/x",
    },
  ];
  for (const row of table) {
    it(row.title, () => {
      const clash = vmNameClash(row.cs, [...row.others, row.cs]);
      assert.equal(clash?.holder, row.holder);
    });
  }

  it("of two clashing fleets exactly one is refused (property)", () => {
    const part = fc.constantFrom("a", "b", "a-b", "b-a", "a-b-c");
    fc.assert(
      fc.property(
        part,
        part,
        part,
        part,
        fc.boolean(),
        fc.boolean(),
        fc.boolean(),
        (ns1, n1, ns2, n2, old1, ran1, ran2) => {
          const one = fleet(ns1, n1, { created: old1 ? T1 : T2, ran: ran1 });
          const two = fleet(ns2, n2, { created: old1 ? T2 : T1, ran: ran2 });
          if (`${ns1}/${n1}` === `${ns2}/${n2}`) return;
          const shared = [...claimedVmNames(one)].some((n) => claimedVmNames(two).has(n));
          const refused = [vmNameClash(one, [two]), vmNameClash(two, [one])].filter(Boolean);
          assert.equal(refused.length, shared ? 1 : 0);
        },
      ),
    );
  });

  it("fleets that are not neighbours never claim one VM name: the filter before the check drops none that could (property)", () => {
    // Names that run into each other: toolbox `b-0` of `x/a` is `vk-x-a-b-0`, slot 0 of `x/a-b`
    // and of `x-a/b`.
    const ns = fc.constantFrom("x", "x-a");
    const name = fc.constantFrom("a", "b", "a-b");
    const toolbox = fc.constantFrom("b-0", "b-1", "a-b-0", "b", "c");
    let sharing = 0;
    fc.assert(
      fc.property(
        fc.tuple(ns, name, fc.nat(2), fc.array(toolbox, { maxLength: 2 }), fc.boolean()),
        fc.tuple(ns, name, fc.nat(2), fc.array(toolbox, { maxLength: 2 }), fc.boolean()),
        ([ns1, n1, r1, t1, ran1], [ns2, n2, r2, t2, ran2]) => {
          const one = fleet(ns1, n1, { replicas: r1, toolboxes: [...new Set(t1)], ran: ran1 });
          const two = fleet(ns2, n2, { replicas: r2, toolboxes: [...new Set(t2)], ran: ran2 });
          const shared = [...claimedVmNames(one)].filter((n) => claimedVmNames(two).has(n));
          if (shared.length > 0 && `${ns1}/${n1}` !== `${ns2}/${n2}`) sharing++;
          if (!mayShareVmNames({ namespace: ns1, name: n1 }, { namespace: ns2, name: n2 }))
            assert.deepEqual(shared, [], `${ns1}/${n1} and ${ns2}/${n2}`);
        },
      ),
      { numRuns: 3000 },
    );
    assert.ok(sharing > 100, `pairs of different fleets sharing a name: ${sharing}`);
  });

  it("the refused fleet's pass creates nothing: a condition and a Warning naming both, once", () => {
    const younger = fleet("q", "x-yy", { created: T2 });
    const holder = fleet("q-x", "yy", { created: T1 });
    const plan = planPass({ cocoonSet: younger, pods: [], nowMs: NOW, fleets: [holder, younger] });
    assert.equal(plan.mutatesPods, false);
    assert.equal(plan.refusals.length, 1);
    assert.match(
      plan.refusals.map((r) => r.message)[0],
      /vk-q-x-yy-0 of CocoonSet q\/x-yy is already held by CocoonSet q-x\/yy/,
    );
    assert.deepEqual(
      plan.steps.map((s) => s.decision),
      ["refuse-vm-names"],
    );
    const [write, event] = plan.steps[0].actions;
    assert.equal(write.kind, "write-status");
    const cond =
      write.kind === "write-status"
        ? write.status.conditions?.find((c) => c.type === VM_NAME_CONDITION)
        : undefined;
    assert.equal(cond?.status, "False");
    assert.equal(cond?.reason, VM_NAME_CONFLICT_REASON);
    assert.equal(event.kind === "event" && event.type, "Warning");
    // Said once: the next pass reports the error again but writes and emits nothing.
    const said: CocoonSet = {
      ...younger,
      status: write.kind === "write-status" ? write.status : undefined,
    };
    const again = planPass({ cocoonSet: said, pods: [], nowMs: NOW, fleets: [holder, said] });
    assert.equal(again.steps.length, 0);
    assert.equal(again.refusals.length, 1);
    // Without the list (an executor that did not read it), nothing is checked.
    assert.equal(planPass({ cocoonSet: younger, pods: [], nowMs: NOW }).mutatesPods, true);
  });

  it("a deletion keeps the tags of a VM name another live fleet has acted on", () => {
    const gone = fleet("q", "x-yy", { ran: true, deleting: true });
    const holder = fleet("q-x", "yy", { ran: true });
    const refused = fleet("q-x", "yy");
    const sameNameNew = fleet("q", "x-yy", { uid: "new-uid" });
    assert.deepEqual(
      vmsFreeToDrop(gone, ["vk-q-x-yy-0", "vk-q-x-yy-9"], { fleets: [gone, holder] }),
      {
        drop: ["vk-q-x-yy-9"],
        kept: [{ vm: "vk-q-x-yy-0", holders: ["CocoonSet q-x/yy"] }],
      },
    );
    assert.deepEqual(vmsFreeToDrop(gone, ["vk-q-x-yy-0"], { fleets: [gone] }).drop, [
      "vk-q-x-yy-0",
    ]);
    // Asking for the name is not holding a tag of it.
    assert.deepEqual(vmsFreeToDrop(gone, ["vk-q-x-yy-0"], { fleets: [gone, refused] }).drop, [
      "vk-q-x-yy-0",
    ]);
    assert.deepEqual(vmsFreeToDrop(gone, ["vk-q-x-yy-0"], { fleets: [gone, sameNameNew] }).drop, [
      "vk-q-x-yy-0",
    ]);
  });
});

describe("a CocoonHibernation acts only on a VM name the controller can attribute", () => {
  const suspended = fleet("p13", "f13", { replicas: 1, created: T1, ran: true });
  const own = fleet("p18", "crew", { replicas: 1, created: T1 });
  // The engine recorded the pod it created for slot 1 (the fixture's uid), not slot 0's.
  own.status = {
    readyAgents: 0,
    desiredAgents: 2,
    readyToolboxes: 0,
    desiredToolboxes: 0,
    vms: { "1": { vm: "vk-p18-crew-1", podUID: "pod-uid-crew-1" } },
  };
  const member = (cs: CocoonSet, slot: number, vm?: string): Pod => {
    const p = live(buildAgentPod(cs, slot));
    if (vm) p.metadata!.annotations = { ...p.metadata!.annotations, [ANNOTATIONS.vmName]: vm };
    return p;
  };
  const standalone = (ns: string, name: string, vm: string): Pod => ({
    metadata: {
      name,
      namespace: ns,
      uid: `uid-${name}`,
      annotations: { [ANNOTATIONS.vmName]: vm },
    },
    status: { phase: "Running" },
  });
  const fleets = [suspended, own];

  const table: { title: string; pod: Pod; refused?: RegExp }[] = [
    { title: "a fleet's member with its derived name", pod: member(own, 1) },
    {
      title: "a standalone pod with its own derived name",
      pod: standalone("p18", "solo", "vk-p18-solo"),
    },
    {
      title: "a standalone pod naming another namespace's VM",
      pod: standalone("p18", "evil2", "vk-p13-f13-1"),
      refused: /carries vm.cocoonstack.io\/name=vk-p13-f13-1, but its VM is vk-p18-evil2/,
    },
    {
      title: "a member whose annotation was rewritten",
      pod: member(own, 1, "vk-p13-f13-1"),
      refused: /but its VM is vk-p18-crew-1/,
    },
    {
      // Its owner reference is not read: it is a standalone pod, and runs its own VM.
      title: "a pod naming a CocoonSet that does not exist as its controller",
      pod: member(fleet("p18", "ghost"), 0),
    },
    {
      title:
        "a pod that claims a fleet's slot (labels, controller reference) without being recorded",
      pod: member(own, 0),
      refused: /is held by CocoonSet p18\/crew/,
    },
    {
      title: "a standalone pod whose derived name another namespace's fleet holds",
      pod: standalone("p13", "f13-1", "vk-p13-f13-1"),
      refused: /is held by CocoonSet p13\/f13/,
    },
    {
      title: "a standalone pod whose derived name collides across namespaces",
      pod: standalone("q", "x-yy-0", "vk-q-x-yy-0"),
      refused: /held by CocoonSet q-x\/yy/,
    },
  ];
  for (const row of table) {
    it(row.title, () => {
      const got = attributePodVm(row.pod, [...fleets, fleet("q-x", "yy")]);
      if (row.refused) {
        assert.ok("refusal" in got, JSON.stringify(got));
        assert.match(got.refusal, row.refused);
      } else assert.deepEqual(got, { vm: row.pod.metadata?.annotations?.[ANNOTATIONS.vmName] });
    });
  }

  const cr = (
    desire: "Hibernate" | "Wake",
    status?: CocoonHibernation["status"],
  ): CocoonHibernation => ({
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonHibernation",
    metadata: {
      name: "h",
      namespace: "p18",
      uid: "uid-h",
      generation: 1,
      creationTimestamp: T1,
      finalizers: [HIBERNATION_FINALIZER],
    },
    spec: { podRef: { name: "evil2" }, desire },
    ...(status ? { status } : {}),
  });

  it("Hibernate and Wake on a pod naming another namespace's VM: Failed, a Warning, nothing else", () => {
    const evil = standalone("p18", "evil2", "vk-p13-f13-1");
    evil.metadata!.annotations![ANNOTATIONS.vmID] = "fake";
    evil.status = {
      phase: "Running",
      containerStatuses: [{ name: "agent", state: { running: {} } }],
    };
    for (const desire of ["Hibernate", "Wake"] as const) {
      const c = cr(desire);
      const input = { cr: c, pod: evil, all: [c], registry: true, nowMs: NOW, fleets };
      assert.equal(hibernationProbe(input), undefined);
      const plan = planHibernation(input);
      assert.equal(plan.decision, "refuse-vm-name");
      assert.deepEqual(kindsOf(plan), ["write-status", "event"]);
      assert.equal(annotateOf(plan), undefined);
      assert.equal(tagOf(plan), undefined);
      assert.equal(statusOf(plan)?.phase, "Failed");
      assert.equal(statusOf(plan)?.vmName, undefined);
      assert.deepEqual(
        eventsOf(plan).map((e) => [e.type, e.reason]),
        [["Warning", HIBERNATION_EVENTS.vmNameMismatch]],
      );
    }
  });

  it("a CR deleted with another namespace's VM in its status drops no tag", () => {
    const deleting = (vmName: string) => {
      const c = cr("Hibernate", { phase: "Hibernated", vmName });
      c.metadata.deletionTimestamp = "2025-06-01T12:00:00Z";
      return c;
    };
    const other = deleting("vk-p13-f13-1");
    assert.equal(
      planHibernation({
        cr: other,
        pod: undefined,
        all: [other],
        registry: true,
        nowMs: NOW,
        fleets,
      }).actions.some((a) => a.kind === "delete-snapshot-tag"),
      false,
    );
    // A name of its own namespace that a fleet of another namespace holds: kept too.
    const q = {
      ...deleting("vk-q-x-yy-0"),
      metadata: { ...deleting("x").metadata, namespace: "q" },
    };
    assert.equal(
      planHibernation({
        cr: q,
        pod: undefined,
        all: [q],
        registry: true,
        nowMs: NOW,
        fleets: [fleet("q-x", "yy")],
      }).actions.some((a) => a.kind === "delete-snapshot-tag"),
      false,
    );
    const mine = deleting("vk-p18-evil2");
    assert.equal(
      tagOf(
        planHibernation({
          cr: mine,
          pod: undefined,
          all: [mine],
          registry: true,
          nowMs: NOW,
          fleets,
        }),
      ),
      "vk-p18-evil2",
    );
  });
});

describe("the snapshots a fleet took", () => {
  const cs = fleet("p12", "f12", { replicas: 1 });
  const hibernatedPod = (slot: number): Pod => {
    const p = live(buildAgentPod(cs, slot));
    p.metadata!.annotations = {
      ...p.metadata!.annotations,
      [ANNOTATIONS.hibernate]: "true",
      [ANNOTATIONS.lifecycleState]: "hibernated",
    };
    return p;
  };
  const facts = { hibernate: new Set(["vk-p12-f12-0", "vk-p12-f12-1"]) };

  it("a tag no pod or record of this uid vouches for does not count", () => {
    assert.deepEqual(ownSnapshotFacts(cs, [], facts), { hibernate: new Set() });
    assert.deepEqual(ownSnapshotFacts(cs, [hibernatedPod(1)], facts), {
      hibernate: new Set(["vk-p12-f12-1"]),
    });
    assert.deepEqual(ownSnapshotFacts(cs, [], facts, ["vk-p12-f12-0"]), {
      hibernate: new Set(["vk-p12-f12-0"]),
    });
    assert.deepEqual(ownSnapshotFacts(cs, [], { error: "down" }), { error: "down" });
  });

  it("the record grows with what the fleet's pods report hibernated, and is the uid's alone", () => {
    const value = snapshotRecordUpdate(cs, [hibernatedPod(0), hibernatedPod(1)], facts);
    assert.equal(
      value,
      JSON.stringify({ uid: cs.metadata.uid, vms: ["vk-p12-f12-0", "vk-p12-f12-1"] }),
    );
    const recorded: CocoonSet = {
      ...cs,
      metadata: { ...cs.metadata, annotations: { [SNAPSHOT_OWNER_ANNOTATION]: value } },
      // The engine's record of the members it created: the annotation counts for these only.
      status: {
        readyAgents: 0,
        desiredAgents: 2,
        readyToolboxes: 0,
        desiredToolboxes: 0,
        vms: { "0": { vm: "vk-p12-f12-0" }, "1": { vm: "vk-p12-f12-1" } },
      },
    };
    assert.deepEqual([...recordedSnapshots(recorded)], ["vk-p12-f12-0", "vk-p12-f12-1"]);
    assert.equal(snapshotRecordUpdate(recorded, [hibernatedPod(0)], facts), undefined);
    assert.deepEqual(ownSnapshotFacts(recorded, [], facts), facts);
    // The annotation is anyone's to write who may edit the CocoonSet: alone it vouches for nothing.
    const unrecorded: CocoonSet = { ...recorded, status: { ...recorded.status!, vms: {} } };
    assert.deepEqual(ownSnapshotFacts(unrecorded, [], facts), { hibernate: new Set() });
    // Copied onto a new CocoonSet of the same name (a new uid): worth nothing.
    const copy: CocoonSet = { ...recorded, metadata: { ...recorded.metadata, uid: "new" } };
    assert.deepEqual(ownSnapshotFacts(copy, [], facts), { hibernate: new Set() });
  });

  it("a new fleet with suspend: true does not restore a stray tag of its main agent's VM", () => {
    const suspended: CocoonSet = { ...cs, spec: { ...cs.spec, suspend: true } };
    const plan = planPass({
      cocoonSet: suspended,
      pods: [],
      nowMs: NOW,
      snapshots: ownSnapshotFacts(suspended, [], facts),
    });
    const create = plan.steps[0].actions[0];
    assert.equal(create.kind, "create-pod");
    assert.equal(
      create.kind === "create-pod" &&
        create.pod.metadata.annotations?.[ANNOTATIONS.restoreFromHibernate],
      undefined,
    );
  });

  it("a deletion cleans up its members' own VMs, whatever their pods' annotations say", () => {
    const p = live(buildAgentPod(cs, 1));
    p.metadata!.annotations = { ...p.metadata!.annotations, [ANNOTATIONS.vmName]: "vk-p13-f13-1" };
    assert.deepEqual(teardownVmNames(cs, [live(buildAgentPod(cs, 0)), p]), [
      "vk-p12-f12-0",
      "vk-p12-f12-1",
    ]);
  });

  it("a deletion waits for the hibernations in flight, not for pods no node agent reports on", () => {
    const withState = (slot: number, state: string | undefined, hibernate = true): Pod => {
      const p = live(buildAgentPod(cs, slot));
      p.metadata!.annotations = {
        ...p.metadata!.annotations,
        ...(hibernate ? { [ANNOTATIONS.hibernate]: "true" } : {}),
        ...(state ? { [ANNOTATIONS.lifecycleState]: state } : {}),
      };
      return p;
    };
    assert.deepEqual(
      hibernationsInFlight(cs, [withState(0, "hibernating"), withState(1, "ready")]),
      ["f12-0", "f12-1"],
    );
    assert.deepEqual(
      hibernationsInFlight(cs, [
        withState(0, "hibernated"),
        withState(1, undefined),
        withState(2, "failed"),
      ]),
      [],
    );
    assert.deepEqual(hibernationsInFlight(cs, [withState(0, "ready", false)]), []);
  });
});
