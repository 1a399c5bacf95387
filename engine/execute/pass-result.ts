/**
 * What a pass reports: its result, and every way it fell short as a typed error (the
 * planner's refusals, a step's API error, an overtaken CocoonSet, an abort).
 */
import { summarizeFailures, type QuotaRefusal, type Plan, type Refusal } from "../plan/index.js";
import { type CocoonSet, type Pod } from "../spec/index.js";
import { isConflict } from "../kube/index.js";
import { BrandedError, errorMessage } from "../kube/branded-error.js";

/** The error a pass reports when its signal stopped it. */
export const PASS_ABORTED = "stopped before the end of the pass: the caller aborted it";

/** What one pass did. */
export interface PassResult {
  plan: Plan;
  /** Pods the plan created (names). */
  created: string[];
  /** Pods the plan deleted (names). */
  deleted: string[];
  /** Names a create found held by a pod that is not the fleet's ({@link EngineHooks.nameHeld}). */
  namesHeld?: string[];
  /** Pods whose steps were held back: in {@link PassOptions.outstanding} (names). */
  heldBack?: string[];
  /** Every failure as a typed error, in step order (the planner's refusals first). */
  failures: PassFailure[];
  /** 0: run again at once; n: after n ms; undefined: only on a change. */
  requeueAfterMs: number | undefined;
  statusWritten: boolean;
  /** Every planned create or delete met a same-name pod: nothing changed this pass. */
  stalled?: boolean;
  /** A write met a newer CocoonSet (409): planning again on fresh data fixes it. */
  conflicted?: boolean;
  /** The CocoonSet after this pass's writes (history, status). */
  cocoonSet: CocoonSet;
  /** The pods the pass planned from, as its reader gave them (the fleet's, then name holders). */
  pods: Pod[];
  /** The ResourceQuota that refused a create of this pass, as the apiserver named it. */
  quotaRefusal?: QuotaRefusal;
  /**
   * The apiserver's message when its admission (Pod Security, a webhook, a policy; not a
   * quota) refused a create of this pass (403).
   */
  admissionRefusal?: string;
  /** Creates not sent because a ResourceQuota had refused one before them in this pass. */
  unsentCreates?: number;
}

/**
 * One bounded line for a pass that fell short (counts by decision, the quota that refused,
 * the first failure): what the controller logs and reports, however many steps failed.
 */
export function passFailureSummary(result: PassResult): string {
  return summarizeFailures(
    result.failures.map((f) =>
      StepFailure.isInstance(f)
        ? {
            pod: f.pod,
            decision: f.decision,
            message: f.cause instanceof Error ? f.cause.message : String(f.cause),
          }
        : { message: f.message },
    ),
    result.unsentCreates,
    result.quotaRefusal,
  );
}

/** The planner refused part of the spec (a toolbox name another pod holds, bad names). */
export class PlanRefusal extends BrandedError {
  constructor(
    /** The planner's refusal, as data. */
    readonly refusal: Refusal,
  ) {
    super(refusal.message);
  }
}

/**
 * The snapshot registry did not answer what the pass needed: nothing was changed (the pass
 * fails closed) and it is tried again.
 */
export class SnapshotRegistryFailure extends BrandedError {
  constructor(
    /** The planner's refusal: what the registry was asked for, and its error. */
    readonly refusal: Extract<Refusal, { kind: "registry-unanswered" }>,
  ) {
    super(refusal.message);
  }
}

/** The pass failure a planner's refusal is reported as. */
export function refusalFailure(refusal: Refusal): PlanRefusal | SnapshotRegistryFailure {
  return refusal.kind === "registry-unanswered"
    ? new SnapshotRegistryFailure(refusal)
    : new PlanRefusal(refusal);
}

/**
 * Whether a pass failure is only a suspend's registry silence (docs/behaviour.md §3.15): it
 * changed nothing, and a wait for the suspend retries it.
 */
export function isSuspendRegistrySilence(f: PassFailure): boolean {
  return SnapshotRegistryFailure.isInstance(f) && f.refusal.need === "suspend";
}

/** One step's action failed against the cluster; `cause` is the API error. */
export class StepFailure extends BrandedError {
  constructor(
    /** The pod the step acts on. */
    readonly pod: string,
    /** What the step was doing (`create`, `rebuild`, `generation-stamp`, …). */
    readonly decision: string,
    cause: unknown,
  ) {
    super(`${pod} (${decision}): ${errorMessage(cause)}`, { cause });
  }
}

/** A write met a newer CocoonSet (409): the pass is planned again on fresh data. */
export class StaleCocoonSet extends BrandedError {
  constructor() {
    super("the CocoonSet changed during the pass; it will be planned again");
  }
}

/**
 * Whether the pass fell short only because the CocoonSet it planned from was overtaken by
 * another write (409 on its history or status write): planning again on a fresh read is
 * all it takes.
 */
export function onlyOvertaken(result: PassResult): boolean {
  return (
    result.conflicted === true &&
    result.failures.every(
      (f) =>
        StaleCocoonSet.isInstance(f) ||
        (StepFailure.isInstance(f) && isConflict((f as Error).cause)),
    )
  );
}

/** The pass's signal stopped it before the end. */
export class PassAborted extends BrandedError {
  constructor() {
    super(PASS_ABORTED);
  }
}

/** Why a pass fell short. */
export type PassFailure =
  PlanRefusal | SnapshotRegistryFailure | StepFailure | StaleCocoonSet | PassAborted;

/** Thrown when a pass could not do everything; carries what it did. */
export class PassError extends BrandedError {
  constructor(
    message: string,
    readonly result: PassResult,
  ) {
    super(message);
  }
}
