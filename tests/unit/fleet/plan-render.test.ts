import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { planToJSON, renderPlan } from "../../../engine/plan/index.js";
import { planPass } from "../../../engine/planner/index.js";
import type { Pod } from "../../../engine/spec/index.js";
import {
  NOW,
  cocoonSet,
  convergedPods,
  failed,
  mainPod,
  subPod,
  toolbox,
  toolboxPod,
  withHistory,
} from "./fixtures.js";

const at = (msAgo: number): string => new Date(NOW - msAgo).toISOString();

describe("renderPlan", () => {
  it("prints one line per member that would change, in slot order", () => {
    const cs = withHistory(
      cocoonSet({ toolboxes: [toolbox("web")] }, { replicas: 12 }),
      JSON.stringify({
        "2": { count: 4, lastDeleted: at(60_000) },
        "3": { count: 1, lastDeleted: at(60_000) },
        "7": { count: 3, lastDeleted: at(26_000) },
      }),
    );
    const wanted = new Set(["demo-0", "demo-2", "demo-3", "demo-7", "demo-13"]);
    const base = [...convergedPods(cs), subPod(cocoonSet({}, { replicas: 13 }), 13)];
    const pods: Pod[] = base
      .filter((p) => wanted.has(p.metadata?.name ?? "") || p.metadata?.name === "demo-web")
      .map((p) =>
        ["demo-2", "demo-3", "demo-7"].includes(p.metadata?.name ?? "") ? failed(p) : p,
      );
    const web = pods.findIndex((p) => p.metadata?.name === "demo-web");
    pods[web] = toolboxPod(cs, toolbox("web", { image: "ghcr.io/acme/web:0" }));
    const lines = renderPlan(planPass({ cocoonSet: cs, pods, nowMs: NOW })).split("\n");
    assert.deepEqual(lines, [
      "slot 1: create",
      "slot 2: dead-letter",
      "slot 3: rebuild (attempt 2/4)",
      "slot 4: create",
      "slot 5: create",
      "slot 6: create",
      "slot 7: wait 4s (backoff)",
      "slot 8: create",
      "slot 9: create",
      "slot 10: create",
      "slot 11: create",
      "slot 12: create",
      "slot 13: delete (scale-down)",
      "toolbox web: delete (drift: image)",
    ]);
  });

  it("prints the main agent's decision", () => {
    const cs = cocoonSet({}, { replicas: 2 });
    assert.equal(renderPlan(planPass({ cocoonSet: cs, pods: [], nowMs: NOW })), "main: create");
    assert.equal(
      renderPlan(planPass({ cocoonSet: cs, pods: [mainPod(cs, false)], nowMs: NOW })),
      "main: wait (not ready; sub-agents and toolboxes wait for it)",
    );
    assert.equal(
      renderPlan(planPass({ cocoonSet: cs, pods: [failed(mainPod(cs))], nowMs: NOW })),
      "main: failed (no automatic rebuild)",
    );
  });

  it("prints errors after the changes", () => {
    const cs = cocoonSet({ toolboxes: [toolbox("1")] });
    assert.equal(
      renderPlan(planPass({ cocoonSet: cs, pods: [], nowMs: NOW })),
      "error: [toolboxes[0].name] must not be an integer (it would collide with sub-agent slots)",
    );
  });

  it("prints `no changes` when the fleet is converged", () => {
    const cs = cocoonSet({ toolboxes: [toolbox("web")] }, { replicas: 3 });
    assert.equal(
      renderPlan(planPass({ cocoonSet: cs, pods: convergedPods(cs), nowMs: NOW })),
      "no changes",
    );
  });
});

describe("planToJSON", () => {
  it("summarises each change without pod bodies, in slot order", () => {
    const cs = withHistory(
      cocoonSet({}, { replicas: 2 }),
      JSON.stringify({ "2": { count: 2, lastDeleted: at(1_000) } }),
    );
    const pods = [mainPod(cs), failed(subPod(cs, 2))];
    const json = planToJSON(planPass({ cocoonSet: cs, pods, nowMs: NOW }));
    assert.deepEqual(json, {
      cocoonSet: { namespace: "team", name: "demo" },
      changes: [
        {
          target: "slot 1",
          role: "sub-agent",
          slot: 1,
          decision: "create",
          podName: "demo-1",
          summary: "create",
        },
        {
          target: "slot 2",
          role: "sub-agent",
          slot: 2,
          decision: "wait-backoff",
          podName: "demo-2",
          summary: "wait 4s (backoff)",
          waitMs: 4_000,
        },
      ],
      errors: [],
      requeueAfterMs: 0,
    });
  });

  it("uses null for no requeue", () => {
    const cs = cocoonSet();
    const json = planToJSON(planPass({ cocoonSet: cs, pods: convergedPods(cs), nowMs: NOW }));
    assert.equal(json.requeueAfterMs, null);
    assert.deepEqual(json.changes, []);
  });
});
