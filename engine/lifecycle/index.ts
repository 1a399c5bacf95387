/** The planners of each lifecycle step: suspend and wake, slot release, migration, restore intent, snapshot ownership, blocked slots. Only what other layers use is exported here. */
export {
  agentNamesToCheck,
  isFollowedMember,
  namesToRead,
  placementNodeToRead,
} from "./blocked.js";
export { MIGRATE_POLL_MS, migrationStartTarget, type TargetNodeFacts } from "./migrate.js";
export { needsHibernationTargets, restoreProbes } from "./restore-intent.js";
export { unschedulableMessage } from "./unschedulable.js";
export {
  ownSnapshotFacts,
  SNAPSHOT_OWNER_ANNOTATION,
  snapshotRecordUpdate,
} from "./snapshot-owner.js";
export { asksHibernate, gateAwaitedVm, type SnapshotFacts } from "./suspend.js";
