/** Durations as flags, arguments and spec fields spell them: `90s`, `5m`, `1h30m`, `250ms`. */
import { InvalidValueError } from "../kube/branded-error.js";

const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const;

/**
 * Parses a duration such as `90s`, `5m`, `1h30m`, `250ms` (a bare number means seconds) into
 * milliseconds; throws an InvalidValueError naming the text and showing examples otherwise.
 */
export function parseDuration(text: string): number {
  const t = text.trim();
  if (/^\d+(\.\d+)?$/.test(t)) return Math.round(parseFloat(t) * 1000);
  let total = 0;
  let consumed = 0;
  for (const m of t.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)) {
    if (m.index !== consumed) break;
    consumed += m[0].length;
    total += parseFloat(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS];
  }
  if (consumed === 0 || consumed !== t.length) {
    throw new InvalidValueError(`"${text}" is not a duration (examples: 500ms, 30s, 5m, 1h)`);
  }
  return Math.round(total);
}
