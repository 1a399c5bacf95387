/**
 * The CocoonSet controller's reads from its informer caches, and its expectations of its
 * own pod writes. A pass reads the CocoonSet from the CocoonSet informer and the fleet's pods
 * from the pod informer (the shared cache's index of pods by CocoonSet, their fleet label,
 * as the fresh read lists them), so a
 * steady pass asks the apiserver nothing. A pass never acts on a pod whose last create or
 * delete the pod watch has not shown yet (controller/expectations.ts).
 *
 * A pass creates without reading the name first: the pod informer sees only managed pods, so
 * a pod that is not the fleet's and holds a name the pass creates shows up as a 409 on the
 * create. The executor then reads that one pod (engine/execute/pass.ts): the fleet's own
 * pod is expected like a create, another's name is remembered here, and every later pass
 * reads that name afresh (as the fresh read does) and plans the slot as blocked until the
 * name is free (docs/behaviour.md §3.21).
 *
 * The CocoonHibernations come from the cache the CocoonHibernation controller shares, and the
 * nodes (a migration's target, the main agent's node before sub-agents are placed next to it)
 * from a node informer, so a converged fleet's pass asks the apiserver nothing even while it
 * carries a CocoonHibernation or a migration target. The CocoonSets a VM name may collide with
 * (a name is unique in the whole cluster) come from an index of every CocoonSet's name: the
 * CocoonSet cache's, or where that holds only part of them (a shard, a controller of some
 * namespaces) a names-only watch of every namespace. Still read from the apiserver: the names
 * remembered as held; the CocoonSets a VM name may collide with when the account may not list
 * every namespace's, and the CocoonHibernations when the controller watches only some
 * namespaces or is a shard; and a node
 * while the node informer has not listed, or cannot (a controller bound by a namespaced Role
 * may not list nodes: it reads each node afresh, and a Role cannot grant that either, so its
 * migrations are refused saying why, as before).
 */
import {
  cocoonSetsNaming,
  freshReader,
  listCocoonSetsVisible,
  readNameHolders,
  type Reader,
} from "../engine/execute/index.js";
import { paths, type KubeClient, type KubeObject } from "../engine/kube/index.js";
import type { TargetNodeFacts } from "../engine/lifecycle/index.js";
import { VmNameIndex, type FleetName } from "../engine/attribution/index.js";
import { claimsStaticVms } from "../engine/snapshots/index.js";
import {
  frozen,
  LABELS,
  type CocoonHibernation,
  type CocoonSet,
  type Pod,
} from "../engine/spec/index.js";
import type { IndexFunc, KindCache } from "./cache.js";
import { PodExpectations, type ObservedPod, type PodWrite } from "./expectations.js";
import { LEASES_BY_FLEET } from "./idle-activity.js";
import type { ActivityLease } from "../engine/idle/index.js";
import { keyOf, namespaceOf } from "../engine/kube/index.js";

/** A cached CocoonSet's namespace and name. */
const fleetNameOf = (o: { metadata?: { namespace?: string; name?: string } }): FleetName => ({
  namespace: o.metadata?.namespace ?? "",
  name: o.metadata?.name ?? "",
});

/** The fleet (`namespace/name`) a pod is listed under: its fleet label, as the fresh read selects. */
function fleetOfPod(pod: KubeObject): string | undefined {
  const ns = pod.metadata.namespace;
  const name = pod.metadata.labels?.[LABELS.name];
  return ns && name ? keyOf(ns, name) : undefined;
}

/** What the expectations need of a pod the watch shows. */
function observed(pod: KubeObject): ObservedPod {
  return {
    name: pod.metadata?.name ?? "",
    uid: pod.metadata?.uid ?? "",
    terminating: pod.metadata?.deletionTimestamp !== undefined,
    resourceVersion: pod.metadata?.resourceVersion,
  };
}

/** The pod cache's index of pods by the CocoonSet they belong to (`namespace/name`). */
export const PODS_BY_COCOONSET = "cocoonset";

/**
 * The indexes the pod cache must keep for a {@link FleetCache}: pods by their CocoonSet, by
 * the fleet label (what a fresh read of the fleet selects).
 */
export const FLEET_POD_INDEXES: Record<string, IndexFunc> = {
  [PODS_BY_COCOONSET]: (pod) => {
    const fleet = fleetOfPod(pod);
    return fleet ? [fleet] : [];
  },
};

/** Informer-backed reads of the fleets, and the expectations of the controller's pod writes. */
export class FleetCache {
  readonly expectations: PodExpectations;
  private cocoonSets?: KindCache;
  private pods?: KindCache;
  private hibernationCache?: KindCache;
  private nodes?: KindCache;
  /** The members' activity Leases, indexed by fleet (controller/idle-activity.ts). */
  private leases?: KindCache;
  /**
   * Every CocoonSet of the cluster by the stem of its VM names, and the cache that fills it:
   * the names of every CocoonSet (a shard's or a namespaced controller's CocoonSet cache holds
   * only part of them), or the CocoonSet cache itself when it watches every namespace whole;
   * none when neither is watched (the names were refused), and the reads go fresh.
   */
  private readonly vmNames = new VmNameIndex();
  private vmNamesFrom?: KindCache;
  /** What the caches cannot answer, read afresh. */
  private readonly fresh: Reader;
  /** Per fleet, the pod names a create found held by a pod that is not the fleet's. */
  private readonly heldNames = new Map<string, Set<string>>();

  constructor(
    private readonly client: KubeClient,
    opts: { now?: () => number; expectationTtlMs?: number } = {},
  ) {
    this.expectations = new PodExpectations(opts.now, opts.expectationTtlMs);
    this.fresh = freshReader(client);
  }

  /**
   * A session's caches: the CocoonSets, and the managed pods with {@link FLEET_POD_INDEXES};
   * the expectations follow the pod cache's events from now on. With `more`, the
   * CocoonHibernations and the nodes are read from their caches too.
   */
  attach(
    cocoonSets: KindCache,
    pods: KindCache,
    more: {
      hibernations?: KindCache;
      nodes?: KindCache;
      names?: KindCache;
      leases?: KindCache;
    } = {},
  ): void {
    this.cocoonSets = cocoonSets;
    this.pods = pods;
    this.hibernationCache = more.hibernations;
    this.nodes = more.nodes;
    this.leases = more.leases;
    // The index follows whichever cache holds every CocoonSet's name (a kind no informer
    // watches is the process's own cache holding them all).
    const whole = cocoonSets.clusterWide && !cocoonSets.selected;
    this.vmNamesFrom = whole
      ? cocoonSets
      : more.names?.clusterWide && more.names.informers.length > 0
        ? more.names
        : undefined;
    this.vmNamesFrom?.addHandlers({
      onAdd: (o) => this.vmNames.add(fleetNameOf(o)),
      onDelete: (o) => this.vmNames.delete(fleetNameOf(o)),
    });
    pods.addHandlers({
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

  /**
   * True once the fleets' caches are attached and have listed (and the CocoonHibernations',
   * when attached). The nodes' is not waited for: a node is read afresh while it has not
   * listed, or when it may not (the session starts no worker before it did either).
   */
  synced(): boolean {
    return (
      !!this.cocoonSets?.synced() &&
      !!this.pods?.synced() &&
      (this.hibernationCache?.synced() ?? true)
    );
  }

  /** The cached CocoonSet (frozen), or undefined when the cache has none. */
  cocoonSet(namespace: string, name: string): CocoonSet | undefined {
    const cached = this.cocoonSets?.get(keyOf(namespace, name));
    return cached && (frozen(cached) as unknown as CocoonSet);
  }

  /**
   * The reads of one pass, from the caches: the cached objects themselves, frozen (a pass
   * plans from them and must not change them; a write to one throws). No copy per pass: at
   * 1,001 pods a copy of each was most of a pass's CPU.
   */
  readonly reads: Reader = {
    cocoonSet: (namespace, name) => Promise.resolve(this.cocoonSet(namespace, name)),
    fleetPods: (cs) => {
      const fleet = keyOf(namespaceOf(cs), cs.metadata.name ?? "");
      const pods = (this.pods?.byIndex(PODS_BY_COCOONSET, fleet) ?? []).map(
        (p) => frozen(p) as Pod,
      );
      // In the order the apiserver lists them (by name), as the fresh read has them.
      pods.sort((a, b) => ((a.metadata?.name ?? "") < (b.metadata?.name ?? "") ? -1 : 1));
      return Promise.resolve(pods);
    },
    nameHolders: async (cs, names) => {
      const fleet = keyOf(namespaceOf(cs), cs.metadata.name ?? "");
      const held = this.heldNames.get(fleet);
      if (!held) return [];
      const asked = new Set(names);
      // A name the pass no longer creates (now the fleet's, or no longer declared) is forgotten.
      for (const name of held) if (!asked.has(name)) held.delete(name);
      const holders = await readNameHolders(this.client, namespaceOf(cs), [...held]);
      // So is a name found free.
      const holding = new Set(holders.map((p) => p.metadata?.name));
      for (const name of held) if (!holding.has(name)) held.delete(name);
      if (held.size === 0) this.heldNames.delete(fleet);
      return holders;
    },
    cocoonSetsForVmNames: (cs) => {
      const cache = this.cocoonSets;
      if (!this.vmNamesKnown()) return listCocoonSetsVisible(this.client, namespaceOf(cs));
      // A static identity may be reported by any fleet: only a cache of them all has it.
      if (claimsStaticVms(cs))
        return this.vmNamesFrom === cache
          ? Promise.resolve(this.cachedCocoonSets())
          : listCocoonSetsVisible(this.client, namespaceOf(cs));
      // Only the neighbours, found in the index: a pass of a fleet with a pod to create in a
      // cluster of a thousand fleets is given a few, and looks at no more.
      return this.vmNameNeighbours(cs);
    },
    cocoonSetsNamingVms: async (namespace, vms) => {
      if (!this.vmNamesKnown()) return this.fresh.cocoonSetsNamingVms(namespace, vms);
      const naming = new Map(
        vms.flatMap((vm) => this.vmNames.naming(vm)).map((f) => [keyOf(f.namespace, f.name), f]),
      );
      return cocoonSetsNaming(await this.namedCocoonSets([...naming.values()], namespace), vms);
    },
    hibernations: (namespace) => {
      const cache = this.hibernationCache;
      if (!cache?.synced()) return this.fresh.hibernations(namespace);
      return Promise.resolve(
        cache
          .list()
          .filter((o) => o.metadata.namespace === namespace)
          .sort((a, b) => ((a.metadata.name ?? "") < (b.metadata.name ?? "") ? -1 : 1))
          .map((o) => frozen(o) as unknown as CocoonHibernation),
      );
    },
    hibernationsForVmNames: (cs) => {
      const cache = this.hibernationCache;
      // A shard's cache holds only its buckets' CRs; a standalone pod's CR may be another's.
      if (!cache?.clusterWide || cache.selected || !cache.synced())
        return this.fresh.hibernationsForVmNames(cs);
      return Promise.resolve(cache.list().map((o) => frozen(o) as unknown as CocoonHibernation));
    },
    activityLeases: (cs) => {
      const leases = this.leases;
      if (!leases?.synced()) return this.fresh.activityLeases(cs);
      const fleet = keyOf(namespaceOf(cs), cs.metadata.name ?? "");
      return Promise.resolve(
        leases.byIndex(LEASES_BY_FLEET, fleet).map((o) => frozen(o) as unknown as ActivityLease),
      );
    },
    node: (name) => {
      const nodes = this.nodes;
      if (!nodes?.synced()) return this.fresh.node(name);
      const node = nodes.get(name) as Extract<TargetNodeFacts, { node?: unknown }>["node"];
      return Promise.resolve({ name, node: node && frozen(node) });
    },
  };

  /** Whether the index of VM names holds every CocoonSet: the cache it follows has listed. */
  private vmNamesKnown(): boolean {
    return !!this.vmNamesFrom?.synced() && !!this.cocoonSets?.synced();
  }

  /** Every cached CocoonSet (frozen). */
  private cachedCocoonSets(): CocoonSet[] {
    return (this.cocoonSets?.list() ?? []).map((o) => frozen(o) as unknown as CocoonSet);
  }

  /**
   * The answer to "which fleets may hold `cs`'s VM names": VM names are
   * `vk-<namespace>-<name>-<member>`, so two fleets' names can meet only where one's
   * `<namespace>-<name>` equals the other's or begins it at a dash (the index's neighbours).
   */
  private vmNameNeighbours(cs: CocoonSet): Promise<CocoonSet[]> {
    return this.namedCocoonSets(this.vmNames.neighbours(fleetNameOf(cs)), namespaceOf(cs));
  }

  /**
   * The CocoonSets `fleets` names (found in the index of every CocoonSet's name), read from
   * this process's cache or afresh (a shard's own cache holds only its buckets' fleets). Until
   * the names have listed, every CocoonSet is listed afresh instead (`namespace`'s where the
   * cluster's may not be): the caller filters what it needs.
   */
  private async namedCocoonSets(fleets: FleetName[], namespace: string): Promise<CocoonSet[]> {
    if (!this.vmNamesKnown()) return listCocoonSetsVisible(this.client, namespace);
    const out: CocoonSet[] = [];
    for (const { namespace: ns, name } of fleets) {
      // The cache's own copy (frozen, as every read of a pass), else a fresh read.
      const read =
        this.cocoonSet(ns, name) ??
        (await this.client.getOrUndefined<CocoonSet>(paths.cocoonSet(ns, name)));
      if (read) out.push(read);
    }
    return out;
  }

  /** A create of the fleet's found `podName` held by a pod that is not the fleet's. */
  nameHeld(fleet: string, podName: string): void {
    let held = this.heldNames.get(fleet);
    if (!held) this.heldNames.set(fleet, (held = new Set()));
    held.add(podName);
  }

  /** Forgets what is remembered of a fleet (it was deleted). */
  forget(fleet: string): void {
    this.heldNames.delete(fleet);
    this.expectations.forget(fleet);
  }

  /** The pass made `write`: expected until the pod watch shows it (unless it already has). */
  expect(fleet: string, write: PodWrite): void {
    const [ns] = fleet.split("/");
    const cached = this.pods?.get(keyOf(ns, write.name));
    this.expectations.expect(fleet, write, cached && observed(cached));
  }

  private seen(pod: KubeObject): void {
    const fleet = fleetOfPod(pod);
    if (!fleet || !pod.metadata.name) return;
    this.expectations.observe(fleet, observed(pod));
  }

  private gone(pod: KubeObject): void {
    const fleet = fleetOfPod(pod);
    if (!fleet || !pod.metadata.name) return;
    this.expectations.observeGone(fleet, { name: pod.metadata.name, uid: pod.metadata.uid ?? "" });
  }
}
