// The capacity forecast: whether the nodes have room for the pods a deploy creates, before
// anything is created. A server-side dry run cannot see it: sub-agents are bound to their
// main agent's node (`spec.nodeName`, the scheduler bypassed), so a scale-up the node has no
// room for passes every admission check and then fails on the node (`OutOfcpu`, ...).
//
// For each node that receives bound pods: its allocatable minus the requests of the
// unfinished pods already bound there (those the deploy deletes freed), against the pods the
// deploy binds there, admitted one by one in creation order as the kubelet admits them. For
// each pod the scheduler places (a new main agent, with the pods that will be bound next to
// it): whether any node it may land on (nodeSelector, required node affinity, taints it must
// tolerate, unschedulable nodes) can hold the whole group, and the best node's shortfall when
// none can. Amounts are in the kubelet's units (thousandths of a core for cpu, the base unit
// otherwise; `pods` counts pods). Pure.
import type { NodeSelectorTerm, Toleration } from "../spec/kube-types.js";
import { parseQuantity } from "../spec/quantity.js";
import {
  type CapacityPod,
  isFinished,
  isNodeResource,
  kubeletUnits,
  PODS,
  podRequests,
  resourceOrder,
} from "./requests.js";

/** Amounts by resource, in the kubelet's units. */
export type Amounts = Record<string, bigint>;

/** The fields of a node the forecast reads. */
export interface ForecastNode {
  metadata: { name?: string; labels?: Record<string, string> };
  spec?: { taints?: { key: string; value?: string; effect: string }[]; unschedulable?: boolean };
  status?: { allocatable?: Record<string, string> };
}

/** The fields of a pod the forecast reads. */
export interface ForecastPod extends CapacityPod {
  spec?: CapacityPod["spec"] & {
    nodeSelector?: Record<string, string>;
    tolerations?: Toleration[];
    affinity?: {
      nodeAffinity?: {
        requiredDuringSchedulingIgnoredDuringExecution?: { nodeSelectorTerms: NodeSelectorTerm[] };
      };
    };
  };
}

/** One pod the deploy creates, in creation order. */
export interface ForecastCreate {
  /** The slot's key (slot number or toolbox name). */
  slot: string;
  pod: ForecastPod;
  /**
   * The slot of the scheduler-placed pod this one will be bound next to (a sub-agent of a
   * main agent the deploy creates). A pod with neither `spec.nodeName` nor this is placed by
   * the scheduler on its own.
   */
  follows?: string;
}

/** Inputs of {@link forecastCapacity}. */
export interface ForecastInput {
  /** Every node (the forecast picks those that matter). */
  nodes: readonly ForecastNode[];
  /** The pods bound to the nodes now, of every namespace. */
  pods: readonly CapacityPod[];
  /** uids of live pods the deploy deletes (for good, or to create again): their room is freed. */
  freed?: ReadonlySet<string>;
  creates: readonly ForecastCreate[];
}

/** A resource the pods need more of than a node has free. */
export interface Shortfall {
  resource: string;
  /** Free on the node before the deploy's pods. */
  free: bigint;
  /** What the deploy's pods there request, together. */
  requested: bigint;
}

/** The forecast of one node that receives bound pods. */
export interface NodeForecast {
  node: string;
  /** Whether the node exists (a pod bound to a missing node never runs). */
  found: boolean;
  /** The node's allocatable, per resource (pods included). */
  allocatable: Amounts;
  /** Allocatable minus the requests of what stays bound there, per resource (pods included). */
  free: Amounts;
  /** Requested by this deploy's pods bound there, per resource (pods included). */
  requested: Amounts;
  /** The slots the deploy binds there, in creation order. */
  slots: string[];
  /** The slots the node would refuse, in creation order (empty: all fit). */
  refused: string[];
  /** The resources the deploy's pods there need more of than is free. */
  short: Shortfall[];
}

/** The forecast of a pod the scheduler places, with the pods bound next to it. */
export interface PlacementForecast {
  /** The scheduler-placed pod's slot. */
  slot: string;
  /** It and every slot that follows it, in creation order. */
  slots: string[];
  /** Requested by the group, per resource (pods included). */
  requested: Amounts;
  /** How many nodes the pod may land on (selectors, affinity, taints). */
  candidates: number;
  /** Whether one of them can hold the whole group. */
  fits: boolean;
  /** The node the forecast counts the group on when it fits; the best node when it does not. */
  node?: string;
  /** What that node had free before the group, per resource (pods included). */
  free?: Amounts;
  /** The best node's shortfall, when none fits. */
  short: Shortfall[];
}

/** What {@link forecastCapacity} says. */
export interface CapacityForecast {
  /** Nodes receiving bound pods, by name. */
  nodes: NodeForecast[];
  placements: PlacementForecast[];
  /** Whether every pod fits. */
  fits: boolean;
}

function add(into: Amounts, from: Amounts, sign = 1n): void {
  for (const [k, v] of Object.entries(from)) into[k] = (into[k] ?? 0n) + sign * v;
}

/** A pod's requests in the kubelet's units, the pod itself counted under `pods`. */
function podAmounts(pod: CapacityPod): Amounts {
  const out: Amounts = { [PODS]: 1n };
  for (const [k, q] of Object.entries(podRequests(pod)))
    if (isNodeResource(k)) out[k] = kubeletUnits(k, q);
  return out;
}

/** A node's allocatable in the kubelet's units (a resource it does not list is 0). */
function allocatableAmounts(node: ForecastNode): Amounts {
  const out: Amounts = {};
  for (const [k, v] of Object.entries(node.status?.allocatable ?? {})) {
    const q = parseQuantity(v);
    out[k] = q ? kubeletUnits(k, q) : 0n;
  }
  return out;
}

/** The resources where `want` exceeds `free`, in the kubelet's order. */
function shortfalls(free: Amounts, want: Amounts): Shortfall[] {
  return resourceOrder(Object.keys(want))
    .filter((k) => want[k] > 0n && want[k] > (free[k] ?? 0n))
    .map((k) => ({ resource: k, free: free[k] ?? 0n, requested: want[k] }));
}

// --- where the scheduler may put a pod

function matchesRequirement(
  labels: Record<string, string>,
  r: { key: string; operator: string; values?: string[] },
): boolean {
  const v = labels[r.key];
  const values = r.values ?? [];
  switch (r.operator) {
    case "In":
      return v !== undefined && values.includes(v);
    case "NotIn":
      return v === undefined || !values.includes(v);
    case "Exists":
      return v !== undefined;
    case "DoesNotExist":
      return v === undefined;
    case "Gt":
    case "Lt": {
      if (v === undefined || values.length !== 1) return false;
      const [a, b] = [Number.parseInt(v, 10), Number.parseInt(values[0], 10)];
      if (Number.isNaN(a) || Number.isNaN(b)) return false;
      return r.operator === "Gt" ? a > b : a < b;
    }
    default:
      return false;
  }
}

export function tolerates(
  tolerations: readonly Toleration[],
  taint: { key: string; value?: string; effect: string },
): boolean {
  return tolerations.some((t) => {
    if (t.effect && t.effect !== taint.effect) return false;
    if (t.operator === "Exists") return !t.key || t.key === taint.key;
    return t.key === taint.key && (t.value ?? "") === (taint.value ?? "");
  });
}

/**
 * Whether the scheduler may put the pod on the node: its nodeSelector, its required node
 * affinity (terms OR'ed, expressions AND'ed), the node's NoSchedule and NoExecute taints
 * (and an unschedulable node's) all tolerated.
 */
export function mayLandOn(pod: ForecastPod, node: ForecastNode): boolean {
  const labels = node.metadata.labels ?? {};
  for (const [k, v] of Object.entries(pod.spec?.nodeSelector ?? {}))
    if (labels[k] !== v) return false;
  const terms =
    pod.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution
      ?.nodeSelectorTerms;
  if (
    terms &&
    !terms.some(
      (t) =>
        (t.matchExpressions ?? []).length > 0 &&
        (t.matchExpressions ?? []).every((r) => matchesRequirement(labels, r)),
    )
  )
    return false;
  const tolerations = pod.spec?.tolerations ?? [];
  const taints = [...(node.spec?.taints ?? [])];
  if (node.spec?.unschedulable)
    taints.push({ key: "node.kubernetes.io/unschedulable", effect: "NoSchedule" });
  return taints
    .filter((t) => t.effect === "NoSchedule" || t.effect === "NoExecute")
    .every((t) => tolerates(tolerations, t));
}

// --- the forecast

interface NodeState {
  node?: ForecastNode;
  allocatable: Amounts;
  free: Amounts;
  /** Left after what the forecast has placed there so far. */
  left: Amounts;
}

/** The smallest share of cpu and memory left after `want`, as the scheduler's least-allocated score ranks nodes. */
function roomScore(s: NodeState, want: Amounts): number {
  const alloc = s.allocatable;
  const shares = ["cpu", "memory"].map((k) => {
    const a = alloc[k] ?? 0n;
    if (a <= 0n) return 0;
    return Number((s.left[k] ?? 0n) - (want[k] ?? 0n)) / Number(a);
  });
  return Math.min(...shares);
}

function fitsIn(left: Amounts, want: Amounts): boolean {
  return Object.entries(want).every(([k, v]) => v <= 0n || v <= (left[k] ?? 0n));
}

/**
 * The forecast of a deploy's creates (see the module's comment). Bound pods are admitted one
 * by one in creation order against what is left, a refused one taking nothing; a group the
 * scheduler places is counted, when it fits, on the node with the most room left for it.
 */
export function forecastCapacity(input: ForecastInput): CapacityForecast {
  const states = nodeStates(input);
  const { bound, groups, order } = admitBound(states, input.creates);
  const placements = order.map((slot) => placeGroup(states, slot, groups.get(slot)!));
  const nodes = [...bound.values()].sort((a, b) => (a.node < b.node ? -1 : 1));
  return {
    nodes,
    placements,
    fits: nodes.every((n) => n.refused.length === 0) && placements.every((p) => p.fits),
  };
}

/** Each node's room: its allocatable less the pods that hold it (finished and freed ones not). */
function nodeStates(input: ForecastInput): Map<string, NodeState> {
  const freed = input.freed ?? new Set<string>();
  const states = new Map<string, NodeState>();
  for (const node of input.nodes) {
    const free = allocatableAmounts(node);
    if (free[PODS] === undefined) free[PODS] = 0n;
    states.set(node.metadata.name ?? "", { node, allocatable: { ...free }, free, left: {} });
  }
  for (const p of input.pods) {
    const s = states.get(p.spec?.nodeName ?? "");
    if (!s || isFinished(p) || freed.has(p.metadata?.uid ?? "")) continue;
    add(s.free, podAmounts(p), -1n);
  }
  for (const s of states.values()) s.left = { ...s.free };
  return states;
}

/** A group the scheduler places: its leader and every create that follows it. */
interface Group {
  leader: ForecastCreate;
  members: ForecastCreate[];
}

/**
 * Admits the bound creates one by one on their node (a refused one takes nothing) and
 * gathers the others into groups, in the order their leaders come.
 */
function admitBound(states: Map<string, NodeState>, creates: readonly ForecastCreate[]) {
  const bound = new Map<string, NodeForecast>();
  const groups = new Map<string, Group>();
  const order: string[] = [];
  for (const c of creates) {
    const g = c.follows !== undefined ? groups.get(c.follows) : undefined;
    if (g) {
      g.members.push(c);
      continue;
    }
    const node = c.pod.spec?.nodeName;
    if (!node) {
      groups.set(c.slot, { leader: c, members: [c] });
      order.push(c.slot);
      continue;
    }
    let s = states.get(node);
    if (!s) {
      s = { allocatable: { [PODS]: 0n }, free: { [PODS]: 0n }, left: { [PODS]: 0n } };
      states.set(node, s);
    }
    const f =
      bound.get(node) ??
      ({
        node,
        found: s.node !== undefined,
        allocatable: { ...s.allocatable },
        free: { ...s.free },
        requested: {},
        slots: [],
        refused: [],
        short: [],
      } satisfies NodeForecast);
    bound.set(node, f);
    const want = podAmounts(c.pod);
    add(f.requested, want);
    f.slots.push(c.slot);
    if (s.node && fitsIn(s.left, want)) add(s.left, want, -1n);
    else f.refused.push(c.slot);
  }
  for (const f of bound.values()) f.short = shortfalls(f.free, f.requested);
  return { bound, groups, order };
}

/**
 * Where the scheduler would put a group: the fitting node with the most room (its room then
 * taken), else the candidate it misses the least.
 */
function placeGroup(states: Map<string, NodeState>, slot: string, g: Group): PlacementForecast {
  const want: Amounts = {};
  for (const m of g.members) add(want, podAmounts(m.pod));
  const candidates = [...states.values()].filter((s) => s.node && mayLandOn(g.leader.pod, s.node));
  const fitting = candidates.filter((s) => fitsIn(s.left, want));
  const byName = (s: NodeState) => s.node?.metadata.name ?? "";
  const placement: PlacementForecast = {
    slot,
    slots: g.members.map((m) => m.slot),
    requested: want,
    candidates: candidates.length,
    fits: fitting.length > 0,
    short: [],
  };
  if (fitting.length > 0) {
    const best = fitting.reduce((a, b) => {
      const d = roomScore(b, want) - roomScore(a, want);
      return d > 0 || (d === 0 && byName(b) < byName(a)) ? b : a;
    });
    placement.free = { ...best.left };
    add(best.left, want, -1n);
    placement.node = byName(best);
  } else if (candidates.length > 0) {
    // The best node: the fewest resources short, then the smallest first shortfall.
    const ranked = candidates
      .map((s) => ({ s, short: shortfalls(s.left, want) }))
      .sort((a, b) => {
        if (a.short.length !== b.short.length) return a.short.length - b.short.length;
        const gap = (x: Shortfall[]) => (x[0] ? x[0].requested - x[0].free : 0n);
        const d = gap(a.short) - gap(b.short);
        return d < 0n ? -1 : d > 0n ? 1 : byName(a.s) < byName(b.s) ? -1 : 1;
      });
    placement.node = byName(ranked[0].s);
    placement.free = { ...ranked[0].s.left };
    placement.short = ranked[0].short;
  }
  return placement;
}

/** An amount as text: cpu in cores (`1500m` below a whole core), memory and storage in binary units when exact. */
export function formatAmount(resource: string, v: bigint): string {
  if (resource === "cpu") return v % 1000n === 0n ? String(v / 1000n) : `${v}m`;
  if (
    resource === "memory" ||
    resource === "ephemeral-storage" ||
    resource.startsWith("hugepages-")
  ) {
    for (const [suffix, bits] of [
      ["Ti", 40n],
      ["Gi", 30n],
      ["Mi", 20n],
      ["Ki", 10n],
    ] as const) {
      const unit = 1n << bits;
      if (v !== 0n && v % unit === 0n) return `${v / unit}${suffix}`;
    }
  }
  return String(v);
}
