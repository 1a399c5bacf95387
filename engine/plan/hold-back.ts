/**
 * Holding back the steps of a plan that act on pods whose last write the caller's reads do
 * not show yet (the controller's expectations): a plan made from a lagging cache would
 * otherwise create a taken name again or count one failure twice. The planner stays the
 * same for every caller; this only narrows what the executor is handed.
 */
import type { Plan, PlanAction, PlanStep } from "./plan-types.js";

/** The pod names a step touches: its own, and those its pod actions name. */
function podsOf(step: PlanStep): string[] {
  const names = [step.podName];
  for (const a of step.actions) {
    const name = podOfAction(a);
    if (name !== undefined) names.push(name);
  }
  return names;
}

function podOfAction(a: PlanAction): string | undefined {
  switch (a.kind) {
    case "create-pod":
      return a.pod.metadata.name;
    case "delete-pod":
    case "annotate-pod":
      return a.name;
    default:
      return undefined;
  }
}

const changesPods = (s: PlanStep): boolean =>
  s.actions.some((a) => a.kind === "create-pod" || a.kind === "delete-pod");

/**
 * The plan without the steps that touch a pod in `outstanding`, and the pod names of those
 * held back. When any step is held back the plan's status is dropped too: it was derived
 * from a view known to be behind, so the pass after the watch catches up writes it.
 */
export function holdBackSteps(
  plan: Plan,
  outstanding: ReadonlySet<string>,
): { plan: Plan; heldBack: string[] } {
  if (outstanding.size === 0) return { plan, heldBack: [] };
  const steps: PlanStep[] = [];
  const heldBack: string[] = [];
  for (const step of plan.steps) {
    if (podsOf(step).some((n) => outstanding.has(n))) heldBack.push(step.podName);
    else steps.push(step);
  }
  if (heldBack.length === 0) return { plan, heldBack };
  return {
    plan: { ...plan, steps, status: undefined, mutatesPods: steps.some(changesPods) },
    heldBack,
  };
}
