/**
 * The controller's Prometheus metrics, on a Registry of their own (never prom-client's
 * global one, so two controllers in one test process do not collide).
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { ControllerMetrics } from "./types.js";

/** Outcome of one reconcile, the `result` label. */
export type ReconcileOutcome = "success" | "error" | "requeue";

/** Names of every metric the controller exports. */
export const METRIC_NAMES = {
  rebuild: "cocoonset_subagent_rebuild_total",
  deadLetter: "cocoonset_subagent_dead_letter_total",
  reapDeleted: "cocoonset_reap_deleted_total",
  releaseDeleted: "cocoonset_release_deleted_total",
  reconcile: "cocoonset_reconcile_total",
  reconcileErrors: "cocoonset_reconcile_errors_total",
  reconcileDuration: "cocoonset_reconcile_duration_seconds",
  queueDepth: "cocoonset_workqueue_depth",
  leader: "cocoonset_leader",
  hibernatePhase: "cocoonset_hibernate_phase_duration_seconds",
  wakePhase: "cocoonset_wake_phase_duration_seconds",
  slotReleasePodsDeleted: "cocoonset_slot_release_pods_deleted_total",
  slotReleaseWake: "cocoonset_slot_release_wake_total",
  slotReleaseWakeUnschedulable: "cocoonset_slot_release_wake_unschedulable_total",
} as const;

/** Options of {@link Metrics}. */
export interface MetricsOptions {
  /** Also export prom-client's process and Node.js metrics. @default false */
  defaultMetrics?: boolean;
}

/** All controller metrics; implements the engine-facing {@link ControllerMetrics}. */
export class Metrics implements ControllerMetrics {
  /** The registry to serve on `/metrics`. */
  readonly registry = new Registry();
  private readonly rebuilds: Counter<"namespace" | "cocoonset">;
  private readonly deadLetters: Counter<"namespace" | "cocoonset">;
  private readonly reaped: Counter<"kind" | "reason">;
  private readonly released: Counter<"kind">;
  private readonly reconciles: Counter<"result">;
  private readonly reconcileErrors: Counter;
  private readonly duration: Histogram<"result">;
  /** Time spent Hibernating / Waking, by `ok` or `timeout` (CocoonHibernation). */
  private readonly phaseDurations: Record<string, Histogram<"result">>;
  private readonly leaderGauge: Gauge;
  private readonly releasePodsDeleted: Counter<"namespace" | "cocoonset">;
  private readonly releaseWakes: Counter<"namespace" | "cocoonset" | "placement">;
  private readonly releaseWakeUnschedulable: Counter<"namespace" | "cocoonset">;
  private depthSource: () => number = () => 0;

  constructor(opts: MetricsOptions = {}) {
    const registers = [this.registry];
    this.rebuilds = new Counter({
      name: METRIC_NAMES.rebuild,
      help: "Sub-agent rebuilds: terminal pods deleted for recreation",
      labelNames: ["namespace", "cocoonset"],
      registers,
    });
    this.deadLetters = new Counter({
      name: METRIC_NAMES.deadLetter,
      help: "Sub-agents parked in dead-letter after exhausting their rebuilds",
      labelNames: ["namespace", "cocoonset"],
      registers,
    });
    this.reaped = new Counter({
      name: METRIC_NAMES.reapDeleted,
      help: "Ephemeral objects deleted by the orphan reaper",
      labelNames: ["kind", "reason"],
      registers,
    });
    this.released = new Counter({
      name: METRIC_NAMES.releaseDeleted,
      help: "Objects deleted by owner release",
      labelNames: ["kind"],
      registers,
    });
    this.reconciles = new Counter({
      name: METRIC_NAMES.reconcile,
      help: "Reconciles by result (success, error, requeue)",
      labelNames: ["result"],
      registers,
    });
    this.reconcileErrors = new Counter({
      name: METRIC_NAMES.reconcileErrors,
      help: "Reconciles that failed with an error",
      registers,
    });
    this.duration = new Histogram({
      name: METRIC_NAMES.reconcileDuration,
      help: "Duration of one reconcile, by result",
      labelNames: ["result"],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    });
    const phaseBuckets = [1, 2.5, 5, 10, 20, 30, 60, 90, 120, 180, 240, 300, 600];
    this.phaseDurations = {
      hibernate_phase_duration_seconds: new Histogram({
        name: METRIC_NAMES.hibernatePhase,
        help: "Time a CocoonHibernation spent Hibernating, by result (ok or timeout)",
        labelNames: ["result"],
        buckets: phaseBuckets,
        registers,
      }),
      wake_phase_duration_seconds: new Histogram({
        name: METRIC_NAMES.wakePhase,
        help: "Time a CocoonHibernation spent Waking, by result (ok or timeout)",
        labelNames: ["result"],
        buckets: phaseBuckets,
        registers,
      }),
    };
    const depth = () => this.depthSource();
    new Gauge({
      name: METRIC_NAMES.queueDepth,
      help: "Keys waiting in the work queue",
      registers,
      collect() {
        this.set(depth());
      },
    });
    this.leaderGauge = new Gauge({
      name: METRIC_NAMES.leader,
      help: "1 while this instance holds the leader Lease (or runs without leader election)",
      registers,
    });
    this.leaderGauge.set(0);
    this.releasePodsDeleted = new Counter({
      name: METRIC_NAMES.slotReleasePodsDeleted,
      help: "Pods deleted by a hibernatePolicy=release suspend once their VM hibernated",
      labelNames: ["namespace", "cocoonset"],
      registers,
    });
    this.releaseWakes = new Counter({
      name: METRIC_NAMES.slotReleaseWake,
      help: "Slot-release wakes completed, by where the main agent landed (hint-node or pool)",
      labelNames: ["namespace", "cocoonset", "placement"],
      registers,
    });
    this.releaseWakeUnschedulable = new Counter({
      name: METRIC_NAMES.slotReleaseWakeUnschedulable,
      help: "Slot-release wake passes that found the restored main agent unschedulable",
      labelNames: ["namespace", "cocoonset"],
      registers,
    });
    if (opts.defaultMetrics) collectDefaultMetrics({ register: this.registry });
  }

  /** {@inheritDoc ControllerMetrics.rebuild} */
  rebuild(namespace: string, cocoonset: string): void {
    this.rebuilds.inc({ namespace, cocoonset });
  }

  /** {@inheritDoc ControllerMetrics.deadLetter} */
  deadLetter(namespace: string, cocoonset: string): void {
    this.deadLetters.inc({ namespace, cocoonset });
  }

  /** {@inheritDoc ControllerMetrics.reapDeleted} */
  reapDeleted(kind: string, reason: string, n = 1): void {
    if (n > 0) this.reaped.inc({ kind, reason }, n);
  }

  /** {@inheritDoc ControllerMetrics.releaseDeleted} */
  releaseDeleted(kind: string, n = 1): void {
    if (n > 0) this.released.inc({ kind }, n);
  }

  /** {@inheritDoc ControllerMetrics.phaseDuration} */
  phaseDuration(metric: string, result: string, seconds: number): void {
    this.phaseDurations[metric]?.observe({ result }, seconds);
  }

  /** {@inheritDoc ControllerMetrics.slotReleasePodDeleted} */
  slotReleasePodDeleted(namespace: string, cocoonset: string): void {
    this.releasePodsDeleted.inc({ namespace, cocoonset });
  }

  /** {@inheritDoc ControllerMetrics.slotReleaseWake} */
  slotReleaseWake(namespace: string, cocoonset: string, placement: string): void {
    this.releaseWakes.inc({ namespace, cocoonset, placement });
  }

  /** {@inheritDoc ControllerMetrics.slotReleaseWakeUnschedulable} */
  slotReleaseWakeUnschedulable(namespace: string, cocoonset: string): void {
    this.releaseWakeUnschedulable.inc({ namespace, cocoonset });
  }

  /** Records one finished reconcile and how long it took. */
  reconciled(result: ReconcileOutcome, seconds: number): void {
    this.reconciles.inc({ result });
    if (result === "error") this.reconcileErrors.inc();
    this.duration.observe({ result }, seconds);
  }

  /** Sets where the work-queue depth is read from at scrape time. */
  setQueueDepthSource(source: () => number): void {
    this.depthSource = source;
  }

  /** Sets the leader gauge. */
  setLeader(leading: boolean): void {
    this.leaderGauge.set(leading ? 1 : 0);
  }

  /** The exposition text (what `/metrics` serves). */
  text(): Promise<string> {
    return this.registry.metrics();
  }
}
