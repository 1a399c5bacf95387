// The import rules of the project (docs/architecture.md, "The layers"), checked by
// dependency-cruiser in `npm run lint` and `npm test`: no module imports itself back through
// others (no cycles, type-only imports included), and each layer imports only the layers
// below it. Tests, benchmarks and build scripts may import any layer, but no cycles either.

/** The layers from the bottom up: a module may import its own layer and those before it. */
const LAYERS = [
  { name: "kube", path: "^engine/kube/" },
  // The planning core, room by room: pure code, each room on the ones before it.
  { name: "spec", path: "^engine/spec/" },
  { name: "attribution", path: "^engine/attribution/" },
  { name: "pods", path: "^engine/pods/" },
  { name: "capacity", path: "^engine/capacity/" },
  { name: "snapshots", path: "^engine/snapshots/" },
  { name: "plan", path: "^engine/plan/" },
  { name: "lifecycle", path: "^engine/lifecycle/" },
  { name: "idle", path: "^engine/idle/" },
  { name: "planner", path: "^engine/planner/" },
  { name: "hibernation", path: "^engine/(hibernation/|core\\.ts$)" },
  { name: "registry", path: "^engine/registry/" },
  { name: "hooks", path: "^engine/hooks/" },
  { name: "release", path: "^engine/release/" },
  { name: "execute", path: "^engine/execute/" },
  // What a cluster needs for a deploy, read and judged: `cocoonset doctor` and the guards' checks.
  { name: "preflight", path: "^engine/preflight/" },
  // provider/index.ts is the package's `./provider` facade over all of the above.
  { name: "dynamic", path: "^provider/" },
  { name: "controller", path: "^controller/" },
  { name: "sdk", path: "^sdk/" },
  { name: "plugin", path: "^plugin/" },
  { name: "cli", path: "^cli/" },
  // Development tooling (`cocoonset-dev`), not in the published package: on top of it all.
  { name: "cluster", path: "^cluster/" },
];

/** The planning core's rooms. */
const CORE =
  "^engine/(spec|attribution|pods|capacity|snapshots|plan|lifecycle|idle|planner|hibernation)/";

const upward = LAYERS.slice(0, -1).map((layer, i) => ({
  name: `layer-${layer.name}`,
  comment: `${layer.name} (${layer.path}) imports only the layers below it`,
  severity: "error",
  from: { path: layer.path },
  to: { path: LAYERS.slice(i + 1).map((above) => above.path) },
}));

module.exports = {
  forbidden: [
    {
      name: "no-circular",
      comment: "a cycle of imports: cut it by moving the shared part into a module of its own",
      severity: "error",
      from: {},
      to: { circular: true },
    },
    {
      name: "core-is-pure",
      comment:
        "the planning core does no I/O: of the Kubernetes layer it uses only the object metadata, the API names and the error base",
      severity: "error",
      from: { path: CORE },
      to: {
        path: "^engine/kube/",
        pathNot: "^engine/kube/(objects|api-names|branded-error)\\.ts$",
      },
    },
    ...upward,
  ],
  options: {
    // Type-only imports count: a cycle of types is a cycle of meaning.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    doNotFollow: { path: "node_modules" },
    exclude: { path: "^(dist|node_modules|templates)/" },
  },
};
