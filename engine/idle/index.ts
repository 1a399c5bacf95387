/** The idle, expiry and hook policies (spec.idle, spec.expiry, spec.hooks), pure. Only what other layers use is exported here. */
export {
  planIdle,
  type IdleDecision,
  type IdleFleetDecision,
  type IdleInput,
  type IdleMember,
  type IdleMemberDecision,
  type IdleMemberKind,
  type IdleMemberState,
} from "./policy.js";
export { expiringLeadMs, expiryState, type ExpiryPolicy, type ExpiryState } from "./expiry.js";
export {
  fleetSubject,
  formatHookRecord,
  hibernationCause,
  hookEvent,
  hookFailureMessage,
  hookPolicy,
  hookRecordFor,
  hookTarget,
  hookVerdict,
  memberSubject,
  parseHookRecord,
  podHookRecord,
  suspendCause,
  type HookPolicy,
  type HookRecord,
  type HookCause,
  type HookEvent,
  type HookMoment,
  type HookOutcome,
  type HookSubject,
  type HookVerdict,
} from "./hooks.js";
export { activityLeaseName, leaseActivity, type ActivityLease } from "./activity.js";
export {
  idleMembers,
  newFleetMembers,
  policyForecast,
  policyForecastToJSON,
  renderPolicyForecast,
  type IdleForecastStep,
  type PolicyForecast,
} from "./forecast.js";
export {
  idleHibernationLabels,
  idleHibernationName,
  idleStepApplies,
  planIdleStep,
  type IdleEvent,
  type IdleHibernationWrite,
  type IdleStep,
  type IdleStepInput,
} from "./step.js";
