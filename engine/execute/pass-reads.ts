/**
 * The fresh reads of the apiserver ({@link freshReader}: what every caller without an
 * informer reads a pass through), the registry's facts a pass asks for, and the list helpers
 * the deletion and preview paths share.
 */
import pLimit from "p-limit";
import {
  type TargetNodeFacts,
  gateAwaitedVm,
  ownSnapshotFacts,
  snapshotRecordUpdate,
  restoreProbes,
  type SnapshotFacts,
} from "../lifecycle/index.js";
import { snapshotProbes } from "../planner/index.js";
import { mayNameVm, recordedWakeProbes } from "../attribution/index.js";
import { wakeProbes, type HibernationTarget } from "../snapshots/index.js";
import { LABELS, type CocoonHibernation, type CocoonSet, type Pod } from "../spec/index.js";
import {
  isNotFound,
  KubeApiError,
  paths,
  type KubeClient,
  type KubeObject,
} from "../kube/index.js";
import { errorMessage } from "../kube/branded-error.js";
import { probeHibernateTags, snapshotFacts, type SnapshotRegistry } from "./snapshots.js";
import { namespaceOf } from "../kube/objects.js";
import type { Reader } from "./reader.js";
import type { ActivityLease } from "../idle/index.js";

/** How many name holders the fresh read asks for at once. */
const NAME_READS_IN_FLIGHT = 8;

/** The fresh reads of the apiserver: one request per question, nothing remembered. */
export function freshReader(client: KubeClient): Reader {
  return {
    cocoonSet: (namespace, name) => readCocoonSet(client, namespace, name),
    fleetPods: (cs) => listFleetPods(client, cs),
    nameHolders: (cs, names) => readNameHolders(client, namespaceOf(cs), names),
    cocoonSetsForVmNames: (cs) => listCocoonSetsVisible(client, namespaceOf(cs)),
    cocoonSetsNamingVms: async (namespace, vms) =>
      cocoonSetsNaming(await listCocoonSetsVisible(client, namespace), vms),
    hibernations: async (namespace) => {
      try {
        return (await client.list<CocoonHibernation>(paths.cocoonHibernations(namespace))).items;
      } catch (e) {
        if (isNotFound(e)) return [];
        throw e;
      }
    },
    hibernationsForVmNames: (cs) => listHibernationsVisible(client, namespaceOf(cs)),
    activityLeases: async (cs) =>
      (
        await client.list<ActivityLease>(paths.leases(namespaceOf(cs)), {
          labelSelector: podSelector(cs.metadata.name ?? ""),
        })
      ).items,
    node: (name) => readNode(client, name),
  };
}

/**
 * The pods holding `names` in `namespace`: one GET per name (a few at a time), none for a
 * name that is free.
 */
export async function readNameHolders(
  client: KubeClient,
  namespace: string,
  names: readonly string[],
): Promise<Pod[]> {
  const limit = pLimit(NAME_READS_IN_FLIGHT);
  const found = await Promise.all(
    names.map((name) => limit(() => client.getOrUndefined<Pod>(paths.pod(namespace, name)))),
  );
  return found.filter((p): p is Pod => p !== undefined);
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
  // A hibernation's snapshot the registry confirmed for a pod that has not changed since is
  // not asked again: a suspend of a hundred members asks each member's tag once, not once
  // per pass while the others hibernate.
  const confirmed = vms.size === 0 ? new Set<string>() : confirmedHibernations(cs, pods);
  const asked = [...vms].filter((vm) => !confirmed.has(vm)).sort();
  const probed = await probeHibernateTags(registry, asked);
  // Kept also when another request failed: the retry asks only for the rest.
  if (probed.hibernate.size > 0) rememberHibernations(cs, pods, probed.hibernate);
  for (const vm of confirmed) probed.hibernate.add(vm);
  const facts = snapshotFacts(probed);
  return {
    facts: ownSnapshotFacts(cs, pods, facts, vouched),
    record: snapshotRecordUpdate(cs, pods, facts),
  };
}

/**
 * Per frozen pod (the controller's cached object, replaced when the pod changes), the
 * `<vm>@<generation>` whose `:hibernate` tag the registry confirmed while the pod reported
 * that VM hibernated for that generation of its fleet (the suspend gate's last condition,
 * engine/lifecycle/suspend.ts). A pod that is not frozen (a fresh read) is never kept.
 */
const CONFIRMED = new WeakMap<Pod, string>();

function hibernationKey(cs: CocoonSet, vm: string): string {
  return `${vm}@${cs.metadata.generation ?? 0}`;
}

/** The VMs of `pods` whose hibernation snapshot was confirmed for the pod as it is now. */
function confirmedHibernations(cs: CocoonSet, pods: readonly Pod[]): Set<string> {
  const out = new Set<string>();
  for (const pod of pods) {
    const key = CONFIRMED.get(pod);
    if (key === undefined) continue;
    const vm = gateAwaitedVm(cs, pod);
    if (vm !== undefined && key === hibernationKey(cs, vm)) out.add(vm);
  }
  return out;
}

/** Remembers, per frozen pod awaiting its tag, that the registry has it (`hibernate`). */
function rememberHibernations(
  cs: CocoonSet,
  pods: readonly Pod[],
  hibernate: ReadonlySet<string>,
): void {
  for (const pod of pods) {
    if (!Object.isFrozen(pod)) continue;
    const vm = gateAwaitedVm(cs, pod);
    if (vm !== undefined && hibernate.has(vm)) CONFIRMED.set(pod, hibernationKey(cs, vm));
  }
}

/** Of `fleets`, those one of whose members could run a VM named in `vms`. */
export function cocoonSetsNaming<T extends CocoonSet>(
  fleets: readonly T[],
  vms: readonly string[],
): T[] {
  return fleets.filter((f) =>
    vms.some((vm) => mayNameVm(namespaceOf(f), f.metadata.name ?? "", vm)),
  );
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
 * A node, read afresh (§3.17, §3.22). Any error is kept as the answer: the planner refuses a
 * target it could not check (a controller without `get` on nodes).
 */
export async function readNode(client: KubeClient, name: string): Promise<TargetNodeFacts> {
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
