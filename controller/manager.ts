/**
 * The controller process: probes and metrics servers, the CRD check, leader election, and
 * while leading, a session of informers → work queue → workers plus the periodic resync and
 * the orphan reaper.
 *
 * Guarantees:
 * - level-based: informer events only enqueue `namespace/name` keys; a key is never
 *   reconciled twice at once; errors requeue with per-key backoff;
 * - a missing CRD never crashes the process: /readyz stays 503 with the reason and the
 *   check is retried with backoff;
 * - with leader election, a standby runs no informer, worker or reaper; a leader that loses
 *   its Lease stops its session before it may lead again;
 * - on SIGTERM/SIGINT: no new work, in-flight reconciles finish (their signal aborts after
 *   the grace period), the Lease is released, servers close, and the promise resolves.
 *
 * Caveats: when every namespace is watched, the reaper visits the namespaces that hold a
 * CocoonSet or a managed pod (from the informer caches) rather than listing namespaces, so
 * it needs no cluster-wide namespace access; ephemeral Jobs or ConfigMaps in a namespace
 * with neither are reaped once such an object appears there or when `--namespace` names it.
 * Behaviour: docs/behaviour.md §6.
 */
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import {
  COCOONSET_API,
  isForbidden,
  isNotFound,
  KubeClient,
  paths,
  type KubeObject,
} from "../provider/kube/index.js";
import { KubeEventRecorder } from "./events.js";
import {
  parseBindAddress,
  startMetricsServer,
  startProbeServer,
  type CheckResult,
} from "./health.js";
import { Informer } from "./informer.js";
import { defaultIdentity, LeaderElector } from "./leader-election.js";
import { createLogger, reconcileLogger } from "./logger.js";
import { Metrics } from "./metrics.js";
import type { ControllerOptions } from "./options.js";
import { COCOONSET_CRD_NAME } from "./rbac.js";
import {
  formatKey,
  parseKey,
  type ObjectKey,
  type ReconcileContext,
  type Reconciler,
} from "./types.js";
import { WorkQueue } from "./work-queue.js";
import { sleep } from "./sleep.js";

/** Label selector of the pods the controller watches. */
export const MANAGED_POD_SELECTOR = "app.kubernetes.io/managed-by=cocoonset";
/** Label naming a pod's CocoonSet (fallback when no controller ownerReference). */
export const COCOONSET_NAME_LABEL = "cocoonset.cocoonstack.io/name";

/** What the controller runs: the reconcile logic and, optionally, one reaper pass. */
export interface ControllerDeps {
  reconciler: Reconciler;
  /** One orphan reaper pass over a namespace. Receives a context for logs and metrics. */
  reap?: (namespace: string, ctx: ReconcileContext) => Promise<unknown>;
}

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
  /** @default "cocoonset-controller" */
  leaseName?: string;
  /** @default 15 */
  leaseDurationSeconds?: number;
  /** Called once the servers listen, with their ports (0 when disabled). */
  onListening?: (ports: { metrics: number; probes: number }) => void;
}

/** The CocoonSet key a pod belongs to: its controller ownerReference, else its name label. */
export function ownerKeyOfPod(pod: KubeObject): ObjectKey | undefined {
  const ns = pod.metadata.namespace;
  if (!ns) return undefined;
  const ref = pod.metadata.ownerReferences?.find(
    (r) => r.controller === true && r.kind === "CocoonSet",
  );
  if (ref) return { namespace: ns, name: ref.name };
  const byLabel = pod.metadata.labels?.[COCOONSET_NAME_LABEL];
  return byLabel ? { namespace: ns, name: byLabel } : undefined;
}

interface PodLike {
  status?: { phase?: string; conditions?: { type: string; status: string }[] };
}

function podReady(p: KubeObject): boolean {
  return (
    (p as PodLike).status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ??
    false
  );
}

function sameMap(a?: Record<string, string>, b?: Record<string, string>): boolean {
  const ka = Object.keys(a ?? {});
  if (ka.length !== Object.keys(b ?? {}).length) return false;
  return ka.every((k) => a?.[k] === b?.[k]);
}

/** True when a pod update matters to its CocoonSet: phase, Ready, deletion, labels or annotations. */
export function podChangeMatters(oldPod: KubeObject, newPod: KubeObject): boolean {
  return (
    (oldPod as PodLike).status?.phase !== (newPod as PodLike).status?.phase ||
    podReady(oldPod) !== podReady(newPod) ||
    oldPod.metadata.deletionTimestamp !== newPod.metadata.deletionTimestamp ||
    !sameMap(oldPod.metadata.labels, newPod.metadata.labels) ||
    !sameMap(oldPod.metadata.annotations, newPod.metadata.annotations)
  );
}

/**
 * True when a CocoonSet update needs a reconcile: a spec change (generation) or a deletion.
 * Status and annotation writes (the engine's own) do not trigger one.
 */
export function cocoonSetChangeMatters(oldCs: KubeObject, newCs: KubeObject): boolean {
  return (
    oldCs.metadata.generation !== newCs.metadata.generation ||
    oldCs.metadata.deletionTimestamp !== newCs.metadata.deletionTimestamp
  );
}

/**
 * Whether the CocoonSet API is installed and served, and if not, why. Reads the CRD object
 * (its Established condition) when allowed, else API discovery.
 */
export async function checkCrd(client: KubeClient, log?: Logger): Promise<CheckResult> {
  try {
    const crd = await client.getOrUndefined<KubeObject>(paths.crd(COCOONSET_CRD_NAME));
    if (!crd) return { ok: false, reason: `CRD ${COCOONSET_CRD_NAME} is not installed` };
    const conds =
      (crd.status as { conditions?: { type: string; status: string }[] } | undefined)?.conditions ??
      [];
    if (!conds.some((c) => c.type === "Established" && c.status === "True"))
      return { ok: false, reason: `CRD ${COCOONSET_CRD_NAME} is not Established yet` };
    return { ok: true, reason: `CRD ${COCOONSET_CRD_NAME} is established` };
  } catch (e) {
    if (!isForbidden(e)) throw e;
    log?.debug({ err: (e as Error).message }, "cannot read the CRD object; asking API discovery");
  }
  // No access to the CRD object (namespaced Role): API discovery is open to every user.
  try {
    const group = await client.get<{ resources?: { name: string }[] }>(`/apis/${COCOONSET_API}`);
    return group.resources?.some((r) => r.name === "cocoonsets")
      ? { ok: true, reason: `${COCOONSET_API} cocoonsets is served` }
      : { ok: false, reason: `${COCOONSET_API} does not serve cocoonsets` };
  } catch (e) {
    if (isNotFound(e)) return { ok: false, reason: `${COCOONSET_API} is not served (CRD missing)` };
    throw e;
  }
}

/** The running part of a leader: informers, queue, workers, resync and reaper. */
interface Session {
  informers: Informer[];
  synced(): boolean;
  stop(graceMs: number): Promise<void>;
}

/**
 * Runs the controller until SIGTERM/SIGINT (or `runtime.signal`), then shuts down cleanly.
 * Rejects only for start-up failures (a server that cannot bind).
 */
export async function runController(
  opts: ControllerOptions,
  deps: ControllerDeps,
  runtime: ControllerRuntime = {},
): Promise<void> {
  const log = runtime.logger ?? createLogger({ level: opts.logLevel });
  const metrics = runtime.metrics ?? new Metrics({ defaultMetrics: true });
  const ownClient = !runtime.client;
  const client = runtime.client ?? new KubeClient({ kubeconfig: opts.kubeconfig });
  const identity = runtime.identity ?? defaultIdentity();
  const graceMs = runtime.shutdownGraceMs ?? 30_000;
  const resyncMs = runtime.resyncIntervalMs ?? 600_000;
  const events = new KubeEventRecorder({ client, identity, log });

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

  let crd: CheckResult = { ok: false, reason: `checking CRD ${COCOONSET_CRD_NAME}` };
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
    if (!crd.ok) return crd;
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

  // The CRD may be installed after the controller (same Pulumi program): wait, don't crash.
  for (let attempt = 0; !stop.signal.aborted; attempt++) {
    try {
      crd = await checkCrd(client, log);
    } catch (e) {
      crd = {
        ok: false,
        reason: `cannot check CRD ${COCOONSET_CRD_NAME}: ${(e as Error).message}`,
      };
    }
    if (crd.ok) break;
    const delay = Math.min(1000 * 2 ** attempt, 60_000);
    log.warn({ reason: crd.reason, retryInMs: delay }, "CocoonSet CRD not available; not ready");
    await sleep(delay, stop.signal);
  }

  const startSession = (): Session =>
    createSession({ opts, deps, client, log, metrics, events, resyncMs });

  // Leadership changes are applied one after the other, so a new session never starts
  // while the previous one is still finishing its reconciles.
  let transitions = Promise.resolve();
  const lead = () => {
    transitions = transitions.then(() => {
      if (stop.signal.aborted || session) return;
      metrics.setLeader(true);
      session = startSession();
    });
  };
  const unlead = (graceForInFlight: number) => {
    transitions = transitions.then(async () => {
      const s = session;
      session = undefined;
      metrics.setLeader(false);
      await s?.stop(graceForInFlight);
    });
  };

  if (!stop.signal.aborted) {
    if (opts.leaderElect) {
      elector = new LeaderElector({
        client,
        namespace: opts.leaderElectionNamespace,
        name: runtime.leaseName,
        identity,
        leaseDurationSeconds: runtime.leaseDurationSeconds,
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
  if (ownClient) client.close();
  log.info("controller stopped");
}

interface SessionDeps {
  opts: ControllerOptions;
  deps: ControllerDeps;
  client: KubeClient;
  log: Logger;
  metrics: Metrics;
  events: KubeEventRecorder;
  resyncMs: number;
}

function createSession(s: SessionDeps): Session {
  const { opts, deps, client, log, metrics, events } = s;
  const queue = new WorkQueue();
  metrics.setQueueDepthSource(() => queue.len());
  const work = new AbortController();
  const halt = new AbortController();
  const scopes: (string | undefined)[] = opts.namespaces.length ? opts.namespaces : [undefined];

  const csInformers = scopes.map((ns) => new Informer({ client, path: paths.cocoonSets(ns), log }));
  const podInformers = scopes.map(
    (ns) =>
      new Informer({
        client,
        path: ns === undefined ? "/api/v1/pods" : paths.pods(ns),
        labelSelector: MANAGED_POD_SELECTOR,
        log,
      }),
  );
  const enqueue = (key: ObjectKey | undefined) => {
    if (key) queue.add(formatKey(key));
  };
  const csKey = (o: KubeObject): ObjectKey | undefined =>
    o.metadata.namespace && o.metadata.name
      ? { namespace: o.metadata.namespace, name: o.metadata.name }
      : undefined;
  for (const inf of csInformers) {
    inf.addHandlers({
      onAdd: (o) => enqueue(csKey(o)),
      onUpdate: (a, b) => {
        if (cocoonSetChangeMatters(a, b)) enqueue(csKey(b));
      },
      onDelete: (o) => enqueue(csKey(o)),
    });
  }
  for (const inf of podInformers) {
    inf.addHandlers({
      onAdd: (p) => enqueue(ownerKeyOfPod(p)),
      onUpdate: (a, b) => {
        if (podChangeMatters(a, b)) enqueue(ownerKeyOfPod(b));
      },
      onDelete: (p) => enqueue(ownerKeyOfPod(p)),
    });
  }
  const informers: Informer[] = [...csInformers, ...podInformers];
  for (const i of informers) i.start();

  const ctxFor = (key: ObjectKey): ReconcileContext => ({
    log: reconcileLogger(log, key),
    events,
    metrics,
    signal: work.signal,
  });

  const worker = async () => {
    for (;;) {
      const key = await queue.get();
      if (key === undefined) return;
      const objKey = parseKey(key);
      const ctx = ctxFor(objKey);
      const started = performance.now();
      try {
        const res = await deps.reconciler.reconcile(objKey, ctx);
        const seconds = (performance.now() - started) / 1000;
        queue.forget(key);
        if (res?.requeueAfterMs !== undefined) {
          // 0 means "at once" (the pass changed pods): the key is in flight, so the queue
          // marks it dirty and hands it out again right after done().
          if (res.requeueAfterMs > 0) queue.addAfter(key, res.requeueAfterMs);
          else queue.add(key);
          metrics.reconciled("requeue", seconds);
          ctx.log.debug({ requeueAfterMs: res.requeueAfterMs, seconds }, "reconciled; requeue");
        } else {
          metrics.reconciled("success", seconds);
          ctx.log.debug({ seconds }, "reconciled");
        }
      } catch (e) {
        const seconds = (performance.now() - started) / 1000;
        metrics.reconciled("error", seconds);
        queue.addRateLimited(key);
        ctx.log.error(
          { err: (e as Error).message, attempt: queue.numRequeues(key), seconds },
          "reconcile failed; requeued with backoff",
        );
      } finally {
        queue.done(key);
      }
    }
  };

  const reapNamespaces = (): string[] => {
    if (opts.namespaces.length) return opts.namespaces;
    const set = new Set<string>();
    for (const i of informers)
      for (const o of i.list()) if (o.metadata.namespace) set.add(o.metadata.namespace);
    return [...set].sort();
  };
  const reapLoop = async () => {
    if (!deps.reap) return;
    while (!halt.signal.aborted) {
      for (const ns of reapNamespaces()) {
        if (halt.signal.aborted) break;
        const ctx: ReconcileContext = {
          log: log.child({ reapId: randomUUID(), namespace: ns }),
          events,
          metrics,
          signal: work.signal,
        };
        try {
          const result = await deps.reap(ns, ctx);
          ctx.log.debug({ result }, "reap pass done");
        } catch (e) {
          ctx.log.error({ err: (e as Error).message }, "reap pass failed");
        }
      }
      await sleep(opts.reapIntervalMs, halt.signal);
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
      { cocoonsets: csInformers.reduce((n, i) => n + i.list().length, 0) },
      "caches synced; starting workers",
    );
    resync = setInterval(() => {
      for (const i of csInformers) for (const o of i.list()) enqueue(csKey(o));
    }, s.resyncMs);
    resync.unref();
    const workers = Array.from({ length: opts.concurrency }, () => worker());
    await Promise.all([...workers, reapLoop()]);
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
      metrics.setQueueDepthSource(() => 0);
    },
  };
}
