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
 * Behaviour: docs/behaviour.md §6.
 */
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import type { Registry } from "prom-client";
import { KubeClient, type KubeObject } from "../engine/kube/index.js";
import { SharedCache, mergeKinds, type CacheReader, type Kind } from "./cache.js";
import { KubeEventRecorder } from "./events.js";
import {
  parseBindAddress,
  startMetricsServer,
  startProbeServer,
  type CheckResult,
} from "./health.js";
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
  /** Other kinds whose events map to this controller's keys. */
  watches?: Watch[];
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
  /** @default {@link DEFAULT_LEASE_NAME} */
  leaseName?: string;
  /** @default 15 */
  leaseDurationSeconds?: number;
  /** Called once the servers listen, with their ports (0 when disabled). */
  onListening?: (ports: { metrics: number; probes: number }) => void;
  /** The work queues' clock (their delays and requeues). @default systemClock */
  clock?: Clock;
}

/** A controller as the manager holds it: its metrics made. */
interface Registered {
  def: Controller;
  metrics: unknown;
}

/** The running part of a leader: the cache, and per controller a queue, workers and tasks. */
interface Session {
  cache: SharedCache;
  stop(graceMs: number): Promise<void>;
}

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

  /** The kinds the cache watches: every controller's reconciled and watched kinds. */
  kinds(): Kind[] {
    return mergeKinds(
      this.controllers.flatMap(({ def }) => [def.for, ...(def.watches ?? []).map((w) => w.kind)]),
    );
  }

  /**
   * Runs until SIGTERM/SIGINT (or `runtime.signal`), then shuts down cleanly. Rejects only for
   * start-up failures (a server that cannot bind).
   */
  async start(): Promise<void> {
    this.running = true;
    const { opts, runtime, metrics } = this;
    const log = runtime.logger ?? createLogger({ level: opts.logLevel });
    const ownClient = !runtime.client;
    const client =
      runtime.client ??
      new KubeClient({
        kubeconfig: opts.kubeconfig,
        context: opts.context,
        // One socket per watch (one per watched kind and scope), plus the default for requests.
        maxSockets: Math.max(1, opts.namespaces.length) * this.kinds().length + 32,
      });
    const identity = runtime.identity ?? defaultIdentity();
    const graceMs = runtime.shutdownGraceMs ?? 30_000;
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

    const gated = this.controllers.map((c) => c.def).filter((d) => !!d.ready);
    let gate: CheckResult = { ok: false, reason: gated[0]?.readyPending ?? "starting" };
    let session: Session | undefined;
    let elector: LeaderElector | undefined;

    const healthz = (): CheckResult => {
      const dead = session?.cache.informers().filter((i) => !i.isSupervised()) ?? [];
      return dead.length
        ? { ok: false, reason: `informers stopped: ${dead.map((i) => i.path).join(", ")}` }
        : { ok: true, reason: "ok" };
    };
    const readyz = (): CheckResult => {
      if (stop.signal.aborted) return { ok: false, reason: "shutting down" };
      if (!gate.ok) return gate;
      if (elector && !elector.isLeader()) return { ok: true, reason: "ok (standby, not leading)" };
      if (!session) return { ok: false, reason: "starting" };
      if (!session.cache.synced()) {
        const pending = session.cache.informers().filter((i) => !i.hasSynced());
        const detail = pending
          .map((i) => `${i.path}${i.lastError() ? ` (${i.lastError()!.message})` : ""}`)
          .join(", ");
        return { ok: false, reason: `caches not synced: ${detail}` };
      }
      return withChecks({ ok: true, reason: "ok" });
    };
    const named: Record<string, () => CheckResult> = Object.assign(
      {},
      ...this.controllers.map((c) => c.def.checks ?? {}),
    ) as Record<string, () => CheckResult>;
    const withChecks = (r: CheckResult): CheckResult => {
      const failing = Object.entries(named)
        .map(([n, check]) => [n, check()] as const)
        .filter(([, c]) => !c.ok);
      if (failing.length === 0) return r;
      return {
        ok: r.ok,
        reason: [r.reason, ...failing.map(([n, c]) => `[-]${n}: ${c.reason}`)].join("\n"),
      };
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
      const p = probeBind
        ? await startProbeServer(probeBind, { healthz, readyz, named })
        : undefined;
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
        controllers: this.controllers.map((c) => c.def.name),
      },
      "controller starting",
    );

    // A gate may pass only later (a CRD installed after the controller): wait, don't crash.
    const checkGates = async (): Promise<{ result: CheckResult; def?: Controller }> => {
      for (const def of gated) {
        let result: CheckResult;
        try {
          result = await def.ready!(client, log);
        } catch (e) {
          result = { ok: false, reason: errorMessage(e) };
        }
        if (!result.ok) return { result, def };
      }
      return { result: { ok: true, reason: "ok" } };
    };
    for (let attempt = 0; !stop.signal.aborted; attempt++) {
      const { result, def } = await checkGates();
      gate = result;
      if (gate.ok) break;
      const delay = Math.min(1000 * 2 ** attempt, 60_000);
      log.warn({ reason: gate.reason, retryInMs: delay }, def?.notReadyMessage ?? "not ready");
      await sleep(delay, stop.signal);
    }

    const startSession = (): Session =>
      createSession({
        opts,
        controllers: this.controllers,
        kinds: this.kinds(),
        client,
        log,
        metrics,
        events,
        resyncMs: runtime.resyncIntervalMs ?? 600_000,
        clock: runtime.clock,
        // With leader election, every process reads the shards' Leases (shard-gate.ts).
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
}

interface SessionDeps {
  opts: RuntimeOptions;
  controllers: readonly Registered[];
  kinds: Kind[];
  client: KubeClient;
  log: Logger;
  metrics: Metrics;
  events: KubeEventRecorder;
  resyncMs: number;
  clock?: Clock;
  gate?: ShardGate;
}

/** One controller's part of a session: its queue, workers, resync and tasks. */
interface Running {
  /** Starts the workers and tasks (once the cache synced); resolves when they end. */
  run(halt: AbortSignal, work: AbortSignal): Promise<void>;
  stop(): void;
}

function createSession(s: SessionDeps): Session {
  const { opts, client, log, events } = s;
  const scopes: (string | undefined)[] = opts.namespaces.length ? opts.namespaces : [undefined];
  const cache = new SharedCache(s.kinds, scopes, { client, log });
  for (const { def } of s.controllers) def.attach?.(cache);
  const work = new AbortController();
  const halt = new AbortController();
  const running = s.controllers.map((c) => runController(c, cache, s));
  cache.start();
  s.gate?.informer.start();

  // Every watched namespace; when all are watched, those the caches have seen an object in
  // (so a task needs no cluster-wide namespace access).
  const taskNamespaces = (): string[] => {
    if (opts.namespaces.length) return opts.namespaces;
    const set = new Set<string>();
    for (const i of cache.informers())
      for (const o of i.list()) if (o.metadata.namespace) set.add(o.metadata.namespace);
    return [...set].sort();
  };
  const taskLoop = async (task: PeriodicTask, metrics: unknown) => {
    while (!halt.signal.aborted) {
      // A task runs in one shard at a time: the one its name falls to.
      const mine = !s.gate || s.gate.verdict("", `task:${task.name}`).kind === "mine";
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

  const all = (async () => {
    const halted = new Promise<void>((resolve) =>
      halt.signal.addEventListener("abort", () => resolve(), { once: true }),
    );
    await Promise.race([
      Promise.all([cache.waitForSync(), s.gate?.informer.waitForSync()]),
      halted,
    ]);
    if (halt.signal.aborted) return;
    const objects = Object.fromEntries(
      s.controllers.map(({ def }) => [def.name, cache.kind(def.for.name).list().length]),
    );
    log.info({ objects }, "caches synced; starting workers");
    await Promise.all([
      ...running.map((r) => r.run(halt.signal, work.signal)),
      ...s.controllers.flatMap(({ def, metrics }) =>
        (def.tasks ?? []).map((t) => taskLoop(t, metrics)),
      ),
    ]);
  })();

  return {
    cache,
    async stop(graceMs: number) {
      halt.abort();
      for (const r of running) r.stop();
      const grace = setTimeout(() => work.abort(), graceMs);
      try {
        await all;
      } finally {
        clearTimeout(grace);
      }
      await Promise.all([cache.stop(), s.gate?.informer.stop()]);
      for (const { def } of s.controllers) s.metrics.setQueue(def.name, undefined);
    },
  };
}

/** An object's own key (`namespace/name`), none without a name. */
function selfKey(o: KubeObject): ObjectKey[] {
  return o.metadata.name ? [{ namespace: o.metadata.namespace ?? "", name: o.metadata.name }] : [];
}

/**
 * The keys of controller `def` that one event on an object of the cache's kind `kind`
 * enqueues: the object's own key when `def` reconciles that kind, and what each of its
 * watches of the kind maps it to. `old` is given for an update, which counts only where
 * `updateMatters` says so (an add or a delete always does).
 */
export function keysFor(
  def: Pick<Controller, "for" | "updateMatters" | "watches">,
  cache: CacheReader,
  kind: string,
  obj: KubeObject,
  old?: KubeObject,
): ObjectKey[] {
  const keys: ObjectKey[] = [];
  if (def.for.name === kind && (!old || !def.updateMatters || def.updateMatters(old, obj)))
    keys.push(...selfKey(obj));
  for (const w of def.watches ?? []) {
    if (w.kind.name !== kind || (old && w.updateMatters && !w.updateMatters(old, obj))) continue;
    keys.push(...w.map(obj, cache));
  }
  return keys;
}

/** One controller in a session: its queue fed by its watches, and its workers. */
function runController(c: Registered, cache: SharedCache, s: SessionDeps): Running {
  const { def } = c;
  const { metrics, log, events } = s;
  const name = def.name;
  const workers = def.workers ?? s.opts.concurrency;
  const queue = new WorkQueue({
    clock: s.clock,
    metrics: {
      added: () => metrics.queueAdded(name),
      retried: () => metrics.queueRetried(name),
      waited: (_key, seconds) => metrics.queueWaited(name, seconds),
      worked: (_key, seconds) => metrics.queueWorked(name, seconds),
    },
  });
  metrics.controllerStarted(name, workers);
  metrics.setQueue(name, queue);
  // Each reconcile's lines name their controller (as controller-runtime's do).
  const controllerLog = log.child({ controller: name });

  const gate = s.gate;
  // A key of another shard is not this process's business: never queued.
  const enqueue = (keys: readonly ObjectKey[]) => {
    for (const key of keys)
      if (gate?.verdict(key.namespace, key.name).kind !== "other") queue.add(formatKey(key));
  };
  for (const kind of new Set([def.for.name, ...(def.watches ?? []).map((w) => w.kind.name)])) {
    cache.kind(kind).addHandlers({
      onAdd: (o) => enqueue(keysFor(def, cache, kind, o)),
      onUpdate: (a, b) => enqueue(keysFor(def, cache, kind, b, a)),
      onDelete: (o) => enqueue(keysFor(def, cache, kind, o)),
    });
  }
  const own = cache.kind(def.for.name);

  // 0 means "at once" (the pass changed pods): the key is in flight, so the queue marks it
  // dirty and hands it out again right after done().
  const requeue = (key: string, afterMs: number) => {
    if (afterMs > 0) queue.addAfter(key, afterMs);
    else queue.add(key);
  };

  const worker = async (work: AbortSignal) => {
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
      const ctx: ReconcileContext = {
        log: reconcileLogger(controllerLog, objKey),
        events,
        metrics: c.metrics,
        signal: work,
      };
      metrics.workerActive(name, 1);
      const started = performance.now();
      try {
        const res = await def.reconciler.reconcile(objKey, ctx);
        const seconds = (performance.now() - started) / 1000;
        queue.forget(key);
        if (res.requeueAfterMs !== undefined) {
          requeue(key, res.requeueAfterMs);
          metrics.reconciled(name, res.requeueAfterMs > 0 ? "requeue_after" : "requeue", seconds);
          ctx.log.debug({ requeueAfterMs: res.requeueAfterMs, seconds }, "reconciled; requeue");
        } else {
          metrics.reconciled(name, "success", seconds);
          ctx.log.debug({ seconds }, "reconciled");
        }
      } catch (e) {
        const seconds = (performance.now() - started) / 1000;
        metrics.reconciled(name, "error", seconds);
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
        metrics.workerActive(name, -1);
        queue.done(key);
      }
    }
  };

  let resync: NodeJS.Timeout | undefined;
  return {
    async run(halt, work) {
      if (halt.aborted) return;
      if (def.resync !== false) {
        resync = setInterval(() => {
          for (const o of own.list()) enqueue(selfKey(o));
        }, s.resyncMs);
        resync.unref();
      }
      await Promise.all(Array.from({ length: workers }, () => worker(work)));
    },
    stop() {
      if (resync) clearInterval(resync);
      queue.shutDown();
    },
  };
}
