// Sorts the pods listed for a CocoonSet into main agent, sub-agents by slot and toolboxes by
// name, keeping only pods this CocoonSet controls that are not already being deleted.
// Behaviour: docs/behaviour.md §3.1.
import { LABELS, ROLES } from "../spec/constants.js";
import type { CocoonSet } from "../spec/generated/types.js";
import type { Pod } from "../spec/kube-types.js";
import { isControlledBy, isTerminating } from "./pod-state.js";

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

/** Whether the pod belongs to this CocoonSet: its name label and its controller uid match. */
export function isOwnedPod(cs: CocoonSet, pod: Pod): boolean {
  return (
    pod.metadata?.labels?.[LABELS.name] === cs.metadata.name &&
    isControlledBy(pod, cs.metadata.uid ?? "")
  );
}

/**
 * Classifies the pods of `cs`. Pods of other owners, terminating pods, unknown roles and
 * unparsable sub-agent slots are left out. Pods are visited in name order, so a duplicate
 * (which the engine never creates) resolves deterministically to the first name.
 */
export function classifyPods(cs: CocoonSet, pods: readonly Pod[]): ClassifiedPods {
  const out: ClassifiedPods = { subAgents: new Map(), toolboxes: new Map() };
  const nameOf = (pod: Pod): string => pod.metadata?.name ?? "";
  const sorted = [...pods].sort((a, b) =>
    nameOf(a) < nameOf(b) ? -1 : nameOf(a) > nameOf(b) ? 1 : 0,
  );
  for (const pod of sorted) {
    if (!isOwnedPod(cs, pod) || isTerminating(pod)) continue;
    const labels = pod.metadata?.labels ?? {};
    const slotLabel = labels[LABELS.slot];
    switch (labels[LABELS.role]) {
      case ROLES.main:
        out.main ??= pod;
        break;
      case ROLES.subAgent: {
        const slot = parseSlot(slotLabel);
        if (slot !== undefined && !out.subAgents.has(slot)) out.subAgents.set(slot, pod);
        break;
      }
      case ROLES.toolbox:
        if (slotLabel && !out.toolboxes.has(slotLabel)) out.toolboxes.set(slotLabel, pod);
        break;
    }
  }
  return out;
}
