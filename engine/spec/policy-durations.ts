/**
 * The idle and expiry policies' durations (spec.idle.after, spec.expiry.after) as numbers,
 * with the rule the schema's pattern cannot say: a floor under which the policy would fight
 * the writers of activity (they renew at most every `after`/4, a minute at least).
 * Behaviour: docs/lifecycle-design.md, "Idle policy, expiry and hooks".
 */
import { errorMessage } from "../kube/branded-error.js";
import { parseDuration } from "./duration.js";
import type { CocoonSetSpec } from "./generated/types.js";

/** The shortest spec.idle.after: a minute. */
export const MIN_IDLE_AFTER_MS = 60_000;
/** The shortest spec.expiry.after: a minute. */
export const MIN_EXPIRY_AFTER_MS = 60_000;

/** One field that does not hold a usable duration, named from the spec (`idle.after`). */
export interface PolicyDurationFailure {
  property: string;
  reason: string;
  value: string;
}

/** The policies' durations in milliseconds (absent without the policy or when refused). */
export interface PolicyDurations {
  idleAfterMs?: number;
  expiryAfterMs?: number;
  failures: PolicyDurationFailure[];
}

function check(
  property: string,
  text: unknown,
  minMs: number,
  failures: PolicyDurationFailure[],
): number | undefined {
  if (typeof text !== "string") return undefined;
  let ms: number;
  try {
    ms = parseDuration(text);
  } catch (e) {
    failures.push({ property, reason: errorMessage(e), value: text });
    return undefined;
  }
  if (ms < minMs) {
    failures.push({ property, reason: `must be at least ${minMs / 1000}s`, value: text });
    return undefined;
  }
  return ms;
}

/** The durations of spec.idle and spec.expiry, each parsed and checked against its floor. */
export function policyDurations(spec: Partial<CocoonSetSpec> | undefined): PolicyDurations {
  const failures: PolicyDurationFailure[] = [];
  const idleAfterMs = check("idle.after", spec?.idle?.after, MIN_IDLE_AFTER_MS, failures);
  const expiryAfterMs = check("expiry.after", spec?.expiry?.after, MIN_EXPIRY_AFTER_MS, failures);
  return { idleAfterMs, expiryAfterMs, failures };
}
