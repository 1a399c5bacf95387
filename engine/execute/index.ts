/** The engine's execution: passes, convergence, finalizer, deletion, the CRD install, preview and its dry runs. Only what other layers use is exported here. */
export { type HibernationHooks, HibernationRefused, runHibernationPass } from "./hibernation.js";
export { converge, type ConvergeGoal, type GoalView } from "./converge.js";
export { deleteFleet, finalizeDeletion } from "./deletion.js";
export { addFinalizerTo } from "./finalizer.js";
export { runPass } from "./pass.js";
export { type CreateLogs, type EngineHooks, type PassOptions } from "./pass-options.js";
export {
  cocoonSetsNaming,
  freshReader,
  listCocoonSetsVisible,
  listFleetPods,
  podSelector,
  readCocoonSet,
  readNameHolders,
  readNode,
} from "./pass-reads.js";
export type { Reader } from "./reader.js";
export {
  isSuspendRegistrySilence,
  onlyOvertaken,
  PassError,
  type PassFailure,
  passFailureSummary,
  SnapshotRegistryFailure,
} from "./pass-result.js";
export {
  groupByShape,
  plannedCocoonSet,
  previewCreates,
  type PreviewCreates,
  sendOnePerShape,
  type ShapeGroup,
} from "./preview-creates.js";
export {
  forecastCreates,
  forecastLive,
  forecastOn,
  listNodesAndPods,
  type LiveForecast,
  type NodesAndPods,
} from "./capacity.js";
export { previewPlan } from "./preview.js";
export { readPolicyForecast } from "./policy-forecast.js";
export type { SnapshotRegistry } from "./snapshots.js";
export {
  beforeTransition,
  callLifecycleHook,
  HookHeld,
  type HookCallResult,
  type HookReport,
} from "./hook-gate.js";
export { runIdleStep, type IdleStepResult } from "./idle.js";
