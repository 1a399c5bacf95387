/**
 * The manager's Prometheus metrics, on a Registry of their own (never prom-client's global
 * one, so two managers in one test process do not collide): controller-runtime's and
 * client-go's series, labelled by the controller each belongs to. A controller's own series
 * (the `cocoonset_*` ones: `cocoonset-metrics.ts`) are registered on the same registry by the
 * controller when it is added to the manager.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";

/**
 * Outcome of one reconcile, the `result` label of `controller_runtime_reconcile_total`, as
 * controller-runtime has it: `requeue` asks for the key again at once, `requeue_after` after
 * a delay.
 */
export type ReconcileOutcome = "success" | "error" | "requeue" | "requeue_after";

/** Names of every metric the controller process exports (the manager's and its controllers'). */
export const METRIC_NAMES = {
  rebuild: "cocoonset_subagent_rebuild_total",
  deadLetter: "cocoonset_subagent_dead_letter_total",
  reapDeleted: "cocoonset_reap_deleted_total",
  releaseDeleted: "cocoonset_release_deleted_total",
  hibernatePhase: "cocoonset_hibernate_phase_duration_seconds",
  wakePhase: "cocoonset_wake_phase_duration_seconds",
  slotReleasePodsDeleted: "cocoonset_slot_release_pods_deleted_total",
  slotReleaseWake: "cocoonset_slot_release_wake_total",
  slotReleaseWakeUnschedulable: "cocoonset_slot_release_wake_unschedulable_total",
  idleHibernations: "cocoonset_idle_hibernations_total",
  idleHibernatedMembers: "cocoonset_idle_hibernated_members",
  wakesOnDemand: "cocoonset_wakes_on_demand_total",
  registryCalls: "cocoonset_snapshot_registry_calls_total",
  registryUnanswered: "cocoonset_snapshot_registry_unanswered",
  reconcile: "controller_runtime_reconcile_total",
  reconcileErrors: "controller_runtime_reconcile_errors_total",
  reconcileTime: "controller_runtime_reconcile_time_seconds",
  maxConcurrentReconciles: "controller_runtime_max_concurrent_reconciles",
  activeWorkers: "controller_runtime_active_workers",
  queueDepth: "workqueue_depth",
  queueAdds: "workqueue_adds_total",
  queueDuration: "workqueue_queue_duration_seconds",
  workDuration: "workqueue_work_duration_seconds",
  queueRetries: "workqueue_retries_total",
  unfinishedWork: "workqueue_unfinished_work_seconds",
  longestRunning: "workqueue_longest_running_processor_seconds",
  leader: "leader_election_master_status",
  restClientRequests: "rest_client_requests_total",
} as const;

/** What the queue gauges read at scrape time (see {@link Metrics.setQueue}). */
export interface QueueView {
  /** Keys waiting to be handed out, in order. */
  queuedKeys(): string[];
  /** Keys in flight, with when (clock milliseconds) their processing started. */
  inFlightSince(): [string, number][];
  /** The queue clock's current time, in milliseconds. */
  now(): number;
}

// controller-runtime's reconcile-time buckets: fine below a second, coarser up to a minute.
const RECONCILE_BUCKETS = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
  1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
];
// client-go's work-queue buckets: powers of ten from 10 ns to 1000 s.
const QUEUE_BUCKETS = Array.from({ length: 12 }, (_, i) => Number((1e-8 * 10 ** i).toPrecision(1)));

/** Options of {@link Metrics}. */
export interface MetricsOptions {
  /** Also export prom-client's process and Node.js metrics. @default false */
  defaultMetrics?: boolean;
}

/**
 * The manager's metrics: per controller (the `controller` label; a queue's `name`), with
 * controller-runtime's and client-go's names, labels and meanings (so dashboards and alerts
 * made for other operators match), plus the Lease and the REST client's requests.
 */
export class Metrics {
  /** The registry to serve on `/metrics`; controllers register their own series on it. */
  readonly registry = new Registry();
  private readonly reconciles: Counter<"controller" | "result">;
  private readonly reconcileErrors: Counter<"controller">;
  private readonly reconcileTime: Histogram<"controller">;
  private readonly maxConcurrent: Gauge<"controller">;
  private readonly activeWorkers: Gauge<"controller">;
  private readonly queueAdds: Counter<"name" | "controller">;
  private readonly queueRetries: Counter<"name" | "controller">;
  private readonly queueDuration: Histogram<"name" | "controller">;
  private readonly workDuration: Histogram<"name" | "controller">;
  private readonly leaderGauge: Gauge<"name">;
  private readonly restRequests: Counter<"code" | "method" | "host">;
  /** Each controller's queue, read by the gauges at scrape time (undefined: not running). */
  private readonly queues = new Map<string, QueueView | undefined>();

  constructor(opts: MetricsOptions = {}) {
    const registers = [this.registry];
    this.reconciles = new Counter({
      name: METRIC_NAMES.reconcile,
      help: "Total number of reconciliations per controller",
      labelNames: ["controller", "result"],
      registers,
    });
    this.reconcileErrors = new Counter({
      name: METRIC_NAMES.reconcileErrors,
      help: "Total number of reconciliation errors per controller",
      labelNames: ["controller"],
      registers,
    });
    this.reconcileTime = new Histogram({
      name: METRIC_NAMES.reconcileTime,
      help: "Length of time per reconciliation per controller",
      labelNames: ["controller"],
      buckets: RECONCILE_BUCKETS,
      registers,
    });
    this.maxConcurrent = new Gauge({
      name: METRIC_NAMES.maxConcurrentReconciles,
      help: "Maximum number of concurrent reconciles per controller",
      labelNames: ["controller"],
      registers,
    });
    this.activeWorkers = new Gauge({
      name: METRIC_NAMES.activeWorkers,
      help: "Number of currently used workers per controller",
      labelNames: ["controller"],
      registers,
    });

    const queueLabels = ["name", "controller"] as const;
    this.queueAdds = new Counter({
      name: METRIC_NAMES.queueAdds,
      help: "Total number of adds handled by workqueue",
      labelNames: queueLabels,
      registers,
    });
    this.queueRetries = new Counter({
      name: METRIC_NAMES.queueRetries,
      help: "Total number of retries handled by workqueue",
      labelNames: queueLabels,
      registers,
    });
    this.queueDuration = new Histogram({
      name: METRIC_NAMES.queueDuration,
      help: "How long in seconds an item stays in workqueue before being requested",
      labelNames: queueLabels,
      buckets: QUEUE_BUCKETS,
      registers,
    });
    this.workDuration = new Histogram({
      name: METRIC_NAMES.workDuration,
      help: "How long in seconds processing an item from workqueue takes",
      labelNames: queueLabels,
      buckets: QUEUE_BUCKETS,
      registers,
    });
    this.registerQueueGauges(registers);
    this.leaderGauge = new Gauge({
      name: METRIC_NAMES.leader,
      help: "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease.",
      labelNames: ["name"],
      registers,
    });
    this.restRequests = new Counter({
      name: METRIC_NAMES.restClientRequests,
      help: "Number of HTTP requests, partitioned by status code, method, and host.",
      labelNames: ["code", "method", "host"],
      registers,
    });
    if (opts.defaultMetrics) collectDefaultMetrics({ register: this.registry });
  }

  /** The queue gauges, computed from each controller's queue when scraped. */
  private registerQueueGauges(registers: Registry[]): void {
    const queueLabels = ["name", "controller"] as const;
    const queues = this.queues;
    const perQueue = (compute: (view: QueueView) => number) =>
      function collect(this: Gauge<"name" | "controller">) {
        this.reset();
        for (const [name, view] of queues)
          this.set({ name, controller: name }, view ? compute(view) : 0);
      };
    new Gauge({
      name: METRIC_NAMES.queueDepth,
      help: "Current depth of workqueue",
      labelNames: queueLabels,
      registers,
      collect: perQueue((view) => view.queuedKeys().length),
    });
    new Gauge({
      name: METRIC_NAMES.unfinishedWork,
      help: "How many seconds of work has been done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.",
      labelNames: queueLabels,
      registers,
      collect: perQueue((view) => {
        const now = view.now();
        return view.inFlightSince().reduce((sum, [, since]) => sum + (now - since) / 1000, 0);
      }),
    });
    new Gauge({
      name: METRIC_NAMES.longestRunning,
      help: "How many seconds has the longest running processor for workqueue been running.",
      labelNames: queueLabels,
      registers,
      collect: perQueue((view) => {
        const now = view.now();
        return view
          .inFlightSince()
          .reduce((max, [, since]) => Math.max(max, (now - since) / 1000), 0);
      }),
    });
  }

  /**
   * Declares a controller and its worker count: its series appear at zero (so a dashboard
   * sees the controller before its first reconcile).
   */
  controllerStarted(controller: string, maxConcurrentReconciles: number): void {
    this.maxConcurrent.set({ controller }, maxConcurrentReconciles);
    this.activeWorkers.set({ controller }, 0);
    this.reconcileErrors.inc({ controller }, 0);
    this.queueAdds.inc({ name: controller, controller }, 0);
    this.queueRetries.inc({ name: controller, controller }, 0);
    if (!this.queues.has(controller)) this.queues.set(controller, undefined);
  }

  /** A worker took (+1) or finished (-1) a key of `controller`. */
  workerActive(controller: string, delta: 1 | -1): void {
    this.activeWorkers.inc({ controller }, delta);
  }

  /** Records one finished reconcile and how long it took. */
  reconciled(controller: string, result: ReconcileOutcome, seconds: number): void {
    this.reconciles.inc({ controller, result });
    if (result === "error") this.reconcileErrors.inc({ controller });
    this.reconcileTime.observe({ controller }, seconds);
  }

  /**
   * Where the queue gauges (depth, unfinished work, longest running processor) of controller
   * `name` are read at scrape time; `undefined` detaches it (its gauges then read zero).
   */
  setQueue(name: string, view: QueueView | undefined): void {
    this.queues.set(name, view);
  }

  /** A key entered the queue of controller `name` (an add that was not deduplicated). */
  queueAdded(name: string): void {
    this.queueAdds.inc({ name, controller: name });
  }

  /** A key of `name` was re-added with rate limiting (a retry after an error). */
  queueRetried(name: string): void {
    this.queueRetries.inc({ name, controller: name });
  }

  /** A key of `name` was handed to a worker after waiting `seconds` in the queue. */
  queueWaited(name: string, seconds: number): void {
    this.queueDuration.observe({ name, controller: name }, seconds);
  }

  /** A worker finished a key of `name` after `seconds`. */
  queueWorked(name: string, seconds: number): void {
    this.workDuration.observe({ name, controller: name }, seconds);
  }

  /** Sets the leader gauge of the Lease `name`. */
  setLeader(name: string, leading: boolean): void {
    this.leaderGauge.set({ name }, leading ? 1 : 0);
  }

  /**
   * Counts one HTTP request to the apiserver: `code` is the status (`"<error>"` when no
   * response came), `method` the verb, `host` the apiserver's host:port.
   */
  restClientRequest(code: string, method: string, host: string): void {
    this.restRequests.inc({ code, method, host });
  }

  /** The exposition text (what `/metrics` serves). */
  text(): Promise<string> {
    return this.registry.metrics();
  }
}
