import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { parseBindAddress } from "../../../controller/health.js";
import { microTime } from "../../../controller/events.js";
import {
  cocoonSetChangeMatters,
  ownerKeyOfPod,
  podChangeMatters,
} from "../../../controller/cocoonset-controller.js";
import {
  controllerClusterRole,
  controllerLeaseRole,
  controllerRole,
  controllerRules,
  leaderElectionRules,
  namespacedRules,
  type PolicyRule,
} from "../../../controller/rbac.js";
import { formatKey, parseKey } from "../../../controller/types.js";
import type { KubeObject } from "../../../engine/kube/index.js";

function pod(over: Partial<KubeObject["metadata"]> = {}, status: Record<string, unknown> = {}) {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "fleet-1", namespace: "ns", labels: { a: "1" }, ...over },
    status: {
      phase: "Running",
      conditions: [{ type: "Ready", status: "True" }],
      ...status,
    },
  } as KubeObject;
}

describe("pod to CocoonSet mapping", () => {
  test("uses the controller ownerReference of kind CocoonSet", () => {
    const p = pod({
      labels: { "cocoonset.cocoonstack.io/name": "by-label" },
      ownerReferences: [
        { apiVersion: "v1", kind: "Pod", name: "other", uid: "1", controller: false },
        {
          apiVersion: "cocoonset.cocoonstack.io/v1",
          kind: "CocoonSet",
          name: "fleet",
          uid: "2",
          controller: true,
        },
      ],
    });
    assert.deepEqual(ownerKeyOfPod(p), { namespace: "ns", name: "fleet" });
  });

  test("falls back to the name label, else nothing", () => {
    assert.deepEqual(ownerKeyOfPod(pod({ labels: { "cocoonset.cocoonstack.io/name": "f" } })), {
      namespace: "ns",
      name: "f",
    });
    assert.equal(ownerKeyOfPod(pod()), undefined);
    const jobOwned = pod({
      ownerReferences: [
        { apiVersion: "batch/v1", kind: "Job", name: "j", uid: "3", controller: true },
      ],
    });
    assert.equal(ownerKeyOfPod(jobOwned), undefined);
  });
});

describe("which changes enqueue", () => {
  const base = pod({ annotations: { x: "1" } });
  const cases: [string, KubeObject, boolean][] = [
    ["only the resourceVersion", pod({ annotations: { x: "1" }, resourceVersion: "9" }), false],
    ["phase", pod({ annotations: { x: "1" } }, { phase: "Failed" }), true],
    [
      "Ready flip",
      pod({ annotations: { x: "1" } }, { conditions: [{ type: "Ready", status: "False" }] }),
      true,
    ],
    [
      "deletionTimestamp",
      pod({ annotations: { x: "1" }, deletionTimestamp: "2026-01-01T00:00:00Z" }),
      true,
    ],
    ["a label", pod({ annotations: { x: "1" }, labels: { a: "2" } }), true],
    ["an annotation", pod({ annotations: { x: "1", y: "2" } }), true],
  ];
  for (const [what, next, expected] of cases) {
    test(`pod update of ${what} → ${expected ? "enqueue" : "ignore"}`, () => {
      assert.equal(podChangeMatters(base, next), expected);
    });
  }

  test("CocoonSet updates enqueue on generation or deletion, not on status writes", () => {
    const cs = (gen: number, del?: string): KubeObject => ({
      metadata: { name: "f", namespace: "ns", generation: gen, deletionTimestamp: del },
    });
    assert.equal(cocoonSetChangeMatters(cs(1), cs(1)), false);
    assert.equal(cocoonSetChangeMatters(cs(1), cs(2)), true);
    assert.equal(cocoonSetChangeMatters(cs(1), cs(1, "2026-01-01T00:00:00Z")), true);
  });
});

describe("bind addresses", () => {
  const table: [string, ReturnType<typeof parseBindAddress> | "error"][] = [
    [":8080", { host: undefined, port: 8080 }],
    ["127.0.0.1:8081", { host: "127.0.0.1", port: 8081 }],
    ["[::1]:9000", { host: "::1", port: 9000 }],
    ["localhost:0", { host: "localhost", port: 0 }],
    ["0", undefined],
    ["8080", "error"],
    [":70000", "error"],
    ["host:", "error"],
  ];
  for (const [text, expected] of table) {
    test(`"${text}"`, () => {
      if (expected === "error") assert.throws(() => parseBindAddress(text), /not a bind address/);
      else assert.deepEqual(parseBindAddress(text), expected);
    });
  }
});

describe("small helpers", () => {
  test("MicroTime has six fractional digits", () => {
    assert.equal(microTime(Date.UTC(2026, 0, 2, 3, 4, 5, 67)), "2026-01-02T03:04:05.067000Z");
  });

  test("keys round-trip", () => {
    assert.equal(formatKey({ namespace: "a", name: "b" }), "a/b");
    assert.deepEqual(parseKey("a/b"), { namespace: "a", name: "b" });
  });

  test("RBAC grants only the verbs the controller sends; Leases only by the Lease Role, in its own namespace", () => {
    const rules = controllerRules();
    const verbsOf = (rs: PolicyRule[], group: string, resource: string) =>
      rs
        .filter((r) => r.apiGroups.includes(group) && r.resources.includes(resource))
        .flatMap((r) => r.verbs);
    const cs = "cocoonset.cocoonstack.io";
    // delete: a fleet expired with spec.expiry.action delete.
    assert.deepEqual(verbsOf(rules, cs, "cocoonsets"), ["get", "list", "watch", "patch", "delete"]);
    assert.deepEqual(verbsOf(rules, cs, "cocoonsets/status"), ["patch"]);
    assert.deepEqual(verbsOf(rules, cs, "cocoonsets/finalizers"), ["update"]);
    assert.deepEqual(verbsOf(rules, "", "pods"), [
      "get",
      "list",
      "watch",
      "create",
      "delete",
      "patch",
    ]);
    assert.deepEqual(verbsOf(rules, "batch", "jobs"), ["list", "watch", "delete"]);
    assert.deepEqual(verbsOf(rules, "", "configmaps"), ["list", "watch", "delete"]);
    assert.deepEqual(verbsOf(rules, "events.k8s.io", "events"), ["create"]);
    assert.deepEqual(verbsOf(rules, "", "persistentvolumeclaims"), [], "no claims");
    // The members' activity Leases are read (selected by the fleet label), never written.
    assert.deepEqual(
      verbsOf(rules, "coordination.k8s.io", "leases"),
      ["list", "watch"],
      "no Lease written outside the controller's own namespace",
    );
    assert.deepEqual(verbsOf(rules, "apiextensions.k8s.io", "customresourcedefinitions"), ["get"]);
    assert.deepEqual(
      rules.find((r) => r.resources.includes("customresourcedefinitions"))?.resourceNames,
      ["cocoonsets.cocoonset.cocoonstack.io"],
    );
    // create and delete: the idle policy's CR of an idle member, gone once its wake is over.
    assert.deepEqual(verbsOf(rules, cs, "cocoonhibernations"), [
      "get",
      "list",
      "watch",
      "patch",
      "create",
      "delete",
    ]);
    assert.deepEqual(verbsOf(rules, cs, "cocoonhibernations/status"), ["patch"]);
    // A migration checks its target node, and placement the main agent's, from the node
    // cache (cluster-scoped: the ClusterRole only).
    assert.deepEqual(verbsOf(rules, "", "nodes"), ["list", "watch"]);
    assert.equal(rules.length, 12, "no other rule");
    assert.ok(!rules.some((r) => r.verbs.includes("*") || r.resources.includes("*")));

    // The Leases, in the controller's own namespace only: its own (a shard's is named after
    // its share), and list and watch of the others' for the shard handover.
    const lease = controllerLeaseRole("c", "cocoonset-system");
    assert.equal(lease.kind, "Role");
    assert.equal(lease.metadata.namespace, "cocoonset-system");
    assert.deepEqual(lease.rules, [
      {
        apiGroups: ["coordination.k8s.io"],
        resources: ["leases"],
        verbs: ["create", "get", "update", "list", "watch"],
      },
    ]);
    assert.deepEqual(controllerClusterRole("c").rules, rules);

    const role = controllerRole("c", "team", { leaderElection: false });
    const roleRules = role.rules as typeof rules;
    assert.equal(role.kind, "Role");
    assert.ok(!roleRules.some((r) => r.apiGroups.includes("apiextensions.k8s.io")));
    // Without the leader election: only the reads of the members' activity Leases.
    assert.deepEqual(
      verbsOf(roleRules, "coordination.k8s.io", "leases"),
      ["list", "watch"],
      "no Lease written in a watched namespace",
    );
    assert.deepEqual(controllerRole("c", "team", { leaderElection: true }).rules, [
      ...namespacedRules(),
      ...leaderElectionRules(),
    ]);
  });
});
