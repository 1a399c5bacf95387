/**
 * A leader's session: one shared informer cache and, per controller, a work queue fed by its
 * watches, its workers, its resync and its periodic tasks; stopped as a whole when the
 * leadership ends or the manager stops.
 */
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import { KubeClient, type KubeObject } from "../engine/kube/index.js";
import { SharedCache, type CacheReader, type Kind } from "./cache.js";
import { KubeEventRecorder } from "./events.js";
import { reconcileLogger } from "./logger.js";
import { Metrics } from "./metrics.js";
import { SHARD_HELD_REQUEUE_MS, ShardGate } from "./shard-gate.js";
import { ShardLabeller } from "./shard-labeller.js";
import { bucketSelector, UNSHARDED, type Shard, type ShardTarget } from "./shard.js";
import { HIBERNATION_PLURAL, LABELS, parseShardBucket } from "../engine/spec/index.js";
import { formatKey, parseKey, type ObjectKey, type ReconcileContext } from "./types.js";
import { WorkQueue, type Clock } from "./work-queue.js";
import { sleep } from "../engine/kube/sleep.js";
import { errorMessage } from "../engine/kube/branded-error.js";
import {
  type Controller,
  type PeriodicTask,
  type Registered,
  type RuntimeOptions,
} from "./manager-types.js";

/** The running part of a leader: the cache, and per controller a queue, workers and tasks. */
export interface Session {
  cache: SharedCache;
  stop(graceMs: number): Promise<void>;
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
  shardGate?: ShardGate;
  /** This process's share: its informers of sharded kinds select its buckets. @default 0/1 */
  shard?: Shard;
}

/** One controller's part of a session: its queue, workers, resync and tasks. */
interface Running {
  /** Starts the workers and tasks (once the cache synced); resolves when they end. */
  run(halt: AbortSignal, work: AbortSignal): Promise<void>;
  stop(): void;
}

/**
 * The labeller of this process's share, when a kind it caches is sharded: objects without
 * their bucket are labelled before the caches list, so a shard's first list holds every pod
 * of its fleets (controller/shard-labeller.ts).
 */
function shardLabeller(
  s: SessionDeps,
  scopes: (string | undefined)[],
  shard: Shard,
): ShardLabeller | undefined {
  const sharded = (name: string) => s.kinds.find((k) => k.name === name && k.sharded);
  const pods = sharded("pods");
  const hibernations = !!sharded(HIBERNATION_PLURAL);
  const cocoonSets = !!sharded("cocoonsets");
  if (!pods && !hibernations && !cocoonSets) return undefined;
  return new ShardLabeller({
    client: s.client,
    scopes,
    podSelector: pods ? (pods.labelSelector ?? "") : undefined,
    hibernations,
    cocoonSets,
    log: s.log,
    shard,
  });
}

/**
 * Every watched namespace; when all are watched, those the caches have seen an object in (so
 * a task needs no cluster-wide namespace access).
 */
function taskNamespaces(opts: SessionDeps["opts"], cache: SharedCache): string[] {
  if (opts.namespaces.length) return opts.namespaces;
  const set = new Set<string>();
  for (const i of cache.informers())
    for (const o of i.list()) if (o.metadata.namespace) set.add(o.metadata.namespace);
  return [...set].sort();
}

/** A periodic task's loop, run in one shard at a time: the one its name falls to. */
async function runTaskLoop(
  task: PeriodicTask,
  metrics: unknown,
  at: { s: SessionDeps; cache: SharedCache; halt: AbortSignal; work: AbortSignal },
): Promise<void> {
  const { s, cache, halt, work } = at;
  while (!halt.aborted) {
    const mine =
      !s.shardGate ||
      s.shardGate.verdict({ namespace: "", name: `task:${task.name}` }).kind === "mine";
    for (const ns of mine ? taskNamespaces(s.opts, cache) : []) {
      if (halt.aborted) break;
      const ctx: ReconcileContext = {
        log: s.log.child({ [`${task.name}Id`]: randomUUID(), namespace: ns }),
        events: s.events,
        metrics,
        signal: work,
      };
      try {
        const result = await task.run(ns, ctx);
        ctx.log.debug({ result }, `${task.name} pass done`);
      } catch (e) {
        ctx.log.error({ err: errorMessage(e) }, `${task.name} pass failed`);
      }
    }
    await sleep(task.intervalMs, halt);
  }
}

export function createSession(s: SessionDeps): Session {
  const { opts, client, log } = s;
  const scopes: (string | undefined)[] = opts.namespaces.length ? opts.namespaces : [undefined];
  const shard = s.shard ?? UNSHARDED;
  const cache = new SharedCache(s.kinds, scopes, {
    client,
    log,
    bucketSelector: bucketSelector(shard),
  });
  for (const { def } of s.controllers) def.attach?.(cache);
  const work = new AbortController();
  const halt = new AbortController();
  const running = s.controllers.map((c) => runController(c, cache, s));
  const labeller = shardLabeller(s, scopes, shard);
  // A CocoonSet whose label is not its name's bucket goes to the shard of its pods.
  if (labeller && s.kinds.some((k) => k.name === "cocoonsets" && k.sharded))
    cache.kind("cocoonsets").addHandlers({
      onAdd: (o) => labeller.relabel(o),
      onUpdate: (_old, o) => labeller.relabel(o),
    });
  const labelled = (labeller?.start() ?? Promise.resolve()).then(() => {
    if (halt.signal.aborted) return;
    cache.start();
  });
  s.shardGate?.informer.start();

  const taskLoop = (task: PeriodicTask, metrics: unknown) =>
    runTaskLoop(task, metrics, { s, cache, halt: halt.signal, work: work.signal });

  const all = (async () => {
    const halted = new Promise<void>((resolve) =>
      halt.signal.addEventListener("abort", () => resolve(), { once: true }),
    );
    await Promise.race([
      labelled.then(() => Promise.all([cache.waitForSync(), s.shardGate?.informer.waitForSync()])),
      halted,
    ]);
    if (halt.signal.aborted) return;
    const objects = Object.fromEntries(
      s.controllers.map(({ def }) => [def.name, cache.kind(def.for.name).list().length]),
    );
    const cached = Object.fromEntries(
      s.kinds.map((k) => [k.name, cache.kind(k.name).list().length]),
    );
    log.info(
      { objects, cached, labelled: labeller?.count() ?? 0 },
      "caches synced; starting workers",
    );
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
      await Promise.all([cache.stop(), s.shardGate?.informer.stop(), labeller?.stop()]);
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

/** What one controller's workers share while they work a key. */
interface KeyWork {
  def: Controller;
  queue: WorkQueue;
  metrics: Metrics;
  requeue: (key: string, afterMs: number) => void;
}

/**
 * Reconciles one key and counts it: the reconciler's result, or its error through the
 * controller's error policy, says whether and when the key comes back.
 */
async function reconcileKey(
  { def, queue, metrics, requeue }: KeyWork,
  key: string,
  objKey: ObjectKey,
  ctx: ReconcileContext,
): Promise<void> {
  const name = def.name;
  const started = performance.now();
  try {
    const res = await def.reconciler.reconcile(objKey, ctx);
    const seconds = (performance.now() - started) / 1000;
    queue.forget(key);
    // Where the controller says so, the latest pass's answer replaces a requeue an earlier
    // pass asked for: a settled object makes no passes beyond its events.
    if (def.latestRequeueWins) queue.cancelDelayed(key);
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
  }
}

/** A controller's work queue, counted in its own series. */
function meteredQueue(name: string, metrics: Metrics, clock: Clock | undefined): WorkQueue {
  return new WorkQueue({
    clock,
    metrics: {
      added: () => metrics.queueAdded(name),
      retried: () => metrics.queueRetried(name),
      waited: (_key, seconds) => metrics.queueWaited(name, seconds),
      worked: (_key, seconds) => metrics.queueWorked(name, seconds),
    },
  });
}

/**
 * What the shard gate says of a key: asked about the cached object's bucket label when its
 * kind carries one; for such a kind without a cached label, "mine" (an object the shard's
 * selection holds is its own; one gone from the cache is left to its reconcile).
 */
function shardVerdict(
  def: Registered["def"],
  own: ReturnType<SharedCache["kind"]>,
  shardGate: ShardGate | undefined,
): (key: ObjectKey) => string {
  const targetOf = (key: ObjectKey): ShardTarget | undefined => {
    // A CocoonSet's bucket is its name's: one labelled otherwise is not reconciled here.
    if (!def.for.sharded || def.for.bucketFromName) return key;
    const label = own.get(formatKey(key))?.metadata.labels?.[LABELS.shardBucket];
    const bucket = parseShardBucket(label);
    return bucket === undefined ? undefined : { ...key, bucket };
  };
  return (key) => {
    const target = targetOf(key);
    return target && shardGate ? shardGate.verdict(target).kind : "mine";
  };
}

/** One controller in a session: its queue fed by its watches, and its workers. */
function runController(c: Registered, cache: SharedCache, s: SessionDeps): Running {
  const { def } = c;
  const { metrics, log, events } = s;
  const name = def.name;
  const workers = def.workers ?? s.opts.concurrency;
  const queue = meteredQueue(name, metrics, s.clock);
  metrics.controllerStarted(name, workers);
  metrics.setQueue(name, queue);
  // Each reconcile's lines name their controller (as controller-runtime's do).
  const controllerLog = log.child({ controller: name });

  const own = cache.kind(def.for.name);
  const verdictOf = shardVerdict(def, own, s.shardGate);
  // A key of another shard is not this process's business: never queued.
  const enqueue = (keys: readonly ObjectKey[]) => {
    for (const key of keys) if (verdictOf(key) !== "other") queue.add(formatKey(key));
  };
  for (const kind of new Set([def.for.name, ...(def.watches ?? []).map((w) => w.kind.name)])) {
    cache.kind(kind).addHandlers({
      onAdd: (o) => enqueue(keysFor(def, cache, kind, o)),
      onUpdate: (a, b) => enqueue(keysFor(def, cache, kind, b, a)),
      onDelete: (o) => enqueue(keysFor(def, cache, kind, o)),
    });
  }

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
      if (verdictOf(objKey) === "held") {
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
      try {
        await reconcileKey({ def, queue, metrics, requeue }, key, objKey, ctx);
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
