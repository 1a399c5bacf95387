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
 * Still read from the apiserver: the names remembered as held, the CocoonSets a VM name may collide with when the
 * controller watches only some namespaces, the CocoonHibernations, the migration target's
 * node and the main agent's node before sub-agents are created next to it (asked only when a
 * pass needs them).
 */
import { addNameHolders, listCocoonSetsVisible, type PassReads } from "../engine/execute/index.js";
import type { KubeClient, KubeObject } from "../engine/kube/index.js";
import { LABELS, type CocoonSet, type Pod } from "../engine/spec/index.js";
import type { IndexFunc, KindCache } from "./cache.js";
import { PodExpectations, showsVersion } from "./expectations.js";
import { keyOf, namespaceOf } from "../engine/kube/index.js";

/** How many gone pod uids are remembered (a create's answer comes back within moments). */
const GONE_UIDS_KEPT = 4096;

/** The fleet (`namespace/name`) a pod is listed under: its fleet label, as the fresh read selects. */
function fleetOfPod(pod: KubeObject): string | undefined {
  const ns = pod.metadata.namespace;
  const name = pod.metadata.labels?.[LABELS.name];
  return ns && name ? keyOf(ns, name) : undefined;
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
  /**
   * The uids of the pods the watch last showed gone, oldest first: a pod deleted before its
   * create's answer came back settles that create when it is recorded.
   */
  private readonly goneUids = new Set<string>();
  /** Per fleet, the pod names a create found held by a pod that is not the fleet's. */
  private readonly heldNames = new Map<string, Set<string>>();

  constructor(
    private readonly client: KubeClient,
    opts: { now?: () => number; expectationTtlMs?: number } = {},
  ) {
    this.expectations = new PodExpectations(opts.now, opts.expectationTtlMs);
  }

  /**
   * A session's caches: the CocoonSets, and the managed pods with {@link FLEET_POD_INDEXES};
   * the expectations follow the pod cache's events from now on.
   */
  attach(cocoonSets: KindCache, pods: KindCache): void {
    this.cocoonSets = cocoonSets;
    this.pods = pods;
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

  /** True once both caches are attached and have listed. */
  synced(): boolean {
    return !!this.cocoonSets?.synced() && !!this.pods?.synced();
  }

  /** The cached CocoonSet, or undefined when the cache has none. */
  cocoonSet(namespace: string, name: string): CocoonSet | undefined {
    return this.cocoonSets?.get(keyOf(namespace, name)) as CocoonSet | undefined;
  }

  /** The reads of one pass of `cs`, from the caches. */
  readonly reads: PassReads = {
    fleetPods: async (cs) => {
      const fleet = keyOf(namespaceOf(cs), cs.metadata.name ?? "");
      // Copies: the pass must not change the cache's objects.
      const pods = (this.pods?.byIndex(PODS_BY_COCOONSET, fleet) ?? []).map(
        (p) => structuredClone(p) as Pod,
      );
      // In the order the apiserver lists them (by name), as the fresh read has them.
      pods.sort((a, b) => ((a.metadata?.name ?? "") < (b.metadata?.name ?? "") ? -1 : 1));
      const held = this.heldNames.get(fleet);
      if (!held) return pods;
      const listed = new Set(pods.map((p) => p.metadata?.name));
      await addNameHolders(this.client, cs, pods, (name) => held.has(name));
      // A name the pass no longer creates, found free, or now the fleet's, is forgotten.
      const holders = new Set(pods.slice(listed.size).map((p) => p.metadata?.name));
      for (const name of held) if (listed.has(name) || !holders.has(name)) held.delete(name);
      if (held.size === 0) this.heldNames.delete(fleet);
      return pods;
    },
    cocoonSetsForVmNames: async (cs) => {
      if (!this.cocoonSets?.clusterWide) return listCocoonSetsVisible(this.client, namespaceOf(cs));
      return this.cocoonSets.list() as unknown as CocoonSet[];
    },
  };

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

  /** The pass patched `pod`: expected until the watch shows the version it wrote. */
  expectPatched(fleet: string, pod: { name: string; uid: string; resourceVersion: string }): void {
    const [ns] = fleet.split("/");
    const cached = this.podNamed(`${ns}/${pod.name}`);
    if (
      cached?.metadata?.uid === pod.uid &&
      showsVersion(cached.metadata.resourceVersion, pod.resourceVersion)
    )
      return;
    this.expectations.expectPatched(fleet, pod);
  }

  private podNamed(key: string): Pod | undefined {
    return this.pods?.get(key);
  }

  private seen(pod: KubeObject): void {
    const fleet = fleetOfPod(pod);
    if (!fleet || !pod.metadata.name) return;
    this.expectations.observe(fleet, {
      name: pod.metadata.name,
      uid: pod.metadata.uid ?? "",
      terminating: pod.metadata.deletionTimestamp !== undefined,
      resourceVersion: pod.metadata.resourceVersion,
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
    this.expectations.observeGone(fleet, { name: pod.metadata.name, uid: pod.metadata.uid ?? "" });
  }
}
