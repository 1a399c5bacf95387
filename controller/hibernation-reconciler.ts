/**
 * The CocoonHibernation reconciler: the engine's hibernation pass (read, plan, execute:
 * engine/execute/hibernation.ts) inside the controller runtime. CRs that target one pod are
 * reconciled one at a time (a per-pod lock): their opposing desires would race that pod's
 * hibernate annotation and its VM's tag.
 * Behaviour: docs/behaviour.md §3.18.
 */
import { GuardedRegistry } from "../engine/registry/guard.js";
import {
  HibernationRefused,
  runHibernationPass,
  type HibernationHooks,
  type Reader,
  type SnapshotRegistry,
} from "../engine/execute/index.js";
import type { CocoonHibernation } from "../engine/spec/index.js";
import { paths, type KubeClient, type KubeObject } from "../engine/kube/index.js";
import { logWithFields } from "./logger.js";
import {
  DONE,
  requeueAfter,
  type HibernationMetrics,
  type ObjectKey,
  type ReconcileContext,
  type Reconciler,
  type ReconcileResult,
} from "./types.js";

/** Options of {@link HibernationReconciler}. */
export interface HibernationReconcilerOptions {
  /** The snapshot registry (`--oci-registry`); without it every CR is `Failed`, saying so. */
  registry?: SnapshotRegistry;
  /** @default 180000 (3 minutes) */
  hibernateTimeoutMs?: number;
  /** @default 300000 (5 minutes) */
  wakeTimeoutMs?: number;
  /** Clock. @default Date.now */
  now?: () => number;
  /**
   * Where a pass reads the fleets a VM name could belong to: the CocoonSet controller's
   * caches (controller/fleet-cache.ts). @default afresh
   */
  reads?: Reader;
}

/** The CR cache's index of CocoonHibernations by their pod (hibernation-controller.ts). */
export interface HibernationsByPod {
  synced(): boolean;
  get(key: string): KubeObject | undefined;
  byIndex(index: string, value: string): KubeObject[];
}

/** Runs `fn` once every earlier call for the same key has settled. */
class KeyedLock {
  private readonly tails = new Map<string, Promise<unknown>>();

  async run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const before = this.tails.get(key) ?? Promise.resolve();
    const mine = before.then(fn, fn);
    const tail = mine.catch(() => undefined);
    this.tails.set(key, tail);
    try {
      return await mine;
    } finally {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    }
  }
}

/** Reconciles one CocoonHibernation per call; level-based. */
export class HibernationReconciler implements Reconciler<HibernationMetrics> {
  private readonly locks = new KeyedLock();
  private cache?: HibernationsByPod;
  private index = "";

  /** The session's CR cache (and its index by pod): a pass reads its pod's CRs from it. */
  attach(cache: HibernationsByPod, index: string): void {
    this.cache = cache;
    this.index = index;
  }

  private hibernationsOfPod(ns: string, pod: string): CocoonHibernation[] | undefined {
    const cache = this.cache;
    if (!cache?.synced()) return undefined;
    return cache.byIndex(this.index, `${ns}/${pod}`) as unknown as CocoonHibernation[];
  }

  private cachedCr(key: ObjectKey): KubeObject | undefined {
    return this.cache?.synced() ? this.cache.get(`${key.namespace}/${key.name}`) : undefined;
  }

  constructor(
    private readonly client: KubeClient,
    private readonly opts: HibernationReconcilerOptions = {},
  ) {}

  async reconcile(
    key: ObjectKey,
    ctx: ReconcileContext<HibernationMetrics>,
  ): Promise<ReconcileResult> {
    const path = paths.cocoonHibernation(key.namespace, key.name);
    // Only its pod is needed before the lock, which a cached copy tells as well (a CR's pod
    // never changes); absent from the cache, the CR is read.
    const first = (this.cachedCr(key) ??
      (await this.client.getOrUndefined<CocoonHibernation>(path))) as CocoonHibernation | undefined;
    if (!first) return DONE;
    const podName = first.spec?.podRef?.name ?? "";
    return this.locks.run(`${key.namespace}/${podName}`, async () => {
      // Read again under the lock: another CR of this pod may just have changed things.
      const cr = await this.client.getOrUndefined<CocoonHibernation>(path);
      return cr ? this.reconcileOne(cr, ctx) : DONE;
    });
  }

  private async reconcileOne(
    cr: CocoonHibernation,
    ctx: ReconcileContext<HibernationMetrics>,
  ): Promise<ReconcileResult> {
    const result = await runHibernationPass(this.client, cr, {
      registry: this.opts.registry,
      hibernateTimeoutMs: this.opts.hibernateTimeoutMs,
      wakeTimeoutMs: this.opts.wakeTimeoutMs,
      now: this.opts.now,
      hooks: hooksFor(ctx),
      reads: this.opts.reads,
      hibernationsOfPod: (ns, pod) => this.hibernationsOfPod(ns, pod),
    });
    // A registry whose breaker is open: back when it is asked again, without a thrown error's
    // growing backoff (which would outlast the outage).
    const guard = this.opts.registry;
    if (
      result.refusal?.kind === "snapshot-registry-unanswered" &&
      guard instanceof GuardedRegistry &&
      guard.status().unanswered
    ) {
      ctx.log.warn(
        { refusal: result.refusal.detail },
        "the snapshot registry is unanswered; requeued",
      );
      return requeueAfter(guard.retryAfterMs());
    }
    // The runtime retries a thrown reconcile with backoff (a registry that did not answer).
    if (result.refusal) throw new HibernationRefused(result.refusal);
    return result.requeueAfterMs === undefined ? DONE : requeueAfter(result.requeueAfterMs);
  }
}

function hooksFor(ctx: ReconcileContext<HibernationMetrics>): HibernationHooks {
  return {
    event(cr, type, reason, message) {
      // Warnings also go to the log: an operator reading logs sees what needs attention.
      if (type === "Warning") ctx.log.warn({ reason }, message);
      void ctx.events.event(
        { apiVersion: cr.apiVersion, kind: cr.kind, metadata: cr.metadata },
        type,
        reason,
        message,
      );
    },
    observe(metric, result, seconds) {
      ctx.metrics.phaseDuration(metric, result, seconds);
    },
    log(level, msg, fields) {
      logWithFields(ctx.log, level, msg, fields);
    },
  };
}
