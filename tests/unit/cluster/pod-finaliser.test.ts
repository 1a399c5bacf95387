// Which pods the embedded cluster's pod finaliser deletes: only terminating pods bound to a
// simulated node whose final (grace 0) delete has not been accepted yet.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { needsFinalDelete, type TerminatingPod } from "../../../cluster/pod-finaliser.js";

const nodes = new Set(["kwok-node-0"]);

function pod(
  meta: Partial<TerminatingPod["metadata"]>,
  nodeName: string | null = "kwok-node-0",
): TerminatingPod {
  return {
    metadata: { name: "p", namespace: "ns", uid: "u1", ...meta },
    spec: nodeName === null ? {} : { nodeName },
  };
}

const stamp = "2026-12-01T00:00:00Z";

describe("needsFinalDelete", () => {
  const table: [string, TerminatingPod, boolean][] = [
    ["a running pod: no", pod({}), false],
    [
      "terminating on a simulated node: yes",
      pod({ deletionTimestamp: stamp, deletionGracePeriodSeconds: 30 }),
      true,
    ],
    ["terminating with no grace recorded: yes", pod({ deletionTimestamp: stamp }), true],
    [
      "final delete already accepted (grace 0, held by a finalizer): no",
      pod({ deletionTimestamp: stamp, deletionGracePeriodSeconds: 0 }),
      false,
    ],
    [
      "terminating but not bound: no (the apiserver removes it)",
      pod({ deletionTimestamp: stamp }, null),
      false,
    ],
    [
      "terminating on a node this cluster does not simulate: no",
      pod({ deletionTimestamp: stamp }, "real-node"),
      false,
    ],
    [
      "no uid to put in the precondition: no",
      pod({ deletionTimestamp: stamp, uid: undefined }),
      false,
    ],
  ];
  for (const [name, p, want] of table) {
    it(name, () => assert.equal(needsFinalDelete(p, nodes), want));
  }
});
