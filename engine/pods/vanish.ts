// Vanish backoff: a sub-agent slot whose pod keeps disappearing right after the engine
// created it (deleted by something else within VANISH_WINDOW_MS, again and again) is
// recreated with a growing wait instead of at once, and reported. A slot that loses its pod
// once is recreated at once, as before; only a streak slows it down.
//
// The engine remembers its own creates in a create log (per CocoonSet, in memory of the
// process that runs the passes: the controller, or one `pulumi up`). The planner reads the
// log and the time and says when a slot may be created again; it stays pure.
// Behaviour: docs/behaviour.md §3.10.
import type { Pod } from "../spec/kube-types.js";

/** What the engine remembers of the last create of one sub-agent slot. */
export interface SlotCreateRecord {
  /** When the engine created the slot's pod (ms since the epoch). */
  createdMs: number;
  /**
   * How many creates in a row, up to and including this one, replaced a pod that had
   * vanished within {@link VANISH_WINDOW_MS} of its own creation. 0: the slot was missing
   * for another reason (first create, scale-up, a pod that lived past the window).
   */
  vanished: number;
}

/** Create records by sub-agent slot. */
export type SlotCreateLog = ReadonlyMap<number, SlotCreateRecord>;

/** A pod gone within this long of its creation counts as vanished. */
export const VANISH_WINDOW_MS = 60_000;

/** Longest wait between two creates of a vanishing slot. Below the window by design. */
export const VANISH_MAX_DELAY_MS = 30_000;

/** From this many vanishes in a row the slot is reported (Warning event, Degraded condition). */
export const VANISH_REPORT_AFTER = 3;

/**
 * Wait between the previous create and the next one, for a slot whose pod vanished
 * `vanished` times in a row: 0 for the first vanish, then 1 s, 2 s, 4 s … up to 30 s.
 */
export function vanishDelayMs(vanished: number): number {
  if (vanished <= 1) return 0;
  return Math.min(VANISH_MAX_DELAY_MS, 1000 * 2 ** Math.min(vanished - 2, 30));
}

/** When a missing slot may be created, and the record its create would leave. */
export interface RecreateDecision {
  /** Milliseconds to wait before the create; 0: create now. */
  waitMs: number;
  /** The record to keep once the create succeeded (only meaningful when waitMs is 0). */
  record: SlotCreateRecord;
}

/**
 * Decides the create of a missing slot from its last create record.
 * @param last the slot's record, if the engine created it before
 * @param nowMs the current time, injected
 */
export function decideRecreate(
  last: SlotCreateRecord | undefined,
  nowMs: number,
): RecreateDecision {
  // A record from the future (another clock) or past the window: an ordinary loss.
  const age = last ? nowMs - last.createdMs : Number.POSITIVE_INFINITY;
  if (!last || age < 0 || age > VANISH_WINDOW_MS) {
    return { waitMs: 0, record: { createdMs: nowMs, vanished: 0 } };
  }
  const vanished = last.vanished + 1;
  const waitMs = Math.max(0, last.createdMs + vanishDelayMs(vanished) - nowMs);
  return { waitMs, record: { createdMs: nowMs, vanished } };
}

/** The records a pass keeps, and when a later pass must look again. */
export interface PrunedCreateLog {
  log: Map<number, SlotCreateRecord>;
  /** Delay until a kept streak's pod outlives the window (so the report clears); if any. */
  recheckMs?: number;
}

/**
 * Drops the records that no longer matter: slots above `replicas`, and slots whose pod
 * outlived the window (the streak is over). Records of missing slots are kept: the planner
 * reads them when it recreates the slot.
 */
export function pruneCreateLog(
  log: SlotCreateLog,
  subAgents: ReadonlyMap<number, Pod>,
  replicas: number,
  nowMs: number,
): PrunedCreateLog {
  const kept = new Map<number, SlotCreateRecord>();
  let recheckMs: number | undefined;
  for (const [slot, record] of log) {
    if (slot < 1 || slot > replicas) continue;
    const age = nowMs - record.createdMs;
    const present = subAgents.has(slot);
    if (age > VANISH_WINDOW_MS || age < 0) {
      // Past the window the record decides nothing any more, whether the pod is there or not.
      continue;
    }
    kept.set(slot, record);
    if (present && record.vanished > 0) {
      const left = VANISH_WINDOW_MS - age + 1;
      recheckMs = recheckMs === undefined ? left : Math.min(recheckMs, left);
    }
  }
  return { log: kept, recheckMs };
}

/** Slots whose streak is long enough to report, ascending. */
export function vanishingSlots(log: SlotCreateLog): number[] {
  return [...log]
    .filter(([, r]) => r.vanished >= VANISH_REPORT_AFTER)
    .map(([slot]) => slot)
    .sort((a, b) => a - b);
}
