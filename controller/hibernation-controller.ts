/**
 * The CocoonHibernation controller, run in the same session as the CocoonSet controller:
 * same work queue, same workers, same leader Lease. Its keys are told apart by a name
 * prefix no Kubernetes name can hold (`cocoonhibernation:`); a dispatcher hands each key to
 * its reconciler. Pod changes reach the CRs that target the pod through an index of
 * `spec.podRef` kept from the CR informer's events (the field is immutable).
 * Behaviour: docs/behaviour.md §3.18.
 */
import {
  COCOONSET_API,
  isNotFound,
  paths,
  type KubeClient,
  type KubeObject,
} from "../engine/kube/index.js";
import { HIBERNATION_PLURAL } from "../engine/spec/index.js";
import type { CheckResult } from "./health.js";
import type { ControllerDefinition, Watch } from "./runtime.js";
import type { ObjectKey, ReconcileContext, Reconciler, ReconcileResult } from "./types.js";

/** The CocoonHibernation controller's name (its metrics' `controller` and queue `name`). */
export const HIBERNATION_CONTROLLER = "cocoonhibernation";

/** The prefix of a CocoonHibernation's key name in the shared work queue. */
export const HIBERNATION_KEY_PREFIX = "cocoonhibernation:";

/** The work-queue key of a CocoonHibernation. */
export function hibernationKey(namespace: string, name: string): ObjectKey {
  return { namespace, name: `${HIBERNATION_KEY_PREFIX}${name}` };
}

/** The CocoonHibernation a key names, or undefined for a CocoonSet key. */
export function hibernationOfKey(key: ObjectKey): ObjectKey | undefined {
  return key.name.startsWith(HIBERNATION_KEY_PREFIX)
    ? { namespace: key.namespace, name: key.name.slice(HIBERNATION_KEY_PREFIX.length) }
    : undefined;
}

/** CR names by `namespace/pod`, as the CR informer reported them. */
export class PodRefIndex {
  private readonly byPod = new Map<string, Set<string>>();

  /** Records a CR (add or update). */
  note(cr: KubeObject): void {
    const ns = cr.metadata.namespace;
    const pod = (cr as { spec?: { podRef?: { name?: string } } }).spec?.podRef?.name;
    if (!ns || !pod || !cr.metadata.name) return;
    const k = `${ns}/${pod}`;
    const set = this.byPod.get(k) ?? new Set<string>();
    set.add(cr.metadata.name);
    this.byPod.set(k, set);
  }

  /** Forgets a CR that is gone. */
  forget(namespace: string, name: string): void {
    for (const [k, set] of this.byPod) {
      if (k.startsWith(`${namespace}/`) && set.delete(name) && set.size === 0) this.byPod.delete(k);
    }
  }

  /** The keys of every CR targeting the pod. */
  keysFor(namespace: string, pod: string): ObjectKey[] {
    return [...(this.byPod.get(`${namespace}/${pod}`) ?? [])]
      .sort()
      .map((n) => hibernationKey(namespace, n));
  }
}

/** A CR update matters when its spec, finalizers, deletion or phase moved (as upstream, a
 *  write of Failed is retried at once). */
export function hibernationChangeMatters(a: KubeObject, b: KubeObject): boolean {
  const phase = (o: KubeObject) => (o.status as { phase?: string } | undefined)?.phase;
  return (
    a.metadata.generation !== b.metadata.generation ||
    a.metadata.deletionTimestamp !== b.metadata.deletionTimestamp ||
    (a.metadata.finalizers ?? []).join() !== (b.metadata.finalizers ?? []).join() ||
    phase(a) !== phase(b)
  );
}

/** Whether the CocoonHibernation resource is served (API discovery, open to every user). */
export async function checkHibernationCrd(client: KubeClient): Promise<CheckResult> {
  try {
    const group = await client.get<{ resources?: { name: string }[] }>(`/apis/${COCOONSET_API}`);
    return group.resources?.some((r) => r.name === HIBERNATION_PLURAL)
      ? { ok: true, reason: `${COCOONSET_API} ${HIBERNATION_PLURAL} is served` }
      : {
          ok: false,
          reason: `${COCOONSET_API} does not serve ${HIBERNATION_PLURAL} (CRD missing)`,
        };
  } catch (e) {
    if (isNotFound(e)) return { ok: false, reason: `${COCOONSET_API} is not served (CRD missing)` };
    throw e;
  }
}

/** Hands each key to its reconciler. */
class Dispatcher implements Reconciler {
  constructor(
    private readonly cocoonSets: Reconciler,
    private readonly hibernations: Reconciler,
  ) {}

  async reconcile(key: ObjectKey, ctx: ReconcileContext): Promise<ReconcileResult> {
    const hib = hibernationOfKey(key);
    if (!hib) return this.cocoonSets.reconcile(key, ctx);
    return this.hibernations.reconcile(hib, ctx);
  }
}

/** A reconciler of CocoonHibernations that reports the CRs it finds gone. */
export interface HibernationReconcilerLike extends Reconciler {
  /** Called with each CR a reconcile found deleted. */
  onGone?: (key: ObjectKey) => void;
}

/**
 * The CocoonSet controller's definition with the CocoonHibernation controller added: a CR
 * informer, the pod informer's changes also fanned out to the CRs that target the pod, the
 * dispatcher, and a readiness gate that also waits for the CocoonHibernation CRD.
 */
export function withHibernation(
  def: ControllerDefinition,
  hibernations: HibernationReconcilerLike,
  podWatch: Watch,
): ControllerDefinition {
  const index = new PodRefIndex();
  hibernations.onGone = (key) => index.forget(key.namespace, key.name);
  const crs: Watch = {
    path: (ns) => paths.cocoonHibernations(ns),
    keyOf: (o) => {
      if (!o.metadata.namespace || !o.metadata.name) return undefined;
      index.note(o);
      return hibernationKey(o.metadata.namespace, o.metadata.name);
    },
    // A CR's change also reaches the other CRs of its pod: a refused duplicate is looked at
    // again when the CR holding the pod goes.
    extraKeys: (o) => {
      const ns = o.metadata.namespace;
      const pod = (o as { spec?: { podRef?: { name?: string } } }).spec?.podRef?.name;
      if (!ns || !pod) return [];
      return index
        .keysFor(ns, pod)
        .filter((k) => k.name !== `${HIBERNATION_KEY_PREFIX}${o.metadata.name}`);
    },
    updateMatters: hibernationChangeMatters,
  };
  const pods: Watch = {
    ...podWatch,
    extraKeys: (o) =>
      o.metadata.namespace && o.metadata.name
        ? index.keysFor(o.metadata.namespace, o.metadata.name)
        : [],
  };
  const dispatcher = new Dispatcher(def.reconciler, hibernations);
  return {
    ...def,
    alsoRuns: [
      ...(def.alsoRuns ?? []),
      { name: HIBERNATION_CONTROLLER, owns: (key) => hibernationOfKey(key) !== undefined },
    ],
    owns: [...def.owns.filter((w) => w !== podWatch), pods, crs],
    reconciler: dispatcher,
    async ready(client, log) {
      const first = def.ready ? await def.ready(client, log) : { ok: true, reason: "ok" };
      if (!first.ok) return first;
      return checkHibernationCrd(client);
    },
  };
}
