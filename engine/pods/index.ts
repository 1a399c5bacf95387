/** One pod: how it is built, read (state, slot, owner), classified, compared for drift; its rebuild history, backoff and vanish record; its quota usage. Only what other layers use is exported here. */
export { classifyPods, isOwnedPod } from "./classify.js";
export { agentDrift, toolboxDrift, VM_FIELDS } from "./drift.js";
export { agentPodName, buildAgentPod, buildToolboxPod, toolboxPodName } from "./pod-builder.js";
export { isReady, isTerminal, isTerminating, removedAtOnce, vmLive } from "./pod-state.js";
export {
  podQuotaUsage,
  type QuotaOverflow,
  quotaOverflows,
  type ResourceQuotaObject,
} from "./quota-room.js";
export { type SlotCreateLog, type SlotCreateRecord, vanishingSlots } from "./vanish.js";
