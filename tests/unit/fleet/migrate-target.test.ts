// No wedged fleet (issue 25, item 6a): a migration to a node that does not exist, is not
// Ready, is cordoned or does not carry the fleet's pool and CPU class is refused before
// anything hibernates (Warning MigrationRefused once, condition MigrationRefused, the main
// agent stays); and a restore pod left unbound, pinned to a target no longer asked for, is
// replaced so that clearing or changing nodeName mid-migration recovers.
// Behaviour: docs/behaviour.md §3.17.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { migrationStartTarget, type TargetNodeFacts } from "../../../engine/lifecycle/index.js";
import { targetNodeProblem } from "../../../engine/lifecycle/migrate.js";
import { renderPlan, type Plan } from "../../../engine/plan/index.js";
import { planPass } from "../../../engine/planner/index.js";
import { buildAgentPod, classifyPods } from "../../../engine/pods/index.js";
import { ANNOTATIONS, type CocoonSet, type Pod } from "../../../engine/spec/index.js";
import {
  NOW,
  cocoonSet,
  decisions,
  live,
  mainPod,
  statusWith,
  tags,
  withAnnotations,
} from "./fixtures.js";

const VM = "vk-team-demo-0";

function node(
  name: string,
  opts: { ready?: boolean; labels?: Record<string, string>; cordoned?: boolean } = {},
): TargetNodeFacts {
  return {
    name,
    node: {
      metadata: { labels: opts.labels ?? { "cocoonstack.io/pool": "default" } },
      spec: opts.cordoned ? { unschedulable: true } : {},
      status: { conditions: [{ type: "Ready", status: opts.ready === false ? "False" : "True" }] },
    },
  };
}

const target = (spec: Parameters<typeof cocoonSet>[0] = {}): CocoonSet =>
  cocoonSet({ nodeName: "node-b", ...spec });
const plan = (cs: CocoonSet, pods: Pod[], targetNode?: TargetNodeFacts, facts = tags()) =>
  planPass({ cocoonSet: cs, pods, nowMs: NOW, snapshots: facts, targetNode });
const hibernateAsked = (p: Plan) =>
  p.steps.some((s) =>
    s.actions.some((a) => a.kind === "annotate-pod" && ANNOTATIONS.hibernate in a.annotations),
  );

describe("the target node is checked before a migration starts", () => {
  const cs = target();
  const main = mainPod(cs); // on node-a

  it("the executor reads spec.nodeName only when the pass may start a migration", () => {
    assert.equal(migrationStartTarget(cs, classifyPods(cs, [main])), "node-b");
    const asked = withAnnotations(main, { [ANNOTATIONS.hibernate]: "true" });
    assert.equal(migrationStartTarget(cs, classifyPods(cs, [asked])), undefined, "already started");
    assert.equal(migrationStartTarget(cocoonSet({}), classifyPods(cs, [main])), undefined);
    const there = structuredClone(main);
    there.spec!.nodeName = "node-b";
    assert.equal(migrationStartTarget(cs, classifyPods(cs, [there])), undefined, "settled");
  });

  const refusals: [string, TargetNodeFacts, CocoonSet, RegExp][] = [
    ["missing", { name: "node-b" }, cs, /node "node-b" does not exist/],
    ["not Ready", node("node-b", { ready: false }), cs, /node "node-b" is not Ready/],
    ["cordoned", node("node-b", { cordoned: true }), cs, /node "node-b" is cordoned/],
    [
      "another pool",
      node("node-b", { labels: { "cocoonstack.io/pool": "gpu" } }),
      cs,
      /not in the pool "default" \(label cocoonstack.io\/pool: gpu\)/,
    ],
    [
      "another CPU class",
      node("node-b", { labels: { "cocoonstack.io/pool": "default" } }),
      target({ snapshotCompatibilityClass: "v1" }),
      /does not have the CPU class "v1"/,
    ],
    [
      "unreadable",
      { name: "node-b", error: "nodes is forbidden" },
      cs,
      /could not be read: nodes is forbidden/,
    ],
  ];
  for (const [what, facts, set, why] of refusals)
    it(`${what}: refused, nothing hibernates, the fleet goes on, the refusal is named`, () => {
      const pod = mainPod(set);
      const p = plan(set, [pod], facts);
      assert.equal(hibernateAsked(p), false);
      assert.deepEqual(decisions(p), ["demo-0:migrate-refused"]);
      const step = p.steps[0];
      assert.match(step.why ?? "", why);
      assert.match(step.why ?? "", /^\[spec\.nodeName\] /);
      assert.deepEqual(
        step.actions.map((a) => (a.kind === "event" ? `${a.type} ${a.reason}` : a.kind)),
        ["Warning MigrationRefused"],
      );
      assert.equal(p.status?.phase, "Running", "the main agent stays where it runs");
      const c = p.status?.conditions?.find((x) => x.type === "MigrationRefused");
      assert.equal(c?.status, "True");
      assert.match(c?.message ?? "", why);
      assert.match(renderPlan(p), /^main: migration refused: node "node-b"/m);
      // Announced once: the stored condition already says it.
      const again = plan({ ...set, status: p.status }, [pod], facts);
      assert.deepEqual(again.steps[0].actions, []);
    });

  it("a fit node: the migration starts as before", () => {
    const p = plan(cs, [main], node("node-b"));
    assert.deepEqual(decisions(p), ["demo-0:migrate"]);
    assert.equal(targetNodeProblem(cs, node("node-b")), undefined);
  });

  it("nodeName cleared after a refusal: the condition turns False", () => {
    const refused = plan(cs, [main], { name: "node-b" });
    const cleared = plan({ ...cocoonSet({}), status: refused.status }, [main]);
    assert.equal(
      cleared.status?.conditions?.find((x) => x.type === "MigrationRefused")?.status,
      "False",
    );
  });
});

describe("a restore pod pinned to a target no longer asked for is replaced", () => {
  /** The restore's pod, unbound, pinned to `pin` by the migration's required affinity. */
  function pendingRestore(pin: string): Pod {
    const pod = live(buildAgentPod(cocoonSet({ nodeName: pin }), 0), false);
    delete pod.spec!.nodeName;
    return withAnnotations(pod, { [ANNOTATIONS.restoreFromHibernate]: "true" });
  }
  const migrating = (nodeName?: string): CocoonSet => ({
    ...cocoonSet(nodeName ? { nodeName } : {}),
    status: statusWith("Migrating"),
  });

  it("nodeName cleared: the pod pinned to the old target is deleted, then restored to any node", () => {
    const pod = pendingRestore("no-such-node");
    const p = plan(migrating(), [pod], undefined, tags(VM));
    assert.deepEqual(decisions(p), ["demo-0:migrate-retarget"]);
    assert.deepEqual(p.steps[0].actions, [
      { kind: "delete-pod", name: "demo-0", uid: "pod-uid-demo-0" },
    ]);
    const next = plan(migrating(), [], undefined, tags(VM));
    assert.deepEqual(decisions(next), ["demo-0:migrate-restore"]);
    const created = next.steps[0].actions.find((a) => a.kind === "create-pod");
    assert.ok(created?.kind === "create-pod");
    assert.equal(created.pod.spec.affinity, undefined, "no pin: any node of the pool");
  });

  it("nodeName set back to another node: the same replacement, then a restore pinned there", () => {
    const p = plan(migrating("node-a"), [pendingRestore("no-such-node")], undefined, tags(VM));
    assert.deepEqual(decisions(p), ["demo-0:migrate-retarget"]);
  });

  it("pinned to the target still asked for: it waits as before", () => {
    const p = plan(migrating("node-b"), [pendingRestore("node-b")], undefined, tags(VM));
    assert.deepEqual(decisions(p), ["demo-0:wait-migration"]);
  });
});

describe("issue 39, finding 7: a restore onto a target that cannot take it is said", () => {
  /** A release-suspended fleet being woken with `nodeName` set; its tag is there. */
  const waking = (phase: "Suspended" | "Waking"): CocoonSet => ({
    ...cocoonSet({ nodeName: "node-b", hibernatePolicy: "release" }),
    metadata: {
      ...cocoonSet().metadata,
      annotations: { [ANNOTATIONS.hibernatedOnNode]: "node-a" },
    },
    status: { ...statusWith("Running"), phase, readyAgents: 0 },
  });

  it("the executor reads the target before a restore with no main agent", () => {
    const cs = waking("Suspended");
    assert.equal(migrationStartTarget(cs, classifyPods(cs, [])), "node-b");
  });

  const unfit: [string, TargetNodeFacts, RegExp][] = [
    ["missing", { name: "node-b" }, /node "node-b" does not exist/],
    ["cordoned", node("node-b", { cordoned: true }), /node "node-b" is cordoned/],
  ];
  for (const [what, facts, why] of unfit)
    it(`${what}: no pod is pinned there; Waking, MigrationRefused (condition and one Warning) name the node`, () => {
      const p = plan(waking("Suspended"), [], facts, tags(VM));
      assert.deepEqual(decisions(p), ["demo-0:migrate-refused"]);
      assert.equal(p.mutatesPods, false);
      assert.equal(p.status?.phase, "Waking");
      const c = p.status?.conditions?.find((x) => x.type === "MigrationRefused");
      assert.equal(c?.status, "True");
      assert.match(c?.message ?? "", why);
      assert.match(c?.message ?? "", /the main agent is not restored there/);
      assert.deepEqual(
        p.steps[0].actions.map((a) => (a.kind === "event" ? `${a.type} ${a.reason}` : a.kind)),
        ["Warning MigrationRefused"],
      );
      // Past the deadline the Progressing condition names it too.
      const late = plan({ ...waking("Suspended"), status: p.status }, [], facts, tags(VM));
      assert.equal(late.status, undefined, "nothing new to write before the deadline");
      const stalled = planPass({
        cocoonSet: { ...waking("Suspended"), status: p.status },
        pods: [],
        nowMs: NOW + 600_000,
        snapshots: tags(VM),
        targetNode: facts,
      });
      const progressing = stalled.status?.conditions?.find((x) => x.type === "Progressing");
      assert.equal(progressing?.reason, "ProgressDeadlineExceeded");
      assert.match(progressing?.message ?? "", why);
    });

  it("the target cordoned mid-move: the unschedulable restore is named (WakeNoCapacity once, MigrationRefused True)", () => {
    const pod = live(buildAgentPod(cocoonSet({ nodeName: "node-b" }), 0), false);
    delete pod.spec!.nodeName;
    pod.status = {
      phase: "Pending",
      conditions: [
        {
          type: "PodScheduled",
          status: "False",
          reason: "Unschedulable",
          message: "0/3 nodes are available: 1 node(s) were unschedulable.",
        },
      ],
    };
    const restoring = withAnnotations(pod, { [ANNOTATIONS.restoreFromHibernate]: "true" });
    const cs: CocoonSet = { ...cocoonSet({ nodeName: "node-b" }), status: statusWith("Migrating") };
    const p = plan(cs, [restoring], undefined, tags(VM));
    assert.deepEqual(decisions(p), ["demo-0:wait-migration"]);
    const why =
      '[spec.nodeName] the restore pod demo-0 cannot be scheduled on node "node-b": 0/3 nodes are available: 1 node(s) were unschedulable.';
    assert.equal(p.steps[0].why, why);
    assert.deepEqual(
      p.steps[0].actions.map((a) => (a.kind === "event" ? [a.type, a.reason, a.message] : a.kind)),
      [["Warning", "WakeNoCapacity", why]],
    );
    assert.equal(p.status?.phase, "Migrating");
    const c = p.status?.conditions?.find((x) => x.type === "MigrationRefused");
    assert.equal(c?.status, "True");
    assert.equal(c?.message, why);
    const again = plan({ ...cs, status: p.status }, [restoring], undefined, tags(VM));
    assert.deepEqual(again.steps[0].actions, [], "announced once");
    assert.match(
      renderPlan(p),
      /^main: wait \(migration: the restore pod demo-0 cannot be scheduled/m,
    );
  });
});
