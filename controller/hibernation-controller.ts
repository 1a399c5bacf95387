/**
 * The CocoonHibernation controller: its own name, queue, workers and metrics in the manager,
 * on the manager's shared cache. It reconciles CocoonHibernations; a pod's change reaches
 * the CRs that target the pod, and a CR's change the other CRs of its pod, through the
 * cache's index of CRs by `spec.podRef` (the field is immutable).
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
import type { CacheReader, Kind, KindCache } from "./cache.js";
import { HibernationPhaseMetrics } from "./cocoonset-metrics.js";
import type { CheckResult } from "./health.js";
import type { Controller, Watch } from "./runtime.js";
import type { HibernationMetrics, ObjectKey, Reconciler } from "./types.js";

/** The CocoonHibernation controller's name (its metrics' `controller` and queue `name`). */
const HIBERNATION_CONTROLLER = "cocoonhibernation";

/** The CR cache's index of CocoonHibernations by the pod they target (`namespace/pod`). */
export const HIBERNATIONS_BY_POD = "pod";

/** The pod (`namespace/pod`) a CocoonHibernation targets, as an index value. */
function podRefOf(cr: KubeObject): string[] {
  const ns = cr.metadata.namespace;
  const pod = (cr as { spec?: { podRef?: { name?: string } } }).spec?.podRef?.name;
  return ns && pod ? [`${ns}/${pod}`] : [];
}

/** The CocoonHibernations the cache watches, indexed by their pod. */
export const hibernationKind: Kind = {
  name: HIBERNATION_PLURAL,
  path: (ns) => paths.cocoonHibernations(ns),
  sharded: true,
  indexes: { [HIBERNATIONS_BY_POD]: podRefOf },
};

/** The keys of the CRs that target the pod `namespace/pod`, by name. */
function hibernationsOfPod(cache: CacheReader, namespace: string, pod: string): ObjectKey[] {
  return cache
    .kind(hibernationKind.name)
    .byIndex(HIBERNATIONS_BY_POD, `${namespace}/${pod}`)
    .map((cr) => ({ namespace, name: cr.metadata.name ?? "" }))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
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

/**
 * A CR update that needs a pass of that CR: a spec change, finalizers, a deletion, or a phase
 * turned `Failed` (retried at once, as upstream). Its other phase changes are this
 * controller's own status writes, whose pass already asked for what comes next: a pass for
 * each would only plan the same status again.
 */
function hibernationSelfChangeMatters(a: KubeObject, b: KubeObject): boolean {
  const phase = (o: KubeObject) => (o.status as { phase?: string } | undefined)?.phase;
  return (
    a.metadata.generation !== b.metadata.generation ||
    a.metadata.deletionTimestamp !== b.metadata.deletionTimestamp ||
    (a.metadata.finalizers ?? []).join() !== (b.metadata.finalizers ?? []).join() ||
    (phase(b) === "Failed" && phase(a) !== "Failed")
  );
}

/** Whether the CocoonHibernation resource is served (API discovery, open to every user). */
async function checkHibernationCrd(client: KubeClient): Promise<CheckResult> {
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

/** The watches mapping pod and CR events to CocoonHibernation keys. */
function hibernationWatches(pods: Omit<Watch, "map">): Watch[] {
  return [
    {
      ...pods,
      map: (pod, cache) =>
        pod.metadata.namespace && pod.metadata.name
          ? hibernationsOfPod(cache, pod.metadata.namespace, pod.metadata.name)
          : [],
    },
    {
      // A CR's change also reaches the other CRs of its pod: a refused duplicate is looked at
      // again when the CR holding the pod goes.
      kind: hibernationKind,
      updateMatters: hibernationChangeMatters,
      map: (cr, cache) => {
        const [ref] = podRefOf(cr);
        if (!ref) return [];
        const ns = cr.metadata.namespace!;
        return hibernationsOfPod(cache, ns, ref.slice(ns.length + 1)).filter(
          (k) => k.name !== cr.metadata.name,
        );
      },
    },
  ];
}

/**
 * The CocoonHibernation controller: reconciles the CRs, watches the managed pods (`pods`:
 * the kind and which updates matter, shared with the CocoonSet controller's watch), waits
 * for the CRD. Its CRs are not resynced: a CR is reconciled on its own changes and its pod's.
 */
export function hibernationController(
  reconciler: Reconciler<HibernationMetrics>,
  pods: Omit<Watch, "map">,
): Controller<HibernationMetrics> {
  return {
    name: HIBERNATION_CONTROLLER,
    for: hibernationKind,
    updateMatters: hibernationSelfChangeMatters,
    resync: false,
    latestRequeueWins: true,
    watches: hibernationWatches(pods),
    reconciler,
    // A pass reads the CRs of its pod from this cache (the reconciler's own reads).
    attach: (shared) => {
      const r = reconciler as { attach?: (cache: KindCache, index: string) => void };
      r.attach?.(shared.kind(hibernationKind.name), HIBERNATIONS_BY_POD);
    },
    metrics: (registry) => new HibernationPhaseMetrics(registry),
    ready: (client) => checkHibernationCrd(client),
    notReadyMessage: "CocoonHibernation CRD not available; not ready",
  };
}
