/** What a CocoonSet and a CocoonHibernation are: the schema and its generated types and CRDs, defaults, validation, quantities, names, the annotations and labels. Only what other layers use is exported here. */
export {
  ANNOTATION_TRUE,
  ANNOTATIONS,
  CRD_NAME,
  DEFAULT_FANOUT,
  DEFAULT_HIBERNATE_TIMEOUT_MS,
  DEFAULT_WAKE_TIMEOUT_MS,
  EVENT_REASONS,
  FINALIZER,
  KIND,
  LABELS,
  LIFECYCLE_STATES,
  MANAGED_BY,
  NODE_LABELS,
  OPERATOR_LABELS,
  PLAN_METRICS,
  ROLES,
  SNAPSHOT_TAGS,
} from "./constants.js";
export { cocoonHibernationCrd, cocoonSetCrd, type CrdManifest } from "./crd-manifest.js";
export { effectiveSuspend, suspendView, withDefaults, withSpecDefaults } from "./defaults.js";
export { frozen } from "./frozen.js";
export {
  MIN_EXPIRY_AFTER_MS,
  MIN_IDLE_AFTER_MS,
  policyDurations,
  type PolicyDurations,
} from "./policy-durations.js";
export type { CocoonHibernation } from "./generated/hibernation-types.js";
export type {
  CocoonSet,
  CocoonSetSpec,
  CocoonSetStatus,
  ExpirySpec,
  HooksSpec,
  IdleSpec,
} from "./generated/types.js";
export { HIBERNATION_CRD_NAME, HIBERNATION_PLURAL } from "./hibernation-schema.js";
export type { Pod, PodManifest } from "./kube-types.js";
export { cocoonSetNameProblem, namespaceNameProblem, objectNameProblem } from "./names.js";
export {
  fnv1a64,
  jumpHash,
  parseShardBucket,
  SHARD_BUCKETS,
  shardBucketOf,
} from "./shard-bucket.js";
export { stableJson } from "./stable-json.js";
export { escapeUnsafeText, hasUnsafeText, redactUserinfo, safeText } from "./safe-text.js";
export {
  describeValue,
  formatFailure,
  prefixedProperty,
  validateCocoonSetSpec,
} from "./validate.js";
