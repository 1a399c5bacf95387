/**
 * The parts the manager starts in order and stops in reverse, as controller-runtime's manager
 * runs its runnables: the signal handlers, the metrics and probe servers, the readiness gates,
 * and the leader election with its handovers (a session of caches, queues and workers while
 * leading). Shutdown is their stops, last started first: the session finishes while the Lease
 * is still held, then the Lease is released, the servers close and the handlers go.
 */
import type { Logger } from "pino";
import type { KubeClient } from "../engine/kube/index.js";
import { errorMessage } from "../engine/kube/branded-error.js";
import { sleep } from "../engine/kube/sleep.js";
import type { KubeEventRecorder } from "./events.js";
import {
  parseBindAddress,
  startMetricsServer,
  startProbeServer,
  type CheckResult,
} from "./health.js";
import { LeaderElector } from "./leader-election.js";
import type { Metrics } from "./metrics.js";
import type { Kind } from "./cache.js";
import type { Controller, ControllerRuntime, Registered, RuntimeOptions } from "./manager-types.js";
import { createSession, type Session } from "./session.js";
import { ShardGate, shardLeaseMetadata } from "./shard-gate.js";
import type { Shard } from "./shard.js";

/** A part of the manager: started in order, stopped in reverse (also after a failed start). */
export interface Runnable {
  /** Resolves once it runs; the election's resolves when the manager is told to stop. */
  start(): Promise<void>;
  stop(): Promise<void>;
}

/** What the runnables of one {@link Manager.start} share. */
export interface ManagerRun {
  opts: RuntimeOptions;
  runtime: ControllerRuntime;
  controllers: readonly Registered[];
  kinds: Kind[];
  metrics: Metrics;
  log: Logger;
  client: KubeClient;
  identity: string;
  events: KubeEventRecorder;
  leaseBase: string;
  leaseName: string;
  shard: Shard;
  graceMs: number;
  /** Aborted by a signal (or `runtime.signal`): no new work. */
  stop: AbortController;
  /** The readiness gates' last answer. */
  readiness: CheckResult;
  /** The session while leading. */
  session?: Session;
  elector?: LeaderElector;
}

/** SIGTERM and SIGINT (or `runtime.signal`) abort `run.stop`. */
export function signalsRunnable(run: ManagerRun): Runnable {
  const onSignal = (sig: string) => {
    run.log.info({ signal: sig }, "shutting down: no new work, finishing in-flight reconciles");
    run.stop.abort();
  };
  const onTerm = () => onSignal("SIGTERM");
  const onInt = () => onSignal("SIGINT");
  return {
    async start() {
      const signal = run.runtime.signal;
      if (signal) {
        if (signal.aborted) run.stop.abort();
        else signal.addEventListener("abort", () => run.stop.abort(), { once: true });
      } else {
        process.once("SIGTERM", onTerm);
        process.once("SIGINT", onInt);
      }
    },
    async stop() {
      process.off("SIGTERM", onTerm);
      process.off("SIGINT", onInt);
    },
  };
}

/**
 * `/healthz`: every informer the session started still supervised (or refused an optional
 * kind). One not started yet is not dead: a session starts its caches once its labeller
 * (shards) is done, after the session exists, and `/readyz` says they are not synced meanwhile.
 */
function healthz(run: ManagerRun): CheckResult {
  const dead =
    run.session?.cache
      .informers()
      .filter((i) => i.wasStarted() && !i.isSupervised() && !i.wasRefused()) ?? [];
  return dead.length
    ? { ok: false, reason: `informers stopped: ${dead.map((i) => i.path).join(", ")}` }
    : { ok: true, reason: "ok" };
}

/** `/readyz`: not stopping, the gates passed, and a leader's caches synced; plus the checks. */
function readyz(run: ManagerRun, named: Record<string, () => CheckResult>): CheckResult {
  if (run.stop.signal.aborted) return { ok: false, reason: "shutting down" };
  if (!run.readiness.ok) return run.readiness;
  if (run.elector && !run.elector.isLeader())
    return { ok: true, reason: "ok (standby, not leading)" };
  const session = run.session;
  if (!session) return { ok: false, reason: "starting" };
  if (!session.cache.synced()) {
    const pending = session.cache.informers().filter((i) => !i.hasSynced());
    const detail = pending
      .map((i) => `${i.path}${i.lastError() ? ` (${i.lastError()!.message})` : ""}`)
      .join(", ");
    return { ok: false, reason: `caches not synced: ${detail}` };
  }
  const failing = Object.entries(named)
    .map(([n, check]) => [n, check()] as const)
    .filter(([, c]) => !c.ok);
  if (failing.length === 0) return { ok: true, reason: "ok" };
  return {
    ok: true,
    reason: ["ok", ...failing.map(([n, c]) => `[-]${n}: ${c.reason}`)].join("\n"),
  };
}

/** The metrics and probe servers; a failure to bind fails the start. */
export function serversRunnable(run: ManagerRun): Runnable {
  const servers: { close(): Promise<void> }[] = [];
  const close = async () => {
    await Promise.all(servers.splice(0).map((s) => s.close()));
  };
  const named: Record<string, () => CheckResult> = Object.assign(
    {},
    ...run.controllers.map((c) => c.def.checks ?? {}),
  ) as Record<string, () => CheckResult>;
  return {
    async start() {
      try {
        const metricsBind = parseBindAddress(run.opts.metricsBindAddress);
        const probeBind = parseBindAddress(run.opts.healthProbeBindAddress);
        const m = metricsBind
          ? await startMetricsServer(metricsBind, run.metrics.registry)
          : undefined;
        if (m) servers.push(m);
        const p = probeBind
          ? await startProbeServer(probeBind, {
              healthz: () => healthz(run),
              readyz: () => readyz(run, named),
              named,
            })
          : undefined;
        if (p) servers.push(p);
        run.runtime.onListening?.({ metrics: m?.port ?? 0, probes: p?.port ?? 0 });
        // With `:0` the ports are chosen here: log what was bound so users and tests find them.
        run.log.info(
          {
            metricsAddress: m?.address ?? "disabled",
            healthProbeAddress: p?.address ?? "disabled",
          },
          "serving metrics and probes",
        );
      } catch (e) {
        await close();
        throw e;
      }
    },
    stop: close,
  };
}

/**
 * The controllers' readiness gates, each in turn, retried with backoff until all pass or the
 * manager stops: a gate may pass only later (a CRD installed after the controller), so a
 * failing one is waited for, never a crash.
 */
export function readinessRunnable(run: ManagerRun): Runnable {
  const gated = run.controllers.map((c) => c.def).filter((d) => !!d.ready);
  run.readiness = { ok: false, reason: gated[0]?.readyPending ?? "starting" };
  const checkGates = async (): Promise<{ result: CheckResult; def?: Controller }> => {
    for (const def of gated) {
      let result: CheckResult;
      try {
        result = await def.ready!(run.client, run.log);
      } catch (e) {
        result = { ok: false, reason: errorMessage(e) };
      }
      if (!result.ok) return { result, def };
    }
    return { result: { ok: true, reason: "ok" } };
  };
  return {
    async start() {
      run.log.info(
        {
          identity: run.identity,
          server: run.client.server,
          namespaces: run.opts.namespaces.length ? run.opts.namespaces : "all",
          leaderElect: run.opts.leaderElect,
          controllers: run.controllers.map((c) => c.def.name),
        },
        "controller starting",
      );
      for (let attempt = 0; !run.stop.signal.aborted; attempt++) {
        const { result, def } = await checkGates();
        run.readiness = result;
        if (result.ok) break;
        const delay = Math.min(1000 * 2 ** attempt, 60_000);
        run.log.warn(
          { reason: result.reason, retryInMs: delay },
          def?.notReadyMessage ?? "not ready",
        );
        await sleep(delay, run.stop.signal);
      }
    },
    async stop() {},
  };
}

/**
 * The leader election (or, without it, leading at once) and its handovers: a session starts
 * on leading and stops on losing the Lease, one change after the other, so a new session
 * never starts while the previous one still finishes its reconciles. Its start resolves when
 * the manager is told to stop; its stop finishes the session while the Lease is still held,
 * then releases it.
 */
export function electionRunnable(run: ManagerRun): Runnable {
  const { opts, runtime, metrics, leaseName } = run;
  const startSession = (): Session =>
    createSession({
      opts,
      controllers: run.controllers,
      kinds: run.kinds,
      client: run.client,
      log: run.log,
      metrics,
      events: run.events,
      resyncMs: runtime.resyncIntervalMs ?? 600_000,
      clock: runtime.clock,
      shard: run.shard,
      // With leader election, every process reads the shards' Leases (shard-gate.ts).
      shardGate: opts.leaderElect
        ? new ShardGate(run.client, {
            namespace: opts.leaderElectionNamespace,
            base: run.leaseBase,
            shard: run.shard,
            log: run.log,
            own: () => run.elector?.current(),
          })
        : undefined,
    });
  let transitions = Promise.resolve();
  const lead = () => {
    transitions = transitions.then(() => {
      if (run.stop.signal.aborted || run.session) return;
      metrics.setLeader(leaseName, true);
      run.session = startSession();
    });
  };
  const unlead = (graceForInFlight: number) => {
    transitions = transitions.then(async () => {
      const s = run.session;
      run.session = undefined;
      metrics.setLeader(leaseName, false);
      await s?.stop(graceForInFlight);
    });
  };
  return {
    async start() {
      if (run.stop.signal.aborted) return;
      if (opts.leaderElect) {
        run.elector = new LeaderElector({
          client: run.client,
          namespace: opts.leaderElectionNamespace,
          name: leaseName,
          identity: run.identity,
          leaseDurationSeconds:
            runtime.leaseDurationSeconds ??
            (opts.leaderElectionLeaseDurationMs !== undefined
              ? opts.leaderElectionLeaseDurationMs / 1000
              : undefined),
          ...shardLeaseMetadata(run.leaseBase, run.shard),
          log: run.log,
          onStartedLeading: lead,
          // Someone else may already be reconciling: cut in-flight work short.
          onStoppedLeading: () => unlead(run.stop.signal.aborted ? run.graceMs : 0),
        });
        run.elector.start();
      } else {
        lead();
      }
      await new Promise<void>((resolve) => {
        if (run.stop.signal.aborted) return resolve();
        run.stop.signal.addEventListener("abort", () => resolve(), { once: true });
      });
    },
    async stop() {
      unlead(run.graceMs);
      await transitions;
      await run.elector?.stop();
    },
  };
}
