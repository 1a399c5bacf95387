import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Plan, PlanAction, PlanStep } from "../../../engine/plan/index.js";
import { deriveStatus } from "../../../engine/plan/status.js";
import { planPass } from "../../../engine/planner/index.js";
import type { CocoonSet, Pod } from "../../../engine/spec/index.js";
import {
  NOW,
  convergedPods,
  deadLettered,
  failed,
  mainPod,
  cocoonSet,
  subPod,
  toolbox,
  toolboxPod,
  withAnnotations,
  withHistory,
} from "./fixtures.js";

const at = (msAgo: number): string => new Date(NOW - msAgo).toISOString();

function plan(cs: CocoonSet, pods: Pod[], nowMs = NOW): Plan {
  return planPass({ cocoonSet: cs, pods, nowMs });
}

function slotStep(p: Plan, slot: number): PlanStep | undefined {
  return p.steps.find((s) => s.target.role === "sub-agent" && s.target.slot === slot);
}

function kinds(step: PlanStep | undefined): string[] {
  return (step?.actions ?? []).map((a) => a.kind);
}

function replacePod(pods: Pod[], name: string, next: Pod): Pod[] {
  return pods.map((p) => (p.metadata?.name === name ? next : p));
}

function historyOf(action: PlanAction | undefined): unknown {
  assert.equal(action?.kind, "write-history");
  return action.kind === "write-history" ? JSON.parse(action.value) : undefined;
}

const fleet = cocoonSet({ toolboxes: [toolbox("web")] }, { replicas: 3 });

describe("main agent", () => {
  it("a missing main agent is created first and nothing else is planned", () => {
    const p = plan(fleet, []);
    assert.equal(p.steps.length, 1);
    const [step] = p.steps;
    assert.deepEqual(step.target, { role: "main", slot: 0 });
    assert.equal(step.decision, "create");
    const [action] = step.actions;
    assert.equal(action.kind, "create-pod");
    assert.equal(action.kind === "create-pod" && action.onAlreadyExists, "retry-later");
    assert.equal(action.kind === "create-pod" && action.pod.metadata.name, "demo-0");
    assert.equal(p.requeueAfterMs, 0);
    assert.equal(p.status, undefined, "no status write in a pass that creates");
  });

  it("a drifted main agent is deleted (recreated next pass) and nothing else is planned", () => {
    const old = mainPod(cocoonSet({}, { image: "old" }));
    const p = plan(fleet, [old]);
    assert.deepEqual(
      p.steps.map((s) => [s.decision, s.drift, kinds(s)]),
      [["delete-drifted", ["image"], ["delete-pod"]]],
    );
    assert.deepEqual(p.steps[0].actions[0], {
      kind: "delete-pod",
      name: "demo-0",
      uid: "pod-uid-demo-0",
    });
    assert.equal(p.requeueAfterMs, 0);
  });

  it("a terminal main agent is not rebuilt: a Warning event, phase Failed, no requeue", () => {
    const p = plan(fleet, [failed(mainPod(fleet)), subPod(fleet, 1)]);
    assert.equal(p.steps.length, 1);
    assert.equal(p.steps[0].decision, "main-failed");
    assert.deepEqual(p.steps[0].actions, [
      {
        kind: "event",
        type: "Warning",
        reason: "MainAgentFailed",
        message: "main agent pod demo-0 failed (phase Failed); it is not rebuilt automatically",
      },
    ]);
    assert.equal(p.requeueAfterMs, undefined);
    assert.equal(p.status?.phase, "Failed");
  });

  it("a main agent failed by its lifecycle state: reason PodLifecycleFailed, the lifecycle message", () => {
    const main = withAnnotations(mainPod(fleet), {
      "vm.cocoonstack.io/lifecycle-state": "failed",
      "vm.cocoonstack.io/lifecycle-state-message": "disk full",
    });
    const [action] = plan(fleet, [main]).steps[0].actions;
    assert.equal(action.kind === "event" && action.reason, "PodLifecycleFailed");
    assert.equal(
      action.kind === "event" && action.message,
      "main agent pod demo-0 failed (disk full); it is not rebuilt automatically",
    );
    // The lifecycle report wins over the phase, as in cocoon-operator.
    const [both] = plan(fleet, [failed(main)]).steps[0].actions;
    assert.equal(both.kind === "event" && both.reason, "PodLifecycleFailed");
  });

  it("a terminal main agent that also drifted is replaced, since it no longer matches", () => {
    const p = plan(fleet, [failed(mainPod(cocoonSet({}, { image: "old" })))]);
    assert.equal(p.steps[0].decision, "delete-drifted");
  });

  it("a main agent that is not Ready makes everything wait, retries in 5 s, phase Pending", () => {
    const p = plan(fleet, [mainPod(fleet, false)]);
    assert.deepEqual(
      p.steps.map((s) => [s.decision, s.actions.length]),
      [["wait-main", 0]],
    );
    assert.equal(p.requeueAfterMs, 5_000);
    assert.equal(p.status?.phase, "Pending");
  });

  it("a main agent Ready again after the fleet Failed emits RecoveredFromFailure", () => {
    const cs = {
      ...fleet,
      status: {
        ...deriveStatus({ cocoonSet: fleet, pods: [], nowMs: NOW }),
        phase: "Failed" as const,
      },
    };
    const p = plan(cs, convergedPods(fleet));
    assert.equal(p.steps.length, 1);
    assert.equal(p.steps[0].decision, "recovered");
    assert.deepEqual(p.steps[0].actions, [
      {
        kind: "event",
        type: "Normal",
        reason: "RecoveredFromFailure",
        message: "main agent pod demo-0 is Ready again",
      },
    ]);
    assert.equal(p.status?.phase, "Running");
  });

  it("a Failed fleet whose replacement main is not Ready yet keeps Failed (no status write)", () => {
    const cs = {
      ...fleet,
      status: {
        ...deriveStatus({ cocoonSet: fleet, pods: [], nowMs: NOW }),
        phase: "Failed" as const,
      },
    };
    const p = plan(cs, [mainPod(fleet, false)]);
    assert.deepEqual(
      p.steps.map((s) => s.decision),
      ["wait-main"],
    );
    assert.equal(p.status, undefined, "Pending must not overwrite Failed before the recovery");
  });

  it("announces the recovery in the quiet pass that clears Failed, not while pods still change", () => {
    const cs = {
      ...fleet,
      status: {
        ...deriveStatus({ cocoonSet: fleet, pods: [], nowMs: NOW }),
        phase: "Failed" as const,
      },
    };
    const busy = plan(cs, convergedPods(fleet).slice(0, 2));
    assert.equal(busy.mutatesPods, true);
    assert.equal(
      busy.steps.some((s) => s.decision === "recovered"),
      false,
    );
  });
});

describe("sub-agent fan-out", () => {
  it("creates every missing slot in 1..replicas, forked from the main VM and bound to its node (its recorded VM, whatever its annotation says)", () => {
    const main = withAnnotations(mainPod(fleet), {
      "vm.cocoonstack.io/name": "vk-team-demo-0-renamed",
    });
    main.spec!.nodeName = "node-q";
    const p = plan(fleet, [main, subPod(fleet, 2), toolboxPod(fleet, toolbox("web"))]);
    const creates = p.steps.filter((s) => s.decision === "create");
    assert.deepEqual(
      creates.map((s) => s.target),
      [
        { role: "sub-agent", slot: 1 },
        { role: "sub-agent", slot: 3 },
      ],
    );
    for (const step of creates) {
      assert.equal(step.concurrent, true);
      const [action] = step.actions;
      assert.ok(action.kind === "create-pod");
      assert.equal(action.onAlreadyExists, "success");
      assert.equal(action.pod.spec.nodeName, "node-q");
      assert.equal(
        action.pod.metadata.annotations["vm.cocoonstack.io/fork-from"],
        "vk-team-demo-0",
      );
    }
    assert.equal(p.fanOut, 8);
    assert.equal(p.requeueAfterMs, 0);
  });

  it("passes a custom fan-out cap through to the executor", () => {
    assert.equal(planPass({ cocoonSet: fleet, pods: [], nowMs: NOW, fanOut: 2 }).fanOut, 2);
  });
});

describe("sub-agent triage", () => {
  const cs = cocoonSet({}, { replicas: 3 });
  const pods = convergedPods(cs);

  it("a dead-lettered slot that still matches the spec is left alone", () => {
    const dl = deadLettered(failed(subPod(cs, 2)));
    const history = withHistory(cs, JSON.stringify({ "2": { count: 4, lastDeleted: at(60_000) } }));
    const p = plan(history, replacePod(pods, "demo-2", dl));
    assert.deepEqual(p.steps, []);
    assert.equal(p.requeueAfterMs, undefined);
  });

  it("a dead-lettered slot whose spec changed has its history cleared first, then is deleted", () => {
    const dl = deadLettered(failed(subPod(cs, 2)));
    const value = JSON.stringify({
      "1": { count: 1, lastDeleted: at(60_000) },
      "2": { count: 4, lastDeleted: at(60_000) },
    });
    const edited = withHistory(
      cocoonSet({}, { replicas: 3, image: "ghcr.io/acme/agent:2" }),
      value,
    );
    const p = plan(edited, replacePod(replacePod(pods, "demo-0", mainPod(edited)), "demo-2", dl));
    const step = slotStep(p, 2);
    assert.equal(step?.decision, "reset-dead-letter");
    assert.deepEqual(kinds(step), ["write-history", "delete-pod"]);
    assert.deepEqual(historyOf(step?.actions[0]), { "1": { count: 1, lastDeleted: at(60_000) } });
    assert.equal(p.history.has(2), false);
  });

  it("a dead-lettered slot with no history entry left is just deleted on drift", () => {
    const dl = deadLettered(subPod(cs, 2));
    const edited = cocoonSet({}, { replicas: 3, os: "android" });
    const p = plan(edited, replacePod(replacePod(pods, "demo-0", mainPod(edited)), "demo-2", dl));
    assert.deepEqual(kinds(slotStep(p, 2)), ["delete-pod"]);
  });

  it("a terminal slot with 4 rebuilds is marked dead-letter, counted and reported, not deleted", () => {
    const withFour = withHistory(
      cs,
      JSON.stringify({ "2": { count: 4, lastDeleted: at(60_000) } }),
    );
    const p = plan(withFour, replacePod(pods, "demo-2", failed(subPod(cs, 2))));
    const step = slotStep(p, 2);
    assert.equal(step?.decision, "dead-letter");
    assert.deepEqual(step?.actions, [
      {
        kind: "annotate-pod",
        name: "demo-2",
        uid: "pod-uid-demo-2",
        annotations: { "cocoonset.cocoonstack.io/dead-letter": "true" },
      },
      { kind: "count-metric", metric: "subagent_dead_letter_total" },
      {
        kind: "event",
        type: "Warning",
        reason: "SubAgentDeadLetter",
        message: "slot 2 exhausted 4 rebuilds; pod demo-2 left in dead-letter",
      },
    ]);
    assert.equal(p.mutatesPods, false);
    assert.equal(p.requeueAfterMs, undefined);
  });

  it("a terminal slot still in its backoff waits and reports the remaining wait as the requeue", () => {
    const two = withHistory(cs, JSON.stringify({ "1": { count: 2, lastDeleted: at(1_500) } }));
    const p = plan(two, replacePod(pods, "demo-1", failed(subPod(cs, 1))));
    const step = slotStep(p, 1);
    assert.equal(step?.decision, "wait-backoff");
    assert.equal(step?.waitMs, 3_500);
    assert.deepEqual(step?.actions, []);
    assert.equal(p.requeueAfterMs, 3_500);
  });

  it("a terminal slot past its backoff is rebuilt and the history is written before the delete", () => {
    const two = withHistory(cs, JSON.stringify({ "2": { count: 2, lastDeleted: at(5_000) } }));
    const p = plan(two, replacePod(pods, "demo-2", failed(subPod(cs, 2))));
    const step = slotStep(p, 2);
    assert.equal(step?.decision, "rebuild");
    assert.equal(step?.attempt, 3);
    assert.deepEqual(kinds(step), [
      "write-history",
      "delete-pod",
      "count-metric",
      "event",
      "create-pod",
    ]);
    assert.deepEqual(historyOf(step?.actions[0]), {
      "2": { count: 3, lastDeleted: new Date(NOW).toISOString() },
    });
    assert.deepEqual(step?.actions.slice(1, 4), [
      { kind: "delete-pod", name: "demo-2", uid: "pod-uid-demo-2" },
      { kind: "count-metric", metric: "subagent_rebuild_total" },
      {
        kind: "event",
        type: "Normal",
        reason: "SubAgentRebuilding",
        message: "slot 2 attempt 3/4",
      },
    ]);
    assert.equal(p.requeueAfterMs, 0);
  });

  it("a rebuild's step ends with its replacement, created only if the delete removed the pod at once", () => {
    const p = plan(cs, replacePod(pods, "demo-2", failed(subPod(cs, 2))));
    const step = slotStep(p, 2);
    const create = step?.actions.at(-1);
    assert.equal(create?.kind, "create-pod");
    if (create?.kind !== "create-pod") return;
    assert.equal(create.afterRemoval, true);
    assert.equal(create.onAlreadyExists, "success");
    // The same pod the next pass would create for the empty slot.
    const next = plan(
      cs,
      pods.filter((pod) => pod.metadata?.name !== "demo-2"),
    );
    const later = slotStep(next, 2)?.actions[0];
    assert.equal(later?.kind, "create-pod");
    assert.deepEqual(create.pod, later?.kind === "create-pod" ? later.pod : undefined);
    // The slot's create log starts afresh with it, as with the next pass's create.
    assert.deepEqual(step?.createRecord, { createdMs: NOW, vanished: 0 });
    assert.equal(step?.concurrent, undefined, "run in order, after its own delete");
  });

  it("the first rebuild of a slot has no backoff and is attempt 1/4", () => {
    const p = plan(cs, replacePod(pods, "demo-3", failed(subPod(cs, 3))));
    assert.equal(slotStep(p, 3)?.attempt, 1);
  });

  it("a slot whose VM lifecycle state is failed is rebuilt like a Failed pod", () => {
    const sub = withAnnotations(subPod(cs, 1), { "vm.cocoonstack.io/lifecycle-state": "failed" });
    assert.equal(slotStep(plan(cs, replacePod(pods, "demo-1", sub)), 1)?.decision, "rebuild");
  });

  it("later slots in the same pass see the history written by earlier slots", () => {
    const broken = replacePod(
      replacePod(pods, "demo-1", failed(subPod(cs, 1))),
      "demo-3",
      failed(subPod(cs, 3)),
    );
    const p = plan(cs, broken);
    const now = new Date(NOW).toISOString();
    assert.deepEqual(historyOf(slotStep(p, 3)?.actions[0]), {
      "1": { count: 1, lastDeleted: now },
      "3": { count: 1, lastDeleted: now },
    });
    assert.deepEqual([...p.history.keys()], [1, 3]);
  });

  it("a terminal slot is triaged as terminal even when it also drifted", () => {
    const edited = cocoonSet({}, { replicas: 3, image: "new" });
    const p = plan(edited, replacePod(convergedPods(edited), "demo-1", failed(subPod(cs, 1))));
    assert.equal(slotStep(p, 1)?.decision, "rebuild");
  });

  it("a drifted healthy slot is deleted for recreation without a history entry", () => {
    const old = subPod(cocoonSet({}, { replicas: 3, network: "old" }), 2);
    const p = plan(cs, replacePod(pods, "demo-2", old));
    const step = slotStep(p, 2);
    assert.equal(step?.decision, "delete-drifted");
    assert.deepEqual(step?.drift, ["network"]);
    assert.deepEqual(kinds(step), ["delete-pod"]);
    assert.equal(p.history.size, 0);
  });

  it("a healthy slot that is merely not Ready yet is left alone", () => {
    const starting = subPod(cs, 1);
    starting.status = { phase: "Pending" };
    assert.deepEqual(plan(cs, replacePod(pods, "demo-1", starting)).steps, []);
  });
});

describe("scale-down", () => {
  it("deletes every sub-agent above replicas in ascending slot order", () => {
    const big = cocoonSet({}, { replicas: 12 });
    const small = cocoonSet({}, { replicas: 2 });
    const pods = convergedPods(big).filter((p) =>
      ["demo-0", "demo-1", "demo-2", "demo-3", "demo-10", "demo-4"].includes(
        p.metadata?.name ?? "",
      ),
    );
    const p = plan(small, pods.reverse());
    assert.deepEqual(
      p.steps.map((s) => [s.decision, s.podName]),
      [
        ["scale-down", "demo-3"],
        ["scale-down", "demo-4"],
        ["scale-down", "demo-10"],
      ],
    );
    assert.equal(p.requeueAfterMs, 0);
  });

  it("history writes drop the slots above replicas", () => {
    const cs = withHistory(
      cocoonSet({}, { replicas: 1 }),
      JSON.stringify({ "5": { count: 2, lastDeleted: at(60_000) } }),
    );
    const p = plan(cs, [mainPod(cs), failed(subPod(cs, 1))]);
    assert.deepEqual(historyOf(slotStep(p, 1)?.actions[0]), {
      "1": { count: 1, lastDeleted: new Date(NOW).toISOString() },
    });
  });
});

describe("toolboxes", () => {
  const web = toolbox("web");
  const db = toolbox("db");
  const cs = cocoonSet({ toolboxes: [web, db] });

  it("invalid names fail the pass before any mutation", () => {
    const bad = cocoonSet({ toolboxes: [toolbox("7"), web, toolbox("web")] });
    const p = plan(bad, []);
    assert.deepEqual(p.steps, []);
    assert.deepEqual(
      p.refusals.map((r) => r.message),
      [
        "[toolboxes[0].name] must not be an integer (it would collide with sub-agent slots)",
        '[toolboxes[2].name] duplicate toolbox name "web"',
      ],
    );
    assert.equal(p.status, undefined);
    assert.equal(p.mutatesPods, false);
  });

  it("a pod named like a toolbox but not this CocoonSet's toolbox is a conflict error", () => {
    const squatter = toolboxPod(cocoonSet(), web);
    squatter.metadata!.ownerReferences = [];
    const pods = [mainPod(cs), squatter, toolboxPod(cs, db)];
    const p = plan(cs, pods);
    assert.deepEqual(
      p.refusals.map((r) => r.message),
      ["toolbox web: pod demo-web already exists and is not this CocoonSet's toolbox"],
    );
    assert.deepEqual(p.steps, [], "the squatter is neither replaced nor deleted");
  });

  it("a missing toolbox is created, and AlreadyExists is checked for ownership", () => {
    const p = plan(cs, [mainPod(cs), toolboxPod(cs, db)]);
    assert.equal(p.steps.length, 1);
    const [action] = p.steps[0].actions;
    assert.ok(action.kind === "create-pod");
    assert.equal(action.onAlreadyExists, "check-owner");
    assert.equal(action.pod.metadata.name, "demo-web");
  });

  it("a terminal toolbox is deleted at once, with no backoff and no dead-letter", () => {
    const history = withHistory(cs, JSON.stringify({ "1": { count: 4, lastDeleted: at(0) } }));
    const p = plan(history, [mainPod(cs), failed(toolboxPod(cs, web)), toolboxPod(cs, db)]);
    assert.deepEqual(
      p.steps.map((s) => [s.target, s.decision, kinds(s)]),
      [[{ role: "toolbox", name: "web" }, "delete-terminal", ["delete-pod"]]],
    );
  });

  it("a drifted toolbox is deleted at once", () => {
    const old = toolboxPod(cs, { ...web, os: "windows" });
    const p = plan(cs, [mainPod(cs), old, toolboxPod(cs, db)]);
    assert.deepEqual(
      p.steps.map((s) => [s.decision, s.drift]),
      [["delete-drifted", ["os"]]],
    );
  });

  it("extra toolboxes are deleted in name order", () => {
    const wide = cocoonSet({ toolboxes: [toolbox("zeta"), toolbox("alpha"), web] });
    const p = plan(cocoonSet({ toolboxes: [web] }), [
      mainPod(wide),
      toolboxPod(wide, toolbox("zeta")),
      toolboxPod(wide, web),
      toolboxPod(wide, toolbox("alpha")),
    ]);
    assert.deepEqual(
      p.steps.map((s) => [s.decision, s.podName]),
      [
        ["delete-extra", "demo-alpha"],
        ["delete-extra", "demo-zeta"],
      ],
    );
  });
});

describe("result of one pass", () => {
  const cs = cocoonSet({ toolboxes: [toolbox("web")] }, { replicas: 2 });

  it("a converged fleet plans nothing, needs no requeue and writes status once", () => {
    const pods = convergedPods(cs);
    const first = plan(cs, pods);
    assert.deepEqual(first.steps, []);
    assert.equal(first.requeueAfterMs, undefined);
    assert.equal(first.status?.phase, "Running");
    const again = plan({ ...cs, status: first.status }, pods, NOW + 60_000);
    assert.equal(again.status, undefined, "an unchanged status is not written again");
  });

  it("requeues after the smallest remaining backoff when nothing was created or deleted", () => {
    const cs3 = withHistory(
      cocoonSet({}, { replicas: 3 }),
      JSON.stringify({
        "1": { count: 3, lastDeleted: at(2_000) },
        "3": { count: 2, lastDeleted: at(2_000) },
      }),
    );
    const pods = convergedPods(cs3).map((p) =>
      ["demo-1", "demo-3"].includes(p.metadata?.name ?? "") ? failed(p) : p,
    );
    const p = plan(cs3, pods);
    assert.deepEqual(
      p.steps.map((s) => s.waitMs),
      [28_000, 3_000],
    );
    assert.equal(p.requeueAfterMs, 3_000);
    assert.equal(p.status?.phase, "Scaling");
  });

  it("requeues at once when anything is created or deleted, even with a backoff pending", () => {
    const cs3 = withHistory(
      cocoonSet({}, { replicas: 3 }),
      JSON.stringify({ "1": { count: 3, lastDeleted: at(2_000) } }),
    );
    const pods = [mainPod(cs3), failed(subPod(cs3, 1)), subPod(cs3, 2)];
    const p = plan(cs3, pods);
    assert.equal(p.mutatesPods, true);
    assert.equal(p.requeueAfterMs, 0);
    assert.equal(p.status, undefined);
  });

  it("never acts on pods of another owner, even ones that look like extra slots", () => {
    const stranger = subPod(cs, 9);
    stranger.metadata!.ownerReferences = [
      { ...stranger.metadata!.ownerReferences![0], uid: "someone-else" },
    ];
    const p = plan(cs, [...convergedPods(cs), stranger]);
    assert.deepEqual(p.steps, []);
  });
});

describe("generation stamps", () => {
  const older: CocoonSet = { ...fleet, metadata: { ...fleet.metadata, generation: 2 } };

  it("stamps every kept pod whose generation annotation lags the CocoonSet's", () => {
    const pods = [mainPod(older), subPod(older, 1), subPod(fleet, 2)];
    assert.deepEqual(plan(fleet, pods).generationStamps, [
      { name: "demo-0", uid: "pod-uid-demo-0", generation: "3" },
      { name: "demo-1", uid: "pod-uid-demo-1", generation: "3" },
    ]);
  });

  it("leaves alone pods the plan deletes, terminating pods and pods of other owners", () => {
    const drifted = {
      ...older,
      spec: { ...older.spec, agent: { ...older.spec.agent, image: "old" } },
    };
    const terminating = subPod(older, 1);
    terminating.metadata = { ...terminating.metadata, deletionTimestamp: "2025-06-01T11:00:00Z" };
    const foreign = subPod(older, 2);
    foreign.metadata = {
      ...foreign.metadata,
      ownerReferences: [{ ...foreign.metadata!.ownerReferences![0], uid: "someone-else" }],
    };
    const p = plan(fleet, [mainPod(drifted), terminating, foreign]);
    assert.equal(p.steps[0]?.decision, "delete-drifted");
    assert.deepEqual(p.generationStamps, []);
  });

  it("stamps nothing once every pod carries the current generation", () => {
    assert.deepEqual(plan(fleet, [mainPod(fleet), subPod(fleet, 1)]).generationStamps, []);
  });
});
