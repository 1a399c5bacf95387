/** JSON logs (pino): one logger per process, one child per reconcile. */
import { randomUUID } from "node:crypto";
import { pino, type DestinationStream, type Logger } from "pino";
import type { ObjectKey } from "./types.js";

/** Log levels accepted by `--log-level`. */
export const LOG_LEVELS = ["trace", "debug", "info", "warn", "error", "fatal", "silent"] as const;

/** One of {@link LOG_LEVELS}. */
export type LogLevel = (typeof LOG_LEVELS)[number];

/** Options of {@link createLogger}. */
export interface LoggerOptions {
  /** @default "info" */
  level?: LogLevel;
  /** Where lines go. @default stdout */
  destination?: DestinationStream;
  /** Fields on every line. */
  base?: Record<string, unknown>;
}

/** Creates the process logger: JSON lines with an ISO time and the level as a string. */
export function createLogger(opts: LoggerOptions = {}): Logger {
  const options = {
    level: opts.level ?? "info",
    base: { component: "cocoonset-controller", ...opts.base },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label: string) => ({ level: label }) },
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
  const bound = log.bindings();
  const own: Record<string, unknown> = {};
  const detail: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(fields)) {
    if (!(k in bound)) own[k] = v;
    else if (bound[k] !== v) detail[k] = v;
  }
  if (Object.keys(detail).length) own.detail = { ...(own.detail as object | undefined), ...detail };
  log[level](own, msg);
}
