/**
 * The package's `./provider` export: the engine's planning core (`core`), its Kubernetes
 * client (`kube`), execution (`engine`), owner release and the reaper (`release`), all in
 * engine/, and the Pulumi dynamic providers of this folder (`dynamic`).
 *
 * Stored Pulumi state depends on two names here, so they never change: the package's
 * `./provider` export path (each stored provider method runs
 * `import("pulumi-cocoonset/provider")`), and the function names of `dynamic` that those
 * methods call (`check`, `diff`, `create`, `update`, `remove`, `read`, `guardCheck`,
 * `guardCreate`, `guardUpdate`, `crdGuardDelete`, `rolloutCreate`, `rolloutUpdate`,
 * `fleetGuardCheck`, `fleetGuardCreate`, `fleetGuardUpdate`, and since ownership tokens
 * `guardDiff`, `guardDelete`, `fleetGuardDiff`, `fleetGuardDelete`). A stack
 * deployed with one version calls them by name from the next.
 */
export * as core from "../engine/core.js";
export * as kube from "../engine/kube/index.js";
export * as engine from "../engine/execute/index.js";
export * as release from "../engine/release/index.js";
export * as dynamic from "./dynamic/index.js";
