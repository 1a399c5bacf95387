// Suspend with hibernatePolicy retain: when a pod counts as hibernated, and the pass's
// registry facts. Pure. Behaviour: docs/behaviour.md §3.15; the upstream it matches:
// docs/lifecycle-design.md.
import { memberPodVm } from "../attribution/attribution.js";
import {
  ANNOTATIONS,
  ANNOTATION_TRUE,
  LIFECYCLE_STATES,
  SNAPSHOT_TAGS,
} from "../spec/constants.js";
import type { CocoonSet } from "../spec/generated/types.js";
import type { Pod } from "../spec/kube-types.js";
import { isTerminal, isTerminating } from "../pods/pod-state.js";
import type { PlanStep, PlanTarget, Refusal } from "../plan/plan-types.js";
import { memberLabel } from "../plan/plan-render.js";
import { deletingHibernationOf, type HibernationTarget } from "../snapshots/hibernation-targets.js";

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
  const pending: string[] = [];
  let counted = 0;
  for (const pod of pods) {
    if (!gated(pod)) continue;
    counted++;
    const vm = awaitingTag(cs, pod);
    if (vm === undefined || !snapshots.has(vm)) pending.push(pod.metadata?.name ?? "");
  }
  return { pending: pending.sort(), counted };
}

/**
 * Why the gate still waits for a pod whose VM reports hibernated: its `<vm>:hibernate` tag is
 * not in the registry. The node agent pushed it before it reported, so the tag was removed
 * since (a registry clean-up, a registry without persistent storage restarted), and no
 * second one comes by itself. Undefined for a pod the gate waits for in the usual way.
 */
export function missingTagWhy(
  cs: CocoonSet,
  pod: Pod,
  snapshots: ReadonlySet<string>,
): string | undefined {
  if (!gated(pod)) return undefined;
  const vm = awaitingTag(cs, pod);
  if (vm === undefined || snapshots.has(vm)) return undefined;
  return `pod ${pod.metadata?.name ?? ""}: its VM reports hibernated but the snapshot tag ${vm}:${SNAPSHOT_TAGS.hibernate} is not in the registry (removed since it was pushed); the node agent pushes no second one: put the tag back, or wake the fleet (suspend: false) and suspend it again`;
}

/** Whether the gate waits for this pod at all: managed, not terminal, not being deleted. */
function gated(pod: Pod): boolean {
  const a = pod.metadata?.annotations ?? {};
  return a[ANNOTATIONS.managed] === ANNOTATION_TRUE && !isTerminal(pod) && !isTerminating(pod);
}

/**
 * The VM name of a gated pod whose node agent already reports `hibernated` for this
 * generation: only its registry tag is left to check. Undefined for any other pod.
 */
function awaitingTag(cs: CocoonSet, pod: Pod): string | undefined {
  const a = pod.metadata?.annotations ?? {};
  const vm = memberPodVm(cs, pod);
  const observed = Number(a[ANNOTATIONS.lifecycleObservedGeneration] ?? "");
  const done =
    vm !== "" &&
    a[ANNOTATIONS.lifecycleState] === LIFECYCLE_STATES.hibernated &&
    Number.isFinite(observed) &&
    observed >= (cs.metadata.generation ?? 0);
  return done ? vm : undefined;
}

/**
 * The step of a suspend (retain or release) that holds back asking `podName`'s VM to
 * hibernate while a CocoonHibernation of that pod is being deleted: that CR's finalizer drops
 * the VM's `:hibernate` tag and, run after the suspend's hibernation, would drop that one.
 * Undefined when no such CR exists (the pod is asked as usual).
 */
export function deletionHold(
  target: PlanTarget,
  podName: string,
  hibernations: readonly HibernationTarget[],
): PlanStep | undefined {
  const deleting = deletingHibernationOf(hibernations, podName);
  if (deleting === undefined) return undefined;
  return {
    target,
    decision: "wait-hibernation",
    podName,
    why: `${memberLabel(target)}: waits for CocoonHibernation ${deleting} to be deleted before its VM is asked to hibernate (the CR's finalizer drops the VM's snapshot tag)`,
    actions: [],
  };
}

/**
 * The VM whose `<vm>:hibernate` tag is all the gate still waits for on `pod` (gated, and the
 * node agent reports it hibernated for this generation), else undefined.
 */
export function gateAwaitedVm(cs: CocoonSet, pod: Pod): string | undefined {
  return gated(pod) ? awaitingTag(cs, pod) : undefined;
}

/**
 * The VMs among `members` whose tag the gate still has to confirm (the node agent reports
 * them hibernated for this generation), sorted and unique.
 */
export function gateProbes(cs: CocoonSet, members: readonly Pod[]): string[] {
  const vms = new Set<string>();
  for (const pod of members) {
    const vm = gateAwaitedVm(cs, pod);
    if (vm !== undefined) vms.add(vm);
  }
  return [...vms].sort();
}

/** A suspend's gate could not be checked: the registry did not answer (fail closed). */
export function suspendUnanswered(registryError: string): Refusal {
  return {
    kind: "registry-unanswered",
    need: "suspend",
    registryError,
    message: `[spec.suspend] cannot tell which VMs have hibernated: the snapshot registry did not answer: ${registryError}`,
  };
}
