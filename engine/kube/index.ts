/** The project's Kubernetes client: REST calls with retries, paths, watches. */
export * from "./client.js";
export * from "./kubeconfig.js";
export * from "./kubeconfig-file.js";
export { keyOf, namespaceOf, rfc3339Seconds } from "./objects.js";
export * from "./paths.js";
export * from "./wait.js";
