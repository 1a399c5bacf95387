/** The idle, expiry and hook policies (spec.idle, spec.expiry, spec.hooks), pure. Only what other layers use is exported here. */
export {
  fleetLastActivity,
  isIdle,
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
  hookEvent,
  hookTarget,
  hookVerdict,
  type HookCause,
  type HookEvent,
  type HookMoment,
  type HookOutcome,
  type HookSubject,
  type HookVerdict,
} from "./hooks.js";
export {
  ACTIVITY_LEASE_SUFFIX,
  activityLeaseName,
  lastActivityOf,
  leaseActivity,
  memberPods,
  type ActivityLease,
} from "./activity.js";
