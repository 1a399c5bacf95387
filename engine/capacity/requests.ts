// What a pod takes from its node's allocatable, counted the way the scheduler's NodeResourcesFit
// and the kubelet's admission count it, and the kubelet's fit check of one pod against a node.
// Pure: quantities are exact rationals (engine/spec/quantity.ts).
import { parseQuantity, type Quantity } from "../spec/quantity.js";

/** Resource name → quantity. */
export type Resources = Record<string, Quantity>;

type Values = Record<string, string | number>;

interface ContainerLike {
  resources?: { requests?: Values };
  /** `Always` on an init container makes it a sidecar. */
  restartPolicy?: string;
}

/** The fields of a pod its node's room depends on. */
export interface CapacityPod {
  metadata?: {
    name?: string;
    namespace?: string;
    uid?: string;
    creationTimestamp?: string;
    deletionTimestamp?: string;
  };
  spec?: {
    nodeName?: string;
    containers?: ContainerLike[];
    initContainers?: ContainerLike[];
    overhead?: Values;
    /** Pod-level resources (PodLevelResources): cpu and memory here replace the containers' sum. */
    resources?: { requests?: Values };
  };
  status?: { phase?: string; startTime?: string };
}

/** The resource a pod count is kept under, as in a node's allocatable. */
export const PODS = "pods";

const ZERO: Quantity = { numerator: 0n, denominator: 1n };

function addQ(a: Quantity, b: Quantity): Quantity {
  return {
    numerator: a.numerator * b.denominator + b.numerator * a.denominator,
    denominator: a.denominator * b.denominator,
  };
}

function compareQ(a: Quantity, b: Quantity): number {
  const l = a.numerator * b.denominator;
  const r = b.numerator * a.denominator;
  return l < r ? -1 : l > r ? 1 : 0;
}

/** The quantity of a resource in a map (zero when absent). */
function amountOf(r: Resources, name: string): Quantity {
  return r[name] ?? ZERO;
}

/**
 * Quantities read so far, by their text: a forecast reads the same few values ("100m",
 * "256Mi") on thousands of pods. Quantities are never changed in place, so they are shared.
 */
const readSoFar = new Map<string, Quantity | undefined>();
const READ_CACHE_SIZE = 4096;

function quantityOf(v: string | number): Quantity | undefined {
  if (typeof v !== "string") return parseQuantity(v);
  if (readSoFar.has(v)) return readSoFar.get(v);
  const q = parseQuantity(v);
  if (readSoFar.size >= READ_CACHE_SIZE) readSoFar.clear();
  readSoFar.set(v, q);
  return q;
}

function read(values: Values | undefined): Resources {
  const out: Resources = {};
  for (const [k, v] of Object.entries(values ?? {})) {
    const q = quantityOf(v);
    if (q) out[k] = q;
  }
  return out;
}

function sumInto(out: Resources, add: Resources): void {
  for (const [k, q] of Object.entries(add)) out[k] = addQ(out[k] ?? ZERO, q);
}

function maxInto(out: Resources, other: Resources): void {
  for (const [k, q] of Object.entries(other)) if (compareQ(q, out[k] ?? ZERO) > 0) out[k] = q;
}

/** Adds every quantity of `b` to `a` (a new map). */
function addResources(a: Resources, b: Resources): Resources {
  const out = { ...a };
  sumInto(out, b);
  return out;
}

/**
 * The requests of one pod as the scheduler counts them: the containers' requests summed;
 * init containers in order, each needing its own requests plus the sidecars started before
 * it, the pod needing at least the largest of those; sidecars (init containers with
 * `restartPolicy: Always`) adding to the sum; pod-level cpu and memory requests, where set,
 * replacing the containers' sum; then the pod overhead added.
 */
export function podRequests(pod: CapacityPod): Resources {
  const requests: Resources = {};
  for (const c of pod.spec?.containers ?? []) sumInto(requests, read(c.resources?.requests));
  const sidecars: Resources = {};
  const initPeak: Resources = {};
  for (const c of pod.spec?.initContainers ?? []) {
    const own = read(c.resources?.requests);
    if (c.restartPolicy === "Always") {
      sumInto(requests, own);
      sumInto(sidecars, own);
    } else {
      maxInto(initPeak, addResources(own, sidecars));
    }
  }
  maxInto(requests, initPeak);
  const podLevel = read(pod.spec?.resources?.requests);
  for (const name of ["cpu", "memory"]) if (podLevel[name]) requests[name] = podLevel[name];
  sumInto(requests, read(pod.spec?.overhead));
  for (const [k, q] of Object.entries(requests)) if (q.numerator === 0n) delete requests[k];
  return requests;
}

/** Whether the pod has finished (Succeeded or Failed) and so takes nothing from its node. */
export function isFinished(pod: CapacityPod): boolean {
  const phase = pod.status?.phase;
  return phase === "Succeeded" || phase === "Failed";
}

/** Whether the node's fit check counts this resource (cpu, memory, ephemeral-storage, hugepages, any domain-prefixed name). */
export function isNodeResource(name: string): boolean {
  return (
    name === "cpu" ||
    name === "memory" ||
    name === "ephemeral-storage" ||
    name.startsWith("hugepages-") ||
    (name.includes("/") && !name.startsWith("requests."))
  );
}

/** An extended resource: domain-prefixed, outside `kubernetes.io/`. */
function isExtendedResource(name: string): boolean {
  return (
    name.includes("/") && !name.startsWith("requests.") && !/(^|\.)kubernetes\.io\//.test(name)
  );
}

/** The order the kubelet checks resources in: pods, cpu, memory, ephemeral-storage, then the rest by name. */
export function resourceOrder(names: Iterable<string>): string[] {
  const first = [PODS, "cpu", "memory", "ephemeral-storage"];
  const set = new Set(names);
  return [...first.filter((n) => set.has(n)), ...[...set].filter((n) => !first.includes(n)).sort()];
}

/**
 * A quantity in the kubelet's integer unit of the resource, rounded up as resource.Quantity
 * does: thousandths of a core for cpu, the base unit otherwise.
 */
export function kubeletUnits(name: string, q: Quantity): bigint {
  const n = name === "cpu" ? q.numerator * 1000n : q.numerator;
  const d = q.denominator;
  const whole = n / d;
  return n % d !== 0n && n > 0n ? whole + 1n : whole;
}

/** One resource a pod does not fit in, in the kubelet's units. */
export interface Insufficient {
  resource: string;
  requested: bigint;
  used: bigint;
  capacity: bigint;
}

/**
 * The resources one pod does not fit in on a node, in the kubelet's order (the kubelet
 * reports the first): `allocatable` is the node's, `admitted` the non-finished pods already
 * admitted there. As the kubelet does, an extended resource the node does not list is left
 * out (cluster-level resources are unknown to nodes), and a resource the pod does not request
 * is never short.
 */
export function kubeletFitErrors(
  pod: CapacityPod,
  allocatable: Values,
  admitted: readonly CapacityPod[],
): Insufficient[] {
  const alloc = read(allocatable);
  // Each admitted pod's requests in whole units, then summed, as the node's bookkeeping does.
  const used = new Map<string, bigint>();
  for (const p of admitted)
    for (const [k, q] of Object.entries(podRequests(p)))
      used.set(k, (used.get(k) ?? 0n) + kubeletUnits(k, q));
  const want = podRequests(pod);
  const out: Insufficient[] = [];
  const podsCap = kubeletUnits(PODS, amountOf(alloc, PODS));
  if (BigInt(admitted.length) + 1n > podsCap)
    out.push({ resource: PODS, requested: 1n, used: BigInt(admitted.length), capacity: podsCap });
  const names = Object.keys(want).filter(
    (n) => isNodeResource(n) && !(isExtendedResource(n) && alloc[n] === undefined),
  );
  for (const name of resourceOrder(names)) {
    const requested = kubeletUnits(name, want[name]);
    const usedUnits = used.get(name) ?? 0n;
    const capacity = kubeletUnits(name, amountOf(alloc, name));
    if (requested > 0n && requested > capacity - usedUnits)
      out.push({ resource: name, requested, used: usedUnits, capacity });
  }
  return out;
}

/** The kubelet's reason for a refused pod: `OutOfcpu`, `OutOfpods`, `OutOf<resource>`. */
export function outOfReason(e: Insufficient): string {
  return `OutOf${e.resource}`;
}

/** The kubelet's message of a refused pod, as it writes it in the pod's status. */
export function rejectionMessage(e: Insufficient): string {
  return `Pod was rejected: Node didn't have enough resource: ${e.resource}, requested: ${e.requested}, used: ${e.used}, capacity: ${e.capacity}`;
}
