/**
 * The controllers' own series (`cocoonset_*`), each set registered on the manager's registry
 * by the controller that records it when the controller is added to the manager: the
 * CocoonSet controller's (rebuilds, dead-letters, the reaper, owner release, slot release)
 * and the CocoonHibernation controller's (the Hibernating and Waking phase durations).
 */
import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import type { GuardedRegistry } from "../engine/registry/guard.js";
import { METRIC_NAMES } from "./metrics.js";
import type { ControllerMetrics, HibernationMetrics } from "./types.js";

/** The CocoonSet controller's series; what its reconciles and its reaper record. */
export class CocoonSetMetrics implements ControllerMetrics {
  private readonly idleHibernations: Counter<"namespace" | "cocoonset">;
  private readonly idleHibernatedGauge: Gauge<"namespace" | "cocoonset">;
  private readonly wakesOnDemand: Counter<"namespace" | "cocoonset">;
  private readonly rebuilds: Counter<"namespace" | "cocoonset">;
  private readonly deadLetters: Counter<"namespace" | "cocoonset">;
  private readonly reaped: Counter<"kind" | "reason">;
  private readonly released: Counter<"kind">;
  private readonly releasePodsDeleted: Counter<"namespace" | "cocoonset">;
  private readonly releaseWakes: Counter<"namespace" | "cocoonset" | "placement">;
  private readonly releaseWakeUnschedulable: Counter<"namespace" | "cocoonset">;

  constructor(registry: Registry) {
    const registers = [registry];
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
    this.idleHibernations = new Counter({
      name: METRIC_NAMES.idleHibernations,
      help: "Members the idle policy hibernated after `spec.idle.after` without activity",
      labelNames: ["namespace", "cocoonset"],
      registers,
    });
    this.idleHibernatedGauge = new Gauge({
      name: METRIC_NAMES.idleHibernatedMembers,
      help: "Members the idle policy holds hibernated, as its last pass of the fleet saw them",
      labelNames: ["namespace", "cocoonset"],
      registers,
    });
    this.wakesOnDemand = new Counter({
      name: METRIC_NAMES.wakesOnDemand,
      help: "Idle-hibernated members and idle-suspended fleets woken by activity",
      labelNames: ["namespace", "cocoonset"],
      registers,
    });
  }

  /** {@inheritDoc ControllerMetrics.idleHibernated} */
  idleHibernated(namespace: string, cocoonset: string, n: number): void {
    this.idleHibernations.inc({ namespace, cocoonset }, n);
  }

  /** {@inheritDoc ControllerMetrics.wokenOnDemand} */
  wokenOnDemand(namespace: string, cocoonset: string, n: number): void {
    this.wakesOnDemand.inc({ namespace, cocoonset }, n);
  }

  /** {@inheritDoc ControllerMetrics.idleHibernatedMembers} */
  idleHibernatedMembers(namespace: string, cocoonset: string, n: number): void {
    this.idleHibernatedGauge.set({ namespace, cocoonset }, n);
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
}

/** The CocoonHibernation controller's series: time spent Hibernating / Waking, by result. */
export class HibernationPhaseMetrics implements HibernationMetrics {
  private readonly phaseDurations: Record<string, Histogram<"result">>;

  constructor(registry: Registry) {
    const registers = [registry];
    const buckets = [1, 2.5, 5, 10, 20, 30, 60, 90, 120, 180, 240, 300, 600];
    this.phaseDurations = {
      hibernate_phase_duration_seconds: new Histogram({
        name: METRIC_NAMES.hibernatePhase,
        help: "Time a CocoonHibernation spent Hibernating, by result (ok or timeout)",
        labelNames: ["result"],
        buckets,
        registers,
      }),
      wake_phase_duration_seconds: new Histogram({
        name: METRIC_NAMES.wakePhase,
        help: "Time a CocoonHibernation spent Waking, by result (ok or timeout)",
        labelNames: ["result"],
        buckets,
        registers,
      }),
    };
  }

  /** {@inheritDoc HibernationMetrics.phaseDuration} */
  phaseDuration(metric: string, result: string, seconds: number): void {
    this.phaseDurations[metric]?.observe({ result }, seconds);
  }
}

/**
 * The snapshot registry guard's series: calls by result (`ok`, `failed`: no answer or a 5xx,
 * `slow`: the caller stopped waiting, `refused`: not asked, the breaker open) and whether the
 * registry is unanswered now (the breaker open or half-open).
 */
export function registerRegistryMetrics(registry: Registry, guard: GuardedRegistry): void {
  const calls = new Counter({
    name: METRIC_NAMES.registryCalls,
    help: "Snapshot registry calls by result (ok, failed, slow, refused)",
    labelNames: ["result"],
    registers: [registry],
  });
  for (const r of ["ok", "failed", "slow", "refused"]) calls.inc({ result: r }, 0);
  new Gauge({
    name: METRIC_NAMES.registryUnanswered,
    help: "1 while the snapshot registry's circuit breaker is open or half-open, else 0",
    registers: [registry],
    collect() {
      this.set(guard.status().unanswered ? 1 : 0);
    },
  });
  guard.onCall = (result) => calls.inc({ result });
}
