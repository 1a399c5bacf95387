// The capacity forecast as refusals in the style of the preview's quota refusals
// (engine/capacity/reasons.ts).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  capacityReasons,
  type ForecastNode,
  type ForecastPod,
  forecastCapacity,
} from "../../../engine/capacity/index.js";

const node = (name: string, allocatable: Record<string, string>): ForecastNode => ({
  metadata: { name, labels: { "cocoonstack.io/pool": "default" } },
  status: { allocatable },
});
const pod = (requests: Record<string, string>, nodeName?: string): ForecastPod => ({
  spec: {
    nodeName,
    nodeSelector: nodeName ? undefined : { "cocoonstack.io/pool": "default" },
    containers: [{ resources: { requests } }],
  },
});
const slots = (from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => String(from + i));

describe("capacityReasons", () => {
  it("names the node, its figures, the slots the deploy binds there and those it would refuse", () => {
    const f = forecastCapacity({
      nodes: [node("n1", { cpu: "12", pods: "110" })],
      pods: [pod({ cpu: "11500m" }, "n1")],
      creates: slots(13, 20).map((slot) => ({ slot, pod: pod({ cpu: "500m" }, "n1") })),
    });
    assert.deepEqual(capacityReasons(f), [
      "[slots.14] node n1 has cpu 11500m of 12 requested, and the pods this deploy binds to it add 4 (slots 13–20): the kubelet would refuse slots 14–20 (OutOfcpu), which the controller would rebuild until they dead-letter",
    ]);
  });

  it("says nothing when everything fits", () => {
    const f = forecastCapacity({
      nodes: [node("n1", { cpu: "12", pods: "110" })],
      pods: [],
      creates: [{ slot: "1", pod: pod({ cpu: "1" }, "n1") }],
    });
    assert.deepEqual(capacityReasons(f), []);
  });

  it("names the best node's shortfall for a main agent and its sub-agents no node can hold", () => {
    const f = forecastCapacity({
      nodes: [node("a", { cpu: "4", pods: "10" }), node("b", { cpu: "6", pods: "10" })],
      pods: [],
      creates: [
        { slot: "0", pod: pod({ cpu: "2" }) },
        ...slots(1, 3).map((slot) => ({ slot, pod: pod({ cpu: "2" }), follows: "0" })),
      ],
    });
    assert.deepEqual(capacityReasons(f), [
      "[slots.0] no node can hold slot 0 and the 3 pods bound next to it (slots 1–3) (2 nodes match its nodeSelector, affinity and tolerations); the best, b, has cpu 6 free, 8 requested",
    ]);
  });

  it("names a missing node, and a pod no node matches", () => {
    const f = forecastCapacity({
      nodes: [],
      pods: [],
      creates: [
        { slot: "1", pod: pod({}, "gone") },
        { slot: "0", pod: pod({ cpu: "1" }) },
      ],
    });
    assert.deepEqual(capacityReasons(f), [
      "[slots.1] node gone does not exist: the pods this deploy binds to it (slot 1) would never run",
      "[slots.0] no node matches the nodeSelector, affinity and tolerations of slot 0: the scheduler would leave it Pending",
    ]);
  });
});
