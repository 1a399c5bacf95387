/**
 * The CocoonSet reconciler: the engine's pass (the same functions `pulumi up` runs) inside
 * the controller runtime, plus the finalizer and deletion. Events, metrics and logs go
 * through the runtime's context.
 */
import {
  ensureFinalizer,
  finalizeDeletion,
  PassError,
  readCocoonSet,
  runPass,
  type CreateLogs,
  type EngineHooks,
} from "../provider/engine/index.js";
import { FINALIZER, PLAN_METRICS, type CocoonSet } from "../provider/fleet/index.js";
import { COCOONSET_API, type KubeClient } from "../provider/kube/index.js";
import { logWithFields } from "./logger.js";
import {
  DONE,
  requeueAfter,
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
}

function hooksFor(ctx: ReconcileContext): EngineHooks {
  return {
    event(cs, type, reason, message) {
      // Warnings also go to the log: an operator reading logs sees what needs attention.
      if (type === "Warning") ctx.log.warn({ reason }, message);
      void ctx.events.event(cs, type, reason, message);
    },
    metric(name, cs) {
      const ns = cs.metadata.namespace ?? "";
      const n = cs.metadata.name ?? "";
      if (name === PLAN_METRICS.subAgentRebuild) ctx.metrics.rebuild(ns, n);
      else if (name === PLAN_METRICS.subAgentDeadLetter) ctx.metrics.deadLetter(ns, n);
    },
    log(level, msg, fields) {
      logWithFields(ctx.log, level, msg, fields);
    },
  };
}

/** What this process last wrote to a CocoonSet: the version it started from and the result. */
interface OwnWrite {
  /** resourceVersion of the copy the reconcile started from. */
  before: string;
  /** The CocoonSet its last write returned. */
  cs: CocoonSet;
}

const rv = (o: { metadata: { resourceVersion?: string } } | undefined) =>
  o?.metadata.resourceVersion ?? "";

/** A private copy of a cached CocoonSet, with the type fields events need. */
const copyOf = (cs: CocoonSet): CocoonSet => ({
  ...structuredClone(cs),
  apiVersion: cs.apiVersion ?? COCOONSET_API,
  kind: cs.kind ?? "CocoonSet",
});

/**
 * Reconciles one CocoonSet per call; level-based, safe to run again at any time.
 *
 * The CocoonSet a pass starts from is the informer's cached copy when that copy is known to
 * be at least as new as this process's own last write to it; else this process's own last
 * write, when the cache still shows the version that write replaced; else a GET. So a pass
 * right after a write (a rebuild's history patch, then the requeued pass that recreates the
 * pod) does not wait for a GET. A copy some other writer has since replaced is no staler
 * than a GET made a moment earlier would be: its change arrives as a watch event and
 * triggers another pass, and the history write is conditional on the resourceVersion
 * (409: planned again). The pods are always listed fresh by the pass itself.
 */
export class CocoonSetReconciler implements Reconciler {
  /** The engine's recent sub-agent creates, kept for this process's lifetime. */
  private readonly createLogs: CreateLogs = new Map();
  /** Own writes the informer has not shown yet, by `namespace/name`. */
  private readonly ownWrites = new Map<string, OwnWrite>();

  constructor(
    private readonly client: KubeClient,
    private readonly opts: CocoonSetReconcilerOptions = {},
  ) {}

  /** The CocoonSet to plan from (see the class comment), or undefined when it is gone. */
  private async current(key: ObjectKey, ctx: ReconcileContext): Promise<CocoonSet | undefined> {
    const k = `${key.namespace}/${key.name}`;
    const cached = ctx.cached?.() as CocoonSet | undefined;
    const own = this.ownWrites.get(k);
    if (cached) {
      if (!own) return copyOf(cached);
      if (rv(cached) === rv(own.cs)) {
        this.ownWrites.delete(k);
        return copyOf(cached);
      }
      if (rv(cached) === own.before) return copyOf(own.cs);
    }
    this.ownWrites.delete(k);
    return readCocoonSet(this.client, key.namespace, key.name);
  }

  /** Remembers the pass's last write, if it wrote the CocoonSet. */
  private remember(key: ObjectKey, started: CocoonSet, after: CocoonSet): void {
    const k = `${key.namespace}/${key.name}`;
    if (rv(after) === rv(started)) return;
    const before = this.ownWrites.get(k)?.before ?? rv(started);
    this.ownWrites.set(k, { before, cs: after });
  }

  async reconcile(key: ObjectKey, ctx: ReconcileContext): Promise<ReconcileResult> {
    const started = await this.current(key, ctx);
    if (!started) return DONE;
    let cs: CocoonSet = started;
    if (cs.metadata.deletionTimestamp) {
      this.ownWrites.delete(`${key.namespace}/${key.name}`);
      this.createLogs.delete(cs.metadata.uid ?? "");
      if (!(cs.metadata.finalizers ?? []).includes(FINALIZER)) return DONE;
      const released = await finalizeDeletion(this.client, cs, {
        timeoutMs: this.opts.releaseTimeoutMs,
        metrics: { releaseDeleted: (kind, n) => ctx.metrics.releaseDeleted(kind, n) },
        log: (level, msg, fields) => logWithFields(ctx.log, level, msg, fields),
        // The controller's RBAC grants nothing on claims: the garbage collector takes them.
        pvcs: false,
      });
      ctx.log.info({ released }, "released the CocoonSet's tree and removed the finalizer");
      return DONE;
    }
    let result;
    try {
      cs = await ensureFinalizer(this.client, cs);
      result = await runPass(this.client, cs, {
        fanOut: this.opts.fanOut,
        now: this.opts.now,
        hooks: hooksFor(ctx),
        createLogs: this.createLogs,
        // Shutdown: once the grace period is over, the pass stops starting new actions.
        signal: ctx.signal,
      });
    } catch (e) {
      // What was written before the failure is unknown: the next reconcile reads afresh.
      this.ownWrites.delete(`${key.namespace}/${key.name}`);
      throw e;
    }
    if (result.conflicted) this.ownWrites.delete(`${key.namespace}/${key.name}`);
    else this.remember(key, started, result.cocoonSet);
    if (result.errors.length > 0) {
      throw new PassError(
        `${result.errors.length} step(s) failed: ${result.errors.join("; ")}`,
        result,
      );
    }
    return result.requeueAfterMs === undefined ? DONE : requeueAfter(result.requeueAfterMs);
  }
}
