/** JSON logs (pino): one logger per process, one child per reconcile. */
import { randomUUID } from "node:crypto";
import { pino, type DestinationStream, type Logger } from "pino";
import type { ObjectKey } from "./types.js";
import { escapeUnsafeText, redactUserinfo } from "../engine/spec/index.js";

/** Log levels accepted by `--log-level`. */
export const LOG_LEVELS = ["trace", "debug", "info", "warn", "error", "fatal", "silent"] as const;

/** One of {@link LOG_LEVELS}. */
export type LogLevel = (typeof LOG_LEVELS)[number];

/** The level when `--log-level` (or the Operator's `logLevel`) is not given. */
export const DEFAULT_LOG_LEVEL: LogLevel = "info";

/** Options of {@link createLogger}. */
export interface LoggerOptions {
  /** @default "info" */
  level?: LogLevel;
  /** Where lines go. @default stdout */
  destination?: DestinationStream;
  /** Fields on every line. */
  base?: Record<string, unknown>;
}

/** Most characters of one string in a log line (a message or a field's value). */
export const MAX_LOG_STRING = 2048;
/** Most entries of one array or object in a log line. */
export const MAX_LOG_ENTRIES = 32;

/**
 * A value made small enough for one log line: strings cut to {@link MAX_LOG_STRING}
 * characters (saying how long they were), arrays and objects to {@link MAX_LOG_ENTRIES}
 * entries, nesting to 4 levels; an Error becomes its type, message and stack. A line's size
 * then has a bound whatever a caller passes.
 */
export function boundLogValue(value: unknown, depth = 0): unknown {
  if (typeof value === "string") {
    // JSON escapes the C0 controls; the rest that could act on a terminal (C1, the
    // bidirectional overrides, zero-width characters) and any address's userinfo are
    // taken care of here.
    const safe = escapeUnsafeText(redactUserinfo(value), { json: true });
    return safe.length <= MAX_LOG_STRING
      ? safe
      : `${safe.slice(0, MAX_LOG_STRING)}… (${safe.length} characters)`;
  }
  if (value instanceof Error)
    return boundLogValue({ type: value.name, message: value.message, stack: value.stack }, depth);
  if (value === null || typeof value !== "object") return value;
  if (depth >= 4) return "[nested too deep]";
  if (Array.isArray(value)) {
    const out = value.slice(0, MAX_LOG_ENTRIES).map((v) => boundLogValue(v, depth + 1));
    if (value.length > MAX_LOG_ENTRIES) out.push(`… ${value.length - MAX_LOG_ENTRIES} more`);
    return out;
  }
  const entries = Object.entries(value as Record<string, unknown>);
  const out: Record<string, unknown> = {};
  for (const [k, v] of entries.slice(0, MAX_LOG_ENTRIES)) out[k] = boundLogValue(v, depth + 1);
  if (entries.length > MAX_LOG_ENTRIES) out["…"] = `${entries.length - MAX_LOG_ENTRIES} more`;
  return out;
}

/** Creates the process logger: JSON lines with an ISO time and the level as a string. */
export function createLogger(opts: LoggerOptions = {}): Logger {
  const options = {
    level: opts.level ?? DEFAULT_LOG_LEVEL,
    base: { component: "cocoonset-controller", ...opts.base },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label: string) => ({ level: label }) },
    hooks: {
      // Every line goes through here, the engine's and the runtime's alike.
      logMethod(this: Logger, args: unknown[], method: (...a: unknown[]) => void) {
        method.apply(
          this,
          args.map((a) => boundLogValue(a)),
        );
      },
    },
  };
  return opts.destination ? pino(options, opts.destination) : pino(options);
}

/** A child logger for one reconcile, tagged with a fresh `reconcileId` and the key. */
export function reconcileLogger(
  log: Logger,
  key: ObjectKey,
  reconcileId: string = randomUUID(),
): Logger {
  return log.child({ reconcileId, namespace: key.namespace, name: key.name });
}

/** Each logger's bindings: pino rebuilds them from its serialised form on every call. */
const BINDINGS = new WeakMap<Logger, Record<string, unknown>>();
function bindingsOf(log: Logger): Record<string, unknown> {
  let bound = BINDINGS.get(log);
  if (!bound) BINDINGS.set(log, (bound = log.bindings()));
  return bound;
}

/** A level a structured log hook passes on. */
export type HookLevel = "info" | "warn" | "debug" | "error";

/**
 * Writes one line with `fields`, leaving out the keys `log` already binds (pino would print
 * them twice). A field that disagrees with the bound value goes under `detail` instead.
 */
export function logWithFields(
  log: Logger,
  level: HookLevel,
  msg: string,
  fields: Record<string, unknown> = {},
): void {
  // A disabled level costs nothing (the engine's hooks log a pass's detail at debug).
  if (!log.isLevelEnabled(level)) return;
  const bound = bindingsOf(log);
  const own: Record<string, unknown> = {};
  const detail: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(fields)) {
    if (!(k in bound)) own[k] = v;
    else if (bound[k] !== v) detail[k] = v;
  }
  if (Object.keys(detail).length) own.detail = { ...(own.detail as object | undefined), ...detail };
  log[level](own, msg);
}
