// The plan of one CocoonHibernation reconcile, in the engine's plan language: the same
// action kinds the CocoonSet planner returns (`PlanAction` of plan.ts: annotate a pod, drop a
// snapshot tag, post an event, write the status), plus the few a CocoonHibernation needs of
// its own (its finalizer, a phase-duration histogram). The planner is hibernation.ts; the
// engine carries the plan out (engine/execute/hibernation.ts).
import type { PlanAction } from "../plan/plan-types.js";
import type { CocoonHibernationStatus } from "../spec/generated/hibernation-types.js";

/** Histograms (without the `cocoonset_` prefix) of the time spent in a transition. */
export const HIBERNATION_METRICS = {
  hibernate: "hibernate_phase_duration_seconds",
  wake: "wake_phase_duration_seconds",
} as const;

/** One thing the hibernation executor does against the cluster, in plan order. */
export type HibernationAction =
  /** Merge-patch the target pod's annotations (uid precondition); null removes a key. */
  | Extract<PlanAction, { kind: "annotate-pod" }>
  /**
   * Delete `<vm>:<tag>` from the snapshot registry (a missing tag counts as deleted); a
   * best-effort delete that fails is logged and the plan goes on.
   */
  | (Extract<PlanAction, { kind: "delete-snapshot-tag" }> & { bestEffort?: boolean })
  /** Emit an event on the CocoonHibernation. */
  | Extract<PlanAction, { kind: "event" }>
  /** Merge-patch the CocoonHibernation's status subresource. */
  | { kind: "write-status"; status: CocoonHibernationStatus }
  /** Add or remove the CocoonHibernation's finalizer, as the CocoonSet plan does its own. */
  | Extract<PlanAction, { kind: "add-finalizer" | "remove-finalizer" }>
  /** Observe one finished transition in a histogram (name without the `cocoonset_` prefix). */
  | {
      kind: "observe-duration";
      metric: (typeof HIBERNATION_METRICS)[keyof typeof HIBERNATION_METRICS];
      result: "ok" | "timeout";
      seconds: number;
    };

/**
 * Why a reconcile could not decide everything: reported after the plan's actions ran, and
 * retried with backoff.
 */
export type HibernationRefusal = {
  /**
   * The registry did not say whether `<vm>:hibernate` exists, and the deadline has not
   * passed: the CR stays as it is.
   */
  kind: "snapshot-registry-unanswered";
  vm: string;
  /** The registry client's own error text, for the message only. */
  detail: string;
};

/** The one-line message of a refusal (the event log and the runtime's error line). */
export function hibernationRefusalMessage(r: HibernationRefusal): string {
  switch (r.kind) {
    case "snapshot-registry-unanswered":
      return `probe hibernate snapshot ${r.vm}: ${r.detail}`;
  }
}

/** What one reconcile of a CocoonHibernation does. */
export interface HibernationPlan {
  /** Run in order; the first failure stops the rest (a best-effort tag delete excepted). */
  actions: HibernationAction[];
  /** Reported once the actions ran; the CR is reconciled again with backoff. */
  refusal?: HibernationRefusal;
  /** 0: reconcile again at once; a number: after that delay; undefined: on the next change. */
  requeueAfterMs?: number;
  /** Why, for the log. */
  decision: string;
}
