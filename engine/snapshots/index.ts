/** Whose VM name and snapshot tag it is: hibernation targets, lost snapshots, the teardown of a fleet's tags, VM-name holders. Only what other layers use is exported here. */
export { type HibernationTarget, hibernationTargets } from "./hibernation-targets.js";
export { wakeProbes } from "./lost-snapshots.js";
export {
  deleteVmNamesStash,
  hibernationsInFlight,
  type TeardownTag,
  teardownTags,
  teardownVmNames,
} from "./teardown.js";
export {
  needsVmNameCheck,
  vmHeldByHibernation,
  vmNameClash,
  vmNameClashMessage,
} from "./vm-names.js";
export {
  claimsStaticVms,
  staticVmClash,
  staticVmClashMessage,
  type StaticClash,
} from "./static-vms.js";
