/**
 * The controller manager, as controller-runtime has one: probes and metrics servers, a
 * readiness gate, one leader election, and while leading, a session of one shared informer
 * cache (`cache.ts`) feeding the controllers registered with the manager, each with its own
 * name, work queue, workers, metrics series, resync and periodic tasks. It knows nothing of
 * CocoonSets: what a controller watches, how events map to its keys and what a reconcile does
 * come from its {@link Controller} (see `cocoonset-controller.ts` and
 * `hibernation-controller.ts` for the two this project runs).
 *
 * Guarantees:
 * - level-based: informer events only enqueue `namespace/name` keys of the controller a watch
 *   belongs to; a key is never reconciled twice at once by its controller; errors requeue
 *   with per-key backoff (or as the controller's error policy says);
 * - a failing readiness gate never crashes the process: /readyz stays 503 with the reason and
 *   the gates are retried with backoff;
 * - with leader election, a standby runs no informer, worker or task; a leader that loses
 *   its Lease stops its session before it may lead again;
 * - on SIGTERM/SIGINT: no new work, in-flight reconciles finish (their signal aborts after
 *   the grace period), the Lease is released, servers close, and the promise resolves.
 * The parts it starts in order and stops in reverse are in runnables.ts; a leader's session
 * (cache, queues, workers) in session.ts.
 * Behaviour: docs/behaviour.md §6.
 */
import { KubeClient } from "../engine/kube/index.js";
import { mergeKinds, type Kind } from "./cache.js";
import { KubeEventRecorder } from "./events.js";
import { DEFAULT_LEASE_NAME, defaultIdentity } from "./leader-election.js";
import { createLogger } from "./logger.js";
import { Metrics } from "./metrics.js";
import { shardLeaseName, UNSHARDED } from "./shard.js";
import type { Controller, ControllerRuntime, Registered, RuntimeOptions } from "./manager-types.js";
import {
  electionRunnable,
  readinessRunnable,
  serversRunnable,
  signalsRunnable,
  type ManagerRun,
  type Runnable,
} from "./runnables.js";

export type {
  Controller,
  ControllerRuntime,
  ErrorAction,
  PeriodicTask,
  RuntimeOptions,
  Watch,
} from "./manager-types.js";
export { keysFor } from "./session.js";

/** Runs controllers on one shared cache under one leader election. */
export class Manager {
  readonly metrics: Metrics;
  private readonly controllers: Registered[] = [];
  private running = false;

  constructor(
    private readonly opts: RuntimeOptions,
    private readonly runtime: ControllerRuntime = {},
  ) {
    this.metrics = runtime.metrics ?? new Metrics({ defaultMetrics: true });
  }

  /**
   * Registers a controller (before {@link Manager.start}); its metrics are registered now.
   * @throws Error for a second controller of one name (a programmer error)
   */
  add<M>(def: Controller<M>): this {
    if (this.running || this.controllers.some((c) => c.def.name === def.name))
      throw new Error(`cannot add controller ${def.name}`);
    const metrics = def.metrics?.(this.metrics.registry);
    this.controllers.push({ def, metrics });
    return this;
  }

  /** The kinds the cache watches: every controller's reconciled, watched and read kinds. */
  kinds(): Kind[] {
    return mergeKinds(
      this.controllers.flatMap(({ def }) => [
        def.for,
        ...(def.watches ?? []).map((w) => w.kind),
        ...(def.reads ?? []),
      ]),
    );
  }

  /**
   * Runs until SIGTERM/SIGINT (or `runtime.signal`), then shuts down cleanly. Rejects only for
   * start-up failures (a server that cannot bind).
   */
  async start(): Promise<void> {
    this.running = true;
    const run = this.prepare();
    const runnables = [
      signalsRunnable(run),
      serversRunnable(run),
      readinessRunnable(run),
      electionRunnable(run),
    ];
    const started: Runnable[] = [];
    const unobserve = run.client.observeRequests((code, method, host) =>
      run.metrics.restClientRequest(code, method, host),
    );
    try {
      // The election's start returns once the manager is told to stop.
      for (const r of runnables) {
        await r.start();
        started.push(r);
      }
    } finally {
      for (const r of started.reverse()) await r.stop();
      unobserve();
      if (!this.runtime.client) run.client.close();
    }
    run.log.info("controller stopped");
  }

  /** The state the runnables of one start share. */
  private prepare(): ManagerRun {
    const { opts, runtime, metrics } = this;
    const log = runtime.logger ?? createLogger({ level: opts.logLevel });
    const client =
      runtime.client ??
      new KubeClient({
        kubeconfig: opts.kubeconfig,
        context: opts.context,
        // One socket per watch (one per watched kind and scope), plus the default for requests.
        maxSockets: Math.max(1, opts.namespaces.length) * this.kinds().length + 32,
      });
    const identity = runtime.identity ?? defaultIdentity();
    const leaseBase = runtime.leaseName ?? DEFAULT_LEASE_NAME;
    const shard = opts.shard ?? UNSHARDED;
    // Each shard elects its leader on a Lease of its own (the base name when unsharded).
    const leaseName = shardLeaseName(leaseBase, shard);
    metrics.setLeader(leaseName, false);
    return {
      opts,
      runtime,
      controllers: this.controllers,
      kinds: this.kinds(),
      metrics,
      log,
      client,
      identity,
      events: new KubeEventRecorder({ client, identity, log }),
      leaseBase,
      leaseName,
      shard,
      graceMs: runtime.shutdownGraceMs ?? 30_000,
      stop: new AbortController(),
      readiness: { ok: false, reason: "starting" },
    };
  }
}
