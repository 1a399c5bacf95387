// Small predicates over a pod's state, shared by classification, triage and status.
import { ANNOTATIONS } from "../spec/constants.js";
import type { Pod } from "../spec/kube-types.js";

/** Whether the VM's lifecycle state (reported by the virtual kubelet) is `failed`. */
export function isLifecycleFailed(pod: Pod): boolean {
  const lifecycle = pod.metadata?.annotations?.[ANNOTATIONS.lifecycleState] ?? "";
  return lifecycle.toLowerCase() === "failed";
}

/** Whether the pod is terminal: phase `Failed`, or the VM's lifecycle state is `failed`. */
export function isTerminal(pod: Pod): boolean {
  return pod.status?.phase === "Failed" || isLifecycleFailed(pod);
}

/**
 * Whether a pod, as the apiserver answered its delete, was removed at once: a grace period of
 * 0 (the apiserver gives one to a terminal or unscheduled pod) and no finalizer holding it.
 * Otherwise it is still there, terminating, and its name is not free yet.
 */
export function removedAtOnce(answer: Pod): boolean {
  const meta = answer.metadata ?? {};
  return meta.deletionGracePeriodSeconds === 0 && (meta.finalizers ?? []).length === 0;
}

/** Whether the pod's `Ready` condition is `True`. */
export function isReady(pod: Pod): boolean {
  return (pod.status?.conditions ?? []).some((c) => c.type === "Ready" && c.status === "True");
}

/** Whether the pod is already being deleted. */
export function isTerminating(pod: Pod): boolean {
  return pod.metadata?.deletionTimestamp !== undefined && pod.metadata.deletionTimestamp !== null;
}

/** The uid of the pod's controller ownerReference, if it has one. */
function controllerUid(pod: Pod): string | undefined {
  return pod.metadata?.ownerReferences?.find((ref) => ref.controller === true)?.uid;
}

/** Whether the pod's controller ownerReference points at `uid`. */
export function isControlledBy(pod: Pod, uid: string): boolean {
  return uid !== "" && controllerUid(pod) === uid;
}

/**
 * Whether the pod's VM runs: the node agent gave it an id and its container is running (a
 * restoring VM has a running container before it has an id).
 */
export function vmLive(pod: Pod): boolean {
  return (
    !!pod.metadata?.annotations?.[ANNOTATIONS.vmID] &&
    (pod.status?.containerStatuses ?? []).some((c) => c.state?.running !== undefined)
  );
}
