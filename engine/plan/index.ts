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
export { holdBackSteps } from "./hold-back.js";
export { planToJSON, renderPlan } from "./plan-render.js";
export type {
  MigrationDecision,
  Plan,
  PlanAction,
  PlanStep,
  PlanTarget,
  Refusal,
} from "./plan-types.js";
export { statusEqual } from "./status.js";
export {
  deadlineWarning,
  progressDeadlineSeconds,
  PROGRESS_DEADLINE_EXCEEDED,
} from "./progress.js";
