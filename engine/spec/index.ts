/** What a CocoonSet and a CocoonHibernation are: the schema and its generated types and CRDs, defaults, validation, quantities, names, the annotations and labels. Only what other layers use is exported here. */
export {
  ANNOTATION_TRUE,
  ANNOTATIONS,
  CRD_NAME,
  DEFAULT_FANOUT,
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
export { withDefaults, withSpecDefaults } from "./defaults.js";
export type { CocoonHibernation } from "./generated/hibernation-types.js";
export type { CocoonSet, CocoonSetSpec, CocoonSetStatus } from "./generated/types.js";
export { HIBERNATION_CRD_NAME, HIBERNATION_PLURAL } from "./hibernation-schema.js";
export type { Pod, PodManifest } from "./kube-types.js";
export { cocoonSetNameProblem, namespaceNameProblem, objectNameProblem } from "./names.js";
export { stableJson } from "./stable-json.js";
export { escapeUnsafeText, hasUnsafeText, redactUserinfo, safeText } from "./safe-text.js";
export {
  describeValue,
  formatFailure,
  prefixedProperty,
  validateCocoonSetSpec,
} from "./validate.js";
