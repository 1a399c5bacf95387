// Whether a namespace's ResourceQuotas have room for all the pods a deploy adds. A server-side
// dry run checks one pod against a quota's current usage, and dry runs do not add up: with
// room for one more pod, every dry run of a ten-slot scale-up passes while `up` would create
// one slot and fail on nine. This sums the deploy's pods against each quota instead. Pure.
import type { Quantity } from "../spec/quantity.js";
import { parseQuantity } from "../spec/quantity.js";

/** The fields of a ResourceQuota this reads. */
export interface ResourceQuotaObject {
  metadata?: { name?: string };
  spec?: { hard?: Record<string, string>; scopes?: string[]; scopeSelector?: unknown };
  status?: { hard?: Record<string, string>; used?: Record<string, string> };
}

/** The fields of a pod its quota usage depends on. */
export interface QuotaPod {
  spec?: {
    containers?: { resources?: QuotaResources }[];
    initContainers?: { resources?: QuotaResources }[];
    overhead?: Record<string, string | number>;
  };
  status?: { phase?: string };
}

interface QuotaResources {
  requests?: Record<string, string | number>;
  limits?: Record<string, string | number>;
}

/** Usage by quota resource name (`pods`, `requests.cpu`, `limits.memory`, ...). */
export type QuotaUsage = Record<string, Quantity>;

const ZERO: Quantity = { numerator: 0n, denominator: 1n };
const ONE: Quantity = { numerator: 1n, denominator: 1n };

function add(a: Quantity, b: Quantity): Quantity {
  return {
    numerator: a.numerator * b.denominator + b.numerator * a.denominator,
    denominator: a.denominator * b.denominator,
  };
}

function negate(a: Quantity): Quantity {
  return { numerator: -a.numerator, denominator: a.denominator };
}

function compare(a: Quantity, b: Quantity): number {
  const l = a.numerator * b.denominator;
  const r = b.numerator * a.denominator;
  return l < r ? -1 : l > r ? 1 : 0;
}

/** A quantity as text: an integer, else in thousandths (`1500m`), else a decimal. */
export function formatQuantity(q: Quantity): string {
  if (q.numerator % q.denominator === 0n) return String(q.numerator / q.denominator);
  if ((q.numerator * 1000n) % q.denominator === 0n) {
    return `${(q.numerator * 1000n) / q.denominator}m`;
  }
  return String(Number(q.numerator) / Number(q.denominator));
}

function sumInto(
  out: Record<string, Quantity>,
  values: Record<string, string | number> | undefined,
): void {
  for (const [k, v] of Object.entries(values ?? {})) {
    const q = parseQuantity(v);
    if (q) out[k] = add(out[k] ?? ZERO, q);
  }
}

function maxInto(
  out: Record<string, Quantity>,
  values: Record<string, string | number> | undefined,
): void {
  for (const [k, v] of Object.entries(values ?? {})) {
    const q = parseQuantity(v);
    if (q && compare(q, out[k] ?? ZERO) > 0) out[k] = q;
  }
}

/**
 * What one pod counts against a quota, the way the apiserver's pod evaluator counts it: one
 * `pods`; per resource, the containers' requests (and limits) summed, at least any single
 * init container's, plus the pod overhead (on limits only where set). A pod that has finished (Succeeded or Failed)
 * counts nothing.
 */
export function podQuotaUsage(pod: QuotaPod): QuotaUsage {
  const phase = pod.status?.phase;
  if (phase === "Succeeded" || phase === "Failed") return {};
  const usage: QuotaUsage = { pods: ONE };
  for (const side of ["requests", "limits"] as const) {
    const sum: Record<string, Quantity> = {};
    for (const c of pod.spec?.containers ?? []) sumInto(sum, c.resources?.[side]);
    for (const c of pod.spec?.initContainers ?? []) maxInto(sum, c.resources?.[side]);
    // Overhead adds to every request, and to a limit only where the pod sets one.
    const overhead = Object.entries(pod.spec?.overhead ?? {}).filter(
      ([k]) => side === "requests" || sum[k] !== undefined,
    );
    sumInto(sum, Object.fromEntries(overhead));
    for (const [k, q] of Object.entries(sum)) usage[`${side}.${k}`] = q;
  }
  return usage;
}

/** The usage key a quota's resource name limits, or undefined when it does not limit pods. */
export function usageKeyOf(quotaResource: string): string | undefined {
  if (quotaResource === "pods" || quotaResource === "count/pods") return "pods";
  if (["cpu", "memory", "ephemeral-storage"].includes(quotaResource)) {
    return `requests.${quotaResource}`;
  }
  if (quotaResource.startsWith("requests.") || quotaResource.startsWith("limits.")) {
    return quotaResource;
  }
  return undefined;
}

/** One quota a deploy's pods do not fit in. */
export interface QuotaOverflow {
  /** Name of the ResourceQuota. */
  quota: string;
  /** The resource name as the quota spells it (`pods`, `requests.cpu`, ...). */
  resource: string;
  hard: string;
  used: string;
  /** What the deploy's new pods count, together. */
  added: string;
  /** Every slot the deploy creates a pod for that counts against this resource. */
  slots: string[];
  /** The slots whose create would be refused, in the order the engine creates them. */
  refused: string[];
}

/**
 * The quotas the deploy's creates do not fit in. `creates` are in creation order, each with
 * its pod's usage (the pod as admission left it, LimitRange defaults included); `freed` is
 * the usage of the live pods the deploy deletes for good, counted as freed before any create
 * (so a create is never called refused when it only waits for a scaled-down pod to go).
 * Quotas with scopes or a scope selector are left to the dry runs (whether a pod matches
 * them depends on fields this does not model); a quota whose usage the quota controller has
 * not measured yet (no `status.hard`) is not enforced by the apiserver either.
 */
export function quotaOverflows(
  quotas: readonly ResourceQuotaObject[],
  creates: readonly { slot: string; usage: QuotaUsage }[],
  freed: readonly QuotaUsage[],
): QuotaOverflow[] {
  const out: QuotaOverflow[] = [];
  for (const quota of quotas) {
    if ((quota.spec?.scopes?.length ?? 0) > 0 || quota.spec?.scopeSelector) continue;
    const hard = quota.status?.hard ?? {};
    const used = quota.status?.used ?? {};
    for (const resource of Object.keys(hard).sort()) {
      const key = usageKeyOf(resource);
      const limit = parseQuantity(hard[resource]);
      const current = parseQuantity(used[resource] ?? "0");
      if (!key || !limit || !current) continue;
      let total = freed.reduce((t, u) => add(t, negate(u[key] ?? ZERO)), current);
      let added = ZERO;
      const slots: string[] = [];
      const refused: string[] = [];
      for (const c of creates) {
        const q = c.usage[key];
        if (!q || q.numerator === 0n) continue;
        slots.push(c.slot);
        added = add(added, q);
        total = add(total, q);
        if (compare(total, limit) > 0) refused.push(c.slot);
      }
      if (refused.length > 0) {
        out.push({
          quota: quota.metadata?.name ?? "",
          resource,
          hard: hard[resource],
          used: used[resource] ?? "0",
          added: formatQuantity(added),
          slots,
          refused,
        });
      }
    }
  }
  return out;
}
