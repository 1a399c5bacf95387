// Snapshots the pass had recorded and can no longer find: a wake or restore whose
// `<vm>:hibernate` tag is gone would otherwise boot the VM without its state and say
// nothing. The pass marks the step that boots or wakes such a VM; the executor first records
// the VM on the CocoonSet (the `SnapshotLost` condition reads that record) and emits a
// Warning, and only then boots. Pure. Behaviour: docs/behaviour.md §3.20.
import { classifyPods } from "../pods/classify.js";
import { memberPodVm } from "../attribution/attribution.js";
import {
  ANNOTATIONS,
  ANNOTATION_TRUE,
  LIFECYCLE_STATES,
  SNAPSHOT_TAGS,
} from "../spec/constants.js";
import type { CocoonSet } from "../spec/generated/types.js";
import type { Pod } from "../spec/kube-types.js";
import { effectiveSuspend } from "../spec/defaults.js";
import { isTerminal, isTerminating } from "../pods/pod-state.js";
import { hibernationHeld, type HibernationTarget } from "./hibernation-targets.js";

/** One lost snapshot as recorded on the CocoonSet. */
export interface LostSnapshot {
  /** The member whose VM it was (`main`, `slot 2`, `toolbox shell`). */
  member: string;
  /** The tag that is gone. */
  tag: string;
  /** When the pass found it gone (RFC 3339). */
  at: string;
}

/** The record of lost snapshots, by VM name; a value that does not parse reads as empty. */
export function readLostSnapshots(cs: CocoonSet): Map<string, LostSnapshot> {
  const raw = cs.metadata.annotations?.[ANNOTATIONS.lostSnapshots];
  const out = new Map<string, LostSnapshot>();
  if (!raw) return out;
  try {
    const parsed = JSON.parse(raw) as unknown;
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) return out;
    for (const [vm, v] of Object.entries(parsed as Record<string, unknown>)) {
      if (v === null || typeof v !== "object") continue;
      const e = v as Record<string, unknown>;
      out.set(vm, {
        member: typeof e.member === "string" ? e.member : "",
        tag: typeof e.tag === "string" ? e.tag : SNAPSHOT_TAGS.hibernate,
        at: typeof e.at === "string" ? e.at : "",
      });
    }
  } catch {
    // An unreadable record is shown as none rather than blocking the pass.
  }
  return out;
}

/** The annotation's value for a record, keys sorted. */
export function serializeLostSnapshots(record: ReadonlyMap<string, LostSnapshot>): string {
  const sorted = [...record.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return JSON.stringify(Object.fromEntries(sorted));
}

/** A VM the step about to run boots or wakes without the snapshot the pass had recorded. */
export interface LostSnapshotMark {
  vm: string;
  /** How the member is named in messages (`main`, `slot 2`, `toolbox shell`). */
  member: string;
}

/** The Warning's text for one lost snapshot. */
export function lostSnapshotMessage(mark: LostSnapshotMark): string {
  return `${mark.member}: the hibernation snapshot ${mark.vm}:${SNAPSHOT_TAGS.hibernate} of VM ${mark.vm} was recorded and is no longer in the registry; the VM starts without its saved state`;
}

/**
 * Whether a pod's hibernate request, once withdrawn, wakes its VM from `<vm>:hibernate`: the
 * node agent reports the VM `hibernated` (so it pushed that tag) and no CocoonHibernation
 * keeps it hibernated.
 */
export function wakesFromSnapshot(
  pod: Pod,
  hibernations: readonly HibernationTarget[] = [],
): boolean {
  const a = pod.metadata?.annotations ?? {};
  return (
    a[ANNOTATIONS.hibernate] === ANNOTATION_TRUE &&
    !isTerminating(pod) &&
    !isTerminal(pod) &&
    !!a[ANNOTATIONS.vmName] &&
    a[ANNOTATIONS.lifecycleState] === LIFECYCLE_STATES.hibernated &&
    !hibernationHeld(hibernations, pod.metadata?.name ?? "")
  );
}

/**
 * The VMs an unsuspend (a retain wake) would wake from their snapshot, sorted: the pass asks
 * the registry for their tags first, so a tag already gone is reported before the wake.
 * A fleet that is suspended, or has nothing hibernated, asks nothing.
 */
export function wakeProbes(
  cs: CocoonSet,
  pods: readonly Pod[],
  hibernations: readonly HibernationTarget[] = [],
): string[] {
  if (effectiveSuspend(cs)) return [];
  const owned = classifyPods(cs, pods);
  const members = [owned.main, ...owned.subAgents.values(), ...owned.toolboxes.values()];
  const vms = new Set<string>();
  for (const pod of members)
    if (pod && wakesFromSnapshot(pod, hibernations)) vms.add(memberPodVm(cs, pod));
  return [...vms].sort();
}
