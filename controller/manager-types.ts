/**
 * What the manager runs (runtime.ts): a controller's declaration (the kind it reconciles, its
 * watches, reconciler, gates, checks, tasks and series) and the manager's own options.
 */
import type { Logger } from "pino";
import type { Registry } from "prom-client";
import { KubeClient, type KubeObject } from "../engine/kube/index.js";
import { SharedCache, type CacheReader, type Kind } from "./cache.js";
import { type CheckResult } from "./health.js";
import { Metrics } from "./metrics.js";
import type { ControllerOptions } from "./options.js";
import {
  type ObjectKey,
  type ReconcileContext,
  type Reconciler,
  type ReconcileResult,
} from "./types.js";
import { type Clock } from "./work-queue.js";

/** A watched kind whose events enqueue keys of the controller that watches it. */
export interface Watch {
  kind: Kind;
  /**
   * The controller's keys an event on `obj` enqueues (read indexes from `cache`: they already
   * have the event applied). Called for adds, updates that matter, and deletes.
   */
  map(obj: KubeObject, cache: CacheReader): readonly ObjectKey[];
  /** Whether an update needs a reconcile. @default every update does */
  updateMatters?(oldObj: KubeObject, newObj: KubeObject): boolean;
}

/** Work run every `intervalMs` per namespace while leading (the first run at once). */
export interface PeriodicTask<M = unknown> {
  /** Names the task in logs (`<name> pass done`). */
  name: string;
  intervalMs: number;
  run(namespace: string, ctx: ReconcileContext<M>): Promise<unknown>;
}

/** What to do with a reconcile that threw. */
export type ErrorAction = "backoff" | ReconcileResult;

/**
 * A controller registered with the {@link Manager}: the kind it reconciles, what else it
 * watches, its reconcile function, metrics and error policy. The manager does the rest.
 */
export interface Controller<M = unknown> {
  /**
   * The controller's name: the `controller` label of its `controller_runtime_*` series and
   * the `name` of its `workqueue_*` ones (controller-runtime uses the lower-case kind).
   */
  name: string;
  /** The reconciled kind: each object is its own key. */
  for: Kind;
  /** Whether an update of a reconciled object needs a reconcile. @default every update does */
  updateMatters?(oldObj: KubeObject, newObj: KubeObject): boolean;
  /** Enqueue every reconciled object each resync interval. @default true */
  resync?: boolean;
  /**
   * A reconcile's answer replaces the requeue an earlier one asked for (a pass that ends with
   * nothing to wait for cancels it). For a controller whose every wait is an event or its own
   * requeue (CocoonHibernations); the others keep each requeue asked for, as
   * controller-runtime does. @default false
   */
  latestRequeueWins?: boolean;
  /** Other kinds whose events map to this controller's keys. */
  watches?: Watch[];
  /** Kinds the reconciler reads from the cache without a watch of its own (nodes). */
  reads?: Kind[];
  reconciler: Reconciler<M>;
  /** Registers the controller's own series on the manager's registry; `ctx.metrics` is the result. */
  metrics?(registry: Registry): M;
  /** Workers reconciling at once. @default the manager's `concurrency` */
  workers?: number;
  /** Called with each leading session's cache before its informers start (readers attach). */
  attach?(cache: SharedCache): void;
  /**
   * Readiness gate, checked before the cache starts and retried with backoff until it and
   * every other controller's pass (for example: the CRD is installed). @default always ready
   */
  ready?(client: KubeClient, log: Logger): Promise<CheckResult>;
  /** What the gate reports before its first check. @default "starting" */
  readyPending?: string;
  /** The warning logged while the gate fails. @default "not ready" */
  notReadyMessage?: string;
  /**
   * Named informational checks, served at `/readyz/<name>` (503 while failing) and named in
   * `/readyz`'s body, which they do not fail: something outside the controller (the snapshot
   * registry) that only some reconciles need.
   */
  checks?: Record<string, () => CheckResult>;
  /** What a thrown reconcile error leads to. @default "backoff" (per-key rate-limited requeue) */
  errorPolicy?(error: unknown, key: ObjectKey): ErrorAction;
  tasks?: PeriodicTask<M>[];
}

/** The options the manager reads (the flags of `cocoonset controller` hold more). */
export type RuntimeOptions = Pick<
  ControllerOptions,
  | "kubeconfig"
  | "context"
  | "namespaces"
  | "concurrency"
  | "metricsBindAddress"
  | "healthProbeBindAddress"
  | "leaderElect"
  | "leaderElectionNamespace"
  | "logLevel"
  | "shard"
  | "leaderElectionLeaseDurationMs"
>;

/** Process-level knobs and injections (tests, the CLI). */
export interface ControllerRuntime {
  /** A ready client. @default a KubeClient from `opts.kubeconfig` */
  client?: KubeClient;
  logger?: Logger;
  /** The manager's metrics; controllers register their own series on its registry. */
  metrics?: Metrics;
  /** Stops the manager. @default SIGTERM or SIGINT */
  signal?: AbortSignal;
  /** @default hostname + random suffix */
  identity?: string;
  /** @default 600000 (10 min) */
  resyncIntervalMs?: number;
  /** How long in-flight reconciles get before their signal aborts. @default 30000 */
  shutdownGraceMs?: number;
  /** @default `DEFAULT_LEASE_NAME` (leader-election.ts) */
  leaseName?: string;
  /** @default 15 */
  leaseDurationSeconds?: number;
  /** Called once the servers listen, with their ports (0 when disabled). */
  onListening?: (ports: { metrics: number; probes: number }) => void;
  /** The work queues' clock (their delays and requeues). @default systemClock */
  clock?: Clock;
}

/** A controller as the manager holds it: its metrics made. */
export interface Registered {
  def: Controller;
  metrics: unknown;
}
