/**
 * The snapshot clean-up of a CocoonSet's deletion, planned: which VMs it concerns and which
 * of their registry tags go once every pod is gone. `:hibernate` always goes (nothing wakes
 * from it after the deletion); `:latest` goes where the snapshot policy says the node agent
 * never meant to keep one (`never`: every VM; `main-only`: every VM but the main agent's;
 * `always`: none).
 * Behaviour: docs/behaviour.md §3.13.
 */
import {
  ANNOTATIONS,
  ANNOTATION_TRUE,
  LIFECYCLE_STATES,
  SNAPSHOT_TAGS,
} from "../spec/constants.js";
import { isOwnedPod } from "../pods/classify.js";
import { isTerminal } from "../pods/pod-state.js";
import type { CocoonSet } from "../spec/generated/types.js";
import type { Pod } from "../spec/kube-types.js";
import { memberPodVm, recordedVms } from "../attribution/attribution.js";
import { DEFAULT_SNAPSHOT_POLICY } from "../spec/schema-source.js";
import { namespaceOf } from "../kube/objects.js";

/** One registry tag the deletion drops. */
export interface TeardownTag {
  vm: string;
  tag: string;
}

/** The VM names of the stash annotation, in its order, blanks dropped. */
export function parseDeleteVmNames(raw: string | undefined): string[] {
  return (raw ?? "")
    .split(",")
    .map((n) => n.trim())
    .filter((n) => n !== "");
}

/**
 * Every VM the deletion concerns, sorted and unique: the ones the engine recorded for the
 * fleet (engine/attribution), members scaled away, released or hibernated included, and those
 * of its recorded members among `pods`. `cs` is the fleet as the engine plans it
 * (`attributedView`). No pod annotation and no CocoonSet annotation is read: anyone who may
 * edit them could otherwise name another fleet's, namespace's or pod's VM.
 */
export function teardownVmNames(cs: CocoonSet, pods: readonly Pod[]): string[] {
  const members = pods.map((p) => memberPodVm(cs, p)).filter((vm) => vm !== "");
  return [...new Set([...recordedVms(cs), ...members])].sort();
}

/**
 * The stash annotation's new value, or undefined when it already says that (or there is
 * nothing to stash).
 */
export function deleteVmNamesStash(cs: CocoonSet, vms: readonly string[]): string | undefined {
  if (vms.length === 0) return undefined;
  const joined = vms.join(",");
  return cs.metadata.annotations?.[ANNOTATIONS.deleteVmNames] === joined ? undefined : joined;
}

/**
 * The agent slot a VM name denotes for this CocoonSet (`vk-<ns>-<cs>-<n>`), or -1 when it
 * is not an agent's (a toolbox's, or another set's).
 */
export function agentSlotOfVm(cs: CocoonSet, vm: string): number {
  const prefix = `vk-${namespaceOf(cs)}-${cs.metadata.name ?? ""}-`;
  if (!vm.startsWith(prefix)) return -1;
  const suffix = vm.slice(prefix.length);
  if (!/^\+?\d+$/.test(suffix)) return -1;
  const n = Number(suffix);
  return Number.isSafeInteger(n) ? n : -1;
}

/** Whether the deletion keeps `<vm>:latest`: the node agent pushed it to be kept. */
function keepsLatestTag(cs: CocoonSet, vm: string): boolean {
  switch (cs.spec.snapshotPolicy || DEFAULT_SNAPSHOT_POLICY) {
    case "never":
      return false;
    case "main-only":
      return agentSlotOfVm(cs, vm) === 0;
    default:
      return true;
  }
}

/** The tags the deletion drops, VM by VM (in the given order), `:hibernate` first. */
export function teardownTags(cs: CocoonSet, vms: readonly string[]): TeardownTag[] {
  const out: TeardownTag[] = [];
  for (const vm of vms) {
    out.push({ vm, tag: SNAPSHOT_TAGS.hibernate });
    if (!keepsLatestTag(cs, vm)) out.push({ vm, tag: SNAPSHOT_TAGS.latest });
  }
  return out;
}

/**
 * The fleet's pods whose VM is hibernating right now (asked to, and the node agent reports a
 * lifecycle state other than `hibernated` or `failed`), sorted. Its snapshot is pushed when the
 * hibernation ends, pod or no pod: a deletion that dropped the tags before would leave that
 * one behind, so it waits for these first. A pod no node agent reports on is not waited for.
 */
export function hibernationsInFlight(cs: CocoonSet, pods: readonly Pod[]): string[] {
  const out: string[] = [];
  for (const pod of pods) {
    const a = pod.metadata?.annotations ?? {};
    const state = a[ANNOTATIONS.lifecycleState] ?? "";
    if (!isOwnedPod(cs, pod) || isTerminal(pod)) continue;
    if (a[ANNOTATIONS.hibernate] !== ANNOTATION_TRUE || state === "") continue;
    if (state === LIFECYCLE_STATES.hibernated || state === LIFECYCLE_STATES.failed) continue;
    out.push(pod.metadata?.name ?? "");
  }
  return out.sort();
}
