// The rebuild history codec. The history lives on the CocoonSet as the annotation
// cocoonset.cocoonstack.io/rebuild-history so a slot's rebuild count survives the pod delete:
//   {"3": {"count": 2, "lastDeleted": "2025-01-01T10:00:00.000Z"}}
// Behaviour: docs/behaviour.md §3.7.
import { ANNOTATIONS } from "../spec/constants.js";
import type { CocoonSet } from "../spec/generated/types.js";

/** How often a slot was rebuilt, and when its pod was last deleted for it. */
export interface RebuildEntry {
  /** Rebuilds so far. */
  count: number;
  /** RFC 3339 time of the last rebuild's delete. */
  lastDeleted: string;
}

/** Rebuild entries by sub-agent slot. */
export type RebuildHistory = ReadonlyMap<number, RebuildEntry>;

function isEntry(value: unknown): value is RebuildEntry {
  if (typeof value !== "object" || value === null) return false;
  const { count, lastDeleted } = value as Record<string, unknown>;
  return (
    Number.isSafeInteger(count) &&
    (count as number) >= 0 &&
    typeof lastDeleted === "string" &&
    !Number.isNaN(Date.parse(lastDeleted))
  );
}

/**
 * Parses the annotation value. Tolerant by design: a missing, unparsable or `null` value
 * reads as an empty history, and malformed entries (bad slot key, count or time) are dropped.
 */
export function parseRebuildHistory(raw: string | undefined | null): Map<number, RebuildEntry> {
  const out = new Map<number, RebuildEntry>();
  if (!raw) return out;
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return out;
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return out;
  for (const [key, value] of Object.entries(parsed as Record<string, unknown>)) {
    if (!/^[1-9][0-9]*$/.test(key) || !isEntry(value)) continue;
    out.set(Number(key), { count: value.count, lastDeleted: value.lastDeleted });
  }
  return out;
}

/** Reads the history annotation of a CocoonSet. */
export function readRebuildHistory(cs: CocoonSet): Map<number, RebuildEntry> {
  return parseRebuildHistory(cs.metadata.annotations?.[ANNOTATIONS.rebuildHistory]);
}

/**
 * Serialises the history for writing: slots above `replicas` are dropped and keys come in
 * ascending slot order, so equal histories always produce equal text.
 */
export function serializeRebuildHistory(history: RebuildHistory, replicas: number): string {
  const slots = [...history.keys()].filter((s) => s >= 1 && s <= replicas).sort((a, b) => a - b);
  const parts = slots.map((slot) => {
    const { count, lastDeleted } = history.get(slot) as RebuildEntry;
    return `${JSON.stringify(String(slot))}:${JSON.stringify({ count, lastDeleted })}`;
  });
  return `{${parts.join(",")}}`;
}
