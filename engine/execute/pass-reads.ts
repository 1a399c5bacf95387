/**
 * Every read a pass makes: the fleet's pods and the name holders, the fleets and
 * CocoonHibernations that hold its VM names, the registry's facts, the migration target's
 * node. {@link PassReads} is where the fleet itself comes from (fresh reads or the
 * controller's caches).
 */
import pLimit from "p-limit";
import {
  agentNamesToCheck,
  type TargetNodeFacts,
  needsHibernationTargets,
  ownSnapshotFacts,
  snapshotRecordUpdate,
  restoreProbes,
  type SnapshotFacts,
} from "../lifecycle/index.js";
import { snapshotProbes } from "../planner/index.js";
import { toolboxPodName } from "../pods/index.js";
import { recordedWakeProbes, type HibernationHold } from "../attribution/index.js";
import {
  wakeProbes,
  hibernationTargets,
  needsVmNameCheck,
  type HibernationTarget,
} from "../snapshots/index.js";
import { LABELS, type CocoonHibernation, type CocoonSet, type Pod } from "../spec/index.js";
import {
  isNotFound,
  KubeApiError,
  paths,
  type KubeClient,
  type KubeObject,
} from "../kube/index.js";
import { errorMessage } from "../kube/branded-error.js";
import { gatherSnapshotFacts, type SnapshotRegistry } from "./snapshots.js";
import { namespaceOf } from "../kube/objects.js";

/**
 * Where a pass reads the fleet from. The default ({@link apiReads}) asks the apiserver
 * afresh, as `pulumi up`, preview and `cocoonset plan` do; the controller reads its informer
 * caches instead (controller/fleet-cache.ts). Either way the same `planPass` decides.
 */
export interface PassReads {
  /** The fleet's pods: its labelled pods, plus any pod holding a name the pass may create. */
  fleetPods(cs: CocoonSet): Promise<Pod[]>;
  /** The CocoonSets a VM name of `cs` could collide with (docs/behaviour.md §2.7). */
  cocoonSetsForVmNames(cs: CocoonSet): Promise<CocoonSet[]>;
}

/** The fresh reads of the apiserver: what every caller without an informer uses. */
export function apiReads(client: KubeClient): PassReads {
  return {
    fleetPods: (cs) => readFleetPods(client, cs),
    cocoonSetsForVmNames: (cs) => listCocoonSetsVisible(client, namespaceOf(cs)),
  };
}

/** The label selector of a CocoonSet's pods. */
export function podSelector(name: string): string {
  return `${LABELS.name}=${name}`;
}

/** Lists the CocoonSet's pods (one request, by label). */
export async function listFleetPods(client: KubeClient, cs: CocoonSet): Promise<Pod[]> {
  const ns = namespaceOf(cs);
  const list = await client.list(paths.pods(ns), {
    labelSelector: podSelector(cs.metadata.name ?? ""),
  });
  return list.items;
}

/**
 * What a pass reads of the cluster: the CocoonSet's labelled pods, plus any pod that holds a
 * declared toolbox's name or an agent name the pass may create without the label, so that
 * the plan sees the name conflict before it creates anything. `cocoonset plan` reads through this too (preview.ts): plan and pass
 * cannot disagree on their input.
 */
async function readFleetPods(client: KubeClient, cs: CocoonSet): Promise<Pod[]> {
  return addNameHolders(client, cs, await listFleetPods(client, cs));
}

/**
 * Adds to the fleet's labelled `pods` (in place) any pod that holds a declared toolbox's
 * name or an agent name the pass may create without the label: one GET per such name, none
 * when every pod is there. With `only`, just the names it accepts are read: the controller
 * creates first and reads a name only once a create of it met another pod (409), so it asks
 * only for the names it has seen held (controller/fleet-cache.ts).
 */
export async function addNameHolders(
  client: KubeClient,
  cs: CocoonSet,
  pods: Pod[],
  only: (podName: string) => boolean = () => true,
): Promise<Pod[]> {
  const ns = namespaceOf(cs);
  const names = new Set(pods.map((p) => p.metadata?.name));
  for (const tb of cs.spec.toolboxes ?? []) {
    const podName = toolboxPodName(cs.metadata.name ?? "", tb.name);
    if (names.has(podName) || !only(podName)) continue;
    const squatter = await client.getOrUndefined<Pod>(paths.pod(ns, podName));
    if (squatter) pods.push(squatter);
  }
  // Agent names the pass may create: a pod without the fleet's label may hold one (§3.21).
  const limit = pLimit(8);
  const holders = await Promise.all(
    agentNamesToCheck(cs, pods)
      .filter(only)
      .map((podName) => limit(() => client.getOrUndefined<Pod>(paths.pod(ns, podName)))),
  );
  for (const holder of holders) if (holder) pods.push(holder);
  return pods;
}

/**
 * What the registry says of the tags a pass may need (the VMs it probes), with the new value
 * of the fleet's record of the snapshots it took when this pass adds to it. Only tags the fleet can attribute to itself count
 * (snapshot-owner.ts, docs/behaviour.md §3.19).
 */
export async function readOwnSnapshotFacts(
  registry: SnapshotRegistry | undefined,
  cs: CocoonSet,
  pods: readonly Pod[],
  hibernations: readonly HibernationTarget[] = [],
): Promise<{ facts: SnapshotFacts | undefined; record?: string }> {
  if (!registry) return { facts: undefined };
  // A member the record says waits in its snapshot, whose pod is gone, restores its next
  // pod from its own tag (engine/attribution).
  const vouched = [...restoreProbes(cs, pods, hibernations), ...recordedWakeProbes(cs, pods)];
  const vms = new Set([
    ...snapshotProbes(cs, pods),
    ...vouched,
    ...wakeProbes(cs, pods, hibernations),
  ]);
  const facts = await gatherSnapshotFacts(registry, [...vms].sort());
  return {
    facts: ownSnapshotFacts(cs, pods, facts, vouched),
    record: snapshotRecordUpdate(cs, pods, facts),
  };
}

/**
 * The CocoonHibernations of the CocoonSet's namespace, as the plan reads them; only asked
 * with a registry and when a pod may be built or an unsuspend may withdraw a hibernate
 * request (a steady fleet asks nothing). A cluster without the CocoonHibernation CRD has none.
 */
export async function readHibernationTargets(
  client: KubeClient,
  registry: SnapshotRegistry | undefined,
  cs: CocoonSet,
  pods: readonly Pod[],
): Promise<HibernationTarget[] | undefined> {
  if (!registry || !needsHibernationTargets(cs, pods)) return undefined;
  try {
    const list = await client.list<CocoonHibernation>(paths.cocoonHibernations(namespaceOf(cs)));
    return hibernationTargets(list.items);
  } catch (e) {
    if (isNotFound(e)) return [];
    throw e;
  }
}

/**
 * The CocoonSets a VM name of `cs` could collide with (docs/behaviour.md §2.7): every one in
 * the cluster, or, for credentials that may not list them cluster-wide, those of its own
 * namespace. Undefined when the pass creates nothing (all pods present): nothing to check.
 */
export async function readFleetsForVmNames(
  client: KubeClient,
  cs: CocoonSet,
  pods?: readonly Pod[],
  reads: PassReads = apiReads(client),
): Promise<CocoonSet[] | undefined> {
  if (pods && !needsVmNameCheck(cs, pods)) return undefined;
  return reads.cocoonSetsForVmNames(cs);
}

/** Every CocoonSet the credentials may list: the cluster's, else one namespace's. */
export async function listCocoonSetsVisible(
  client: KubeClient,
  namespace: string,
): Promise<CocoonSet[]> {
  // No CocoonSet resource served yet (a preview before the CRD is installed): none exists.
  const absent = (e: unknown) => KubeApiError.isInstance(e) && e.status === 404;
  try {
    return (await client.list<CocoonSet>(paths.cocoonSets())).items;
  } catch (e) {
    if (absent(e)) return [];
    if (!(KubeApiError.isInstance(e) && e.status === 403)) throw e;
  }
  try {
    return (await client.list<CocoonSet>(paths.cocoonSets(namespace))).items;
  } catch (e) {
    if (absent(e)) return [];
    throw e;
  }
}

/** Every CocoonHibernation the credentials may list: the cluster's, else one namespace's. */
export async function listHibernationsVisible(
  client: KubeClient,
  namespace: string,
): Promise<CocoonHibernation[]> {
  const absent = (e: unknown) => KubeApiError.isInstance(e) && e.status === 404;
  try {
    return (await client.list<CocoonHibernation>(paths.cocoonHibernations())).items;
  } catch (e) {
    if (absent(e)) return [];
    if (!(KubeApiError.isInstance(e) && e.status === 403)) throw e;
  }
  try {
    return (await client.list<CocoonHibernation>(paths.cocoonHibernations(namespace))).items;
  } catch (e) {
    if (absent(e)) return [];
    throw e;
  }
}

/**
 * The VMs live CocoonHibernations recorded, when a pass may create pods (`fleets` was read)
 * with a registry: a fleet is refused a VM one of them holds (engine/attribution).
 */
export async function readHibernationHolds(
  client: KubeClient,
  cs: CocoonSet,
): Promise<HibernationHold[]> {
  return (await listHibernationsVisible(client, namespaceOf(cs)))
    .filter((h) => !h.metadata.deletionTimestamp && (h.status?.vmName ?? "") !== "")
    .map((h) => ({
      namespace: namespaceOf(h),
      name: h.metadata.name ?? "",
      vm: h.status?.vmName ?? "",
    }));
}

/**
 * The node a migration would start towards (§3.17). Any error is kept as the answer: the
 * planner refuses a target it could not check (a controller without `get` on nodes).
 */
export async function readTargetNode(client: KubeClient, name: string): Promise<TargetNodeFacts> {
  try {
    const node = await client.getOrUndefined<
      NonNullable<Extract<TargetNodeFacts, { node?: unknown }>["node"]> & KubeObject
    >(`${paths.nodes()}/${encodeURIComponent(name)}`);
    return { name, node };
  } catch (e) {
    return { name, error: errorMessage(e) };
  }
}

/** Reads a CocoonSet, or undefined when it does not exist. */
export async function readCocoonSet(
  client: KubeClient,
  namespace: string,
  name: string,
): Promise<CocoonSet | undefined> {
  return client.getOrUndefined<CocoonSet>(paths.cocoonSet(namespace, name));
}
