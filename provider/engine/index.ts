/** The engine's execution: passes, convergence, finalizer and deletion. */
export * from "./pass.js";
export * from "./lifecycle.js";
export * from "./install-crd.js";
export * from "./preview.js";
export * from "./simulate.js";
export * from "./preview-creates.js";
export * from "./snapshots.js";
export * from "./hibernation.js";
export * from "./finalizer.js";
