// A hibernation snapshot the pass had recorded and can no longer find is never a quiet
// fresh boot: the step that boots or wakes the VM first records it on the CocoonSet (the
// SnapshotLost condition reads that record) and emits a Warning, once per VM, on every path:
// the retain wake (main agent, sub-agent, toolbox), the release wake and a CocoonHibernation's
// restore intent. Behaviour: docs/behaviour.md §3.20.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { SnapshotFacts } from "../../../engine/lifecycle/index.js";
import type { Plan, PlanAction } from "../../../engine/plan/index.js";
import { deriveStatus } from "../../../engine/plan/status.js";
import { planPass } from "../../../engine/planner/index.js";
import { wakeProbes } from "../../../engine/snapshots/index.js";
import { readLostSnapshots } from "../../../engine/snapshots/lost-snapshots.js";
import { ANNOTATIONS, type CocoonSet, type Pod } from "../../../engine/spec/index.js";
import {
  NOW,
  cocoonSet,
  convergedPods,
  failed,
  mainPod,
  tags,
  toolbox,
  withAnnotations,
} from "./fixtures.js";

const vmOf = (pod: Pod) => pod.metadata?.annotations?.[ANNOTATIONS.vmName] ?? "";
const hibernated = (pod: Pod): Pod =>
  withAnnotations(pod, {
    [ANNOTATIONS.hibernate]: "true",
    [ANNOTATIONS.lifecycleState]: "hibernated",
    [ANNOTATIONS.lifecycleObservedGeneration]: "3",
  });
const withCsAnnotations = (cs: CocoonSet, a: Record<string, string>): CocoonSet => ({
  ...cs,
  metadata: { ...cs.metadata, annotations: { ...cs.metadata.annotations, ...a } },
});
const plan = (cs: CocoonSet, pods: Pod[], snapshots?: SnapshotFacts, hibernations = []) =>
  planPass({ cocoonSet: cs, pods, nowMs: NOW, snapshots, hibernations });

const warnings = (p: Plan) =>
  p.steps.flatMap((s) =>
    s.actions.flatMap((a) =>
      a.kind === "event" && a.reason === "SnapshotLost" ? [`${s.podName}: ${a.message}`] : [],
    ),
  );
const recorded = (p: Plan): string[] => {
  const writes = p.steps.flatMap((s) =>
    s.actions.filter(
      (a): a is Extract<PlanAction, { kind: "annotate-cocoonset" }> =>
        a.kind === "annotate-cocoonset" && ANNOTATIONS.lostSnapshots in a.annotations,
    ),
  );
  if (writes.length === 0) return [];
  const value = writes[0].annotations[ANNOTATIONS.lostSnapshots] ?? "";
  for (const w of writes) assert.equal(w.annotations[ANNOTATIONS.lostSnapshots], value);
  return Object.keys(JSON.parse(value) as object).sort();
};

describe("lost snapshots: the retain wake", () => {
  const cs = cocoonSet({ toolboxes: [toolbox("db")] }, { replicas: 2 });
  const pods = convergedPods(cs).map(hibernated);
  const [main, one, two, db] = pods;

  it("asks the registry for the tag of each VM it wakes from a snapshot", () => {
    assert.deepEqual(wakeProbes(cs, pods), [vmOf(main), vmOf(one), vmOf(two), vmOf(db)].sort());
    // A pod a CocoonHibernation keeps hibernated is not woken, and not asked about.
    assert.deepEqual(
      wakeProbes(cs, pods, [{ pod: "demo-1", desire: "Hibernate", phase: "Hibernated" }]),
      [vmOf(main), vmOf(two), vmOf(db)].sort(),
    );
    assert.deepEqual(wakeProbes(cocoonSet({ suspend: true }, { replicas: 2 }), pods), []);
    assert.deepEqual(wakeProbes(cs, convergedPods(cs)), [], "nothing hibernated: nothing asked");
  });

  it("every tag there: a plain wake, nothing recorded", () => {
    const p = plan(cs, pods, tags(...pods.map(vmOf)));
    assert.deepEqual(warnings(p), []);
    assert.deepEqual(recorded(p), []);
    assert.equal(
      p.status?.conditions?.some((c) => c.type === "SnapshotLost"),
      false,
    );
  });

  it("each tag gone (main, sub-agent, toolbox): recorded, then a Warning, then the wake", () => {
    const p = plan(cs, pods, tags(vmOf(two)));
    assert.deepEqual(recorded(p), [vmOf(main), vmOf(one), vmOf(db)].sort());
    assert.deepEqual(warnings(p), [
      `demo-0: main agent: the hibernation snapshot ${vmOf(main)}:hibernate of VM ${vmOf(main)} was recorded and is no longer in the registry; the VM starts without its saved state`,
      `demo-1: slot 1: the hibernation snapshot ${vmOf(one)}:hibernate of VM ${vmOf(one)} was recorded and is no longer in the registry; the VM starts without its saved state`,
      `demo-db: toolbox db: the hibernation snapshot ${vmOf(db)}:hibernate of VM ${vmOf(db)} was recorded and is no longer in the registry; the VM starts without its saved state`,
    ]);
    const step = p.steps.find((s) => s.podName === "demo-1");
    assert.deepEqual(
      step?.actions.map((a) => a.kind),
      ["annotate-cocoonset", "event", "annotate-pod"],
      "recorded before the wake",
    );
    const lost = p.status?.conditions?.find((c) => c.type === "SnapshotLost");
    assert.equal(lost?.status, "True");
    assert.equal(lost?.reason, "SnapshotNotFound");
    for (const vm of [vmOf(main), vmOf(one), vmOf(db)]) assert.ok(lost?.message?.includes(vm));
    assert.match(
      lost?.message ?? "",
      /remove the annotation cocoonset\.cocoonstack\.io\/lost-snapshots/,
    );
  });

  it("a VM already recorded is not announced again; the condition stays until acknowledged", () => {
    const first = plan(cs, pods, tags(vmOf(main), vmOf(two), vmOf(db)));
    const write = first.steps
      .flatMap((s) => s.actions)
      .find((a) => a.kind === "annotate-cocoonset");
    const value = (write as Extract<PlanAction, { kind: "annotate-cocoonset" }>).annotations[
      ANNOTATIONS.lostSnapshots
    ] as string;
    const after = withCsAnnotations(cs, { [ANNOTATIONS.lostSnapshots]: value });
    assert.deepEqual(warnings(plan(after, pods, tags(vmOf(main), vmOf(two), vmOf(db)))), []);
    const status = deriveStatus({ cocoonSet: after, pods: convergedPods(cs), nowMs: NOW });
    assert.equal(status.conditions?.find((c) => c.type === "SnapshotLost")?.status, "True");
    // The user removed the annotation: False, with the previous condition known.
    const acked = deriveStatus({
      cocoonSet: { ...cs, status },
      pods: convergedPods(cs),
      nowMs: NOW,
    });
    assert.equal(acked.conditions?.find((c) => c.type === "SnapshotLost")?.status, "False");
    assert.equal(
      readLostSnapshots(withCsAnnotations(cs, { [ANNOTATIONS.lostSnapshots]: "{" })).size,
      0,
    );
  });

  it("the registry did not answer: the wake goes on, nothing is claimed lost", () => {
    const p = plan(cs, pods, { error: "connection refused" });
    assert.deepEqual(warnings(p), []);
  });
});

describe("lost snapshots: the release wake", () => {
  const base = cocoonSet({ hibernatePolicy: "release" });
  const vm0 = "vk-team-demo-0";
  const released = (a: Record<string, string>): CocoonSet => ({
    ...withCsAnnotations(base, a),
    status: {
      phase: "Suspended",
      readyAgents: 0,
      desiredAgents: 1,
      readyToolboxes: 0,
      desiredToolboxes: 0,
    },
  });

  it("the suspend recorded the VM (stash and node hint) and the tag is gone: a fresh boot, reported", () => {
    const cs = released({
      [ANNOTATIONS.deleteVmNames]: vm0,
      [ANNOTATIONS.hibernatedOnNode]: "node-a",
    });
    const p = plan(cs, [], tags());
    const create = p.steps.find((s) => s.decision === "create");
    assert.equal(create?.podName, "demo-0");
    assert.deepEqual(
      create?.actions.map((a) => a.kind),
      ["annotate-cocoonset", "event", "create-pod"],
    );
    assert.deepEqual(recorded(p), [vm0]);
    assert.equal(warnings(p).length, 1);
  });

  it("the tag is there: the restore, nothing lost", () => {
    const cs = released({
      [ANNOTATIONS.deleteVmNames]: vm0,
      [ANNOTATIONS.hibernatedOnNode]: "node-a",
    });
    const p = plan(cs, [], tags(vm0));
    assert.deepEqual(
      p.steps.map((s) => s.decision),
      ["wake-restore"],
    );
    assert.deepEqual(warnings(p), []);
  });

  it("suspended before its first boot (nothing recorded): a plain first boot", () => {
    const p = plan(released({}), [], tags());
    assert.deepEqual(
      p.steps.map((s) => s.decision),
      ["create"],
    );
    assert.deepEqual(warnings(p), []);
  });
});

describe("lost snapshots: a CocoonHibernation's restore intent", () => {
  const cs = cocoonSet({}, { replicas: 1 });
  const main = mainPod(cs);
  const cr = [{ pod: "demo-1", desire: "Wake", phase: "Waking" }];

  it("the CR says hibernated, the tag is gone: the rebuilt pod boots fresh, reported", () => {
    const p = plan(cs, [main], tags(), cr as never);
    const create = p.steps.find((s) => s.podName === "demo-1");
    assert.equal(create?.decision, "create");
    assert.deepEqual(
      create?.actions.map((a) => a.kind),
      ["annotate-cocoonset", "event", "create-pod"],
    );
    assert.deepEqual(recorded(p), ["vk-team-demo-1"]);
  });

  it("the tag there: restore intent, nothing lost", () => {
    const p = plan(cs, [main], tags("vk-team-demo-1"), cr as never);
    assert.deepEqual(warnings(p), []);
  });

  it("a terminal main agent is no wake: nothing is claimed", () => {
    const p = plan(cs, [failed(hibernated(main))], tags());
    assert.deepEqual(warnings(p), []);
  });
});
