// The CocoonHibernations of a namespace as the CocoonSet pass reads them (a pure input the
// executor gathers): which pods a CR wants hibernated, which it says are hibernated. No
// imports but types, so the suspend, migration and restore planners can all read them.
// Behaviour: docs/behaviour.md §3.18.
import type { CocoonHibernation } from "../spec/generated/hibernation-types.js";

/** One CocoonHibernation as the CocoonSet pass sees it. */
export interface HibernationTarget {
  /** `spec.podRef.name`. */
  pod: string;
  desire?: string;
  phase?: string;
  /** Being deleted: its finalizer may still drop the pod's VM's `:hibernate` tag. */
  deleting?: { name: string };
}

/**
 * The pass's view of the namespace's CocoonHibernations. A CR being deleted still counts until
 * it is gone (its finalizer drops the tag first), as upstream: a pass run in between neither
 * wakes its pod nor restores it from a tag about to go.
 */
export function hibernationTargets(crs: readonly CocoonHibernation[]): HibernationTarget[] {
  return crs
    .filter((c) => (c.spec?.podRef?.name ?? "") !== "")
    .map((c) => ({
      pod: c.spec.podRef.name,
      desire: c.spec.desire,
      phase: c.status?.phase,
      ...(c.metadata.deletionTimestamp ? { deleting: { name: c.metadata.name ?? "" } } : {}),
    }));
}

/**
 * The CocoonHibernation being deleted that targets `pod`, if any: a suspend does not ask the
 * pod's VM to hibernate before it is gone, since its finalizer drops the VM's `:hibernate` tag
 * and, run after the suspend's hibernation, would drop that one (docs/behaviour.md §3.15).
 */
export function deletingHibernationOf(
  targets: readonly HibernationTarget[],
  pod: string,
): string | undefined {
  return targets.find((t) => t.pod === pod && t.deleting)?.deleting?.name;
}

/**
 * Whether a pod built under this name restores from `:hibernate`: a CR targeting it is
 * `Hibernated`, or `Waking` (the phase, not the desire: a leaked tag of an `Active` pod is
 * never booted).
 */
export function restoreIntended(targets: readonly HibernationTarget[], pod: string): boolean {
  return targets.some((t) => t.pod === pod && (t.phase === "Hibernated" || t.phase === "Waking"));
}

/** Whether an unsuspend must leave the pod's hibernate request alone (a CR still wants it). */
export function hibernationHeld(targets: readonly HibernationTarget[], pod: string): boolean {
  return targets.some(
    (t) => t.pod === pod && (t.desire === "Hibernate" || t.phase === "Hibernating"),
  );
}
