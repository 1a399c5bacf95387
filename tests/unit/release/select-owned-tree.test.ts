/** Table and property tests for the pure selection of an owner's tree (SPEC section 4). */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import type { KubeObject } from "../../../engine/kube/index.js";
import {
  formatRemaining,
  ownerReferenceForPod,
  selectOwnedTree,
  type ListedObjects,
} from "../../../engine/release/index.js";

const o = (name: string, uid: string | undefined, ...owners: string[]): KubeObject => ({
  metadata: {
    name,
    uid,
    ownerReferences: owners.map((u) => ({ apiVersion: "v1", kind: "X", name: u, uid: u })),
  },
});
const names = (items: KubeObject[]) => items.map((i) => i.metadata.name).sort();

void describe("selectOwnedTree", () => {
  void test("selects direct children of every kind and nothing of other owners or unowned", () => {
    const tree = selectOwnedTree("owner", {
      jobs: [o("j1", "j1", "owner"), o("j-other", "jo", "other")],
      pods: [o("p1", "p1", "owner"), o("p-other", "po", "other"), o("p-free", "pf")],
      configMaps: [o("c1", "c1", "owner"), o("c-free", "cf")],
      pvcs: [o("v1", "v1", "owner"), o("v-other", "vo", "other")],
    });
    assert.deepEqual(names(tree.jobs), ["j1"]);
    assert.deepEqual(names(tree.pods), ["p1"]);
    assert.deepEqual(names(tree.configMaps), ["c1"]);
    assert.deepEqual(names(tree.pvcs), ["v1"]);
  });

  void test("follows ownership recursively: a selected Job's pods and a pod's ConfigMaps", () => {
    const tree = selectOwnedTree("owner", {
      jobs: [o("j1", "j1", "owner")],
      pods: [o("jp1", "jp1", "j1"), o("p1", "p1", "owner"), o("other-job-pod", "x", "jx")],
      // Listed before its owner pod's kind is scanned: the fixed point still finds it.
      configMaps: [o("c-of-jp1", "c2", "jp1"), o("c-of-c2", "c3", "c2")],
    });
    assert.deepEqual(names(tree.jobs), ["j1"]);
    assert.deepEqual(names(tree.pods), ["jp1", "p1"]);
    assert.deepEqual(names(tree.configMaps), ["c-of-c2", "c-of-jp1"]);
    assert.deepEqual(tree.pvcs, []);
  });

  void test("an object listed twice (or owned twice within the tree) is selected once", () => {
    const pod = o("p1", "p1", "owner", "j1");
    const tree = selectOwnedTree("owner", {
      jobs: [o("j1", "j1", "owner")],
      pods: [pod, { ...pod }],
      configMaps: [],
    });
    assert.equal(tree.pods.length, 1);
  });

  void test("never selects the owner itself, even through an ownership cycle", () => {
    const tree = selectOwnedTree("owner", {
      jobs: [],
      pods: [o("owner-pod", "owner", "p1"), o("p1", "p1", "owner")],
      configMaps: [],
    });
    assert.deepEqual(names(tree.pods), ["p1"]);
  });

  void test("objects without a uid are never selected", () => {
    const tree = selectOwnedTree("owner", {
      jobs: [],
      pods: [o("no-uid", undefined, "owner")],
      configMaps: [],
    });
    assert.deepEqual(tree.pods, []);
  });

  void test("an unknown owner selects nothing", () => {
    const tree = selectOwnedTree("nobody", {
      jobs: [o("j1", "j1", "owner")],
      pods: [o("p1", "p1", "j1")],
      configMaps: [o("c1", "c1")],
    });
    assert.deepEqual(tree, { jobs: [], pods: [], configMaps: [], pvcs: [] });
  });

  void test("property: selected exactly when a chain of ownerReferences reaches the owner", () => {
    // Random forests over uids u0..u11 with "owner" as an extra root.
    const uidArb = fc.integer({ min: 0, max: 11 }).map((i) => `u${i}`);
    const objArb = fc.record({
      uid: uidArb,
      owners: fc.array(fc.oneof(uidArb, fc.constant("owner"), fc.constant("stranger")), {
        maxLength: 2,
      }),
      kind: fc.constantFrom("jobs", "pods", "configMaps", "pvcs"),
    });
    fc.assert(
      fc.property(fc.uniqueArray(objArb, { selector: (x) => x.uid, maxLength: 12 }), (objs) => {
        const listed: ListedObjects = { jobs: [], pods: [], configMaps: [], pvcs: [] };
        for (const x of objs) listed[x.kind]!.push(o(x.uid, x.uid, ...x.owners));
        const tree = selectOwnedTree("owner", listed);
        const picked = new Set(
          [...tree.jobs, ...tree.pods, ...tree.configMaps, ...tree.pvcs].map((i) => i.metadata.uid),
        );
        // Reference: walk up from each object through its owners.
        const byUid = new Map(objs.map((x) => [x.uid, x]));
        const reaches = (uid: string, seen: Set<string>): boolean => {
          const x = byUid.get(uid);
          if (!x || seen.has(uid)) return false;
          seen.add(uid);
          return x.owners.some((w) => w === "owner" || reaches(w, seen));
        };
        for (const x of objs) assert.equal(picked.has(x.uid), reaches(x.uid, new Set()), x.uid);
        assert.equal(
          picked.size,
          tree.jobs.length + tree.pods.length + tree.configMaps.length + tree.pvcs.length,
        );
      }),
    );
  });
});

void describe("ownerReferenceForPod", () => {
  void test("is a non-controller reference that does not block the owner's deletion", () => {
    assert.deepEqual(ownerReferenceForPod({ name: "w", uid: "u1" }), {
      apiVersion: "v1",
      kind: "Pod",
      name: "w",
      uid: "u1",
      controller: false,
      blockOwnerDeletion: false,
    });
  });
});

void describe("formatRemaining", () => {
  void test("names the object, its finalizers and since when it terminates", () => {
    assert.equal(
      formatRemaining("ns", {
        kind: "pod",
        name: "p",
        uid: "u",
        finalizers: ["example.com/hold"],
        deletionTimestamp: "2024-01-01T00:00:00Z",
      }),
      "pod ns/p (finalizers: example.com/hold; terminating since 2024-01-01T00:00:00Z)",
    );
    assert.equal(
      formatRemaining("ns", { kind: "job", name: "j", uid: "u", finalizers: [] }),
      "job ns/j (not yet marked for deletion)",
    );
  });
});
