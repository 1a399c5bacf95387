// Migration to spec.nodeName (docs/behaviour.md §3.17): the plan persists Migrating before
// it asks the main agent to hibernate, deletes the old pod once the hibernation gate holds,
// recreates it on the target with restore intent, drops the snapshot tag only once the new
// VM is live, and hands back to the normal pass. The registry's answer is an input; without
// a registry nothing of this is planned. Plus snapshotCompatibilityClass: its node selector
// and the adoption of pods created before it was set.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { MIGRATE_POLL_MS, type SnapshotFacts } from "../../../engine/lifecycle/index.js";
import { renderPlan, type Plan } from "../../../engine/plan/index.js";
import { planPass, snapshotProbes } from "../../../engine/planner/index.js";
import {
  agentDrift,
  buildAgentPod,
  buildToolboxPod,
  toolboxDrift,
  vmLive,
} from "../../../engine/pods/index.js";
import {
  ANNOTATIONS,
  NODE_LABELS,
  SNAPSHOT_TAGS,
  type CocoonSet,
  type Pod,
} from "../../../engine/spec/index.js";
import {
  NOW,
  cocoonSet,
  convergedPods,
  decisions,
  failed,
  live,
  mainPod,
  statusWith,
  tags,
  toolbox,
  withAnnotations,
} from "./fixtures.js";

const VM = "vk-team-demo-0";
const actionKinds = (p: Plan) => p.steps.flatMap((s) => s.actions.map((a) => a.kind));

/** The fleet asked to move to node-b; `phase` is the stored phase. */
function pinned(phase?: "Running" | "Migrating", replicas = 0): CocoonSet {
  const cs = cocoonSet({ nodeName: "node-b" }, { replicas });
  return phase ? { ...cs, status: statusWith(phase) } : cs;
}

function plan(cs: CocoonSet, pods: Pod[], snapshots?: SnapshotFacts): Plan {
  return planPass({ cocoonSet: cs, pods, nowMs: NOW, snapshots });
}

/** A main pod whose VM runs: an id from the node agent and a running container. */
function running(pod: Pod): Pod {
  const out = withAnnotations(pod, {
    [ANNOTATIONS.vmID]: "vm-1",
    [ANNOTATIONS.lifecycleState]: "ready",
  });
  out.status = {
    ...out.status,
    containerStatuses: [{ name: "agent", state: { running: { startedAt: "x" } } }],
  };
  return out;
}

/** On `node`. */
function on(pod: Pod, node: string): Pod {
  const out = structuredClone(pod);
  if (out.spec) out.spec.nodeName = node;
  return out;
}

const asked = (pod: Pod) => withAnnotations(pod, { [ANNOTATIONS.hibernate]: "true" });

/** Hibernated by the node agent for generation 3 (the fixture's), no VM id left. */
function hibernated(pod: Pod): Pod {
  return withAnnotations(asked(pod), {
    [ANNOTATIONS.lifecycleState]: "hibernated",
    [ANNOTATIONS.lifecycleObservedGeneration]: "3",
    [ANNOTATIONS.vmID]: undefined,
  });
}

/** The restored main agent on node-b, as created by the migration. */
function restored(cs: CocoonSet): Pod {
  const pod = on(mainPod(cs), "node-b");
  return withAnnotations(pod, { [ANNOTATIONS.restoreFromHibernate]: "true" });
}

describe("migration to spec.nodeName: the plan", () => {
  it("persists Migrating, then asks the main agent on the old node to hibernate", () => {
    const cs = pinned("Running");
    const main = running(mainPod(cs));
    const p = plan(cs, [main], tags());
    assert.deepEqual(decisions(p), ["demo-0:migrate"]);
    const [first, second] = p.steps[0].actions;
    assert.equal(first.kind, "write-status", "the phase is written before the first side effect");
    assert.equal(first.kind === "write-status" && first.status.phase, "Migrating");
    assert.deepEqual(second, {
      kind: "annotate-pod",
      name: "demo-0",
      uid: "pod-uid-demo-0",
      annotations: { [ANNOTATIONS.hibernate]: "true" },
    });
    assert.equal(p.status, undefined, "not written a second time after the steps");
    assert.equal(p.requeueAfterMs, MIGRATE_POLL_MS);
    assert.equal(p.mutatesPods, false);
    assert.match(renderPlan(p), /^main: hibernate \(migration to spec\.nodeName\)$/m);
  });

  it("table: each step of a migration, Migrating throughout", () => {
    const cs = pinned("Migrating");
    const main = running(mainPod(cs));
    const rows: {
      what: string;
      pods: Pod[];
      facts: SnapshotFacts;
      want: string[];
      kinds: string[];
    }[] = [
      {
        what: "asked, not hibernated yet, no tag: wait",
        pods: [asked(main)],
        facts: tags(),
        want: ["demo-0:wait-migration"],
        kinds: [],
      },
      {
        what: "tag pushed but the node agent has not reported hibernated: the gate waits",
        pods: [withAnnotations(asked(main), { [ANNOTATIONS.lifecycleState]: "hibernating" })],
        facts: tags(VM),
        want: ["demo-0:wait-migration"],
        kinds: [],
      },
      {
        what: "hibernated with its tag: delete the old pod",
        pods: [hibernated(main)],
        facts: tags(VM),
        want: ["demo-0:migrate-evict"],
        kinds: ["delete-pod"],
      },
      {
        what: "a tag this migration did not ask for: dropped first",
        pods: [main],
        facts: tags(VM),
        want: ["demo-0:migrate-drop-stale"],
        kinds: ["delete-snapshot-tag"],
      },
      {
        what: "old pod gone, tag there: create on the target, restoring",
        pods: [],
        facts: tags(VM),
        want: ["demo-0:migrate-restore"],
        kinds: ["create-pod"],
      },
      {
        what: "restored pod not scheduled yet: wait (and keep the tag)",
        pods: [on(restored(cs), "")],
        facts: tags(VM),
        want: ["demo-0:wait-migration"],
        kinds: [],
      },
      {
        what: "restored pod running but no VM id yet: keep the tag",
        pods: [
          (() => {
            const p = restored(cs);
            p.status = {
              ...p.status,
              containerStatuses: [{ name: "agent", state: { running: {} } }],
            };
            return p;
          })(),
        ],
        facts: tags(VM),
        want: ["demo-0:wait-migration"],
        kinds: [],
      },
      {
        what: "restored VM has an id but its container is not running: keep the tag",
        pods: [withAnnotations(restored(cs), { [ANNOTATIONS.vmID]: "vm-2" })],
        facts: tags(VM),
        want: ["demo-0:wait-migration"],
        kinds: [],
      },
      {
        what: "restored VM live: drop the tag",
        pods: [running(restored(cs))],
        facts: tags(VM),
        want: ["demo-0:migrate-complete"],
        kinds: ["delete-snapshot-tag"],
      },
      {
        what: "quiesced on the target (re-targeted back): woken in place",
        pods: [on(hibernated(main), "node-b")],
        facts: tags(VM),
        want: ["demo-0:migrate-wake"],
        kinds: ["annotate-pod"],
      },
    ];
    for (const row of rows) {
      const p = plan(cs, row.pods, row.facts);
      assert.deepEqual(decisions(p), row.want, row.what);
      assert.deepEqual(actionKinds(p), row.kinds, row.what);
      assert.equal(
        p.requeueAfterMs,
        ["create-pod", "delete-pod", "delete-snapshot-tag"].some((k) => row.kinds.includes(k))
          ? 0
          : MIGRATE_POLL_MS,
        `${row.what}: at once after a change no watch reports, else the poll`,
      );
      if (!p.mutatesPods) assert.equal(p.status?.phase ?? "Migrating", "Migrating", row.what);
      assert.ok(!actionKinds(p).includes("write-status"), `${row.what}: stored already`);
    }
  });

  it("recreates the main agent with restore-from-hibernate and the target's hostname affinity", () => {
    const p = plan(pinned("Migrating"), [], tags(VM));
    const action = p.steps[0].actions[0];
    assert.equal(action.kind, "create-pod");
    if (action.kind !== "create-pod") return;
    assert.equal(action.onAlreadyExists, "retry-later", "the old pod may still be terminating");
    assert.equal(action.pod.metadata.annotations[ANNOTATIONS.restoreFromHibernate], "true");
    assert.deepEqual(
      action.pod.spec.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution,
      {
        nodeSelectorTerms: [
          { matchExpressions: [{ key: NODE_LABELS.hostname, operator: "In", values: ["node-b"] }] },
        ],
      },
    );
  });

  it("drops exactly the main agent's :hibernate tag", () => {
    const cs = pinned("Migrating");
    const p = plan(cs, [running(restored(cs))], tags(VM));
    assert.deepEqual(p.steps[0].actions, [
      { kind: "delete-snapshot-tag", vm: VM, tag: SNAPSHOT_TAGS.hibernate },
    ]);
    assert.equal(p.status?.phase, "Migrating", "the tag is gone only after this pass");
  });

  it("settles: once the tag is gone and the VM is live on the target, the normal pass runs to Running", () => {
    const cs = pinned("Migrating", 1);
    const p = plan(cs, [running(restored(cs))], tags());
    assert.deepEqual(decisions(p), ["demo-1:create"], "sub-agents are planned again");
    const done = plan(
      cs,
      convergedPods(cs).map((x) => on(running(x), "node-b")),
      tags(),
    );
    assert.equal(done.status?.phase, "Running");
  });

  it("sub-agents, toolboxes and the unsuspend wait while migration owns the pass", () => {
    const cs = cocoonSet({ nodeName: "node-b", toolboxes: [toolbox("db")] }, { replicas: 2 });
    const [main, ...rest] = convergedPods(cs);
    const p = plan({ ...cs, status: statusWith("Migrating") }, [asked(running(main))], tags());
    assert.deepEqual(decisions(p), ["demo-0:wait-migration"], "no sub-agent or toolbox created");
    assert.ok(rest.length === 3);
  });

  it("without a registry nothing is planned for spec.nodeName: the running pod stays", () => {
    const cs = pinned("Running");
    const p = plan(cs, [running(mainPod(cs))]);
    assert.deepEqual(p.steps, []);
    assert.deepEqual(
      snapshotProbes(cs, [running(mainPod(cs))]),
      [VM],
      "the executor with no registry never asks",
    );
  });

  it("fails closed when the registry does not answer", () => {
    const cs = pinned("Migrating");
    const p = plan(cs, [asked(running(mainPod(cs)))], { error: "HEAD refused" });
    assert.deepEqual(p.steps, []);
    assert.equal(p.status, undefined);
    assert.match(p.refusals.map((r) => r.message)[0], /^\[spec\.nodeName\] .*HEAD refused/);
  });

  it("not handled: no target, a fresh create, a pod already on the target, a terminal main", () => {
    const bare = cocoonSet();
    assert.deepEqual(decisions(plan(bare, [running(mainPod(bare))], tags())), []);
    const cs = pinned("Running");
    assert.deepEqual(
      decisions(plan(cs, [], tags())),
      ["demo-0:create"],
      "fresh create, no restore",
    );
    const onTarget = on(running(mainPod(cs)), "node-b");
    assert.deepEqual(decisions(plan(cs, [onTarget], tags())), []);
    const broken = failed(mainPod(cs));
    assert.deepEqual(decisions(plan(cs, [broken], tags(VM))), ["demo-0:main-failed"]);
  });

  it("a main agent a CocoonHibernation keeps hibernated on the target is no migration", () => {
    const cs = pinned("Running");
    const main = hibernated(on(mainPod(cs), "node-b"));
    const byCr = planPass({
      cocoonSet: cs,
      pods: [main],
      nowMs: NOW,
      snapshots: tags(VM),
      hibernations: [{ pod: "demo-0", desire: "Hibernate", phase: "Hibernated" }],
    });
    assert.deepEqual(decisions(byCr), [], "neither migrated nor woken: the CR holds it");
    assert.notDeepEqual(decisions(plan(cs, [main], tags(VM))), [], "without the CR it is handled");
  });

  it("a restore in flight without the stored phase is someone else's wake: not handled", () => {
    const cs = pinned("Running");
    const pod = on(mainPod(cs), "node-b");
    const p = plan(cs, [pod], tags(VM));
    assert.ok(
      !p.steps.some((s) => s.decision.startsWith("migrate") || s.decision === "wait-migration"),
    );
  });

  it("asks the registry only while a migration can be concerned", () => {
    const cs = pinned("Running");
    const main = running(mainPod(cs));
    assert.deepEqual(snapshotProbes(cs, [main]), [VM], "main on the old node");
    assert.deepEqual(snapshotProbes(cs, []), [VM], "main missing");
    assert.deepEqual(snapshotProbes(cs, [on(main, "node-b")]), [], "settled on the target");
    assert.deepEqual(
      snapshotProbes(pinned("Migrating"), [on(main, "node-b")]),
      [VM],
      "stored Migrating: the tag is still to be dropped",
    );
    assert.deepEqual(snapshotProbes(cocoonSet(), [main]), [], "no target");
    assert.deepEqual(snapshotProbes(cs, [failed(main)]), [], "terminal main triaged first");
  });

  it("vmLive needs both the VM id and a running container", () => {
    const cs = pinned();
    const pod = mainPod(cs);
    assert.equal(vmLive(pod), false);
    assert.equal(vmLive(running(pod)), true);
    assert.equal(vmLive(withAnnotations(running(pod), { [ANNOTATIONS.vmID]: undefined })), false);
  });
});

describe("snapshotCompatibilityClass", () => {
  const classed = cocoonSet({ snapshotCompatibilityClass: "n2-v1" });

  it("selects the class label on every pod, next to the pool", () => {
    const tb = toolbox("db");
    for (const pod of [
      buildAgentPod(classed, 0),
      buildAgentPod(classed, 1),
      buildToolboxPod(classed, tb),
    ]) {
      assert.deepEqual(pod.spec.nodeSelector, {
        [NODE_LABELS.pool]: "default",
        "cocoonstack.io/snapshot-cpu-class": "n2-v1",
      });
    }
    assert.deepEqual(buildAgentPod(cocoonSet(), 0).spec.nodeSelector, {
      [NODE_LABELS.pool]: "default",
    });
  });

  it("also on the pod a migration recreates", () => {
    const cs = {
      ...pinned("Migrating"),
      spec: { ...pinned().spec, snapshotCompatibilityClass: "n2-v1" },
    };
    const action = plan(cs, [], tags(VM)).steps[0].actions[0];
    assert.equal(
      action.kind === "create-pod" && action.pod.spec.nodeSelector?.[NODE_LABELS.snapshotClass],
      "n2-v1",
    );
  });

  it("adoption: a live pod created before the class was set is kept; a terminal one is replaced", () => {
    const tb = toolbox("db");
    const before = cocoonSet({ toolboxes: [tb] });
    const after = cocoonSet({ snapshotCompatibilityClass: "n2-v1", toolboxes: [tb] });
    const rows: [string, Pod, boolean][] = [
      ["live main without the class: adopted", mainPod(before), true],
      ["terminal main without the class: drifted", failed(mainPod(before)), false],
      [
        "main with another class: drifted",
        mainPod(cocoonSet({ snapshotCompatibilityClass: "n1-v1" })),
        false,
      ],
      ["main with the class: matches", mainPod(after), true],
    ];
    for (const [what, pod, kept] of rows)
      assert.equal(agentDrift(after, 0, pod).length === 0, kept, what);
    assert.deepEqual(
      toolboxDrift(after, tb, live(buildToolboxPod(before, tb))),
      [],
      "toolbox adopted",
    );
    const p = plan(after, [mainPod(before)]);
    assert.ok(!p.steps.some((s) => s.decision === "delete-drifted"), "no rebuild for the class");
  });
});

describe("migration: safety properties over every main agent state", () => {
  // "Never lose live state": whatever the pod, the tag and the stored phase, the old pod is
  // deleted only once the gate holds for it, a restore only happens from an existing tag,
  // the tag is dropped only when the VM is live (or the tag is one this migration never
  // asked for), and Migrating is persisted before any side effect.
  const stateArb = fc.record({
    node: fc.constantFrom("", "node-a", "node-b"),
    exists: fc.boolean(),
    asked: fc.boolean(),
    lifecycle: fc.constantFrom(undefined, "creating", "ready", "hibernating", "hibernated"),
    observed: fc.constantFrom(undefined, "2", "3"),
    vmID: fc.boolean(),
    containerRunning: fc.boolean(),
    tagged: fc.boolean(),
    phase: fc.constantFrom(undefined, "Running" as const, "Migrating" as const),
    target: fc.constantFrom("node-a", "node-b", undefined),
  });

  it("holds for every state", () => {
    fc.assert(
      fc.property(stateArb, (st) => {
        const base = cocoonSet(st.target ? { nodeName: st.target } : {});
        const cs: CocoonSet = st.phase ? { ...base, status: statusWith(st.phase) } : base;
        let pod = on(mainPod(cs), st.node);
        pod = withAnnotations(pod, {
          [ANNOTATIONS.hibernate]: st.asked ? "true" : undefined,
          [ANNOTATIONS.lifecycleState]: st.lifecycle,
          [ANNOTATIONS.lifecycleObservedGeneration]: st.observed,
          [ANNOTATIONS.vmID]: st.vmID ? "vm-1" : undefined,
        });
        if (st.containerRunning)
          pod.status = {
            ...pod.status,
            containerStatuses: [{ name: "agent", state: { running: {} } }],
          };
        const pods = st.exists ? [pod] : [];
        const p = plan(cs, pods, tags(...(st.tagged ? [VM] : [])));
        const actions = p.steps.flatMap((s) => s.actions);
        const migrating = p.steps.some(
          (s) => s.decision.startsWith("migrate") || s.decision === "wait-migration",
        );
        if (!migrating) return;
        const elsewhere = st.exists && !!st.target && st.node !== "" && st.node !== st.target;
        for (const a of actions) {
          if (a.kind === "delete-pod") {
            assert.ok(
              st.tagged && elsewhere && st.asked,
              "deleted only with the tag, on the old node",
            );
            assert.equal(st.lifecycle, "hibernated", "deleted only once hibernated");
            assert.equal(st.observed, "3", "hibernated for this generation");
          }
          if (a.kind === "create-pod") {
            assert.ok(st.tagged && !st.exists, "recreated only over an existing tag");
            assert.equal(a.pod.metadata.annotations[ANNOTATIONS.restoreFromHibernate], "true");
          }
          if (a.kind === "delete-snapshot-tag") {
            const isLive = st.exists && st.vmID && st.containerRunning && !st.asked && !elsewhere;
            const stale = elsewhere && !st.asked;
            assert.ok(isLive || stale, "the tag goes only once the VM is live, or when stale");
          }
        }
        const sideEffects = actions.filter((a) => a.kind !== "write-status");
        if (st.phase !== "Migrating" && sideEffects.length > 0)
          assert.equal(actions[0].kind, "write-status", "Migrating is persisted first");
        if (actions[0]?.kind === "write-status") assert.equal(actions[0].status.phase, "Migrating");
      }),
      { numRuns: 2000 },
    );
  });
});
