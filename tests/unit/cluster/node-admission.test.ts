// The simulated kubelet's admission decisions (cluster/node-admission.ts) and the
// `--node-allocatable` option's reading (cluster/local-cluster.ts).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseNodeAllocatable } from "../../../cluster/local-cluster.js";
import {
  type AdmissionPod,
  admissionDecision,
  admissionOrder,
  awaitsAdmission,
} from "../../../cluster/node-admission.js";

function pod(name: string, cpu: string, extra: Partial<AdmissionPod> = {}): AdmissionPod {
  return {
    metadata: { name, creationTimestamp: "2026-01-01T00:00:00Z", ...extra.metadata },
    spec: { nodeName: "n", containers: [{ resources: { requests: { cpu } } }] },
    status: extra.status,
  };
}

const node = { metadata: { name: "n" }, status: { allocatable: { cpu: "2", pods: "10" } } };

describe("admissionDecision", () => {
  it("admits a pod that fits", () => {
    assert.deepEqual(admissionDecision(pod("a", "1"), node, [pod("b", "1")]), { admit: true });
  });
  it("refuses one that does not, with the first shortfall's reason and the kubelet's message", () => {
    assert.deepEqual(admissionDecision(pod("a", "1500m"), node, [pod("b", "1")]), {
      admit: false,
      reason: "OutOfcpu",
      message:
        "Pod was rejected: Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000",
    });
  });
  it("refuses everything on a node with no allocatable listed", () => {
    const d = admissionDecision(pod("a", "1"), { metadata: { name: "n" } }, []);
    assert.equal(d.admit ? "" : d.reason, "OutOfpods");
  });
});

describe("awaitsAdmission and admissionOrder", () => {
  it("waits only for pending pods without a start time that are not being deleted", () => {
    assert.equal(awaitsAdmission(pod("a", "1")), true);
    assert.equal(awaitsAdmission(pod("a", "1", { status: { startTime: "t" } })), false);
    assert.equal(awaitsAdmission(pod("a", "1", { status: { phase: "Failed" } })), false);
    assert.equal(
      awaitsAdmission(pod("a", "1", { metadata: { name: "a", deletionTimestamp: "t" } })),
      false,
    );
  });
  it("admits by creation time, then name", () => {
    const at = (name: string, ts: string) =>
      pod(name, "1", { metadata: { name, creationTimestamp: ts } });
    const order = admissionOrder([
      at("c", "2026-01-01T00:00:02Z"),
      at("b", "2026-01-01T00:00:01Z"),
      at("a", "2026-01-01T00:00:02Z"),
    ]).map((p) => p.metadata.name);
    assert.deepEqual(order, ["b", "a", "c"]);
  });
});

describe("parseNodeAllocatable", () => {
  it("reads every-node and per-node values, later ones adding to earlier", () => {
    assert.deepEqual(
      parseNodeAllocatable(["cpu=4,memory=8Gi", "kwok-node-1:pods=20,example.com/gpu=2", "cpu=6"]),
      { "*": { cpu: "6", memory: "8Gi" }, "kwok-node-1": { pods: "20", "example.com/gpu": "2" } },
    );
  });
  for (const bad of ["cpu", "cpu=lots", "kwok-node-0:", "cpu=1=2", "=4", "cpu=4,,memory=1Gi"])
    it(`refuses ${JSON.stringify(bad)} by name`, () =>
      assert.throws(() => parseNodeAllocatable([bad]), /\[node-allocatable\]/));
});
