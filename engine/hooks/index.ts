/** Calling the lifecycle hooks of spec.hooks (I/O to the platform's service). */
export { callHook, hooksUrlProblem, parseHookUrl, type HookEndpoint } from "./call.js";
