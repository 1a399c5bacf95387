// Whether a node takes a pod bound to it by name. A pod with `spec.nodeName` skips the
// scheduler, and the kubelet admits it on a cordoned node and past a `NoSchedule` taint: the
// sub-agents, bound next to their main agent, would land there. The engine checks what the
// scheduler would have: a cordon, and the NoSchedule and NoExecute taints the pod does not
// tolerate. Pure. Behaviour: docs/behaviour.md §3.22.
import { tolerates } from "./forecast.js";

/** The node as the executor read it: what the check looks at. */
export interface PlacementNode {
  name: string;
  node?: {
    spec?: {
      unschedulable?: boolean;
      taints?: { key: string; value?: string; effect: string }[];
    };
  };
  /** The read failed: the check does not refuse (the scheduler's rules are a courtesy here). */
  error?: string;
}

/** The tolerations of the pod to be bound. */
export interface PlacedPod {
  spec?: {
    tolerations?: {
      key?: string;
      operator?: string;
      value?: string;
      effect?: string;
    }[];
  };
}

/**
 * Why `node` does not take `pod`, or undefined: cordoned (unschedulable, unless the pod
 * tolerates `node.kubernetes.io/unschedulable`), or a NoSchedule or NoExecute taint the pod
 * does not tolerate. A node that could not be read, or does not exist, is not judged here
 * (the kubelet of a missing node never runs the pod, and the status shows it Pending).
 */
export function placementProblem(pod: PlacedPod, facts: PlacementNode): string | undefined {
  if (facts.error !== undefined || !facts.node) return undefined;
  const tolerations = pod.spec?.tolerations ?? [];
  const spec = facts.node.spec ?? {};
  const cordon = { key: "node.kubernetes.io/unschedulable", effect: "NoSchedule" };
  if (spec.unschedulable && !tolerates(tolerations, cordon))
    return `node "${facts.name}" is cordoned (unschedulable)`;
  for (const t of spec.taints ?? []) {
    if (t.effect !== "NoSchedule" && t.effect !== "NoExecute") continue;
    if (!tolerates(tolerations, t))
      return `node "${facts.name}" has the taint ${t.key}${t.value ? `=${t.value}` : ""}:${t.effect}, which the pod does not tolerate`;
  }
  return undefined;
}
