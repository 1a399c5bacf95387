// The node cache keeps a node cut down to what the migration and placement checks read
// (controller/node-kind.ts): both checks must answer the same on the cut-down node as on the
// whole one, whatever else the node carries.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { trimNodeForCache } from "../../../controller/node-kind.js";
import { targetNodeProblem } from "../../../engine/lifecycle/migrate.js";
import { placementProblem } from "../../../engine/capacity/placement.js";
import type { KubeObject } from "../../../engine/kube/index.js";
import type { CocoonSet } from "../../../engine/spec/index.js";

const word = fc.constantFrom("a", "b", "default", "gpu", "");
const effect = fc.constantFrom("NoSchedule", "NoExecute", "PreferNoSchedule");
const taint = fc.record(
  {
    key: fc.constantFrom("maintenance", "node.kubernetes.io/unschedulable", "x"),
    value: word,
    effect,
  },
  { requiredKeys: ["key", "effect"] },
);
const node = fc.record({
  apiVersion: fc.constant("v1"),
  kind: fc.constant("Node"),
  metadata: fc.record({
    name: fc.constant("n"),
    uid: fc.constant("u"),
    resourceVersion: fc.constant("7"),
    labels: fc.dictionary(
      fc.constantFrom("cocoonstack.io/pool", "cocoonstack.io/snapshot-class", "other"),
      word,
    ),
    annotations: fc.dictionary(fc.constantFrom("x", "y"), word),
    managedFields: fc.constant([{ manager: "kubelet" }]),
  }),
  spec: fc.record(
    { unschedulable: fc.boolean(), taints: fc.array(taint, { maxLength: 3 }), podCIDR: word },
    { requiredKeys: [] },
  ),
  status: fc.record({
    conditions: fc.array(
      fc.record({
        type: fc.constantFrom("Ready", "MemoryPressure"),
        status: fc.constantFrom("True", "False", "Unknown"),
        reason: word,
        message: word,
      }),
      { maxLength: 3 },
    ),
    allocatable: fc.constant({ cpu: "4", memory: "8Gi" }),
    images: fc.constant([{ names: ["busybox"] }]),
  }),
});
const fleet = fc.record({ pool: word, cpuClass: word });
const tolerations = fc.array(
  fc.record(
    {
      key: fc.constantFrom("maintenance", "node.kubernetes.io/unschedulable", "x"),
      operator: fc.constantFrom("Exists", "Equal"),
      value: word,
      effect,
    },
    { requiredKeys: [] },
  ),
  { maxLength: 2 },
);

describe("the node cache's cut-down node", () => {
  it("answers the migration and placement checks as the whole node does", () => {
    fc.assert(
      fc.property(node, fleet, tolerations, (whole, f, tol) => {
        const cs = {
          metadata: { name: "demo", namespace: "team" },
          spec: { nodePool: f.pool || undefined, snapshotCompatibilityClass: f.cpuClass },
        } as unknown as CocoonSet;
        const trimmed = trimNodeForCache(structuredClone(whole) as unknown as KubeObject);
        assert.equal(
          targetNodeProblem(cs, { name: "n", node: trimmed }),
          targetNodeProblem(cs, { name: "n", node: whole }),
        );
        const pod = { spec: { tolerations: tol } };
        assert.equal(
          placementProblem(pod, { name: "n", node: trimmed as never }),
          placementProblem(pod, { name: "n", node: whole }),
        );
      }),
    );
  });

  it("keeps nothing else", () => {
    const trimmed = trimNodeForCache({
      apiVersion: "v1",
      kind: "Node",
      metadata: {
        name: "n",
        uid: "u",
        resourceVersion: "7",
        labels: { a: "b" },
        annotations: { x: "y" },
      },
      spec: { podCIDR: "10.0.0.0/24" },
      status: {
        conditions: [{ type: "Ready", status: "True", reason: "KubeletReady" }],
        images: [],
      },
    });
    assert.deepEqual(trimmed, {
      apiVersion: "v1",
      kind: "Node",
      metadata: { name: "n", uid: "u", resourceVersion: "7", labels: { a: "b" } },
      spec: {},
      status: { conditions: [{ type: "Ready", status: "True" }] },
    });
  });
});
