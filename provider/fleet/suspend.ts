// Suspend with hibernatePolicy retain: when a pod counts as hibernated, and the pass's
// registry facts. Pure. Behaviour: docs/behaviour.md §3.15; the upstream it matches:
// docs/lifecycle-design.md.
import { ANNOTATIONS, ANNOTATION_TRUE, LIFECYCLE_STATES } from "./constants.js";
import type { CocoonSet } from "./generated/types.js";
import type { Pod } from "./kube-types.js";
import { isTerminal, isTerminating } from "./pod-state.js";

/**
 * What the registry said, gathered by the executor before the pass: the VM names whose
 * `<vm>:hibernate` tag exists, or why it could not be asked.
 */
export type SnapshotFacts = { hibernate: ReadonlySet<string> } | { error: string };

/** Requeue delay while a suspend waits for its VMs to hibernate (as cocoon-operator polls). */
export const SUSPEND_POLL_MS = 5_000;

/** Whether the CocoonSet asks to be suspended with its pods kept (the retain policy). */
export function suspendsRetaining(cs: CocoonSet): boolean {
  return cs.spec.suspend === true && (cs.spec.hibernatePolicy ?? "retain") === "retain";
}

/** Whether the pod carries `vm.cocoonstack.io/hibernate=true`. */
export function asksHibernate(pod: Pod): boolean {
  return pod.metadata?.annotations?.[ANNOTATIONS.hibernate] === ANNOTATION_TRUE;
}

/** Where a suspend stands: done when no pod is pending. */
export interface HibernationGate {
  /** Names of the pods whose VM has not hibernated yet, sorted. */
  pending: string[];
  /** Pods the gate counted (managed, live, not terminal). */
  counted: number;
}

/**
 * Which pods have not hibernated yet. A managed pod has when the node agent reports
 * `hibernated` for a generation at least the CocoonSet's, and its `<vm>:hibernate` tag is in
 * the registry: the generation rejects a tag and a state left from an earlier suspend.
 * Unmanaged pods (static toolboxes) have no VM lifecycle, and terminal pods no live VM, so
 * neither is waited for; a pod being deleted is not either.
 */
export function hibernationGate(
  cs: CocoonSet,
  pods: readonly Pod[],
  snapshots: ReadonlySet<string>,
): HibernationGate {
  const generation = cs.metadata.generation ?? 0;
  const pending: string[] = [];
  let counted = 0;
  for (const pod of pods) {
    const a = pod.metadata?.annotations ?? {};
    if (a[ANNOTATIONS.managed] !== ANNOTATION_TRUE || isTerminal(pod) || isTerminating(pod))
      continue;
    counted++;
    const vm = a[ANNOTATIONS.vmName] ?? "";
    const observed = Number(a[ANNOTATIONS.lifecycleObservedGeneration] ?? "");
    const done =
      vm !== "" &&
      a[ANNOTATIONS.lifecycleState] === LIFECYCLE_STATES.hibernated &&
      Number.isFinite(observed) &&
      observed >= generation &&
      snapshots.has(vm);
    if (!done) pending.push(pod.metadata?.name ?? "");
  }
  return { pending: pending.sort(), counted };
}
