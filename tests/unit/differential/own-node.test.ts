import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ownNodeRelative } from "../../differential/snapshot.js";

describe("differential snapshot: the pod's own node", () => {
  it("names the pod's own node by relation, in a message and deep in an affinity", () => {
    const affinity = {
      nodeAffinity: {
        preferredDuringSchedulingIgnoredDuringExecution: [
          {
            weight: 100,
            preference: {
              matchExpressions: [
                { key: "kubernetes.io/hostname", operator: "In", values: ["kwok-node-1"] },
              ],
            },
          },
        ],
      },
    };
    const out = ownNodeRelative(affinity, "kwok-node-1");
    assert.deepEqual(
      out.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]?.preference
        .matchExpressions[0]?.values,
      ["<the pod's node>"],
    );
    assert.equal(
      ownNodeRelative("restored from the node-local snapshot on kwok-node-1", "kwok-node-1"),
      "restored from the node-local snapshot on <the pod's node>",
    );
  });

  it("keeps other nodes, longer names that start with it, and everything when the pod is unbound", () => {
    assert.equal(ownNodeRelative("on kwok-node-0", "kwok-node-1"), "on kwok-node-0");
    assert.equal(ownNodeRelative("on kwok-node-10", "kwok-node-1"), "on kwok-node-10");
    assert.equal(ownNodeRelative("on kwok-node-1", undefined), "on kwok-node-1");
  });
});
