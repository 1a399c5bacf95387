// What a pass that fell short says about itself: one bounded summary line instead of a line
// per failed step, and, when a ResourceQuota refused its creates, a status that names the
// quota. A fleet asking for 1000 pods under a 10-pod quota fails 990 creates a pass; the
// log and the status must stay readable. Pure. Behaviour: docs/behaviour.md §3.5, §3.12.
import type { CocoonSetStatus } from "../spec/generated/types.js";
import { condition, deriveStatus, type StatusInput } from "./status.js";

/** Most characters of one failure's message a summary or a condition quotes. */
const MAX_REASON_CHARS = 1000;

/** `text` cut to `max` characters, saying how long it was. */
function clip(text: string, max: number = MAX_REASON_CHARS): string {
  return text.length <= max ? text : `${text.slice(0, max)}… (${text.length} characters)`;
}

/** One failed step as a summary counts it. */
export interface FailedStep {
  /** What the step was doing (`create`, `rebuild`, …); undefined for a pass-wide failure. */
  decision?: string;
  /** The pod it acted on. */
  pod?: string;
  message: string;
}

/** The quota an apiserver refusal names (`… exceeded quota: NAME, requested: …`). */
export interface QuotaRefusal {
  quota: string;
  /** `requested: pods=1, used: pods=10, limited: pods=10`, as the apiserver said it. */
  detail: string;
}

/** The ResourceQuota a create's error message names, or undefined when it is not a quota refusal. */
export function quotaRefusalOf(message: string): QuotaRefusal | undefined {
  const m = /exceeded quota: ([^,\s]+)(?:, (.*))?$/s.exec(message);
  if (!m) return undefined;
  return { quota: m[1], detail: clip((m[2] ?? "").trim(), 200) };
}

/**
 * One line for a pass whose steps failed: the count, the count by decision, the quota that
 * refused creates, the creates left unsent, and the first failure's message, cut. Its length
 * does not grow with the number of failures.
 */
export function summarizeFailures(
  failures: readonly FailedStep[],
  unsentCreates = 0,
  quota?: QuotaRefusal,
): string {
  const byDecision = new Map<string, number>();
  for (const f of failures) {
    // A failure without a decision is the planner's refusal (or the registry's silence).
    const d = f.decision ?? "plan";
    byDecision.set(d, (byDecision.get(d) ?? 0) + 1);
  }
  const counts = [...byDecision].map(([d, n]) => `${d} ×${n}`).slice(0, 8);
  if (byDecision.size > 8) counts.push(`… ${byDecision.size - 8} more kind(s)`);
  const parts = [`${failures.length} step(s) failed (${counts.join(", ")})`];
  if (quota) parts.push(`ResourceQuota ${clip(quota.quota, 63)} is full`);
  if (unsentCreates > 0)
    parts.push(`${unsentCreates} create(s) not sent (the quota refused the ones before)`);
  const first = failures[0];
  if (first) {
    const where = first.pod ? `${first.pod}${first.decision ? ` (${first.decision})` : ""}: ` : "";
    parts.push(`first: ${where}${clip(first.message)}`);
  }
  return parts.join("; ");
}

/** The condition a ResourceQuota's refusal sets: type `ReplicaFailure`, as a ReplicaSet's. */
export const QUOTA_CONDITION = { type: "ReplicaFailure", reason: "QuotaExceeded" } as const;

/**
 * The status of a pass whose creates a ResourceQuota refused: the status the pods give (phase,
 * counts, Ready and Progressing), plus a `ReplicaFailure` condition (`QuotaExceeded`) naming
 * the quota and how many members are missing. `missing` is the number of creates the pass
 * planned, so the message stays the same from one pass to the next while nothing changes.
 * The next status written from a pass without a refusal leaves the condition out.
 */
export function quotaBlockedStatus(
  input: StatusInput & { refusal: QuotaRefusal | AdmissionRefusal; missing: number },
): CocoonSetStatus {
  // A phase the planner reads back (Failed, a suspend's, a wake's, a migration's) marks work
  // in flight: it stays. Only the phases the pods alone decide are derived.
  const stored = input.cocoonSet.status?.phase;
  const derivedOnly = stored === undefined || ["Pending", "Scaling", "Running"].includes(stored);
  const generation = input.cocoonSet.metadata.generation;
  const r = input.refusal;
  const message =
    "quota" in r
      ? `ResourceQuota ${clip(r.quota, 63)} refuses the pods of ${input.missing} missing member(s)${r.detail ? ` (${r.detail})` : ""}; they are created once the quota has room`
      : admissionMessage(r, input.missing);
  const status = deriveStatus({
    ...input,
    phase: input.phase ?? (derivedOnly ? undefined : stored),
    waitingFor: [...(input.waitingFor ?? []), message],
  });
  const refused = condition(
    input.cocoonSet.status?.conditions,
    {
      type: QUOTA_CONDITION.type,
      status: "True",
      reason: "quota" in r ? QUOTA_CONDITION.reason : ADMISSION_REASON,
      message,
      ...(generation !== undefined ? { observedGeneration: generation } : {}),
    },
    input.nowMs,
  );
  return { ...status, conditions: [...(status.conditions ?? []), refused] };
}

/**
 * A pod create the apiserver's admission refused (403) other than a ResourceQuota: Pod
 * Security (`restricted`), a validating webhook or policy. `message` is the apiserver's.
 */
export interface AdmissionRefusal {
  admission: string;
}

/** The reason of `ReplicaFailure` for an admission refusal, as a ReplicaSet's: `FailedCreate`. */
export const ADMISSION_REASON = "FailedCreate";

/** The condition's (and the Warning's) text of an admission refusal. */
export function admissionMessage(r: AdmissionRefusal, missing: number): string {
  return `the apiserver refuses to create the pods of ${missing} missing member(s): ${clip(r.admission, 400)}; they are created once the apiserver allows them (the namespace's admission: Pod Security, webhooks, policies; or the RBAC of whoever creates them)`;
}
