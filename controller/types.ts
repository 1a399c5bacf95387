/**
 * The contract between the controller runtime and the reconcile logic it drives. The
 * engine implements {@link Reconciler}; the runtime owns queues, informers, leases, logs,
 * events and metrics, and hands the engine what it needs through {@link ReconcileContext}.
 */
import type { Logger } from "pino";
import { keyOf, type ObjectLike } from "../engine/kube/index.js";

export type { Logger } from "pino";

/** The identity of an object in the work queue. */
export interface ObjectKey {
  namespace: string;
  name: string;
}

/** Event severity, as the events API spells it. */
export type EventType = "Normal" | "Warning";

/**
 * Records Kubernetes Events about an object.
 *
 * Guarantees: never rejects; a failure to post is logged. Identical events (same object
 * uid, reason and note) within the dedup window are posted once.
 */
export interface EventRecorder {
  /**
   * Records one event.
   * @param regarding the object the event is about (apiVersion, kind, metadata name/namespace/uid)
   * @param type Normal or Warning
   * @param reason a CamelCase machine-readable reason, e.g. `SubAgentRebuilding`
   * @param note the human-readable message
   * @param action what the controller did or failed to do @default reason
   */
  event(
    regarding: ObjectLike,
    type: EventType,
    reason: string,
    note: string,
    action?: string,
  ): Promise<void>;
}

/**
 * The CocoonSet controller's engine-facing metrics: small methods so the engine never imports
 * prom-client (`cocoonset-metrics.ts` implements them).
 */
export interface ControllerMetrics {
  /** One sub-agent rebuild (terminal pod deleted for recreation). */
  rebuild(namespace: string, cocoonset: string): void;
  /** One sub-agent parked in dead-letter. */
  deadLetter(namespace: string, cocoonset: string): void;
  /** Objects deleted by the orphan reaper. @param n @default 1 */
  reapDeleted(kind: string, reason: string, n?: number): void;
  /** Objects deleted by owner release. @param n @default 1 */
  releaseDeleted(kind: string, n?: number): void;
  /** One pod deleted by a slot-release suspend (its VM hibernated, its seat freed). */
  slotReleasePodDeleted(namespace: string, cocoonset: string): void;
  /** One slot-release wake completed; `placement` is `hint-node` or `pool`. */
  slotReleaseWake(namespace: string, cocoonset: string, placement: string): void;
  /** One wake pass that found the restored main agent unschedulable. */
  slotReleaseWakeUnschedulable(namespace: string, cocoonset: string): void;
  /** Members the idle policy hibernated (spec.idle). */
  idleHibernated?(namespace: string, cocoonset: string, n: number): void;
  /** Members or fleets woken by activity (or because their policy went). */
  wokenOnDemand?(namespace: string, cocoonset: string, n: number): void;
  /** How many members the idle policy holds hibernated now. */
  idleHibernatedMembers?(namespace: string, cocoonset: string, n: number): void;
}

/** The CocoonHibernation controller's metrics. */
export interface HibernationMetrics {
  /**
   * One finished CocoonHibernation transition: `metric` is `hibernate_phase_duration_seconds`
   * or `wake_phase_duration_seconds`, `result` `ok` or `timeout`.
   */
  phaseDuration(metric: string, result: string, seconds: number): void;
}

/**
 * What one reconcile receives besides the key; `metrics` is what its controller registered
 * (`Controller.metrics`).
 */
export interface ReconcileContext<M = unknown> {
  /** A child logger carrying `reconcileId`, `namespace` and `name`. */
  log: Logger;
  events: EventRecorder;
  metrics: M;
  /** Aborted when the process must stop and the grace period for in-flight work ran out. */
  signal: AbortSignal;
}

/**
 * What a reconcile asks of the queue: done (`{}`: nothing until the next event or resync),
 * or requeue after `requeueAfterMs` (0: at once). Either way the key's failure history is
 * forgotten. See {@link DONE} and {@link requeueAfter}.
 */
export interface ReconcileResult {
  requeueAfterMs?: number;
}

/** The result of a reconcile with nothing left to wait for. */
export const DONE: ReconcileResult = Object.freeze({});

/** The result of a reconcile that must run again after `ms` (0: at once). */
export function requeueAfter(ms: number): ReconcileResult {
  return { requeueAfterMs: ms };
}

/**
 * The reconcile logic. Level-based: it receives a key, reads the current state and converges.
 * A thrown error goes to the controller's error policy (by default a rate-limited requeue).
 * Return a result or throw, not both.
 */
export interface Reconciler<M = unknown> {
  reconcile(key: ObjectKey, ctx: ReconcileContext<M>): Promise<ReconcileResult>;
}

/** Formats a key as `namespace/name` (`name` alone when cluster-scoped). */
export function formatKey(key: ObjectKey): string {
  return keyOf(key.namespace, key.name);
}

/** Parses `namespace/name`; a key without a slash is cluster-scoped (empty namespace). */
export function parseKey(key: string): ObjectKey {
  const i = key.indexOf("/");
  return i < 0
    ? { namespace: "", name: key }
    : { namespace: key.slice(0, i), name: key.slice(i + 1) };
}
