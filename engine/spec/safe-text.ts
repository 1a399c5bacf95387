/**
 * Text that came from outside (a spec's value, a registry address) made safe to print in an
 * error, a log line or an event: characters that move a terminal's cursor, change its colours,
 * ring it, reorder what follows (the bidirectional overrides) or hide themselves (zero-width
 * and other format characters) are written as `\u` escapes of four hex digits, and the
 * userinfo of an address (`user:password@`) is replaced by `[redacted]`. Pure.
 */

/**
 * Characters that are unsafe to print: C0 controls (ESC, BEL, CR, …), DEL and the C1 controls
 * (a terminal may take U+009B for CSI), the soft hyphen, the Arabic letter mark, the
 * zero-width and directional marks, the line and paragraph separators, the bidirectional
 * embeddings, overrides and isolates, the invisible operators, the variation selectors, the
 * byte-order mark and the interlinear annotation characters.
 */
const BEYOND_C0: readonly [number, number][] = [
  [0x7f, 0x9f],
  [0xad, 0xad],
  [0x61c, 0x61c],
  [0x180e, 0x180e],
  [0x200b, 0x200f],
  [0x2028, 0x202e],
  [0x2060, 0x206f],
  [0xfe00, 0xfe0f],
  [0xfeff, 0xfeff],
  [0xfff9, 0xfffb],
];

/** Whether one UTF-16 unit is unsafe; `c0` says whether the C0 controls count. */
function unsafe(code: number, c0: boolean): boolean {
  if (code < 0x20) return c0;
  return BEYOND_C0.some(([lo, hi]) => code >= lo && code <= hi);
}

/** Every character outside printable ASCII: the candidates, each then checked. */
const CANDIDATES = /[^\x20-\x7e]/g;

const escape = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`;

/** Whether `text` holds a character {@link escapeUnsafeText} would escape. */
export function hasUnsafeText(text: string): boolean {
  for (let i = 0; i < text.length; i++) if (unsafe(text.charCodeAt(i), true)) return true;
  return false;
}

/**
 * `text` with every unsafe character written as a `\u` escape of four hex digits. With `json`
 * the C0 controls are left for a JSON encoder to escape (a log line), so line breaks in a
 * stack stay `\n`.
 */
export function escapeUnsafeText(text: string, opts: { json?: boolean } = {}): string {
  const c0 = opts.json !== true;
  return text.replace(CANDIDATES, (c) => (unsafe(c.charCodeAt(0), c0) ? escape(c) : c));
}

/**
 * `text` with the userinfo of any address in it (`https://user:password@host`,
 * `user:token@host`) replaced by `[redacted]`: what an error or a log may echo of an address.
 */
export function redactUserinfo(text: string): string {
  return text.replace(
    // Up to the last @ before the host: a password may hold an @ of its own. An image's
    // digest (`name@sha256:<hex>`) is not an address and is left alone. A scheme is tried
    // only from the start of a run of scheme characters (its leading digits and signs go
    // back out unchanged in $1): tried from every letter of the run, a long run without
    // `://` (a log value of 172,000 characters) took minutes, the time growing with the
    // square of its length.
    /((?:(?<![a-z0-9+.-])[0-9+.-]*[a-z][a-z0-9+.-]*:\/\/)|^|(?<=[\s"'(<=,]))[^\s/?#"'()<>=,]+@(?![a-z][a-z0-9]*(?:[+._-][a-z][a-z0-9]*)*:[0-9a-f]{32,})(?=[^\s/?#@"'()<>=,]+)/gi,
    "$1[redacted]@",
  );
}

/** What an error, a log line or an event may show of an outside value: redacted and escaped. */
export function safeText(text: string): string {
  return escapeUnsafeText(redactUserinfo(text));
}
