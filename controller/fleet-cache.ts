/**
 * The CocoonSet controller's reads from its informer caches, and its expectations of its
 * own pod writes. A pass reads the CocoonSet from the CocoonSet informer and the fleet's pods
 * from the pod informer (indexed by their fleet label, as the fresh read lists them), so a
 * steady pass asks the apiserver nothing. A pass never acts on a pod whose last create or
 * delete the pod watch has not shown yet (controller/expectations.ts).
 *
 * Still read from the apiserver: a pod that holds a toolbox or agent name the pass may
 * create but carries no managed-by label (the pod informer does not see it; only asked when
 * the plan would create that name), the CocoonSets a VM name may collide with when the
 * controller watches only some namespaces, the CocoonHibernations and the migration target's
 * node (asked only when a pass needs them).
 */
import { addNameHolders, listCocoonSetsVisible, type PassReads } from "../engine/execute/index.js";
import type { KubeClient, KubeObject } from "../engine/kube/index.js";
import { LABELS, type CocoonSet, type Pod } from "../engine/spec/index.js";
import { PodExpectations } from "./expectations.js";
import type { Informer } from "./informer.js";

/** How many gone pod uids are remembered (a create's answer comes back within moments). */
const GONE_UIDS_KEPT = 4096;

const fleetOf = (namespace: string, name: string): string => `${namespace}/${name}`;

/** The fleet (`namespace/name`) a pod is listed under: its fleet label, as the fresh read selects. */
function fleetOfPod(pod: KubeObject): string | undefined {
  const ns = pod.metadata.namespace;
  const name = pod.metadata.labels?.[LABELS.name];
  return ns && name ? fleetOf(ns, name) : undefined;
}

/** Informer-backed reads of the fleets, and the expectations of the controller's pod writes. */
export class FleetCache {
  readonly expectations: PodExpectations;
  private cocoonSetInformers: readonly Informer[] = [];
  private podInformers: readonly Informer[] = [];
  /** Pod cache keys (`namespace/name`) by fleet. */
  private readonly podsByFleet = new Map<string, Set<string>>();
  /** Whether the CocoonSet informers see every namespace. */
  private clusterWide = false;
  /**
   * The uids of the pods the watch last showed gone, oldest first: a pod deleted before its
   * create's answer came back settles that create when it is recorded.
   */
  private readonly goneUids = new Set<string>();

  constructor(
    private readonly client: KubeClient,
    opts: { now?: () => number; expectationTtlMs?: number } = {},
  ) {
    this.expectations = new PodExpectations(opts.now, opts.expectationTtlMs);
  }

  /** The session's CocoonSet informers (one per watched scope; `clusterWide` when unscoped). */
  attachCocoonSets(informers: readonly Informer[], clusterWide: boolean): void {
    this.cocoonSetInformers = informers;
    this.clusterWide = clusterWide;
  }

  /** The session's pod informers: the index and the expectations follow their events. */
  attachPods(informers: readonly Informer[]): void {
    this.podInformers = informers;
    this.podsByFleet.clear();
    for (const inf of informers) {
      inf.addHandlers({
        onAdd: (p) => this.seen(p),
        onUpdate: (old, p) => {
          // Another fleet's now, or another pod of the same name (a re-list's diff).
          if (fleetOfPod(old) !== fleetOfPod(p) || old.metadata.uid !== p.metadata.uid)
            this.gone(old);
          this.seen(p);
        },
        onDelete: (p) => this.gone(p),
      });
    }
  }

  /** True once both kinds of informer are attached and have listed. */
  synced(): boolean {
    const all = [...this.cocoonSetInformers, ...this.podInformers];
    return (
      this.cocoonSetInformers.length > 0 &&
      this.podInformers.length > 0 &&
      all.every((i) => i.hasSynced() && i.isSupervised())
    );
  }

  /** The cached CocoonSet, or undefined when the cache has none. */
  cocoonSet(namespace: string, name: string): CocoonSet | undefined {
    const key = fleetOf(namespace, name);
    for (const inf of this.cocoonSetInformers) {
      const cs = inf.get(key);
      if (cs) return cs as unknown as CocoonSet;
    }
    return undefined;
  }

  /** The reads of one pass of `cs`, from the caches. */
  readonly reads: PassReads = {
    fleetPods: (cs) => {
      const fleet = fleetOf(cs.metadata.namespace ?? "default", cs.metadata.name ?? "");
      const pods: Pod[] = [];
      for (const key of this.podsByFleet.get(fleet) ?? []) {
        const pod = this.podNamed(key);
        // A copy: the pass must not change the cache's object.
        if (pod) pods.push(structuredClone(pod));
      }
      // In the order the apiserver lists them (by name), as the fresh read has them.
      pods.sort((a, b) => ((a.metadata?.name ?? "") < (b.metadata?.name ?? "") ? -1 : 1));
      return addNameHolders(this.client, cs, pods);
    },
    cocoonSetsForVmNames: async (cs) => {
      if (!this.clusterWide)
        return listCocoonSetsVisible(this.client, cs.metadata.namespace ?? "default");
      return this.cocoonSetInformers.flatMap((i) => i.list() as unknown as CocoonSet[]);
    },
  };

  /** The pass created `pod`: expected until the watch shows its uid (unless it already has). */
  expectCreated(fleet: string, pod: { name: string; uid: string }): void {
    const [ns] = fleet.split("/");
    if (!pod.uid || this.goneUids.has(pod.uid)) return;
    if (this.podNamed(`${ns}/${pod.name}`)?.metadata?.uid === pod.uid) return;
    this.expectations.expectCreated(fleet, pod);
  }

  /** The pass deleted `pod`: expected until the watch shows it terminating or gone. */
  expectDeleted(fleet: string, pod: { name: string; uid: string }): void {
    const [ns] = fleet.split("/");
    const cached = this.podNamed(`${ns}/${pod.name}`);
    if (!cached || cached.metadata?.uid !== pod.uid || cached.metadata.deletionTimestamp) return;
    this.expectations.expectDeleted(fleet, pod);
  }

  private podNamed(key: string): Pod | undefined {
    for (const inf of this.podInformers) {
      const pod = inf.get(key);
      if (pod) return pod;
    }
    return undefined;
  }

  private seen(pod: KubeObject): void {
    const fleet = fleetOfPod(pod);
    if (!fleet || !pod.metadata.name) return;
    let set = this.podsByFleet.get(fleet);
    if (!set) this.podsByFleet.set(fleet, (set = new Set()));
    set.add(`${pod.metadata.namespace}/${pod.metadata.name}`);
    this.expectations.observe(fleet, {
      name: pod.metadata.name,
      uid: pod.metadata.uid ?? "",
      terminating: pod.metadata.deletionTimestamp !== undefined,
    });
  }

  private gone(pod: KubeObject): void {
    const uid = pod.metadata.uid;
    if (uid) {
      this.goneUids.add(uid);
      if (this.goneUids.size > GONE_UIDS_KEPT)
        this.goneUids.delete(this.goneUids.values().next().value!);
    }
    const fleet = fleetOfPod(pod);
    if (!fleet || !pod.metadata.name) return;
    const set = this.podsByFleet.get(fleet);
    set?.delete(`${pod.metadata.namespace}/${pod.metadata.name}`);
    if (set?.size === 0) this.podsByFleet.delete(fleet);
    this.expectations.observeGone(fleet, { name: pod.metadata.name, uid: pod.metadata.uid ?? "" });
  }
}
