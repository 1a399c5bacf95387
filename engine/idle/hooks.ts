// Lifecycle hooks (spec.hooks): the event the controller POSTs to the platform's service
// around a member's hibernation and wake and a fleet's expiry, and what a failed call means
// under each failure policy. Pure; the controller makes the call. Behaviour:
// docs/lifecycle-design.md, "Idle policy, expiry and hooks".
import { createHash } from "node:crypto";
import { memberOf, memberPodVm } from "../attribution/attribution.js";
import { ANNOTATIONS, GROUP, VERSION } from "../spec/constants.js";
import type { CocoonSet } from "../spec/generated/types.js";
import type { Pod } from "../spec/kube-types.js";

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

/** The fleet's hook as the controller calls it: spec.hooks with its defaults filled in. */
export interface HookPolicy {
  url: string;
  caBundle?: string;
  timeoutMs: number;
  failurePolicy: "Ignore" | "Fail";
}

/** How long a call may take when spec.hooks.timeoutSeconds is unset. */
const DEFAULT_HOOK_TIMEOUT_SECONDS = 10;

/** The fleet's hook, or undefined when it has none (then nothing is called, nothing written). */
export function hookPolicy(cs: CocoonSet): HookPolicy | undefined {
  const h = cs.spec.hooks;
  if (!h?.url) return undefined;
  return {
    url: h.url,
    ...(h.caBundle ? { caBundle: h.caBundle } : {}),
    timeoutMs: (h.timeoutSeconds ?? DEFAULT_HOOK_TIMEOUT_SECONDS) * 1000,
    failurePolicy: h.failurePolicy === "Ignore" ? "Ignore" : "Fail",
  };
}

/** A hook still to be answered for one pod: what, why, and when it was decided. */
export interface HookRecord {
  moment: HookMoment;
  cause: HookCause;
  decidedAt: Date;
  /**
   * The generation of the object whose spec decided it (the CocoonSet, or the
   * CocoonHibernation), when one did: a spec changed since (a suspend withdrawn and asked
   * again) is a new decision, with an id of its own.
   */
  generation?: number;
}

const MOMENTS: readonly HookMoment[] = ["BeforeHibernate", "AfterWake", "BeforeExpire"];
const CAUSES: readonly HookCause[] = [
  "idle",
  "suspend",
  "hibernation",
  "activity",
  "wake",
  "expiry",
];

/** The pod annotation's text of a record: `<moment> <cause> <RFC 3339 time>[ g<generation>]`. */
export function formatHookRecord(r: HookRecord): string {
  const g = r.generation === undefined ? "" : ` g${r.generation}`;
  return `${r.moment} ${r.cause} ${r.decidedAt.toISOString()}${g}`;
}

/** The record an annotation carries; undefined for none or for text that is not one. */
export function parseHookRecord(text: string | undefined): HookRecord | undefined {
  const [moment, cause, time, g, ...rest] = (text ?? "").split(" ");
  if (rest.length > 0 || !MOMENTS.includes(moment as HookMoment)) return undefined;
  if (!CAUSES.includes(cause as HookCause)) return undefined;
  const decidedAt = new Date(time ?? "");
  if (Number.isNaN(decidedAt.getTime()) || decidedAt.toISOString() !== time) return undefined;
  if (g !== undefined && !/^g(0|[1-9][0-9]{0,15})$/.test(g)) return undefined;
  return {
    moment: moment as HookMoment,
    cause: cause as HookCause,
    decidedAt,
    ...(g !== undefined ? { generation: Number(g.slice(1)) } : {}),
  };
}

/** The record the pod carries (annotation `hook-pending`), if any. */
export function podHookRecord(pod: Pod): HookRecord | undefined {
  return parseHookRecord(pod.metadata?.annotations?.[ANNOTATIONS.hookPending]);
}

/**
 * The record for a transition about to be called: the pod's own when it is about the same
 * moment and cause, decided at the same generation (an earlier call of it held, failed, or
 * cut short by a stop: the same decision, so the same event id), else a new one decided
 * `now`, which the caller writes to the pod before it calls (`write`).
 */
export function hookRecordFor(
  pod: Pod,
  moment: HookMoment,
  cause: HookCause,
  now: Date,
  generation?: number,
): { record: HookRecord; write: boolean } {
  const had = podHookRecord(pod);
  if (had && had.moment === moment && had.cause === cause && had.generation === generation)
    return { record: had, write: false };
  const record: HookRecord = { moment, cause, decidedAt: now };
  if (generation !== undefined) record.generation = generation;
  return { record, write: true };
}

/** The subject of a member's transition: the fleet, the member's key, its pod and VM. */
export function memberSubject(cs: CocoonSet, pod: Pod): HookSubject {
  const member = memberOf(cs, pod);
  const vm = memberPodVm(cs, pod);
  return {
    namespace: cs.metadata.namespace ?? "",
    cocoonSet: cs.metadata.name ?? "",
    uid: cs.metadata.uid ?? "",
    ...(member !== undefined ? { member } : {}),
    pod: pod.metadata?.name ?? "",
    ...(vm ? { vm } : {}),
  };
}

/** The subject of a transition of the fleet as a whole (an expiry). */
export function fleetSubject(cs: CocoonSet): HookSubject {
  return {
    namespace: cs.metadata.namespace ?? "",
    cocoonSet: cs.metadata.name ?? "",
    uid: cs.metadata.uid ?? "",
  };
}

/**
 * Why the fleet's members hibernate: its spec asks (`suspend`), or the controller suspended
 * it for idleness (the effective suspend without spec.suspend: `idle`).
 */
export function suspendCause(cs: CocoonSet): HookCause {
  return cs.spec.suspend === true ? "suspend" : "idle";
}

/**
 * Why a CocoonHibernation hibernates its pod: the idle policy's own (a CocoonHibernation the
 * fleet controls, `idle`), or someone's (`hibernation`).
 */
export function hibernationCause(
  fleetUid: string,
  owners: readonly { uid?: string; controller?: boolean }[] | undefined,
): HookCause {
  return (owners ?? []).some((o) => o.controller === true && o.uid === fleetUid)
    ? "idle"
    : "hibernation";
}

/**
 * The line an event and a log say about a failed call: the hook's target (no credentials,
 * no query), the moment and cause, what it was about, and why it failed; never the body.
 */
export function hookFailureMessage(
  url: string,
  record: Pick<HookRecord, "moment" | "cause">,
  about: string,
  reason: string,
  verdict: Exclude<HookVerdict, "proceed">,
): string {
  const then =
    verdict === "hold"
      ? "the transition waits and the call is retried with backoff (failurePolicy Fail)"
      : "the transition went on (failurePolicy Ignore)";
  return `lifecycle hook ${hookTarget(url)} (${record.moment}, ${record.cause}) for ${about} failed: ${reason}; ${then}`;
}
