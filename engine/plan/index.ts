/** The plan's vocabulary (actions, steps, refusals), the status it derives, its rendering and the report of a failed pass. Only what other layers use is exported here. */
export {
  ADMISSION_REASON,
  admissionMessage,
  type AdmissionRefusal,
  quotaBlockedStatus,
  type QuotaRefusal,
  quotaRefusalOf,
  summarizeFailures,
} from "./pass-report.js";
export { finalizerActions, type FinalizerAction } from "./finalizer.js";
export { holdBackSteps } from "./hold-back.js";
export {
  describeWait,
  type GoneSet,
  type ObjectsGone,
  type PassWait,
  passWait,
} from "./plan-wait.js";
export { planToJSON, renderPlan } from "./plan-render.js";
export type {
  MigrationDecision,
  Plan,
  PlanAction,
  PlanStep,
  PlanTarget,
  Refusal,
  StepWait,
} from "./plan-types.js";
export { condition, EXPIRING_CONDITION, statusEqual } from "./status.js";
export {
  deadlineWarning,
  progressDeadlineSeconds,
  PROGRESS_DEADLINE_EXCEEDED,
} from "./progress.js";
