/** The engine's execution: passes, convergence, finalizer, deletion, the CRD install, preview and its dry runs. Only what other layers use is exported here. */
export { type HibernationHooks, HibernationRefused, runHibernationPass } from "./hibernation.js";
export { converge } from "./converge.js";
export { deleteFleet, finalizeDeletion } from "./deletion.js";
export { ensureFinalizer } from "./finalizer.js";
export { runPass } from "./pass.js";
export { type CreateLogs, type EngineHooks, type PassOptions } from "./pass-options.js";
export {
  addNameHolders,
  apiReads,
  listCocoonSetsVisible,
  listFleetPods,
  type PassReads,
  podSelector,
  readCocoonSet,
} from "./pass-reads.js";
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
export type { SnapshotRegistry } from "./snapshots.js";
