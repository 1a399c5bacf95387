// The scheduler's word on a pod it cannot place, read by the wakes and the migration.
import type { Pod } from "../spec/kube-types.js";

/** The scheduler's message when the pod is Unschedulable, else undefined. */
export function unschedulableMessage(pod: Pod): string | undefined {
  const c = (pod.status?.conditions ?? []).find(
    (x) => x.type === "PodScheduled" && x.status === "False" && x.reason === "Unschedulable",
  );
  return c ? (c.message ?? "") : undefined;
}
