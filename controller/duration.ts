/** Durations as flags and arguments spell them: `90s`, `5m`, `1h30m`, `250ms`. */
import { InvalidValueError } from "../engine/kube/branded-error.js";

/** The longest delay a Node timer honours (a longer one fires at once). */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Parses a duration such as `90s`, `5m`, `1h30m`, `250ms` (a bare number means seconds) into
 * milliseconds; throws an Error naming the text and showing examples otherwise.
 */
export function parseDuration(text: string): number {
  const t = text.trim();
  if (/^\d+(\.\d+)?$/.test(t)) return Math.round(parseFloat(t) * 1000);
  const re = /(\d+(?:\.\d+)?)(ms|s|m|h)/g;
  let total = 0;
  let consumed = 0;
  for (const m of t.matchAll(re)) {
    if (m.index !== consumed) break;
    consumed += m[0].length;
    const n = parseFloat(m[1]);
    total += n * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[m[2] as "ms" | "s" | "m" | "h"];
  }
  if (consumed === 0 || consumed !== t.length) {
    throw new InvalidValueError(`"${text}" is not a duration (examples: 500ms, 30s, 5m, 1h)`);
  }
  return Math.round(total);
}
