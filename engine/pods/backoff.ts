// Rebuild backoff: the wait before rebuild number count+1, measured from the last delete.
// Behaviour: docs/behaviour.md §3.6.
import { BACKOFF_SCHEDULE_SECONDS } from "../spec/constants.js";
import type { RebuildEntry } from "./rebuild-history.js";

/** Backoff after `count` rebuilds: 0 → 0 s, 1 → 1 s, 2 → 5 s, 3 or more → 30 s. */
export function backoffDelayMs(count: number): number {
  const index = Math.min(Math.max(0, Math.floor(count)), BACKOFF_SCHEDULE_SECONDS.length - 1);
  return BACKOFF_SCHEDULE_SECONDS[index] * 1000;
}

/**
 * Milliseconds left before a slot may be rebuilt again; 0 when it may be rebuilt now.
 * @param entry the slot's history entry (none means never rebuilt)
 * @param nowMs the current time, injected
 */
export function backoffRemainingMs(entry: RebuildEntry | undefined, nowMs: number): number {
  if (!entry) return 0;
  const since = nowMs - Date.parse(entry.lastDeleted);
  if (Number.isNaN(since)) return 0;
  const delay = backoffDelayMs(entry.count);
  // A lastDeleted in the future (clock skew between writers) never extends the wait.
  return Math.min(delay, Math.max(0, delay - since));
}
