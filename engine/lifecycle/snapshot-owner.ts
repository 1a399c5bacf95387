/**
 * Which `<vm>:hibernate` snapshots a fleet took itself. A tag in the registry says nothing
 * about who pushed it: a fleet deleted while a hibernation was in flight, or another fleet
 * that derived the same VM name, leaves one behind, and a fleet that restored it would boot
 * someone else's VM. So a fleet restores only from a tag it can attribute to itself (its
 * uid): one whose VM its own live pod reports hibernated now, or one it recorded when it saw
 * that. The record is an annotation of the CocoonSet, `{"uid": …, "vms": […]}`: a new
 * CocoonSet of the same name has a new uid and no record. Pure; behaviour:
 * docs/behaviour.md §3.19.
 */
import { ANNOTATIONS, LIFECYCLE_STATES } from "../spec/constants.js";
import { isOwnedPod } from "../pods/classify.js";
import { memberPodVm, recordedVms } from "../attribution/attribution.js";
import type { CocoonSet } from "../spec/generated/types.js";
import type { Pod } from "../spec/kube-types.js";
import { isTerminating } from "../pods/pod-state.js";
import type { SnapshotFacts } from "./suspend.js";

/**
 * The CocoonSet annotation that records the snapshots the fleet took. Not a key of the peer's:
 * it sits outside the `cocoonset.cocoonstack.io/` prefix the peer's keys use.
 */
export const SNAPSHOT_OWNER_ANNOTATION = "snapshot.cocoonset.cocoonstack.io/taken-by";

/** The VMs the record lists, when it was written by this very CocoonSet (same uid). */
export function recordedSnapshots(cs: CocoonSet): Set<string> {
  const raw = cs.metadata.annotations?.[SNAPSHOT_OWNER_ANNOTATION];
  if (!raw) return new Set();
  try {
    const parsed = JSON.parse(raw) as { uid?: unknown; vms?: unknown };
    if (parsed.uid !== cs.metadata.uid || !Array.isArray(parsed.vms)) return new Set();
    return new Set(parsed.vms.filter((v): v is string => typeof v === "string" && v !== ""));
  } catch {
    return new Set();
  }
}

/** VMs of the fleet's own live pods that the node agent reports hibernated. */
function hibernatedHere(cs: CocoonSet, pods: readonly Pod[]): Set<string> {
  const out = new Set<string>();
  for (const pod of pods) {
    if (!isOwnedPod(cs, pod) || isTerminating(pod)) continue;
    const a = pod.metadata?.annotations ?? {};
    // The node agent's report is believed for the recorded member's own VM only.
    const vm = memberPodVm(cs, pod);
    if (vm !== "" && a[ANNOTATIONS.lifecycleState] === LIFECYCLE_STATES.hibernated) out.add(vm);
  }
  return out;
}

/**
 * The registry facts with every tag the fleet cannot attribute to itself left out: it then
 * plans as if the tag were not there (a missing main agent boots fresh, and hibernating it
 * again overwrites the stray tag). Kept: tags of VMs its own pods report hibernated, tags it
 * recorded, the VMs of its slot-release stash (written only by its own passes), and `trusted`
 * (the VMs a Hibernated CocoonHibernation of the namespace vouches for, restore-intent.ts).
 */
export function ownSnapshotFacts(
  cs: CocoonSet,
  pods: readonly Pod[],
  facts: SnapshotFacts | undefined,
  trusted: Iterable<string> = [],
): SnapshotFacts | undefined {
  if (!facts || "error" in facts) return facts;
  const own = new Set([...recordedSnapshots(cs), ...hibernatedHere(cs, pods), ...trusted]);
  const stash = cs.metadata.annotations?.[ANNOTATIONS.deleteVmNames] ?? "";
  for (const n of stash.split(",")) if (n.trim() !== "") own.add(n.trim());
  // The two annotations are the fleet's own writes, but anyone who may edit the CocoonSet
  // may write them too: they are believed only for VMs the engine recorded for this fleet.
  const mine = new Set([...recordedVms(cs), ...pods.map((p) => memberPodVm(cs, p))]);
  const vouched = new Set(trusted);
  return {
    hibernate: new Set(
      [...facts.hibernate].filter((vm) => own.has(vm) && (mine.has(vm) || vouched.has(vm))),
    ),
  };
}

/**
 * The record's new value once this pass's facts are in, or undefined when it already says
 * so: the recorded VMs plus every VM whose tag exists while its own pod reports it
 * hibernated. A record of another uid is replaced.
 */
export function snapshotRecordUpdate(
  cs: CocoonSet,
  pods: readonly Pod[],
  facts: SnapshotFacts | undefined,
): string | undefined {
  if (!facts || "error" in facts) return undefined;
  const before = recordedSnapshots(cs);
  const add = [...hibernatedHere(cs, pods)].filter(
    (vm) => facts.hibernate.has(vm) && !before.has(vm),
  );
  if (add.length === 0) return undefined;
  const vms = [...new Set([...before, ...add])].sort();
  return JSON.stringify({ uid: cs.metadata.uid ?? "", vms });
}
