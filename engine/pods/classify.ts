// Sorts the pods listed for a CocoonSet into main agent, sub-agents by slot and toolboxes by
// name, keeping only pods the engine recorded as this CocoonSet's members (engine/attribution:
// by uid, never by label or owner reference) that are not already being deleted.
// Behaviour: docs/behaviour.md §3.1; the trust model: docs/security.md.
import { isRecordedMember, memberOf, memberRole } from "../attribution/attribution.js";
import type { CocoonSet } from "../spec/generated/types.js";
import type { Pod } from "../spec/kube-types.js";
import { isTerminating } from "./pod-state.js";

/** The live pods of one CocoonSet, by role. */
export interface ClassifiedPods {
  /** The main agent (slot 0), if present. */
  main?: Pod;
  /** Sub-agents by slot number (slots >= 1). */
  subAgents: Map<number, Pod>;
  /** Toolboxes by toolbox name. */
  toolboxes: Map<string, Pod>;
}

/** Parses a sub-agent slot label: a canonical positive decimal, else undefined. */
export function parseSlot(label: string | undefined): number | undefined {
  if (label === undefined || !/^[1-9][0-9]*$/.test(label)) return undefined;
  const slot = Number(label);
  return Number.isSafeInteger(slot) ? slot : undefined;
}

/** Whether the pod belongs to this CocoonSet: the engine recorded its uid for a member. */
export function isOwnedPod(cs: CocoonSet, pod: Pod): boolean {
  return isRecordedMember(cs, pod);
}

/**
 * Classifies the pods of `cs`. Pods it did not record, and terminating pods, are left out; the
 * member the record names gives the role and slot (a pod's labels are not read). Pods are visited in name order, so a duplicate
 * (which the engine never creates) resolves deterministically to the first name.
 */
export function classifyPods(cs: CocoonSet, pods: readonly Pod[]): ClassifiedPods {
  // A pass classifies the same list against the same record several times (the plan, the
  // status, the waits, the names to read): the last answer per list is kept while the
  // record and the list are the same objects. Inputs are read only (the controller's are
  // frozen), and so is the answer.
  const vms = cs.status?.vms;
  const last = CLASSIFIED.get(pods);
  if (
    vms !== undefined &&
    last?.vms === vms &&
    last.name === cs.metadata.name &&
    last.length === pods.length
  )
    return last.out;
  const out = classify(cs, pods);
  if (vms !== undefined)
    CLASSIFIED.set(pods, { vms, name: cs.metadata.name, length: pods.length, out });
  return out;
}

/** The last classification of each pod list (see {@link classifyPods}). */
const CLASSIFIED = new WeakMap<
  readonly Pod[],
  { vms: object; name: string | undefined; length: number; out: ClassifiedPods }
>();

function classify(cs: CocoonSet, pods: readonly Pod[]): ClassifiedPods {
  const out: ClassifiedPods = { subAgents: new Map(), toolboxes: new Map() };
  const nameOf = (pod: Pod): string => pod.metadata?.name ?? "";
  const sorted = [...pods].sort((a, b) =>
    nameOf(a) < nameOf(b) ? -1 : nameOf(a) > nameOf(b) ? 1 : 0,
  );
  for (const pod of sorted) {
    const member = isTerminating(pod) ? undefined : memberOf(cs, pod);
    if (member === undefined) continue;
    switch (memberRole(member)) {
      case "main":
        out.main ??= pod;
        break;
      case "sub-agent": {
        const slot = parseSlot(member);
        if (slot !== undefined && !out.subAgents.has(slot)) out.subAgents.set(slot, pod);
        break;
      }
      case "toolbox":
        if (!out.toolboxes.has(member)) out.toolboxes.set(member, pod);
        break;
    }
  }
  return out;
}
