/**
 * The nodes the CocoonSet controller's cache watches, so that a pass reads a migration's
 * target and the main agent's node (docs/behaviour.md §3.17, §3.22) without a request. Each
 * node is kept cut down to what those checks read: its labels, whether it is cordoned, its
 * taints, and its conditions' types and statuses. Optional: a controller bound by a namespaced Role may
 * not list nodes; it then reads each node afresh (controller/fleet-cache.ts).
 */
import { paths, type KubeObject } from "../engine/kube/index.js";
import type { Kind } from "./cache.js";

/**
 * A node cut down, in place, to what the migration and placement checks read
 * (`TargetNodeFacts` in engine/lifecycle/migrate.ts, `PlacementNode` in
 * engine/capacity/placement.ts).
 */
export function trimNodeForCache<U extends KubeObject>(obj: U): U {
  const node = obj as unknown as {
    metadata: Record<string, unknown>;
    spec?: { unschedulable?: boolean; taints?: { key: string; value?: string; effect: string }[] };
    status?: { conditions?: { type?: string; status?: string }[] };
  };
  const { name, uid, resourceVersion, labels } = node.metadata;
  node.metadata = { name, uid, resourceVersion, labels };
  const { unschedulable, taints } = node.spec ?? {};
  node.spec = {
    ...(unschedulable ? { unschedulable } : {}),
    ...(taints?.length
      ? { taints: taints.map(({ key, value, effect }) => ({ key, value, effect })) }
      : {}),
  };
  node.status = {
    conditions: (node.status?.conditions ?? []).map((c) => ({ type: c.type, status: c.status })),
  };
  return obj;
}

/** The cluster's nodes, one watch whatever namespaces the controller watches. */
export const nodeKind: Kind = {
  name: "nodes",
  path: () => paths.nodes(),
  transform: trimNodeForCache,
  optional: true,
  clusterScoped: true,
};
