/**
 * The CocoonSet reconciler: the engine's pass (the same functions `pulumi up` runs) inside
 * the controller runtime, plus the finalizer and deletion. Events, metrics and logs go
 * through the runtime's context.
 */
import {
  ensureFinalizer,
  finalizeDeletion,
  PassError,
  passFailureSummary,
  readCocoonSet,
  runPass,
  type CreateLogs,
  type EngineHooks,
  type SnapshotRegistry,
} from "../engine/execute/index.js";
import { FINALIZER, PLAN_METRICS, type CocoonSet } from "../engine/spec/index.js";
import type { KubeClient } from "../engine/kube/index.js";
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
  /** The snapshot registry (`--oci-registry`); without it `spec.suspend` is not acted on. */
  registry?: SnapshotRegistry;
  /** How long a CocoonHibernation may stay Hibernating. @default 180000 */
  hibernateTimeoutMs?: number;
  /** How long a CocoonHibernation may stay Waking. @default 300000 */
  wakeTimeoutMs?: number;
}

function hooksFor(ctx: ReconcileContext): EngineHooks {
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
export class CocoonSetReconciler implements Reconciler {
  /** The engine's recent sub-agent creates, kept for this process's lifetime. */
  private readonly createLogs: CreateLogs = new Map();

  constructor(
    private readonly client: KubeClient,
    private readonly opts: CocoonSetReconcilerOptions = {},
  ) {}

  async reconcile(key: ObjectKey, ctx: ReconcileContext): Promise<ReconcileResult> {
    let cs: CocoonSet | undefined = await readCocoonSet(this.client, key.namespace, key.name);
    if (!cs) return DONE;
    if (cs.metadata.deletionTimestamp) {
      this.createLogs.delete(cs.metadata.uid ?? "");
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
    cs = await ensureFinalizer(this.client, cs);
    const result = await runPass(this.client, cs, {
      fanOut: this.opts.fanOut,
      now: this.opts.now,
      hooks: hooksFor(ctx),
      createLogs: this.createLogs,
      registry: this.opts.registry,
      // Shutdown: once the grace period is over, the pass stops starting new actions.
      signal: ctx.signal,
    });
    if (result.failures.length > 0) {
      // One bounded line however many steps failed (the runtime logs it once per pass).
      throw new PassError(passFailureSummary(result), result);
    }
    return result.requeueAfterMs === undefined ? DONE : requeueAfter(result.requeueAfterMs);
  }
}
