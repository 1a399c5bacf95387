/**
 * What the slots resource says and waits for around a suspend or a wake of its fleet: the
 * change a new spec asks for, the one-line summary preview prints for it, and which pods a
 * suspend or a wake still waits for. Pure: the slots resource (slots.ts) and its lifecycle
 * wait (lifecycle-wait.ts) feed it the cluster's objects.
 * Behaviour: docs/behaviour.md §7.4.
 */
import { asksHibernate } from "../../engine/lifecycle/index.js";
import type { Plan } from "../../engine/plan/index.js";
import { isOwnedPod, isTerminal, isTerminating } from "../../engine/pods/index.js";
import {
  ANNOTATIONS,
  ANNOTATION_TRUE,
  LIFECYCLE_STATES,
  type CocoonSet,
  type CocoonSetSpec,
  type Pod,
} from "../../engine/spec/index.js";
import type { SlotMap } from "./slot-view.js";

/** A flip of `spec.suspend` between two deploys. */
export type LifecycleChange = "suspend" | "wake";

/** How long `pulumi up` waits for a suspend or a wake by default, in seconds. */
export const DEFAULT_SUSPEND_TIMEOUT_SECONDS = 300;

/**
 * The change from the last deploy's spec to the new one: `suspend` when `spec.suspend`
 * turns true, `wake` when it turns from true to anything else, none otherwise (also when
 * the new value is not known yet, or there is no last deploy: a fleet created suspended is
 * a create, not a suspend).
 */
export function lifecycleChange(
  oldSpec: Partial<CocoonSetSpec> | undefined,
  newSpec: Partial<CocoonSetSpec> | undefined,
  isUnknown: (v: unknown) => boolean,
): LifecycleChange | undefined {
  if (oldSpec === undefined || newSpec === undefined || isUnknown(newSpec.suspend)) return;
  const was = oldSpec.suspend === true;
  const is = newSpec.suspend === true;
  if (!was && is) return "suspend";
  if (was && !is) return "wake";
  return undefined;
}

/** Whether a pod has a VM lifecycle the node agent reports on (static toolboxes have none). */
function managed(pod: Pod): boolean {
  return pod.metadata?.annotations?.[ANNOTATIONS.managed] === ANNOTATION_TRUE;
}

/** The pods a suspend or a wake concerns: owned, managed, live and not terminal. */
export function lifecyclePods(cs: CocoonSet, pods: readonly Pod[]): Pod[] {
  return pods.filter((p) => isOwnedPod(cs, p) && managed(p) && !isTerminal(p) && !isTerminating(p));
}

/**
 * How many pods the change moves: of the live pods when they could be listed, else of the
 * desired slots (every slot but a static toolbox).
 */
export function lifecycleCount(
  cs: CocoonSet,
  pods: readonly Pod[] | undefined,
  slots: SlotMap,
): number {
  if (pods !== undefined) return lifecyclePods(cs, pods).length;
  return Object.values(slots).filter((s) => s.mode !== "static").length;
}

/** The line preview prints for a suspend or a wake of the fleet. */
export function lifecycleSummary(
  change: LifecycleChange,
  namespace: string,
  name: string,
  count: number,
): string {
  const one = count === 1;
  return change === "suspend"
    ? `suspend fleet ${namespace}/${name} (${count} pod${one ? " hibernates" : "s hibernate"}; the slots are kept)`
    : `wake fleet ${namespace}/${name} (${count} pod${one ? " wakes" : "s wake"} from the hibernation snapshots)`;
}

/** The pods a suspend still waits for, as the pass planned them (sorted, unique). */
export function suspendPending(plan: Plan): string[] {
  const names = plan.steps
    .filter((s) => s.decision === "hibernate" || s.decision === "wait-hibernation")
    .map((s) => s.podName);
  return [...new Set(names)].sort();
}

/**
 * The pods a wake still waits for (sorted): a pod still asked to hibernate, or whose node
 * agent reports a state other than `ready` (`hibernated`, `hibernating`, `creating`). A pod
 * with no lifecycle state at all has no node agent reporting on it and is not waited for.
 */
export function wakePending(cs: CocoonSet, pods: readonly Pod[]): string[] {
  const out: string[] = [];
  for (const pod of lifecyclePods(cs, pods)) {
    const state = pod.metadata?.annotations?.[ANNOTATIONS.lifecycleState];
    if (asksHibernate(pod) || (state !== undefined && state !== LIFECYCLE_STATES.ready))
      out.push(pod.metadata?.name ?? "");
  }
  return out.sort();
}

/** `name (lifecycle state S)` for each named pod, for a timeout message. */
export function describePods(pods: readonly Pod[], names: readonly string[]): string {
  const byName = new Map(pods.map((p) => [p.metadata?.name ?? "", p]));
  return names
    .map((n) => {
      const pod = byName.get(n);
      if (!pod) return `${n} (gone)`;
      const state = pod.metadata?.annotations?.[ANNOTATIONS.lifecycleState];
      return `${n} (${state ? `lifecycle state ${state}` : "no lifecycle state reported"})`;
    })
    .join(", ");
}
