/**
 * Pure selection of an owner's tree from listed objects: what release deletes and waits for.
 * No I/O; the executor lists each kind once and hands the lists in.
 */
import type { KubeObject } from "../kube/index.js";
import type { RemainingObject } from "./errors.js";

/** The listed objects of one namespace, by kind. */
export interface ListedObjects<T extends KubeObject = KubeObject> {
  jobs: T[];
  pods: T[];
  configMaps: T[];
  pvcs?: T[];
}

/** The owner's tree, by kind: every object is listed once. */
export interface OwnedTree<T extends KubeObject = KubeObject> {
  jobs: T[];
  pods: T[];
  configMaps: T[];
  pvcs: T[];
}

/**
 * Selects the objects whose ownerReferences carry `ownerUid`, then, recursively, the objects
 * owned by a selected object (a Job's pods, for instance).
 *
 * Guarantees: an object is selected only through a chain of ownerReferences ending at
 * `ownerUid`; objects of other owners, unowned objects, objects without a uid and the owner
 * itself are never selected; each uid appears once, in the order first listed.
 */
export function selectOwnedTree<T extends KubeObject>(
  ownerUid: string,
  listed: ListedObjects<T>,
): OwnedTree<T> {
  const kinds = ["jobs", "pods", "configMaps", "pvcs"] as const;
  const owners = new Set<string>([ownerUid]);
  const picked = new Set<string>();
  // Fixed point: each round adds the dependents of what the previous rounds picked.
  for (let grew = true; grew;) {
    grew = false;
    for (const kind of kinds) {
      for (const o of listed[kind] ?? []) {
        const uid = o.metadata.uid;
        if (!uid || uid === ownerUid || picked.has(uid)) continue;
        if ((o.metadata.ownerReferences ?? []).some((r) => owners.has(r.uid))) {
          picked.add(uid);
          owners.add(uid);
          grew = true;
        }
      }
    }
  }
  const tree: OwnedTree<T> = { jobs: [], pods: [], configMaps: [], pvcs: [] };
  const emitted = new Set<string>();
  for (const kind of kinds) {
    for (const o of listed[kind] ?? []) {
      const uid = o.metadata.uid ?? "";
      if (picked.has(uid) && !emitted.has(uid)) {
        emitted.add(uid);
        tree[kind].push(o);
      }
    }
  }
  return tree;
}

/** Describes an object still present when a release timed out. */
export function describeRemaining(kind: string, o: KubeObject): RemainingObject {
  return {
    kind,
    name: o.metadata.name ?? "",
    uid: o.metadata.uid ?? "",
    finalizers: o.metadata.finalizers ?? [],
    deletionTimestamp: o.metadata.deletionTimestamp,
  };
}

/** One line per remaining object: `pod ns/name (finalizers: a, b; terminating since T)`. */
export function formatRemaining(namespace: string, r: RemainingObject): string {
  const why: string[] = [];
  if (r.finalizers.length) why.push(`finalizers: ${r.finalizers.join(", ")}`);
  if (r.deletionTimestamp) why.push(`terminating since ${r.deletionTimestamp}`);
  else why.push("not yet marked for deletion");
  return `${r.kind} ${namespace}/${r.name} (${why.join("; ")})`;
}
