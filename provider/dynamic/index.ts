/** The Pulumi dynamic provider of the slots resource, and the per-slot view it keeps. */
export * from "./slot-view.js";
export * from "./slots.js";
export * from "./operator-guard.js";
export * from "./controller-rollout.js";
