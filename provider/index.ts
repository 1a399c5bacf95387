/**
 * The engine both sides run: pure planning (`fleet`), the Kubernetes client (`kube`),
 * execution (`engine`), owner release and the reaper (`release`), and the Pulumi dynamic
 * provider (`dynamic`).
 */
export * as fleet from "./fleet/index.js";
export * as kube from "./kube/index.js";
export * as engine from "./engine/index.js";
export * as release from "./release/index.js";
export * as dynamic from "./dynamic/index.js";
