/** Durations as flags and arguments spell them: `90s`, `5m`, `1h30m`, `250ms`. */

/** The longest delay a Node timer honours (a longer one fires at once). */
export const MAX_TIMER_MS = 2 ** 31 - 1;

export { parseDuration } from "../engine/spec/duration.js";
