/** The engine's execution: passes, convergence, finalizer, deletion, the CRD install, preview and its dry runs. Only what other layers use is exported here. */
export { type HibernationHooks, HibernationRefused, runHibernationPass } from "./hibernation.js";
export { converge } from "./converge.js";
export { deleteFleet, finalizeDeletion } from "./deletion.js";
export { ensureFinalizer } from "./finalizer.js";
export {
  addNameHolders,
  apiReads,
  type CreateLogs,
  type EngineHooks,
  isSuspendRegistrySilence,
  listCocoonSetsVisible,
  listFleetPods,
  onlyOvertaken,
  PassError,
  type PassFailure,
  passFailureSummary,
  type PassOptions,
  type PassReads,
  podSelector,
  readCocoonSet,
  runPass,
  SnapshotRegistryFailure,
} from "./pass.js";
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
