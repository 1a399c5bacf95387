/**
 * The one finalizer idiom of the engine, for the CocoonSet and the CocoonHibernation alike:
 * their plans add and remove a finalizer with plan actions (engine/plan/finalizer.ts), which
 * the executor (actions.ts) carries out with JSON patches whose `test` op checks exactly what
 * the write depends on.
 *
 * - Add: `test` the finalizers list as read, then append ours (an object with no list
 *   tests its resourceVersion instead, since a `test` cannot name a missing path).
 * - Remove: `test` that the entry at our index is ours, then remove that index; when the
 *   list moved under it (422 from the test, or 409), read again and retry.
 * - Both `test` the uid too: an object deleted and created again under the same name is
 *   not the one that was read, and is left alone.
 *
 * Why not a merge patch guarded by resourceVersion: a merge patch replaces the whole list,
 * so it is only as safe as its resourceVersion guard, and that guard fails on any write to
 * the object (a status write, an annotation) although the list did not change. The `test`
 * op guards the list itself: another controller's finalizer is never dropped or overwritten,
 * and unrelated writes do not turn into conflicts.
 */
import {
  isNotFound,
  KubeApiError,
  PatchType,
  type KubeClient,
  type ObjectMeta,
} from "../kube/index.js";

/** Adds `finalizer` to the object at `path` when `obj` (as read) lacks it; returns the object. */
export async function addFinalizerTo<T extends { metadata: ObjectMeta }>(
  client: KubeClient,
  path: string,
  obj: T,
  finalizer: string,
): Promise<T> {
  const finalizers = obj.metadata.finalizers ?? [];
  if (finalizers.includes(finalizer)) return obj;
  const ops =
    finalizers.length === 0
      ? [
          { op: "test", path: "/metadata/resourceVersion", value: obj.metadata.resourceVersion },
          { op: "add", path: "/metadata/finalizers", value: [finalizer] },
        ]
      : [
          { op: "test", path: "/metadata/finalizers", value: finalizers },
          { op: "add", path: "/metadata/finalizers/-", value: finalizer },
        ];
  return client.patch<T>(path, [...sameObject(obj), ...ops], PatchType.json);
}

/**
 * Removes only `finalizer` from the object at `path`. A copy read without it is checked once
 * against the live object (it may have been read before the finalizer was added); a list
 * that changed under the patch is read again (up to five tries); an object gone, or
 * replaced by another of the same name (another uid), means done.
 */
export async function removeFinalizerFrom<T extends { metadata: ObjectMeta }>(
  client: KubeClient,
  path: string,
  obj: T,
  finalizer: string,
): Promise<void> {
  let current: T | undefined = obj;
  let fresh = false;
  for (let attempt = 0; attempt < 5 && current; attempt++) {
    if (current.metadata.uid !== obj.metadata.uid) return;
    const index = (current.metadata.finalizers ?? []).indexOf(finalizer);
    if (index < 0) {
      if (fresh) return;
      current = await client.getOrUndefined<T>(path);
      fresh = true;
      continue;
    }
    try {
      await client.patch(
        path,
        [
          ...sameObject(obj),
          { op: "test", path: `/metadata/finalizers/${index}`, value: finalizer },
          { op: "remove", path: `/metadata/finalizers/${index}` },
        ],
        PatchType.json,
      );
      return;
    } catch (e) {
      if (isNotFound(e)) return;
      const stale = KubeApiError.isInstance(e) && (e.status === 422 || e.status === 409);
      if (!stale) throw e;
    }
    current = await client.getOrUndefined<T>(path);
    fresh = true;
  }
}

/** A `test` of the uid as read, when it was read. */
function sameObject(obj: { metadata: ObjectMeta }): { op: string; path: string; value: string }[] {
  const uid = obj.metadata.uid;
  return uid ? [{ op: "test", path: "/metadata/uid", value: uid }] : [];
}
