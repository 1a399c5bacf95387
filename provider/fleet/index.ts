// The pure planning core of the engine: schema, defaults, pod builder, classification, drift,
// rebuild history, backoff, slot plan and status. No I/O; time is injected.
export * from "./constants.js";
export type * from "./generated/types.js";
export { COCOONSET_API_VERSION } from "./generated/types.js";
export type * from "./kube-types.js";
export { cocoonHibernationCrd, cocoonSetCrd, type CrdManifest } from "./crd-manifest.js";
export {
  DEFAULT_AGENT_MODE,
  DEFAULT_BACKEND,
  DEFAULT_HIBERNATE_POLICY,
  DEFAULT_NODE_POOL,
  DEFAULT_OS,
  DEFAULT_REPLICAS,
  DEFAULT_SNAPSHOT_POLICY,
  DEFAULT_TOOLBOX_MODE,
  MAX_COCOONSET_NAME_LENGTH,
  cocoonSetSchema,
  cocoonSetSpecSchema,
  cocoonSetStatusSchema,
  type CelRule,
  type SchemaNode,
} from "./schema-source.js";
export { applySchemaDefaults, withDefaults, withSpecDefaults } from "./defaults.js";
export {
  cocoonSetNameProblem,
  describeValue,
  formatFailure,
  namespaceNameProblem,
  prefixedProperty,
  validateCocoonSetSpec,
  type SpecValidation,
  type ValidationFailure,
} from "./validate.js";
export {
  MAX_QUANTITY,
  isZeroQuantity,
  parseQuantity,
  quantitiesEqual,
  readQuantity,
  type Quantity,
  type QuantityReading,
} from "./quantity.js";
export {
  agentPodName,
  buildAgentPod,
  buildToolboxPod,
  ownerReferenceTo,
  toolboxPodName,
  vmNameFor,
  type AgentPodOptions,
} from "./pod-builder.js";
export {
  controllerUid,
  isControlledBy,
  isReady,
  isTerminal,
  isTerminating,
  vmLive,
} from "./pod-state.js";
export { classifyPods, isOwnedPod, parseSlot, type ClassifiedPods } from "./classify.js";
export { agentDrift, toolboxDrift, VM_FIELDS, type Compare } from "./drift.js";
export {
  parseRebuildHistory,
  readRebuildHistory,
  serializeRebuildHistory,
  type RebuildEntry,
  type RebuildHistory,
} from "./rebuild-history.js";
export { backoffDelayMs, backoffRemainingMs } from "./backoff.js";
export {
  decideRecreate,
  pruneCreateLog,
  vanishDelayMs,
  vanishingSlots,
  VANISH_MAX_DELAY_MS,
  VANISH_REPORT_AFTER,
  VANISH_WINDOW_MS,
  type RecreateDecision,
  type SlotCreateLog,
  type SlotCreateRecord,
} from "./vanish.js";
export type {
  AlreadyExistsPolicy,
  Decision,
  GenerationStamp,
  MigrationDecision,
  Plan,
  PlanAction,
  Refusal,
  PlanStep,
  PlanTarget,
  RegistryNeed,
} from "./plan-types.js";
export { planPass, toolboxNameErrors, type PlanInput } from "./plan.js";
export { snapshotProbes } from "./probes.js";
export {
  asksHibernate,
  gateProbes,
  hibernationGate,
  suspendUnanswered,
  suspendsRetaining,
  SUSPEND_POLL_MS,
  type HibernationGate,
  type SnapshotFacts,
} from "./suspend.js";
export {
  hibernatedOnNode,
  hintAffinity,
  planSlotRelease,
  releasedSnapshotLost,
  slotReleaseProbes,
  suspendsReleasing,
  unschedulableMessage,
  wakeMainPod,
  HINT_AFFINITY_WEIGHT,
  type SlotReleaseInput,
  type SlotReleasePlan,
  type WakePlacement,
} from "./slot-release.js";
export {
  MIGRATE_POLL_MS,
  migrationConsults,
  migrationStartTarget,
  targetNodeProblem,
  type TargetNodeFacts,
  migrationProbes,
  planMigration,
  type MigrationInput,
  type MigrationPlan,
} from "./migrate.js";
export {
  agentSlotOfVm,
  deleteVmNamesStash,
  hibernationsInFlight,
  keepsLatestTag,
  parseDeleteVmNames,
  teardownTags,
  teardownVmNames,
  type TeardownTag,
} from "./teardown.js";
export {
  planToJSON,
  renderPlan,
  stepsInSlotOrder,
  type PlanChangeJSON,
  type PlanJSON,
} from "./plan-render.js";
export {
  deriveStatus,
  fleetPhase,
  memberPhase,
  memberReady,
  rfc3339Seconds,
  statusEqual,
  type StatusInput,
} from "./status.js";
export {
  clip,
  MAX_REASON_CHARS,
  QUOTA_CONDITION,
  quotaBlockedStatus,
  quotaRefusalOf,
  summarizeFailures,
  type FailedStep,
  type QuotaRefusal,
} from "./pass-report.js";
export {
  formatQuantity,
  podQuotaUsage,
  quotaOverflows,
  usageKeyOf,
  type QuotaOverflow,
  type QuotaPod,
  type QuotaUsage,
  type ResourceQuotaObject,
} from "./quota-room.js";
export type {
  CocoonHibernation,
  CocoonHibernationPhase,
  CocoonHibernationSpec,
  CocoonHibernationStatus,
  HibernationDesire,
  HibernationPodRef,
} from "./generated/hibernation-types.js";
export { COCOONHIBERNATION_API_VERSION } from "./generated/hibernation-types.js";
export * from "./hibernation-schema.js";
export * from "./hibernation.js";
export * from "./hibernation-plan.js";
export * from "./restore-intent.js";
export * from "./vm-names.js";
export * from "./snapshot-owner.js";
export * from "./lost-snapshots.js";
export * from "./blocked.js";
