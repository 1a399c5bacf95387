/**
 * The controller runtime: probes and metrics servers, a readiness gate, leader election, and
 * while leading, a session of informers → work queue → workers plus the periodic resync and
 * periodic tasks. It knows nothing of CocoonSets: what to watch, how objects map to keys and
 * what a reconcile does come from a {@link ControllerDefinition} (see
 * `cocoonset-controller.ts` for the one this project runs).
 *
 * Guarantees:
 * - level-based: informer events only enqueue `namespace/name` keys; a key is never
 *   reconciled twice at once; errors requeue with per-key backoff (or as the definition's
 *   error policy says);
 * - a failing readiness gate never crashes the process: /readyz stays 503 with the reason and
 *   the gate is retried with backoff;
 * - with leader election, a standby runs no informer, worker or task; a leader that loses
 *   its Lease stops its session before it may lead again;
 * - on SIGTERM/SIGINT: no new work, in-flight reconciles finish (their signal aborts after
 *   the grace period), the Lease is released, servers close, and the promise resolves.
 * Behaviour: docs/behaviour.md §6.
 */
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import { KubeClient, type KubeObject } from "../engine/kube/index.js";
import { KubeEventRecorder } from "./events.js";
import {
  parseBindAddress,
  startMetricsServer,
  startProbeServer,
  type CheckResult,
} from "./health.js";
import { Informer } from "./informer.js";
import { DEFAULT_LEASE_NAME, defaultIdentity, LeaderElector } from "./leader-election.js";
import { createLogger, reconcileLogger } from "./logger.js";
import { Metrics } from "./metrics.js";
import { SHARD_HELD_REQUEUE_MS, ShardGate, shardLeaseMetadata } from "./shard-gate.js";
import { shardLeaseName, UNSHARDED } from "./shard.js";
import type { ControllerOptions } from "./options.js";
import {
  formatKey,
  parseKey,
  type ObjectKey,
  type ReconcileContext,
  type Reconciler,
  type ReconcileResult,
} from "./types.js";
import { WorkQueue, type Clock } from "./work-queue.js";
import { sleep } from "../engine/kube/sleep.js";
import { errorMessage } from "../engine/kube/branded-error.js";

/** One watched kind: where to list it, and which keys its changes enqueue. */
export interface Watch {
  /** Collection path in one namespace, or in all of them (`undefined`). */
  path(namespace: string | undefined): string;
  labelSelector?: string;
  /** The key to reconcile when an object of this kind changes (none: ignore it). */
  keyOf(obj: KubeObject): ObjectKey | undefined;
  /** More keys the same change enqueues (e.g. the CocoonHibernations targeting a pod). */
  extraKeys?(obj: KubeObject): ObjectKey[];
  /** Whether an update needs a reconcile. @default every update does */
  updateMatters?(oldObj: KubeObject, newObj: KubeObject): boolean;
  /**
   * Hands a session's informers of this kind (one per watched scope) to whoever reads their
   * caches; `clusterWide` when they watch every namespace. Called before they start.
   */
  attach?(informers: readonly Informer[], clusterWide: boolean): void;
}

/** Work run every `intervalMs` per namespace while leading (the first run at once). */
export interface PeriodicTask {
  /** Names the task in logs (`<name> pass done`). */
  name: string;
  intervalMs: number;
  run(namespace: string, ctx: ReconcileContext): Promise<unknown>;
}

/** What to do with a reconcile that threw. */
export type ErrorAction = "backoff" | ReconcileResult;

/**
 * A controller: the kind it reconciles, the kinds it owns, its reconcile function and its
 * error policy. The runtime does the rest.
 */
export interface ControllerDefinition {
  /**
   * The controller's name: the `controller` label of the `controller_runtime_*` metrics and
   * the `name` of the `workqueue_*` ones (controller-runtime uses the lower-case kind).
   */
  name: string;
  /**
   * Further controllers sharing this one's queue and workers, each with the test of which
   * keys are its own (checked in order; a key none claims is `name`'s).
   */
  alsoRuns?: { name: string; owns(key: ObjectKey): boolean }[];
  /** The reconciled kind: its objects are their own keys, and they are resynced periodically. */
  primary: Watch;
  /** Owned kinds: their changes enqueue their owner's key. */
  owns: Watch[];
  reconciler: Reconciler;
  /**
   * Readiness gate, checked before any informer starts and retried with backoff until it
   * passes (for example: the CRD is installed). @default always ready
   */
  ready?(client: KubeClient, log: Logger): Promise<CheckResult>;
  /** What the gate reports before its first check. @default "starting" */
  readyPending?: string;
  /** The warning logged while the gate fails. @default "not ready" */
  notReadyMessage?: string;
  /** What a thrown reconcile error leads to. @default "backoff" (per-key rate-limited requeue) */
  errorPolicy?(error: unknown, key: ObjectKey): ErrorAction;
  tasks?: PeriodicTask[];
}

/** The options the runtime reads (the flags of `cocoonset controller` hold more). */
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
  metrics?: Metrics;
  /** Stops the controller. @default SIGTERM or SIGINT */
  signal?: AbortSignal;
  /** @default hostname + random suffix */
  identity?: string;
  /** @default 600000 (10 min) */
  resyncIntervalMs?: number;
  /** How long in-flight reconciles get before their signal aborts. @default 30000 */
  shutdownGraceMs?: number;
  /** @default {@link DEFAULT_LEASE_NAME} */
  leaseName?: string;
  /** @default 15 */
  leaseDurationSeconds?: number;
  /** Called once the servers listen, with their ports (0 when disabled). */
  onListening?: (ports: { metrics: number; probes: number }) => void;
  /** The work queue's clock (its delays and requeues). @default systemClock */
  clock?: Clock;
}

/** The running part of a leader: informers, queue, workers, resync and periodic tasks. */
interface Session {
  informers: Informer[];
  synced(): boolean;
  stop(graceMs: number): Promise<void>;
}

/**
 * Runs the controller until SIGTERM/SIGINT (or `runtime.signal`), then shuts down cleanly.
 * Rejects only for start-up failures (a server that cannot bind).
 */
export async function runManager(
  def: ControllerDefinition,
  opts: RuntimeOptions,
  runtime: ControllerRuntime = {},
): Promise<void> {
  const log = runtime.logger ?? createLogger({ level: opts.logLevel });
  const metrics = runtime.metrics ?? new Metrics({ defaultMetrics: true });
  const ownClient = !runtime.client;
  const client =
    runtime.client ??
    new KubeClient({
      kubeconfig: opts.kubeconfig,
      context: opts.context,
      // One socket per watch (one per watched kind and scope), plus the default for requests.
      maxSockets: Math.max(1, opts.namespaces.length) * (1 + def.owns.length) + 32,
    });
  const identity = runtime.identity ?? defaultIdentity();
  const graceMs = runtime.shutdownGraceMs ?? 30_000;
  const resyncMs = runtime.resyncIntervalMs ?? 600_000;
  const events = new KubeEventRecorder({ client, identity, log });
  const leaseBase = runtime.leaseName ?? DEFAULT_LEASE_NAME;
  const shard = opts.shard ?? UNSHARDED;
  // Each shard elects its leader on a Lease of its own (the base name when unsharded).
  const leaseName = shardLeaseName(leaseBase, shard);
  metrics.setLeader(leaseName, false);
  const unobserve = client.observeRequests((code, method, host) =>
    metrics.restClientRequest(code, method, host),
  );

  const stop = new AbortController();
  const onSignal = (sig: string) => {
    log.info({ signal: sig }, "shutting down: no new work, finishing in-flight reconciles");
    stop.abort();
  };
  const onTerm = () => onSignal("SIGTERM");
  const onInt = () => onSignal("SIGINT");
  if (runtime.signal) {
    if (runtime.signal.aborted) stop.abort();
    else runtime.signal.addEventListener("abort", () => stop.abort(), { once: true });
  } else {
    process.once("SIGTERM", onTerm);
    process.once("SIGINT", onInt);
  }

  let gate: CheckResult = { ok: false, reason: def.readyPending ?? "starting" };
  let session: Session | undefined;
  let elector: LeaderElector | undefined;

  const healthz = (): CheckResult => {
    const dead = session?.informers.filter((i) => !i.isSupervised()) ?? [];
    return dead.length
      ? { ok: false, reason: `informers stopped: ${dead.map((i) => i.path).join(", ")}` }
      : { ok: true, reason: "ok" };
  };
  const readyz = (): CheckResult => {
    if (stop.signal.aborted) return { ok: false, reason: "shutting down" };
    if (!gate.ok) return gate;
    if (elector && !elector.isLeader()) return { ok: true, reason: "ok (standby, not leading)" };
    if (!session) return { ok: false, reason: "starting" };
    if (!session.synced()) {
      const pending = session.informers.filter((i) => !i.hasSynced());
      const detail = pending
        .map((i) => `${i.path}${i.lastError() ? ` (${i.lastError()!.message})` : ""}`)
        .join(", ");
      return { ok: false, reason: `caches not synced: ${detail}` };
    }
    return { ok: true, reason: "ok" };
  };

  const servers: { close(): Promise<void> }[] = [];
  const closeServers = async () => {
    await Promise.all(servers.splice(0).map((s) => s.close()));
  };
  try {
    const metricsBind = parseBindAddress(opts.metricsBindAddress);
    const probeBind = parseBindAddress(opts.healthProbeBindAddress);
    const m = metricsBind ? await startMetricsServer(metricsBind, metrics.registry) : undefined;
    if (m) servers.push(m);
    const p = probeBind ? await startProbeServer(probeBind, { healthz, readyz }) : undefined;
    if (p) servers.push(p);
    runtime.onListening?.({ metrics: m?.port ?? 0, probes: p?.port ?? 0 });
    // With `:0` the ports are chosen here: log what was bound so users and tests find them.
    log.info(
      { metricsAddress: m?.address ?? "disabled", healthProbeAddress: p?.address ?? "disabled" },
      "serving metrics and probes",
    );
  } catch (e) {
    await closeServers();
    process.off("SIGTERM", onTerm);
    process.off("SIGINT", onInt);
    unobserve();
    if (ownClient) client.close();
    throw e;
  }
  log.info(
    {
      identity,
      server: client.server,
      namespaces: opts.namespaces.length ? opts.namespaces : "all",
      leaderElect: opts.leaderElect,
    },
    "controller starting",
  );

  // The gate may pass only later (a CRD installed after the controller): wait, don't crash.
  for (let attempt = 0; def.ready && !stop.signal.aborted; attempt++) {
    try {
      gate = await def.ready(client, log);
    } catch (e) {
      gate = { ok: false, reason: errorMessage(e) };
    }
    if (gate.ok) break;
    const delay = Math.min(1000 * 2 ** attempt, 60_000);
    log.warn({ reason: gate.reason, retryInMs: delay }, def.notReadyMessage ?? "not ready");
    await sleep(delay, stop.signal);
  }
  if (!def.ready) gate = { ok: true, reason: "ok" };

  const startSession = (): Session =>
    createSession({
      opts,
      def,
      client,
      log,
      metrics,
      events,
      resyncMs,
      clock: runtime.clock,
      // With leader election, every process reads the shards' Leases (controller/shard-gate.ts).
      gate: opts.leaderElect
        ? new ShardGate(client, {
            namespace: opts.leaderElectionNamespace,
            base: leaseBase,
            shard,
            log,
          })
        : undefined,
    });

  // Leadership changes are applied one after the other, so a new session never starts
  // while the previous one is still finishing its reconciles.
  let transitions = Promise.resolve();
  const lead = () => {
    transitions = transitions.then(() => {
      if (stop.signal.aborted || session) return;
      metrics.setLeader(leaseName, true);
      session = startSession();
    });
  };
  const unlead = (graceForInFlight: number) => {
    transitions = transitions.then(async () => {
      const s = session;
      session = undefined;
      metrics.setLeader(leaseName, false);
      await s?.stop(graceForInFlight);
    });
  };

  if (!stop.signal.aborted) {
    if (opts.leaderElect) {
      elector = new LeaderElector({
        client,
        namespace: opts.leaderElectionNamespace,
        name: leaseName,
        identity,
        leaseDurationSeconds:
          runtime.leaseDurationSeconds ??
          (opts.leaderElectionLeaseDurationMs !== undefined
            ? opts.leaderElectionLeaseDurationMs / 1000
            : undefined),
        ...shardLeaseMetadata(leaseBase, shard),
        log,
        onStartedLeading: lead,
        // Someone else may already be reconciling: cut in-flight work short.
        onStoppedLeading: () => unlead(stop.signal.aborted ? graceMs : 0),
      });
      elector.start();
    } else {
      lead();
    }
    await new Promise<void>((resolve) => {
      if (stop.signal.aborted) return resolve();
      stop.signal.addEventListener("abort", () => resolve(), { once: true });
    });
  }

  // Shutdown: finish the session while still holding the Lease, then release it.
  unlead(graceMs);
  await transitions;
  await elector?.stop();
  await closeServers();
  process.off("SIGTERM", onTerm);
  process.off("SIGINT", onInt);
  unobserve();
  if (ownClient) client.close();
  log.info("controller stopped");
}

interface SessionDeps {
  opts: RuntimeOptions;
  def: ControllerDefinition;
  client: KubeClient;
  log: Logger;
  metrics: Metrics;
  events: KubeEventRecorder;
  resyncMs: number;
  clock?: Clock;
  gate?: ShardGate;
}

function createSession(s: SessionDeps): Session {
  const { opts, def, client, log, metrics, events } = s;
  // One queue and one worker pool for every controller of the definition; each key's
  // metrics go to the controller that owns it.
  const names = [def.name, ...(def.alsoRuns ?? []).map((c) => c.name)];
  const controllerOf = (key: string): string => {
    const k = parseKey(key);
    return def.alsoRuns?.find((c) => c.owns(k))?.name ?? def.name;
  };
  const queue = new WorkQueue({
    clock: s.clock,
    metrics: {
      added: (key) => metrics.queueAdded(controllerOf(key)),
      retried: (key) => metrics.queueRetried(controllerOf(key)),
      waited: (key, seconds) => metrics.queueWaited(controllerOf(key), seconds),
      worked: (key, seconds) => metrics.queueWorked(controllerOf(key), seconds),
    },
  });
  for (const name of names) metrics.controllerStarted(name, opts.concurrency);
  metrics.setQueueSource(queue, controllerOf, names);
  const work = new AbortController();
  const halt = new AbortController();
  const scopes: (string | undefined)[] = opts.namespaces.length ? opts.namespaces : [undefined];

  const gate = s.gate;
  // A key of another shard is not this process's business: never queued.
  const enqueue = (key: ObjectKey | undefined) => {
    if (key && gate?.verdict(key.namespace, key.name).kind !== "other") queue.add(formatKey(key));
  };
  const informersOf = (watch: Watch): Informer[] => {
    const made = scopes.map((ns) => {
      const inf = new Informer({
        client,
        path: watch.path(ns),
        labelSelector: watch.labelSelector,
        log,
      });
      const enqueueAll = (o: KubeObject) => {
        enqueue(watch.keyOf(o));
        for (const k of watch.extraKeys?.(o) ?? []) enqueue(k);
      };
      inf.addHandlers({
        onAdd: enqueueAll,
        onUpdate: (a, b) => {
          if (!watch.updateMatters || watch.updateMatters(a, b)) enqueueAll(b);
        },
        onDelete: enqueueAll,
      });
      return inf;
    });
    watch.attach?.(made, scopes[0] === undefined);
    return made;
  };
  const primaryInformers = informersOf(def.primary);
  const informers: Informer[] = [
    ...primaryInformers,
    ...def.owns.flatMap(informersOf),
    ...(gate ? [gate.informer] : []),
  ];
  for (const i of informers) i.start();

  const ctxFor = (key: ObjectKey): ReconcileContext => ({
    log: reconcileLogger(log, key),
    events,
    metrics,
    signal: work.signal,
  });

  // 0 means "at once" (the pass changed pods): the key is in flight, so the queue marks it
  // dirty and hands it out again right after done().
  const requeue = (key: string, afterMs: number) => {
    if (afterMs > 0) queue.addAfter(key, afterMs);
    else queue.add(key);
  };

  const worker = async () => {
    for (;;) {
      // A reconcile may need no I/O at all (a pass planned from the caches): yield to the
      // event loop between keys, so watch events land before a key requeued at once runs.
      await new Promise<void>((resolve) => setImmediate(resolve));
      const key = await queue.get();
      if (key === undefined) return;
      const objKey = parseKey(key);
      // A live shard of another count holds it since earlier (a count change in progress).
      if (gate?.verdict(objKey.namespace, objKey.name).kind === "held") {
        queue.forget(key);
        queue.addAfter(key, SHARD_HELD_REQUEUE_MS);
        queue.done(key);
        continue;
      }
      const ctx = ctxFor(objKey);
      const controller = controllerOf(key);
      metrics.workerActive(controller, 1);
      const started = performance.now();
      try {
        const res = await def.reconciler.reconcile(objKey, ctx);
        const seconds = (performance.now() - started) / 1000;
        queue.forget(key);
        if (res.requeueAfterMs !== undefined) {
          requeue(key, res.requeueAfterMs);
          metrics.reconciled(
            controller,
            res.requeueAfterMs > 0 ? "requeue_after" : "requeue",
            seconds,
          );
          ctx.log.debug({ requeueAfterMs: res.requeueAfterMs, seconds }, "reconciled; requeue");
        } else {
          metrics.reconciled(controller, "success", seconds);
          ctx.log.debug({ seconds }, "reconciled");
        }
      } catch (e) {
        const seconds = (performance.now() - started) / 1000;
        metrics.reconciled(controller, "error", seconds);
        const action = def.errorPolicy?.(e, objKey) ?? "backoff";
        if (action === "backoff") {
          queue.addRateLimited(key);
          ctx.log.error(
            { err: errorMessage(e), attempt: queue.numRequeues(key), seconds },
            "reconcile failed; requeued with backoff",
          );
        } else {
          queue.forget(key);
          if (action.requeueAfterMs !== undefined) requeue(key, action.requeueAfterMs);
          ctx.log.error(
            { err: errorMessage(e), requeueAfterMs: action.requeueAfterMs, seconds },
            "reconcile failed",
          );
        }
      } finally {
        metrics.workerActive(controller, -1);
        queue.done(key);
      }
    }
  };

  // Every watched namespace; when all are watched, those the caches have seen an object in
  // (so a task needs no cluster-wide namespace access).
  const taskNamespaces = (): string[] => {
    if (opts.namespaces.length) return opts.namespaces;
    const set = new Set<string>();
    for (const i of informers)
      for (const o of i.list()) if (o.metadata.namespace) set.add(o.metadata.namespace);
    return [...set].sort();
  };
  const taskLoop = async (task: PeriodicTask) => {
    while (!halt.signal.aborted) {
      // A task runs in one shard at a time: the one its name falls to.
      const mine = !gate || gate.verdict("", `task:${task.name}`).kind === "mine";
      for (const ns of mine ? taskNamespaces() : []) {
        if (halt.signal.aborted) break;
        const ctx: ReconcileContext = {
          log: log.child({ [`${task.name}Id`]: randomUUID(), namespace: ns }),
          events,
          metrics,
          signal: work.signal,
        };
        try {
          const result = await task.run(ns, ctx);
          ctx.log.debug({ result }, `${task.name} pass done`);
        } catch (e) {
          ctx.log.error({ err: errorMessage(e) }, `${task.name} pass failed`);
        }
      }
      await sleep(task.intervalMs, halt.signal);
    }
  };

  let resync: NodeJS.Timeout | undefined;
  const running = (async () => {
    const halted = new Promise<void>((resolve) =>
      halt.signal.addEventListener("abort", () => resolve(), { once: true }),
    );
    await Promise.race([Promise.all(informers.map((i) => i.waitForSync())), halted]);
    if (halt.signal.aborted) return;
    log.info(
      { objects: primaryInformers.reduce((n, i) => n + i.list().length, 0) },
      "caches synced; starting workers",
    );
    resync = setInterval(() => {
      for (const i of primaryInformers) for (const o of i.list()) enqueue(def.primary.keyOf(o));
    }, s.resyncMs);
    resync.unref();
    const workers = Array.from({ length: opts.concurrency }, () => worker());
    await Promise.all([...workers, ...(def.tasks ?? []).map(taskLoop)]);
  })();

  return {
    informers,
    synced: () => informers.every((i) => i.hasSynced()),
    async stop(graceMs: number) {
      halt.abort();
      if (resync) clearInterval(resync);
      queue.shutDown();
      const grace = setTimeout(() => work.abort(), graceMs);
      try {
        await running;
      } finally {
        clearTimeout(grace);
      }
      await Promise.all(informers.map((i) => i.stop()));
      metrics.setQueueSource(undefined);
    },
  };
}
