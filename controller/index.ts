/** The controller: a small manager (shared informer cache with indexes, per-controller work queues and metrics, leader election, events, health) and the CocoonSet and CocoonHibernation controllers it runs. */
export * from "./types.js";
export * from "./work-queue.js";
export * from "./informer.js";
export * from "./leader-election.js";
export * from "./metrics.js";
export * from "./events.js";
export * from "./logger.js";
export * from "./health.js";
export * from "./options.js";
export * from "./rbac.js";
export * from "./runtime.js";
export * from "./cache.js";
export * from "./cocoonset-metrics.js";
export * from "./cocoonset-controller.js";
export * from "./cocoonset-reconciler.js";
export * from "./expectations.js";
export * from "./fleet-cache.js";
