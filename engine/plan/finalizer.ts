// The one finalizer idiom of the plans: a finalizer is added and removed by plan actions, for
// the CocoonSet (its pass's setup, its deletion) and the CocoonHibernation alike; the engine
// carries them out with JSON patches that test what they depend on (engine/execute/finalizer.ts).
import type { PlanAction } from "./plan-types.js";

/** An action on a finalizer. */
export type FinalizerAction = Extract<PlanAction, { kind: "add-finalizer" | "remove-finalizer" }>;

/**
 * What a plan does with `finalizer` on an object: while the object lives (`live`), add it when
 * the copy planned from lacks it; once what the finalizer guards is done (`released`), remove
 * it. A removal is planned even when the copy lacks it: the copy may have been read before
 * the finalizer was added, and the executor checks the live object then. No finalizer (the
 * caller keeps none, as `pulumi up` does): nothing.
 */
export function finalizerActions(
  metadata: { finalizers?: readonly string[]; deletionTimestamp?: string },
  finalizer: string | undefined,
  stage: "live" | "released",
): FinalizerAction[] {
  if (finalizer === undefined) return [];
  if (stage === "released") return [{ kind: "remove-finalizer", finalizer }];
  if (metadata.deletionTimestamp !== undefined) return [];
  return (metadata.finalizers ?? []).includes(finalizer)
    ? []
    : [{ kind: "add-finalizer", finalizer }];
}
