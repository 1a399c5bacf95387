// Reading a CocoonHibernation plan's actions in the hibernation tests: the first action of a
// kind, and the status, events and tag drop a plan carries.
import type { HibernationAction, HibernationPlan } from "../../../engine/hibernation/index.js";

type ActionOf<K extends HibernationAction["kind"]> = Extract<HibernationAction, { kind: K }>;

/** The plan's first action of `kind`, if any. */
export function actionOf<K extends HibernationAction["kind"]>(
  plan: HibernationPlan,
  kind: K,
): ActionOf<K> | undefined {
  return plan.actions.find((a): a is ActionOf<K> => a.kind === kind);
}

export const annotateOf = (plan: HibernationPlan) => actionOf(plan, "annotate-pod");
export const statusOf = (plan: HibernationPlan) => actionOf(plan, "write-status")?.status;
export const tagOf = (plan: HibernationPlan) => actionOf(plan, "delete-snapshot-tag")?.vm;
export const observeOf = (plan: HibernationPlan) => actionOf(plan, "observe-duration");
export const eventsOf = (plan: HibernationPlan) =>
  plan.actions.filter((a): a is ActionOf<"event"> => a.kind === "event");
export const kindsOf = (plan: HibernationPlan) => plan.actions.map((a) => a.kind);
