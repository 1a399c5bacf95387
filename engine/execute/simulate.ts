// A pure stand-in for the executor and the cluster: applies a plan to a list of pods. The
// preview uses it to plan a new fleet past its main agent; the property tests use it to run
// passes to a fixpoint. Not part of the planning core: the core decides, this plays it out.
import type { Plan, PlanAction, PlanStep } from "../plan/index.js";
import type { Pod } from "../spec/index.js";

/** How {@link applyPlanToPods} behaves. */
export interface SimulationOptions {
  /** Time of the pass; part of the uids given to created pods. */
  nowMs: number;
  /** Whether created pods come up Running and Ready, as a healthy virtual kubelet makes them. @default true */
  ready?: boolean;
  /** Node given to created pods that the plan did not bind. @default "sim-node" */
  nodeName?: string;
  /** Return true to make an action fail; the rest of its step is skipped, like the executor does. */
  fail?: (action: PlanAction, step: PlanStep) => boolean;
}

/** An event the plan emitted. */
export interface SimulatedEvent {
  type: string;
  reason: string;
  message: string;
}

/** What applying a plan did. */
export interface SimulationResult {
  /** The pods afterwards (deleted pods are gone at once). */
  pods: Pod[];
  /** The last rebuild-history value written, if any; the caller stores it on the CocoonSet. */
  historyValue?: string;
  /** Events emitted. */
  events: SimulatedEvent[];
  /** Counter increments by metric name. */
  metrics: Record<string, number>;
  /** Pods deleted, as `name/uid`. */
  deleted: string[];
}

/** The pod the apiserver would hold after a create: a uid, a node and, unless told, Ready. */
function createdPod(manifest: Pod, options: SimulationOptions, n: number): Pod {
  const pod: Pod = structuredClone(manifest);
  const name = pod.metadata?.name ?? "";
  pod.metadata = { ...pod.metadata, uid: `sim-${name}-${options.nowMs}-${n}` };
  if (pod.spec && !pod.spec.nodeName) pod.spec.nodeName = options.nodeName ?? "sim-node";
  pod.status =
    (options.ready ?? true)
      ? { phase: "Running", conditions: [{ type: "Ready", status: "True" }] }
      : { phase: "Pending" };
  return pod;
}

/** A pod's annotations after a patch that sets some and removes those given as null. */
function annotated(pod: Pod, patch: Record<string, string | null>): Record<string, string> {
  const annotations = { ...pod.metadata?.annotations };
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete annotations[k];
    else annotations[k] = v;
  }
  return annotations;
}

/** Applies `plan` to `pods` without touching the inputs, the way the executor would. */
export function applyPlanToPods(
  pods: readonly Pod[],
  plan: Plan,
  options: SimulationOptions,
): SimulationResult {
  const current: Pod[] = pods.map((p) => structuredClone(p));
  // Pods by name (deleted ones taken out), so each action costs the same however large the fleet.
  const byName = new Map<string, Pod[]>();
  const removed = new Set<Pod>();
  const index = (pod: Pod): void => {
    const name = pod.metadata?.name ?? "";
    const same = byName.get(name);
    if (same) same.push(pod);
    else byName.set(name, [pod]);
  };
  current.forEach(index);
  const result: SimulationResult = { pods: [], events: [], metrics: {}, deleted: [] };
  let created = 0;
  const apply = (action: PlanAction): void => {
    switch (action.kind) {
      case "create-pod": {
        const name = action.pod.metadata.name;
        if ((byName.get(name)?.length ?? 0) > 0) return; // AlreadyExists
        const pod = createdPod(action.pod, options, created++);
        current.push(pod);
        index(pod);
        return;
      }
      case "delete-pod": {
        const same = byName.get(action.name) ?? [];
        const gone = same.filter((p) => p.metadata?.uid === action.uid);
        if (gone.length === 0) return;
        byName.set(
          action.name,
          same.filter((p) => p.metadata?.uid !== action.uid),
        );
        for (const p of gone) removed.add(p);
        result.deleted.push(`${action.name}/${action.uid}`);
        return;
      }
      case "annotate-pod": {
        const pod = byName.get(action.name)?.find((p) => p.metadata?.uid === action.uid);
        if (pod?.metadata) pod.metadata.annotations = annotated(pod, action.annotations);
        return;
      }
      case "write-history":
        result.historyValue = action.value;
        return;
      case "event":
        result.events.push({ type: action.type, reason: action.reason, message: action.message });
        return;
      case "count-metric":
        result.metrics[action.metric] = (result.metrics[action.metric] ?? 0) + 1;
        return;
      // The CocoonSet and the registry are not simulated.
      case "annotate-cocoonset":
      case "delete-snapshot-tag":
      case "write-status":
        return;
    }
  };
  for (const step of plan.steps) {
    for (const action of step.actions) {
      if (options.fail?.(action, step)) break;
      apply(action);
    }
  }
  result.pods = current.filter((p) => !removed.has(p));
  return result;
}
