// The capacity forecast as refusals, one per node that would refuse pods and one per pod
// the scheduler could place nowhere with the pods bound next to it, in the style of the
// preview's quota refusals: keyed by the first slot refused, naming the node, the figures
// and the slots. Pure.
import type { CapacityForecast, Shortfall } from "./forecast.js";
import { formatAmount } from "./forecast.js";
import { slotRanges } from "./render.js";

const slotsWord = (slots: readonly string[]) =>
  `${slots.length === 1 ? "slot" : "slots"} ${slotRanges(slots)}`;

/** One refusal per node that would refuse a pod and per group no node can hold. */
export function capacityReasons(f: CapacityForecast): string[] {
  const out: string[] = [];
  for (const n of f.nodes) {
    if (n.refused.length === 0) continue;
    if (!n.found) {
      out.push(
        `[slots.${n.refused[0]}] node ${n.node} does not exist: the pods this deploy binds to it (${slotsWord(n.slots)}) would never run`,
      );
      continue;
    }
    const figures = n.short
      .map((s: Shortfall) => {
        const used = (n.allocatable[s.resource] ?? 0n) - s.free;
        return `${s.resource} ${formatAmount(s.resource, used)} of ${formatAmount(s.resource, n.allocatable[s.resource] ?? 0n)} requested, and the pods this deploy binds to it add ${formatAmount(s.resource, s.requested)}`;
      })
      .join("; ");
    const reasons = n.short.map((s) => `OutOf${s.resource}`).join(", ");
    out.push(
      `[slots.${n.refused[0]}] node ${n.node} has ${figures} (${slotsWord(n.slots)}): the kubelet would refuse ${slotsWord(n.refused)} (${reasons}), which the controller would rebuild until they dead-letter`,
    );
  }
  for (const p of f.placements) {
    if (p.fits) continue;
    const group =
      p.slots.length > 1
        ? `slot ${p.slot} and the ${p.slots.length - 1} ${p.slots.length === 2 ? "pod" : "pods"} bound next to it (${slotsWord(p.slots.slice(1))})`
        : `slot ${p.slot}`;
    if (p.candidates === 0) {
      out.push(
        `[slots.${p.slot}] no node matches the nodeSelector, affinity and tolerations of ${group}: the scheduler would leave it Pending`,
      );
      continue;
    }
    const short = p.short
      .map(
        (s) =>
          `${s.resource} ${formatAmount(s.resource, s.free)} free, ${formatAmount(s.resource, s.requested)} requested`,
      )
      .join("; ");
    out.push(
      `[slots.${p.slot}] no node can hold ${group} (${p.candidates} ${p.candidates === 1 ? "node matches" : "nodes match"} its nodeSelector, affinity and tolerations); the best, ${p.node}, has ${short}`,
    );
  }
  return out;
}
