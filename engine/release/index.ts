/** Owner release and the orphan reaper: what deletes the engine's objects when they are done. */
export * from "./errors.js";
export * from "./select.js";
export * from "./decisions.js";
export * from "./release.js";
export * from "./owner-pod.js";
export * from "./reaper.js";
