// The progress deadline of a fleet, as a Deployment's `progressDeadlineSeconds`: a fleet
// that is not at rest (Running, or Suspended) and whose status has not moved for the
// deadline reports it, naming what the pass waits for, instead of sitting silently in a
// phase. Pure: "moved" is read from the stored status (its `lastProgressTime` and what it
// said) against the status this pass derives, and "what it waits for" from the plan's steps
// and refusals. Behaviour: docs/behaviour.md §3.12a.
import { DEFAULT_PROGRESS_DEADLINE_SECONDS, EVENT_REASONS } from "../spec/constants.js";
import type { CocoonSet, CocoonSetStatus, Condition } from "../spec/generated/types.js";
import { rfc3339Seconds } from "../kube/objects.js";

/** The reason of `Progressing` `False`, and of the Warning, once the deadline is exceeded. */
export const PROGRESS_DEADLINE_EXCEEDED = EVENT_REASONS.progressDeadlineExceeded;

/** How many causes a deadline message names (the rest are counted). */
const MAX_CAUSES_NAMED = 5;

/** The fleet's deadline in seconds: its spec's, else the default (600). */
export function progressDeadlineSeconds(cs: CocoonSet): number {
  const v = cs.spec?.progressDeadlineSeconds;
  return typeof v === "number" && Number.isInteger(v) && v >= 1
    ? v
    : DEFAULT_PROGRESS_DEADLINE_SECONDS;
}

/** The phases a fleet rests in: nothing is under way, so no deadline runs. */
export function atRest(phase: string | undefined): boolean {
  return phase === "Running" || phase === "Suspended";
}

/**
 * What of a status counts as movement: the generation it observed, the phase, the counts, and
 * each member's pod, phase and VM id. Conditions and their messages are not: a message that
 * changes while nothing else does is not progress.
 */
export function progressSignature(status: CocoonSetStatus | undefined): string {
  if (!status) return "";
  return JSON.stringify([
    status.observedGeneration ?? null,
    status.phase ?? null,
    status.readyAgents ?? 0,
    status.desiredAgents ?? 0,
    status.readyToolboxes ?? 0,
    status.desiredToolboxes ?? 0,
    (status.agents ?? []).map((a) => [a.slot, a.podName ?? "", a.phase ?? "", a.vmID ?? ""]),
    (status.toolboxes ?? []).map((t) => [t.name, t.podName ?? "", t.phase ?? "", t.vmID ?? ""]),
  ]);
}

/** Inputs of {@link judgeProgress}. */
export interface ProgressInput {
  /** The stored status: its `lastProgressTime` and what it said. */
  previous: CocoonSetStatus | undefined;
  /** The status this pass derives (its Progressing condition as usual). */
  next: CocoonSetStatus;
  /** The deadline, in seconds. */
  deadlineSeconds: number;
  /** What the pass waits for, one line each (the plan's steps and refusals). */
  waitingFor: readonly string[];
  nowMs: number;
}

/** The verdict of one pass. */
export interface ProgressVerdict {
  /** The `lastProgressTime` to store; undefined at rest (no deadline runs, none is kept). */
  lastProgressTime?: string;
  /** Set once the deadline is exceeded: the message of the condition and the Warning. */
  exceeded?: string;
  /**
   * While the fleet is under way and the deadline not yet reached: how long until it is,
   * so a pass looks again then even if nothing else wakes it. Undefined at rest or exceeded.
   */
  recheckMs?: number;
}

/** The message of an exceeded deadline: when progress stopped, the phase, and the causes. */
function deadlineMessage(
  since: string,
  deadlineSeconds: number,
  phase: string | undefined,
  waitingFor: readonly string[],
): string {
  const causes = [...new Set(waitingFor)];
  const named = causes.slice(0, MAX_CAUSES_NAMED);
  const more = causes.length > named.length ? `; and ${causes.length - named.length} more` : "";
  const what =
    named.length > 0
      ? `waiting for: ${named.join("; ")}${more}`
      : "the controller finds nothing to wait for; see the events of the fleet's pods";
  return `no progress since ${since} (progressDeadlineSeconds ${deadlineSeconds}), phase ${phase ?? "none"}: ${what}`;
}

/**
 * Whether the fleet moved, since when it has not, and whether the deadline is exceeded. A
 * status that says something else than the stored one about the signature's fields is
 * progress (now); a stored status without `lastProgressTime` (at rest, or written before this
 * field) starts the clock now. At rest no deadline runs and no time is kept.
 */
export function judgeProgress(input: ProgressInput): ProgressVerdict {
  const { previous, next, nowMs } = input;
  const storedMs = Date.parse(previous?.lastProgressTime ?? "");
  const moved = Number.isNaN(storedMs) || progressSignature(previous) !== progressSignature(next);
  // A stored time in the future (a clock step back) counts as now.
  const sinceMs = moved ? nowMs : Math.min(storedMs, nowMs);
  if (atRest(next.phase)) return {};
  const lastProgressTime = moved ? rfc3339Seconds(nowMs) : (previous?.lastProgressTime as string);
  const deadlineMs = input.deadlineSeconds * 1000;
  const elapsed = nowMs - sinceMs;
  if (elapsed < deadlineMs) return { lastProgressTime, recheckMs: deadlineMs - elapsed };
  return {
    lastProgressTime,
    exceeded: deadlineMessage(
      lastProgressTime,
      input.deadlineSeconds,
      next.phase,
      input.waitingFor,
    ),
  };
}

/**
 * The `Progressing` condition of an exceeded deadline: `False`, reason
 * `ProgressDeadlineExceeded`. Its transition time is kept while it stays `False`.
 */
export function deadlineCondition(
  previous: readonly Condition[] | undefined,
  message: string,
  observedGeneration: number | undefined,
  nowMs: number,
): Condition {
  const before = previous?.find((c) => c.type === "Progressing");
  return {
    type: "Progressing",
    status: "False",
    reason: PROGRESS_DEADLINE_EXCEEDED,
    message,
    ...(observedGeneration !== undefined ? { observedGeneration } : {}),
    lastTransitionTime:
      before?.status === "False" && before.lastTransitionTime
        ? before.lastTransitionTime
        : rfc3339Seconds(nowMs),
  };
}

/**
 * The Warning to post with a status about to be written: when it reports the deadline
 * exceeded and the stored status did not say so already (with the same message).
 */
export function deadlineWarning(
  stored: CocoonSetStatus | undefined,
  next: CocoonSetStatus | undefined,
): string | undefined {
  const said = (s: CocoonSetStatus | undefined) =>
    s?.conditions?.find((c) => c.type === "Progressing" && c.reason === PROGRESS_DEADLINE_EXCEEDED)
      ?.message;
  const now = said(next);
  return now !== undefined && now !== said(stored) ? now : undefined;
}

/**
 * How long until the stored status's deadline runs out, for a pass that writes no status of
 * its own: a fleet under way is looked at again then even if no event comes. Undefined at
 * rest, without a recorded time, or once the deadline has passed.
 */
export function storedDeadlineRecheckMs(cs: CocoonSet, nowMs: number): number | undefined {
  const stored = cs.status;
  if (!stored || atRest(stored.phase)) return undefined;
  const since = Date.parse(stored.lastProgressTime ?? "");
  if (Number.isNaN(since)) return undefined;
  const remaining = progressDeadlineSeconds(cs) * 1000 - (nowMs - Math.min(since, nowMs));
  return remaining > 0 ? remaining : undefined;
}
