/**
 * The capacity forecast of a deploy against the live cluster: what converging the fleet would
 * create (`previewCreates`, the engine's own planner run pass after pass), the nodes, and the
 * pods bound to them in every namespace, given to the pure forecast (engine/capacity). Reads
 * only. `cocoonset plan` prints it.
 */
import {
  type CapacityForecast,
  type ForecastCreate,
  type ForecastNode,
  forecastCapacity,
} from "../capacity/index.js";
import { errorMessage } from "../kube/branded-error.js";
import { type KubeClient, type KubeObject, paths } from "../kube/index.js";
import { type CocoonSet, LABELS, type Pod, ROLES } from "../spec/index.js";
import { NOT_CREATED_UID, type PreviewCreates, previewCreates } from "./preview-creates.js";
import { listFleetPods } from "./pass-reads.js";

/** The forecast, or why it could not be made (the caller may not list nodes or pods). */
export type LiveForecast = { forecast: CapacityForecast } | { unavailable: string };

/**
 * The forecast's input from what a deploy creates: a pod with a node is bound there; a
 * sub-agent without one follows the main agent the same deploy creates (the engine binds it
 * to the main agent's node once the scheduler placed it); any other pod without a node is
 * placed by the scheduler. The live pods the deploy deletes, for good or to create again,
 * free their room.
 */
export function forecastCreates(
  preview: PreviewCreates,
  livePods: readonly Pod[],
): { creates: ForecastCreate[]; freed: Set<string> } {
  const mainSlot = preview.creates.find(
    (c) => c.pod.metadata.labels[LABELS.role] === ROLES.main && !c.pod.spec.nodeName,
  )?.slot;
  const creates = preview.creates.map((c): ForecastCreate => {
    const follows =
      !c.pod.spec.nodeName &&
      c.pod.metadata.labels[LABELS.role] === ROLES.subAgent &&
      mainSlot !== undefined
        ? mainSlot
        : undefined;
    return { slot: c.slot, pod: c.pod, ...(follows !== undefined && { follows }) };
  });
  const created = new Set(preview.creates.map((c) => c.pod.metadata.name));
  const freed = new Set<string>();
  for (const p of preview.removed) if (p.metadata?.uid) freed.add(p.metadata.uid);
  for (const p of livePods)
    if (p.metadata?.uid && created.has(p.metadata.name ?? "\u0000")) freed.add(p.metadata.uid);
  return { creates, freed };
}

/**
 * Forecasts a deploy of `cs` (the CocoonSet as the deploy would leave it; `exists` when it is
 * live) against the cluster's nodes and the unfinished pods bound to them.
 */
export async function forecastLive(
  client: KubeClient,
  cs: CocoonSet,
  opts: { exists: boolean; nowMs?: number; fanOut?: number },
): Promise<LiveForecast> {
  const planned: CocoonSet = cs.metadata.uid
    ? cs
    : { ...cs, metadata: { ...cs.metadata, uid: NOT_CREATED_UID, generation: 1 } };
  const fleetPods = opts.exists ? await listFleetPods(client, planned) : [];
  const preview = previewCreates({
    cocoonSet: planned,
    pods: fleetPods,
    nowMs: opts.nowMs ?? Date.now(),
    fanOut: opts.fanOut,
  });
  const { creates } = forecastCreates(preview, fleetPods);
  if (creates.length === 0) return { forecast: { nodes: [], placements: [], fits: true } };
  return forecastOn(await listNodesAndPods(client), preview, fleetPods);
}

/** What the forecast reads of the cluster, or why it could not be read. */
export type NodesAndPods = { nodes: ForecastNode[]; pods: Pod[] } | { unavailable: string };

/**
 * The cluster's nodes and the unfinished pods bound to them in every namespace (one LIST
 * each, in parallel); `unavailable` says why they could not be read (the caller may not list
 * nodes or pods cluster-wide). Never rejects. `cocoonset plan` and `pulumi preview`
 * (provider/dynamic/dry-run.ts, which starts it before its planner runs) share it.
 */
export async function listNodesAndPods(client: KubeClient): Promise<NodesAndPods> {
  try {
    const [nodes, pods] = await Promise.all([
      client.list<ForecastNode & KubeObject>(paths.nodes()).then((l) => l.items),
      client
        .list<Pod>(paths.allPods(), {
          fieldSelector: "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed",
        })
        .then((l) => l.items),
    ]);
    return { nodes, pods };
  } catch (e) {
    return { unavailable: errorMessage(e) };
  }
}

/** The forecast of what `preview` creates (the fleet's live pods `fleetPods`) on `cluster`. Pure. */
export function forecastOn(
  cluster: NodesAndPods,
  preview: PreviewCreates,
  fleetPods: readonly Pod[],
): LiveForecast {
  const { creates, freed } = forecastCreates(preview, fleetPods);
  if (creates.length === 0) return { forecast: { nodes: [], placements: [], fits: true } };
  if ("unavailable" in cluster) return { unavailable: cluster.unavailable };
  return {
    forecast: forecastCapacity({ nodes: cluster.nodes, pods: cluster.pods, freed, creates }),
  };
}
