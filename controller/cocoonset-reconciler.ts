/**
 * The CocoonSet reconciler: the engine's pass (the same functions `pulumi up` runs) inside
 * the controller runtime (its plan adds the finalizer), plus the deletion. Events, metrics and logs go
 * through the runtime's context.
 */
import {
  freshReader,
  finalizeDeletion,
  PassError,
  passFailureSummary,
  onlyOvertaken,
  readCocoonSet,
  runPass,
  SnapshotRegistryFailure,
  type CreateLogs,
  type EngineHooks,
  type SnapshotRegistry,
} from "../engine/execute/index.js";
import { EVENT_REASONS, FINALIZER, PLAN_METRICS, type CocoonSet } from "../engine/spec/index.js";
import { GuardedRegistry } from "../engine/registry/guard.js";
import type { KubeClient } from "../engine/kube/index.js";
import type { FleetCache } from "./fleet-cache.js";
import { runIdle } from "./idle-activity.js";
import { idleStepApplies } from "../engine/idle/index.js";
import { logWithFields } from "./logger.js";
import {
  DONE,
  requeueAfter,
  type ControllerMetrics,
  type ObjectKey,
  type ReconcileContext,
  type Reconciler,
  type ReconcileResult,
} from "./types.js";

/** Options of {@link CocoonSetReconciler}. */
export interface CocoonSetReconcilerOptions {
  /** Sub-agent creates in flight per pass. @default 8 */
  fanOut?: number;
  /** Deadline of a deletion's owner release. @default 120000 */
  releaseTimeoutMs?: number;
  /** Clock (tests fast-forward it). @default Date.now */
  now?: () => number;
  /** The snapshot registry (`--oci-registry`); without it `spec.suspend` is not acted on. */
  registry?: SnapshotRegistry;
  /** How long a CocoonHibernation may stay Hibernating. @default 180000 */
  hibernateTimeoutMs?: number;
  /** How long a CocoonHibernation may stay Waking. @default 300000 */
  wakeTimeoutMs?: number;
  /**
   * The informer caches to plan from, with the expectations of the pass's own pod writes;
   * until they are synced (or without them) the pass reads the apiserver afresh.
   */
  cache?: FleetCache;
}

function hooksFor(ctx: ReconcileContext<ControllerMetrics>): EngineHooks {
  return {
    event(cs, type, reason, message) {
      // Warnings also go to the log: an operator reading logs sees what needs attention.
      if (type === "Warning") ctx.log.warn({ reason }, message);
      void ctx.events.event(cs, type, reason, message);
    },
    metric(name, cs, labels) {
      const ns = cs.metadata.namespace ?? "";
      const n = cs.metadata.name ?? "";
      if (name === PLAN_METRICS.subAgentRebuild) ctx.metrics.rebuild(ns, n);
      else if (name === PLAN_METRICS.subAgentDeadLetter) ctx.metrics.deadLetter(ns, n);
      else if (name === PLAN_METRICS.slotReleasePodsDeleted)
        ctx.metrics.slotReleasePodDeleted(ns, n);
      else if (name === PLAN_METRICS.slotReleaseWake)
        ctx.metrics.slotReleaseWake(ns, n, labels?.placement ?? "pool");
      else if (name === PLAN_METRICS.slotReleaseWakeUnschedulable)
        ctx.metrics.slotReleaseWakeUnschedulable(ns, n);
    },
    log(level, msg, fields) {
      logWithFields(ctx.log, level, msg, fields);
    },
  };
}

/** Reconciles one CocoonSet per call; level-based, safe to run again at any time. */
export class CocoonSetReconciler implements Reconciler<ControllerMetrics> {
  /** The engine's recent sub-agent creates, kept for this process's lifetime. */
  private readonly createLogs: CreateLogs = new Map();

  constructor(
    private readonly client: KubeClient,
    private readonly opts: CocoonSetReconcilerOptions = {},
  ) {}

  /**
   * Per fleet, the CocoonSet the last cached pass ended with, and the cache's resourceVersion
   * when that pass began: while the cache still shows that version, the pass's own copy (from
   * its writes' answers) is the newer one, and planning from it avoids a write from stale data.
   */
  private readonly written = new Map<string, { cached: string | undefined; cs: CocoonSet }>();

  /**
   * Fleets whose last pass met a newer CocoonSet (409), with the resourceVersion it planned
   * from and when: the next pass waits for the cache to show a newer one (the watch brings it)
   * instead of reading it, and reads it fresh only if the watch has not within
   * {@link STALE_WAIT_MS}.
   */
  private readonly stale = new Map<string, { version: string | undefined; sinceMs: number }>();

  private nowMs(): number {
    return (this.opts.now ?? Date.now)();
  }

  /** Notes that `cs`, as this pass planned from it, was overtaken by another write. */
  private overtaken(fleet: string, cs: CocoonSet, cachedVersion: string | undefined): void {
    this.written.delete(fleet);
    const version = newerVersion(cs.metadata.resourceVersion, cachedVersion);
    this.stale.set(fleet, { version, sinceMs: this.stale.get(fleet)?.sinceMs ?? this.nowMs() });
  }

  /**
   * The CocoonSet to plan from, with the cache's resourceVersion of it: the cache's copy (or
   * the pass's own newer one), else a fresh read (no cache, or not synced yet).
   */
  private async read(
    key: ObjectKey,
    cache: FleetCache | undefined,
  ): Promise<{ cs?: CocoonSet; cached?: string; fresh?: boolean; waitMs?: number }> {
    if (!cache) return { cs: await readCocoonSet(this.client, key.namespace, key.name) };
    const fleet = `${key.namespace}/${key.name}`;
    const cached = cache.cocoonSet(key.namespace, key.name);
    if (!cached) {
      this.written.delete(fleet);
      this.stale.delete(fleet);
      cache.forget(fleet);
      return {};
    }
    const version = cached.metadata.resourceVersion;
    // A pass that met a newer CocoonSet plans again from it once the watch has brought it to
    // the cache: no read. (The finalizer is added from the cached copy too: its patch tests
    // the copy's resourceVersion or finalizers, so a copy the apiserver has overtaken is
    // refused the same way.) Only a watch silent for STALE_WAIT_MS has the copy read afresh.
    const stale = this.stale.get(fleet);
    if (stale) {
      if (isNewer(version, stale.version)) this.stale.delete(fleet);
      else if (this.nowMs() - stale.sinceMs < STALE_WAIT_MS) return { waitMs: STALE_RECHECK_MS };
      else {
        this.stale.delete(fleet);
        this.written.delete(fleet);
        return {
          cs: await readCocoonSet(this.client, key.namespace, key.name),
          cached: version,
          fresh: true,
        };
      }
    }
    // The pass's own copy while the cache has not caught up with it: the cache may show the
    // version the pass began from, or one of the pass's own writes before its last.
    const own = this.written.get(fleet);
    if (
      own &&
      own.cs.metadata.uid === cached.metadata.uid &&
      (own.cached === version || isNewer(own.cs.metadata.resourceVersion, version))
    )
      return { cs: own.cs, cached: version };
    this.written.delete(fleet);
    // The cache's object itself, frozen (FleetCache): a pass never changes what it planned from.
    return { cs: cached, cached: version };
  }

  async reconcile(
    key: ObjectKey,
    ctx: ReconcileContext<ControllerMetrics>,
  ): Promise<ReconcileResult> {
    const cache = this.opts.cache?.synced() ? this.opts.cache : undefined;
    const read = await this.read(key, cache);
    // Overtaken and the watch has not shown the newer CocoonSet yet: look again shortly.
    if (read.waitMs !== undefined) return requeueAfter(read.waitMs);
    let cs: CocoonSet | undefined = read.cs;
    if (!cs) return DONE;
    const fleet = `${key.namespace}/${key.name}`;
    if (cs.metadata.deletionTimestamp) {
      this.createLogs.delete(cs.metadata.uid ?? "");
      cache?.forget(fleet);
      if (!(cs.metadata.finalizers ?? []).includes(FINALIZER)) return DONE;
      const released = await finalizeDeletion(this.client, cs, {
        timeoutMs: this.opts.releaseTimeoutMs,
        metrics: { releaseDeleted: (kind, n) => ctx.metrics.releaseDeleted(kind, n) },
        log: (level, msg, fields) => logWithFields(ctx.log, level, msg, fields),
        // The controller's RBAC grants nothing on claims: the garbage collector takes them.
        pvcs: false,
        registry: this.opts.registry,
      });
      ctx.log.info({ released }, "released the CocoonSet's tree and removed the finalizer");
      return DONE;
    }
    const readVersion = cs.metadata.resourceVersion;
    const hooks = hooksFor(ctx);
    // The idle and expiry policies first: the pass plans from the effective suspend they record.
    let idleRequeueAtMs: number | undefined;
    // A fleet with a policy runs the idle step before its pass (controller/idle-activity.ts).
    if (idleStepApplies(cs)) {
      const reads = cache?.reads ?? freshReader(this.client);
      const pods = await reads.fleetPods(cs);
      const idle = await runIdle(this.client, reads, cs, pods, this.nowMs(), hooks, ctx.metrics);
      if (idle.deleted) return DONE;
      if (idle.overtaken) {
        if (cache && !read.fresh) this.overtaken(fleet, cs, read.cached);
        return requeueAfter(cache ? STALE_RECHECK_MS : 0);
      }
      cs = idle.cocoonSet;
      idleRequeueAtMs = idle.requeueAtMs;
    }
    if (cache) {
      hooks.podWritten = (kind, pod) => cache.expect(fleet, { kind, ...pod });
      hooks.nameHeld = (podName) => cache.nameHeld(fleet, podName);
    }
    const result = await runPass(this.client, cs, {
      fanOut: this.opts.fanOut,
      now: this.opts.now,
      hooks,
      ...(cache && {
        reads: cache.reads,
        cocoonSetFromCache: true,
        outstanding: cache.expectations.outstanding(fleet, (w) =>
          ctx.log.warn(
            { pod: w.name, write: w.kind, uid: w.uid },
            "the pod watch never showed this write of the controller's; planning from the cache again",
          ),
        ),
        heldBackRequeueMs: cache.expectations.nextExpiryMs(fleet),
      }),
      createLogs: this.createLogs,
      registry: this.opts.registry,
      // The plan's setup adds it when missing; a cached copy another writer overtook fails its
      // patch's test (422) and counts as overtaken, as a history write's 409 does.
      finalizer: FINALIZER,
      // Shutdown: once the grace period is over, the pass stops starting new actions.
      signal: ctx.signal,
    });
    if (cache && result.cocoonSet.metadata.resourceVersion !== readVersion)
      this.written.set(fleet, { cached: read.cached, cs: result.cocoonSet });
    if (result.heldBack)
      ctx.log.debug(
        { pods: result.heldBack },
        "held back: the pod watch has not shown the last writes",
      );
    if (onlyOvertaken(result)) {
      // The cached CocoonSet was behind another writer's: nothing wrong, plan again from the
      // newer one as soon as the watch brings it (no read, no error line, no backoff).
      if (!cache) {
        ctx.log.debug({}, "the CocoonSet changed during the pass; planned again on a fresh read");
        return requeueAfter(0);
      }
      this.overtaken(fleet, cs, read.cached);
      ctx.log.debug({}, "the CocoonSet changed during the pass; planned again once cached");
      return requeueAfter(STALE_RECHECK_MS);
    }
    const wait = registryWait(this.opts.registry, result);
    if (wait !== undefined) {
      // The registry is unanswered: this pass changed nothing; it comes back when the breaker
      // lets a call through again, without holding a worker meanwhile.
      hooks.event?.(
        result.cocoonSet,
        "Warning",
        EVENT_REASONS.snapshotRegistryUnanswered,
        `${passFailureSummary(result)}; requeued in ${Math.ceil(wait / 1000)}s`,
      );
      return requeueAfter(wait);
    }
    if (result.failures.length > 0) {
      // One bounded line however many steps failed (the runtime logs it once per pass).
      throw new PassError(passFailureSummary(result), result);
    }
    // The policies' next check, timed from now (after the pass) rather than from the read.
    const idleRequeueMs =
      idleRequeueAtMs === undefined ? undefined : Math.max(0, idleRequeueAtMs - this.nowMs());
    const requeue = [result.requeueAfterMs, idleRequeueMs].filter((ms) => ms !== undefined);
    return requeue.length === 0 ? DONE : requeueAfter(Math.min(...requeue));
  }
}

/** How often a fleet overtaken by another write looks whether the cache shows the newer copy. */
export const STALE_RECHECK_MS = 50;
/** How long such a fleet waits for the watch before it reads the CocoonSet afresh. */
export const STALE_WAIT_MS = 10_000;

// resourceVersions are compared as the numbers the apiserver's storage gives them, as the
// pass's own precondition does (engine/execute/pass.ts); one that is not a number is never
// taken as newer.
function isNewer(a: string | undefined, b: string | undefined): boolean {
  const x = Number(a ?? "");
  const y = Number(b ?? "");
  return Boolean(a) && Number.isFinite(x) && Number.isFinite(y) && x > y;
}

function newerVersion(a: string | undefined, b: string | undefined): string | undefined {
  return isNewer(b, a) ? b : a;
}

/**
 * How long to wait before the next pass when this one failed only for want of the snapshot
 * registry and the registry's breaker is open (engine/registry/guard.ts); undefined otherwise
 * (the error goes to the queue's backoff as any other).
 */
export function registryWait(
  registry: unknown,
  result: { failures: readonly unknown[] },
): number | undefined {
  if (!(registry instanceof GuardedRegistry) || !registry.status().unanswered) return undefined;
  if (result.failures.length === 0) return undefined;
  if (!result.failures.every((f) => SnapshotRegistryFailure.isInstance(f))) return undefined;
  return registry.retryAfterMs();
}
