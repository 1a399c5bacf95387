/**
 * The CocoonHibernation reconciler: reads one CR, its target pod, the namespace's other CRs
 * and (when the plan needs it) the registry's `<vm>:hibernate` tag, asks the pure planner
 * (provider/fleet/hibernation.ts) what to do, and does it. CRs that target one pod are
 * reconciled one at a time (a per-pod lock): their opposing desires would race that pod's
 * hibernate annotation and its VM's tag.
 * Behaviour: docs/behaviour.md §3.18.
 */
import { listCocoonSetsVisible, type SnapshotRegistry } from "../provider/engine/index.js";
import {
  ANNOTATIONS,
  HIBERNATION_FINALIZER,
  SNAPSHOT_TAGS,
  hibernationProbe,
  planHibernation,
  type CocoonHibernation,
  type HibernationPlan,
  type Pod,
  type TagFact,
} from "../provider/fleet/index.js";
import { isNotFound, PatchType, paths, type KubeClient } from "../provider/kube/index.js";
import {
  DONE,
  requeueAfter,
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
export class HibernationReconciler implements Reconciler {
  private readonly locks = new KeyedLock();
  /** Told of each CR a reconcile found deleted (the controller's pod index forgets it). */
  onGone?: (key: ObjectKey) => void;

  constructor(
    private readonly client: KubeClient,
    private readonly opts: HibernationReconcilerOptions = {},
  ) {}

  async reconcile(key: ObjectKey, ctx: ReconcileContext): Promise<ReconcileResult> {
    const path = paths.cocoonHibernation(key.namespace, key.name);
    const first = await this.client.getOrUndefined<CocoonHibernation>(path);
    if (!first) {
      this.onGone?.(key);
      return DONE;
    }
    const podName = first.spec?.podRef?.name ?? "";
    return this.locks.run(`${key.namespace}/${podName}`, async () => {
      // Read again under the lock: another CR of this pod may just have changed things.
      const cr = await this.client.getOrUndefined<CocoonHibernation>(path);
      return cr ? this.reconcileOne(cr, ctx) : DONE;
    });
  }

  private async reconcileOne(
    cr: CocoonHibernation,
    ctx: ReconcileContext,
  ): Promise<ReconcileResult> {
    const ns = cr.metadata.namespace ?? "";
    const registry = this.opts.registry;
    const all = (await this.client.list<CocoonHibernation>(paths.cocoonHibernations(ns))).items;
    const podName = cr.spec?.podRef?.name ?? "";
    const pod = podName ? await this.client.getOrUndefined<Pod>(paths.pod(ns, podName)) : undefined;
    // Every fleet a VM name could belong to: the pod's annotation is believed only when the
    // controller can attribute it (docs/behaviour.md §3.18).
    const fleets = await listCocoonSetsVisible(this.client, ns);
    const base = {
      cr,
      pod,
      all,
      fleets,
      registry: registry !== undefined,
      nowMs: (this.opts.now ?? Date.now)(),
      hibernateTimeoutMs: this.opts.hibernateTimeoutMs,
      wakeTimeoutMs: this.opts.wakeTimeoutMs,
    };
    const vm = hibernationProbe(base);
    let tag: TagFact | undefined;
    if (vm && registry) {
      try {
        tag = { exists: await registry.hasManifest(vm, SNAPSHOT_TAGS.hibernate) };
      } catch (e) {
        tag = { error: `probe hibernate snapshot ${vm}: ${(e as Error).message}` };
      }
    }
    const plan = planHibernation({ ...base, tag });
    await this.execute(cr, plan, ctx);
    if (plan.error) throw new Error(plan.error);
    return plan.requeueAfterMs === undefined ? DONE : requeueAfter(plan.requeueAfterMs);
  }

  private async execute(
    cr: CocoonHibernation,
    plan: HibernationPlan,
    ctx: ReconcileContext,
  ): Promise<void> {
    const ns = cr.metadata.namespace ?? "";
    const name = cr.metadata.name ?? "";
    const crPath = paths.cocoonHibernation(ns, name);
    if (plan.finalizer === "add") {
      await this.client.patch(
        crPath,
        {
          metadata: {
            resourceVersion: cr.metadata.resourceVersion,
            finalizers: [...(cr.metadata.finalizers ?? []), HIBERNATION_FINALIZER],
          },
        },
        PatchType.merge,
      );
      ctx.log.debug("added the finalizer");
      return;
    }
    if (plan.annotate) {
      const { pod, uid, value } = plan.annotate;
      await this.client.patch(
        paths.pod(ns, pod),
        { metadata: { uid, annotations: { [ANNOTATIONS.hibernate]: value } } },
        PatchType.merge,
      );
      ctx.log.info(
        { pod, hibernate: value },
        value ? "asked the pod to hibernate" : "asked the pod to wake",
      );
    }
    if (plan.deleteTag && this.opts.registry) {
      try {
        await this.opts.registry.deleteManifest(plan.deleteTag, SNAPSHOT_TAGS.hibernate);
      } catch (e) {
        // Not fatal, but loud: a registry refusing deletes leaks every snapshot.
        ctx.log.error(
          { err: (e as Error).message, vm: plan.deleteTag },
          "could not delete the hibernate snapshot",
        );
      }
    }
    if (plan.status) {
      await this.client.patch(
        paths.cocoonHibernationStatus(ns, name),
        { status: plan.status },
        PatchType.merge,
      );
      ctx.log.info({ phase: plan.status.phase, decision: plan.decision }, "wrote the status");
    }
    for (const e of plan.events) {
      if (e.type === "Warning") ctx.log.warn({ reason: e.reason }, e.message);
      void ctx.events.event(
        { apiVersion: cr.apiVersion, kind: cr.kind, metadata: cr.metadata },
        e.type,
        e.reason,
        e.message,
      );
    }
    if (plan.observe)
      ctx.metrics.phaseDuration?.(plan.observe.metric, plan.observe.result, plan.observe.seconds);
    if (plan.finalizer === "remove") {
      const finalizers = (cr.metadata.finalizers ?? []).filter((f) => f !== HIBERNATION_FINALIZER);
      try {
        await this.client.patch(
          crPath,
          { metadata: { resourceVersion: cr.metadata.resourceVersion, finalizers } },
          PatchType.merge,
        );
      } catch (e) {
        if (!isNotFound(e)) throw e;
      }
      ctx.log.info({ decision: plan.decision }, "released the finalizer");
    }
  }
}
