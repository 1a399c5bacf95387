/**
 * The planning core's public names, room by room: what the package's `./provider` facade
 * shows as `core`. Pure code, no I/O; other layers import the rooms' own index files.
 */
export * from "./spec/index.js";
export * from "./pods/index.js";
export * from "./snapshots/index.js";
export * from "./plan/index.js";
export * from "./lifecycle/index.js";
export * from "./planner/index.js";
export * from "./hibernation/index.js";
