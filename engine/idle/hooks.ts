// Lifecycle hooks (spec.hooks): the event the controller POSTs to the platform's service
// around a member's hibernation and wake and a fleet's expiry, and what a failed call means
// under each failure policy. Pure; the controller makes the call. Behaviour:
// docs/lifecycle-design.md, "Idle policy, expiry and hooks".
import { createHash } from "node:crypto";
import { GROUP, VERSION } from "../spec/constants.js";

/** When the hook is called: before a hibernation or an expiry, after a wake. */
export type HookMoment = "BeforeHibernate" | "AfterWake" | "BeforeExpire";

/** Why the transition happens. */
export type HookCause = "idle" | "suspend" | "hibernation" | "activity" | "wake" | "expiry";

/** What a transition is about: one member, or the fleet (an expiry, a fleet-wide suspend). */
export interface HookSubject {
  namespace: string;
  cocoonSet: string;
  /** The CocoonSet's uid: two fleets of one name at different times are told apart. */
  uid: string;
  /** The member's key (slot number or toolbox name); none for the fleet as a whole. */
  member?: string;
  pod?: string;
  vm?: string;
}

/** The JSON body of one call. */
export interface HookEvent extends HookSubject {
  apiVersion: string;
  kind: "CocoonSetLifecycleEvent";
  /**
   * The same for every call about one transition (a retry, or a call repeated after the
   * controller restarted between the call and the transition), so the receiver can dedupe.
   */
  id: string;
  moment: HookMoment;
  cause: HookCause;
  /** When the transition was decided (RFC 3339). */
  time: string;
}

/**
 * The event for a transition decided at `decidedAt` (the same instant, and so the same `id`,
 * for every call about it: the caller keeps the decision's time in the fleet's status).
 */
export function hookEvent(
  subject: HookSubject,
  moment: HookMoment,
  cause: HookCause,
  decidedAt: Date,
): HookEvent {
  const time = decidedAt.toISOString();
  const id = createHash("sha256")
    .update([subject.uid, subject.member ?? "", moment, cause, time].join("\n"))
    .digest("hex")
    .slice(0, 32);
  return {
    apiVersion: `${GROUP}/${VERSION}`,
    kind: "CocoonSetLifecycleEvent",
    id,
    moment,
    cause,
    time,
    ...subject,
  };
}

/** How one call ended: a 2xx, or not (a status, a timeout, a refused connection). */
export type HookOutcome = { ok: true; status: number } | { ok: false; reason: string };

/**
 * What the controller does after a call: go on; go on and say the hook failed (`Ignore`); or
 * hold the transition back and call again with backoff (`Fail`).
 */
export type HookVerdict = "proceed" | "proceed-despite-failure" | "hold";

/** The verdict for a call's outcome under a failure policy. */
export function hookVerdict(outcome: HookOutcome, failurePolicy: "Ignore" | "Fail"): HookVerdict {
  if (outcome.ok) return "proceed";
  return failurePolicy === "Fail" ? "hold" : "proceed-despite-failure";
}

/**
 * The hook's URL as logs and events may show it: scheme, host, port and path, without the
 * credentials, query or fragment it may carry. A URL that does not parse shows as `(invalid)`.
 */
export function hookTarget(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return "(invalid)";
  }
}
