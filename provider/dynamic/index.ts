/**
 * The Pulumi dynamic providers (slots, Operator guards, rollout check) and the per-slot view.
 * The exported function names are called by name from users' stored state: see ../index.ts.
 */
export * from "./slot-view.js";
export * from "./slots.js";
export * from "./operator-guard.js";
export * from "./fleet-guard.js";
export * from "./controller-rollout.js";
