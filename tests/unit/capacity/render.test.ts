// The capacity forecast as `cocoonset plan` prints it (engine/capacity/render.ts), and how a
// deploy's creates become the forecast's input (engine/execute/capacity.ts).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  type ForecastNode,
  type ForecastPod,
  forecastCapacity,
  forecastToJSON,
  renderForecast,
  slotRanges,
} from "../../../engine/capacity/index.js";
import { forecastCreates } from "../../../engine/execute/index.js";
import type { Pod, PodManifest } from "../../../engine/spec/index.js";

const node = (
  name: string,
  allocatable: Record<string, string>,
  pool = "default",
): ForecastNode => ({
  metadata: { name, labels: { "cocoonstack.io/pool": pool } },
  status: { allocatable },
});
const pod = (cpu: string, nodeName?: string, selector?: Record<string, string>): ForecastPod => ({
  spec: { nodeName, nodeSelector: selector, containers: [{ resources: { requests: { cpu } } }] },
});

describe("slotRanges", () => {
  for (const [slots, want] of [
    [["13", "14", "15", "16"], "13–16"],
    [["3", "5", "6", "browser"], "3, 5–6, browser"],
    [["1"], "1"],
    [[], ""],
  ] as const)
    it(`${JSON.stringify(slots)} → ${want}`, () => assert.equal(slotRanges(slots), want));
});

describe("renderForecast", () => {
  it("prints one row per node: node, free, requested by this plan, verdict", () => {
    const f = forecastCapacity({
      nodes: [node("n1", { cpu: "12", pods: "110" }), node("n2", { cpu: "8", pods: "110" })],
      pods: [pod("11500m", "n1")],
      creates: [
        ...["13", "14", "15", "16"].map((slot) => ({ slot, pod: pod("1", "n1") })),
        { slot: "0", pod: pod("2", undefined, { "cocoonstack.io/pool": "default" }) },
        { slot: "1", pod: pod("2"), follows: "0" },
      ],
    });
    assert.equal(
      renderForecast(f),
      [
        "capacity forecast:",
        "NODE            FREE                REQUESTED BY THIS PLAN                             VERDICT",
        "n1              cpu 500m, pods 109  cpu 4, pods 4 (slots 13–16)                        refuses slots 13–16: cpu 500m free, 4 requested",
        "n2 (scheduler)  cpu 8, pods 110     cpu 4, pods 2 (slot 0 and 1 pod bound next to it)  fits (scheduler: 2 nodes match)",
      ].join("\n"),
    );
  });

  it("says when no node matches, and nothing at all when the plan creates no pod", () => {
    const f = forecastCapacity({
      nodes: [node("n1", { cpu: "1", pods: "1" }, "other")],
      pods: [],
      creates: [{ slot: "0", pod: pod("1", undefined, { "cocoonstack.io/pool": "default" }) }],
    });
    assert.match(
      renderForecast(f),
      /^\(scheduler\) +- +cpu 1, pods 1 \(slot 0\) +no node matches its nodeSelector, affinity and tolerations$/m,
    );
    assert.equal(renderForecast(forecastCapacity({ nodes: [], pods: [], creates: [] })), "");
  });

  it("gives JSON with quantities as text", () => {
    const f = forecastCapacity({
      nodes: [node("n1", { cpu: "2", memory: "1Gi", pods: "5" })],
      pods: [],
      creates: [{ slot: "1", pod: pod("2500m", "n1") }],
    });
    assert.deepEqual(forecastToJSON(f), {
      fits: false,
      nodes: [
        {
          node: "n1",
          found: true,
          allocatable: { cpu: "2", memory: "1Gi", pods: "5" },
          free: { cpu: "2", memory: "1Gi", pods: "5" },
          requested: { pods: "1", cpu: "2500m" },
          slots: ["1"],
          refused: ["1"],
          short: [{ resource: "cpu", free: "2", requested: "2500m" }],
        },
      ],
      placements: [],
    });
  });
});

describe("forecastCreates", () => {
  const manifest = (name: string, role: string, nodeName?: string): PodManifest =>
    ({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name, labels: { "cocoonset.cocoonstack.io/role": role }, annotations: {} },
      spec: { containers: [], ...(nodeName && { nodeName }) },
    }) as unknown as PodManifest;
  const live = (name: string, uid: string) => ({ metadata: { name, uid } }) as Pod;

  it("makes the sub-agents of a new main agent follow it, and frees the pods deleted or recreated", () => {
    const { creates, freed } = forecastCreates(
      {
        creates: [
          { slot: "0", pod: manifest("f-0", "main") },
          { slot: "1", pod: manifest("f-1", "sub-agent") },
          { slot: "browser", pod: manifest("f-browser", "toolbox") },
        ],
        removed: [live("f-7", "u7")],
        refusals: [],
      },
      [live("f-0", "u0"), live("f-7", "u7"), live("f-2", "u2")],
    );
    assert.deepEqual(
      creates.map((c) => [c.slot, c.follows]),
      [
        ["0", undefined],
        ["1", "0"],
        ["browser", undefined],
      ],
    );
    assert.deepEqual([...freed].sort(), ["u0", "u7"]);
  });

  it("leaves sub-agents bound to a live main agent's node bound", () => {
    const { creates } = forecastCreates(
      {
        creates: [{ slot: "3", pod: manifest("f-3", "sub-agent", "n1") }],
        removed: [],
        refusals: [],
      },
      [],
    );
    assert.deepEqual(
      creates.map((c) => [c.slot, c.follows, c.pod.spec?.nodeName]),
      [["3", undefined, "n1"]],
    );
  });
});
