// The capacity forecast as text: one table row per node that receives pods (node, free,
// requested by this plan, verdict), as `cocoonset plan` prints it. Pure.
import type { Amounts, CapacityForecast, Shortfall } from "./forecast.js";
import { formatAmount } from "./forecast.js";
import { resourceOrder } from "./requests.js";

/** Slots as text, runs of consecutive slot numbers as ranges: `13–20`, `3, 5, browser`. */
export function slotRanges(slots: readonly string[]): string {
  const out: string[] = [];
  let i = 0;
  while (i < slots.length) {
    let j = i;
    const isNum = (s: string) => /^\d+$/.test(s);
    while (
      j + 1 < slots.length &&
      isNum(slots[j]) &&
      isNum(slots[j + 1]) &&
      Number(slots[j + 1]) === Number(slots[j]) + 1
    )
      j++;
    out.push(j > i ? `${slots[i]}–${slots[j]}` : slots[i]);
    i = j + 1;
  }
  return out.join(", ");
}

/** Resources in the order a table shows them: the kubelet's, with the pods count last. */
function shownOrder(names: Iterable<string>): string[] {
  const order = resourceOrder(names);
  return [...order.filter((n) => n !== "pods"), ...order.filter((n) => n === "pods")];
}

function amounts(a: Amounts, names: readonly string[]): string {
  return names.map((k) => `${k} ${formatAmount(k, a[k] ?? 0n)}`).join(", ");
}

function shortText(short: readonly Shortfall[]): string {
  return short
    .map(
      (s) =>
        `${s.resource} ${formatAmount(s.resource, s.free)} free, ${formatAmount(s.resource, s.requested)} requested`,
    )
    .join("; ");
}

const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

/** The forecast as a table (empty when the plan creates no pod). */
export function renderForecast(f: CapacityForecast): string {
  const rows: string[][] = [];
  for (const n of f.nodes) {
    const names = shownOrder(Object.keys(n.requested));
    const verdict = !n.found
      ? `refuses slots ${slotRanges(n.refused)}: no such node`
      : n.refused.length === 0
        ? "fits"
        : `refuses slots ${slotRanges(n.refused)}: ${shortText(n.short)}`;
    rows.push([
      n.node,
      amounts(n.free, names),
      `${amounts(n.requested, names)} (slots ${slotRanges(n.slots)})`,
      verdict,
    ]);
  }
  for (const p of f.placements) {
    const names = shownOrder(Object.keys(p.requested));
    const who =
      p.slots.length > 1
        ? `slot ${p.slot} and ${plural(p.slots.length - 1, "pod", "pods")} bound next to it`
        : `slot ${p.slot}`;
    const requested = `${amounts(p.requested, names)} (${who})`;
    if (p.candidates === 0) {
      rows.push([
        "(scheduler)",
        "-",
        requested,
        `no node matches its nodeSelector, affinity and tolerations`,
      ]);
      continue;
    }
    const verdict = p.fits
      ? `fits (scheduler: ${plural(p.candidates, "node matches", "nodes match")})`
      : `no node holds ${who} (${plural(p.candidates, "node matches", "nodes match")}); best ${p.node}: ${shortText(p.short)}`;
    rows.push([`${p.node} (scheduler)`, amounts(p.free ?? {}, names), requested, verdict]);
  }
  if (rows.length === 0) return "";
  const header = ["NODE", "FREE", "REQUESTED BY THIS PLAN", "VERDICT"];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (r: string[]) =>
    r
      .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i])))
      .join("  ")
      .trimEnd();
  return ["capacity forecast:", line(header), ...rows.map(line)].join("\n");
}

const amountsJSON = (a: Amounts | undefined) =>
  Object.fromEntries(Object.entries(a ?? {}).map(([k, v]) => [k, formatAmount(k, v)]));

const shortJSON = (s: readonly Shortfall[]) =>
  s.map((x) => ({
    resource: x.resource,
    free: formatAmount(x.resource, x.free),
    requested: formatAmount(x.resource, x.requested),
  }));

/** The forecast as plain JSON (amounts as quantity strings). */
export function forecastToJSON(f: CapacityForecast): unknown {
  return {
    fits: f.fits,
    nodes: f.nodes.map((n) => ({
      node: n.node,
      found: n.found,
      allocatable: amountsJSON(n.allocatable),
      free: amountsJSON(n.free),
      requested: amountsJSON(n.requested),
      slots: n.slots,
      refused: n.refused,
      short: shortJSON(n.short),
    })),
    placements: f.placements.map((p) => ({
      slot: p.slot,
      slots: p.slots,
      requested: amountsJSON(p.requested),
      candidates: p.candidates,
      fits: p.fits,
      node: p.node ?? null,
      free: amountsJSON(p.free),
      short: shortJSON(p.short),
    })),
  };
}
