// The controller's idle step for one fleet, pure: from the CocoonSet, its pods, the
// namespace's CocoonHibernations and activity Leases and the time, what the idle and expiry
// policies change (the status's record, the CocoonHibernations the policy owns, events,
// metrics, a deletion) and when to look again. The controller carries it out
// (engine/execute/idle.ts) before the pass, which reads the effective suspend from the status.
// Behaviour: docs/lifecycle-design.md, "Idle policy, expiry and hooks".
import { classifyPods } from "../pods/classify.js";
import { isReady, isTerminating } from "../pods/pod-state.js";
import { ANNOTATIONS, KIND, LABELS } from "../spec/constants.js";
import type { CocoonHibernation } from "../spec/generated/hibernation-types.js";
import type { CocoonSet, CocoonSetStatus, Condition, VMRecord } from "../spec/generated/types.js";
import type { Pod } from "../spec/kube-types.js";
import { policyDurations } from "../spec/policy-durations.js";
import { rfc3339Seconds } from "../kube/objects.js";
import { condition, EXPIRING_CONDITION } from "../plan/status.js";
import { leaseActivity, type ActivityLease } from "./activity.js";
import { expiryState, type ExpiryState } from "./expiry.js";
import { planIdle, type IdleDecision, type IdleMember, type IdleMemberKind } from "./policy.js";

/** The events of the idle and expiry policies, one per transition. */
const IDLE_EVENT_REASONS = {
  /** A sub-agent or toolbox went idle: hibernated through its CocoonHibernation. */
  idleHibernated: "IdleHibernated",
  /** Activity on an idle-hibernated member: woken. */
  wokenOnActivity: "WokenOnActivity",
  /** Every member went idle: the fleet is suspended. */
  idleSuspended: "IdleSuspended",
  /** Activity on an idle-suspended fleet (or the policy gone): woken, main agent first. */
  idleWoken: "IdleWoken",
  /** The expiry is near (the Expiring condition turned True). */
  expiring: "Expiring",
  /** The expiry came: the fleet is suspended or deleted. */
  expired: "Expired",
  /** spec.idle or spec.expiry holds a duration the controller cannot use (Warning). */
  invalidPolicy: "InvalidIdlePolicy",
} as const;

/** The suffix of the CocoonHibernation the idle policy owns for a member: `<pod>-idle`. */
const IDLE_HIBERNATION_SUFFIX = "-idle";

/** The name of the CocoonHibernation the idle policy uses for the member whose pod is `pod`. */
export function idleHibernationName(pod: string): string {
  return `${pod}${IDLE_HIBERNATION_SUFFIX}`;
}

/** What the idle step reads. */
export interface IdleStepInput {
  cocoonSet: CocoonSet;
  /** The fleet's pods. */
  pods: readonly Pod[];
  /** The namespace's CocoonHibernations. */
  hibernations: readonly CocoonHibernation[];
  /** The namespace's activity Leases of this fleet. */
  leases: readonly ActivityLease[];
  nowMs: number;
}

/** One CocoonHibernation the idle policy creates, turns or deletes (owned by the CocoonSet). */
export interface IdleHibernationWrite {
  name: string;
  pod: string;
  member: string;
  desire: "Hibernate" | "Wake";
  /**
   * `create` it, `patch` its desire, or `delete` it: a wake that is over (a CR that asks
   * Wake would withdraw any later hibernate request on its pod, a fleet's suspend included).
   */
  op: "create" | "patch" | "delete";
}

/** One event of the step. */
export interface IdleEvent {
  type: "Normal" | "Warning";
  reason: string;
  message: string;
}

/** What the step changes. */
export interface IdleStep {
  /**
   * The status fields to merge (`null` clears one), or undefined when nothing changes:
   * `vms` entries' lastActivity and idleSince, idleSuspendedSince, expiresAt, conditions.
   */
  status?: Record<string, unknown>;
  /** The policy's CocoonHibernations to create or turn, from the status as written. */
  hibernations: IdleHibernationWrite[];
  events: IdleEvent[];
  /** Members hibernated and woken by this step, and how many stay idle-hibernated. */
  counts: { hibernated: number; woken: number; idleHibernated: number };
  /** The expiry came with `action: delete`: delete the CocoonSet. */
  deleteFleet: boolean;
  /**
   * Set when this step carries an expiry out (a delete, or the suspend it starts): the expiry's
   * time, from which the fleet's `BeforeExpire` hook is called first (one id per expiry).
   */
  expiring?: string;
  /** When to look again if nothing else happens (epoch ms). */
  nextCheckAtMs?: number;
}

interface Member {
  key: string;
  kind: IdleMemberKind;
  pod?: Pod;
  podName: string;
  record?: VMRecord;
}

function membersOf(cs: CocoonSet, pods: readonly Pod[]): Member[] {
  const owned = classifyPods(cs, pods);
  const name = cs.metadata.name ?? "";
  const out: Member[] = [];
  const vms = cs.status?.vms ?? {};
  const podNameOf = (p: Pod | undefined, fallback: string) => p?.metadata?.name ?? fallback;
  out.push({
    key: "0",
    kind: "main",
    pod: owned.main,
    podName: podNameOf(owned.main, `${name}-0`),
    record: vms["0"],
  });
  for (let slot = 1; slot <= (cs.spec.agent?.replicas ?? 0); slot++) {
    const pod = owned.subAgents.get(slot);
    const key = String(slot);
    out.push({
      key,
      kind: "sub-agent",
      pod,
      podName: podNameOf(pod, `${name}-${slot}`),
      record: vms[key],
    });
  }
  for (const tb of cs.spec.toolboxes ?? []) {
    const pod = owned.toolboxes.get(tb.name);
    out.push({
      key: tb.name,
      kind: "toolbox",
      pod,
      podName: podNameOf(pod, `${name}-${tb.name}`),
      record: vms[tb.name],
    });
  }
  return out;
}

function ms(text: string | undefined): number | undefined {
  const t = text ? Date.parse(text) : NaN;
  return Number.isFinite(t) ? t : undefined;
}

function latest(...times: (number | undefined)[]): number | undefined {
  const known = times.filter((t): t is number => t !== undefined);
  return known.length > 0 ? Math.max(...known) : undefined;
}

/** Whether `h` is the idle policy's own CocoonHibernation of this fleet. */
function isIdleHibernation(cs: CocoonSet, h: CocoonHibernation): boolean {
  return (h.metadata?.ownerReferences ?? []).some(
    (r) => r.kind === KIND && r.uid === cs.metadata.uid,
  );
}

/** The CocoonHibernations targeting each pod, the policy's own apart from others. */
function hibernationsByPod(cs: CocoonSet, all: readonly CocoonHibernation[]) {
  const own = new Map<string, CocoonHibernation>();
  const others = new Set<string>();
  for (const h of all) {
    const pod = h.spec?.podRef?.name;
    if (!pod || h.metadata?.deletionTimestamp) continue;
    if (isIdleHibernation(cs, h) && h.metadata?.name === idleHibernationName(pod)) own.set(pod, h);
    else others.add(pod);
  }
  return { own, others };
}

/** The Expiring condition for an expiry state, with its transition time kept. */
function expiringCondition(
  previous: readonly Condition[] | undefined,
  st: ExpiryState,
  action: string,
  generation: number | undefined,
  nowMs: number,
): Condition {
  const at = rfc3339Seconds(st.expiresAt.getTime());
  const next = st.due
    ? { status: "True" as const, reason: "Expired", message: `expired at ${at} (${action})` }
    : st.expiring
      ? { status: "True" as const, reason: "ExpiryNear", message: `expires at ${at} (${action})` }
      : { status: "False" as const, reason: "ExpiryFar", message: `expires at ${at} (${action})` };
  return condition(
    previous,
    {
      type: EXPIRING_CONDITION,
      ...next,
      ...(generation === undefined ? {} : { observedGeneration: generation }),
    },
    nowMs,
  );
}

function sameCondition(a: Condition | undefined, b: Condition | undefined): boolean {
  return (
    a?.status === b?.status &&
    a?.reason === b?.reason &&
    a?.message === b?.message &&
    a?.lastTransitionTime === b?.lastTransitionTime
  );
}

/**
 * Whether the idle step has anything to do for `cs`: a policy, or a record of one in its
 * status (a policy removed still wakes what it hibernated). A fleet without either is left
 * exactly as it was, with nothing read for it.
 */
export function idleStepApplies(cs: CocoonSet): boolean {
  const status = cs.status;
  return (
    cs.spec.idle !== undefined ||
    cs.spec.expiry !== undefined ||
    Boolean(status?.idleSuspendedSince) ||
    status?.expiresAt !== undefined ||
    Object.values(status?.vms ?? {}).some((r) => r.idleSince) ||
    (status?.conditions ?? []).some((c) => c.type === EXPIRING_CONDITION)
  );
}

/** What one idle step builds up while it decides. */
interface Draft {
  cs: CocoonSet;
  now: number;
  status: Partial<CocoonSetStatus>;
  out: IdleStep;
  members: Member[];
  /** Each member's last activity (epoch ms), when known. */
  activity: Map<string, number | undefined>;
  /** The `status.vms` entries' fields to merge. */
  vms: Record<string, Record<string, string | null>>;
  /** The status fields to merge besides `vms`. */
  patch: Record<string, unknown>;
  idleSuspendedSince: string | null | undefined;
  nextChecks: number[];
  /** spec.suspend (the author's, which the policies never override). */
  suspended: boolean;
  /** status.idleSuspendedSince, parsed. */
  fleetSince?: number;
}

/** Merges fields into a member's record (only a member the engine recorded). */
function setVm(d: Draft, key: string, fields: Record<string, string | null>): void {
  if (!(d.cs.status?.vms ?? {})[key]) return;
  d.vms[key] = { ...d.vms[key], ...fields };
}

function event(d: Draft, reason: string, message: string): void {
  d.out.events.push({ type: "Normal", reason, message });
}

/**
 * Each member as the idle policy sees it, with its last activity: its Lease, the record's,
 * and (while it runs in a fleet that is awake) its pod's creation, which is the controller's
 * own create or rebuild.
 */
function idleMembersOf(d: Draft, input: IdleStepInput, others: Set<string>): IdleMember[] {
  const leases = leaseActivity(d.cs, input.leases);
  return d.members.map((m) => {
    const idleSince = ms(m.record?.idleSince);
    const live = m.pod && !isTerminating(m.pod) ? m.pod : undefined;
    const created =
      live && idleSince === undefined && d.fleetSince === undefined && !d.suspended
        ? ms(live.metadata?.creationTimestamp)
        : undefined;
    const last = latest(leases.get(m.key)?.getTime(), ms(m.record?.lastActivity), created);
    d.activity.set(m.key, last);
    const held =
      others.has(m.podName) || live?.metadata?.annotations?.[ANNOTATIONS.deadLetter] === "true";
    const state =
      idleSince !== undefined
        ? "idle-hibernated"
        : held
          ? "held"
          : live && isReady(live)
            ? "running"
            : "absent";
    return {
      key: m.key,
      kind: m.kind,
      state,
      lastActivity: last === undefined ? undefined : new Date(last),
      idleSince: idleSince === undefined ? undefined : new Date(idleSince),
    };
  });
}

/** Without an expiry: its record goes. */
function clearExpiry(d: Draft): void {
  if (d.status.expiresAt !== undefined) d.patch.expiresAt = null;
  if (d.status.conditions?.some((c) => c.type === EXPIRING_CONDITION))
    d.patch.conditions = d.status.conditions.filter((c) => c.type !== EXPIRING_CONDITION);
}

/**
 * The expiry: `expiresAt`, the Expiring condition and its event, and when due the fleet's
 * suspend or deletion. Answers whether it is due (then it holds the fleet whatever the idle
 * policy says).
 */
function applyExpiry(d: Draft, afterMs: number | undefined): boolean {
  const expiry = d.cs.spec.expiry;
  if (!expiry || afterMs === undefined) {
    clearExpiry(d);
    return false;
  }
  const action = expiry.action ?? "suspend";
  const fleetLast = latest(...d.activity.values());
  const st = expiryState(
    { afterMs, since: expiry.since ?? "creation", action },
    new Date(ms(d.cs.metadata.creationTimestamp) ?? d.now),
    fleetLast === undefined ? undefined : new Date(fleetLast),
    new Date(d.now),
  );
  const expiresAt = rfc3339Seconds(st.expiresAt.getTime());
  if (d.status.expiresAt !== expiresAt) d.patch.expiresAt = expiresAt;
  const before = d.status.conditions?.find((c) => c.type === EXPIRING_CONDITION);
  const next = expiringCondition(d.status.conditions, st, action, d.cs.metadata.generation, d.now);
  if (!sameCondition(before, next)) {
    d.patch.conditions = [...(d.status.conditions ?? []).filter((c) => c !== before), next];
    if (next.status === "True" && before?.status !== "True" && !st.due)
      event(
        d,
        IDLE_EVENT_REASONS.expiring,
        `the fleet expires at ${expiresAt}; then it is ${action === "delete" ? "deleted" : "suspended"}`,
      );
  }
  if (st.nextCheckAt) d.nextChecks.push(st.nextCheckAt.getTime());
  if (!st.due) return false;
  if (action === "delete") {
    d.out.deleteFleet = !d.cs.metadata.deletionTimestamp;
    if (d.out.deleteFleet) {
      d.out.expiring = expiresAt;
      event(d, IDLE_EVENT_REASONS.expired, `the fleet expired at ${expiresAt}: deleted`);
    }
  } else if (!d.idleSuspendedSince && !d.suspended) {
    d.out.expiring = expiresAt;
    d.idleSuspendedSince = rfc3339Seconds(d.now);
    event(d, IDLE_EVENT_REASONS.expired, `the fleet expired at ${expiresAt}: suspended`);
  }
  return true;
}

/** The member a decision names, for its event. */
function memberText(d: Draft, key: string): string {
  const m = d.members.find((x) => x.key === key);
  return `${m?.kind ?? "member"} ${key} (pod ${m?.podName ?? "?"})`;
}

/** The fleet's suspend or wake the idle policy decided. */
function applyFleet(d: Draft, fleet: IdleDecision["fleet"]): void {
  const nowText = rfc3339Seconds(d.now);
  if (fleet.kind === "suspend" && !d.idleSuspendedSince) {
    d.idleSuspendedSince = nowText;
    for (const m of d.members) {
      const last = d.activity.get(m.key);
      if (last !== undefined) setVm(d, m.key, { lastActivity: rfc3339Seconds(last) });
    }
    event(
      d,
      IDLE_EVENT_REASONS.idleSuspended,
      `every member idle since ${rfc3339Seconds(fleet.lastActivity.getTime())}: the fleet is suspended`,
    );
  } else if (fleet.kind === "wake" && d.idleSuspendedSince) {
    d.idleSuspendedSince = null;
    // The wake is the controller's own activity for every member it wakes.
    for (const m of d.members)
      if (m.record && !m.record.idleSince) setVm(d, m.key, { lastActivity: nowText });
    d.out.counts.woken++;
    const why = fleet.lastActivity
      ? `activity at ${rfc3339Seconds(fleet.lastActivity.getTime())}`
      : "no idle or expiry policy holds it";
    event(d, IDLE_EVENT_REASONS.idleWoken, `${why}: the fleet wakes, main agent first`);
  }
}

/** The idle policy's decision, into the record and events. */
function applyIdle(d: Draft, members: IdleMember[], afterMs: number | undefined): void {
  const decision = planIdle({
    afterMs: d.cs.spec.idle ? afterMs : undefined,
    now: new Date(d.now),
    suspended: d.suspended,
    fleetIdleSince: d.fleetSince === undefined ? undefined : new Date(d.fleetSince),
    members,
  });
  const nowText = rfc3339Seconds(d.now);
  for (const h of decision.hibernate) {
    const last = rfc3339Seconds(h.lastActivity.getTime());
    setVm(d, h.key, { idleSince: nowText, lastActivity: last });
    d.out.counts.hibernated++;
    event(
      d,
      IDLE_EVENT_REASONS.idleHibernated,
      `${memberText(d, h.key)} idle since ${last}: hibernated`,
    );
  }
  for (const w of decision.wake) {
    // The wake is the controller's own activity: the member gets a whole `after` again.
    setVm(d, w.key, { idleSince: null, lastActivity: nowText });
    d.out.counts.woken++;
    event(
      d,
      IDLE_EVENT_REASONS.wokenOnActivity,
      `${memberText(d, w.key)} active at ${rfc3339Seconds(w.lastActivity.getTime())}: woken`,
    );
  }
  applyFleet(d, decision.fleet);
  if (decision.nextCheckAt) d.nextChecks.push(decision.nextCheckAt.getTime());
}

/**
 * The policy's CocoonHibernations follow the record as written: one asks Hibernate while its
 * member is idle-hibernated, Wake once woken, and is deleted once that wake is over (Active
 * or Failed) or the fleet is suspended, so that it never withdraws a later hibernate request.
 */
function hibernationWrites(d: Draft, own: Map<string, CocoonHibernation>): void {
  const fleetAsleep = d.suspended || Boolean(d.idleSuspendedSince);
  for (const m of d.members) {
    const written = d.vms[m.key];
    const idleSince = written && "idleSince" in written ? written.idleSince : m.record?.idleSince;
    const ours = own.get(m.podName);
    if (idleSince) d.out.counts.idleHibernated++;
    const desire = idleSince ? "Hibernate" : "Wake";
    const write = { pod: m.podName, member: m.key, desire } as const;
    if (ours) {
      const name = ours.metadata?.name ?? "";
      const over = ["Active", "Failed"].includes(ours.status?.phase ?? "");
      if (!idleSince && ours.spec?.desire === "Wake" && (over || fleetAsleep))
        d.out.hibernations.push({ name, ...write, op: "delete" });
      else if (ours.spec?.desire !== desire)
        d.out.hibernations.push({ name, ...write, op: "patch" });
    } else if (idleSince && m.pod && !isTerminating(m.pod)) {
      d.out.hibernations.push({ name: idleHibernationName(m.podName), ...write, op: "create" });
    }
  }
}

/**
 * The idle step of one pass. Without spec.idle and spec.expiry, and with nothing of theirs
 * left in the status, it changes nothing (a fleet without a policy behaves as before).
 */
export function planIdleStep(input: IdleStepInput): IdleStep {
  const cs = input.cocoonSet;
  const out: IdleStep = {
    hibernations: [],
    events: [],
    counts: { hibernated: 0, woken: 0, idleHibernated: 0 },
    deleteFleet: false,
  };
  const durations = policyDurations(cs.spec);
  for (const f of durations.failures)
    out.events.push({
      type: "Warning",
      reason: IDLE_EVENT_REASONS.invalidPolicy,
      message: `[spec.${f.property}] ${f.reason} (got ${JSON.stringify(f.value)}); the policy is not applied`,
    });
  if (!idleStepApplies(cs)) return out;
  // A fleet's first status is the pass's (the schema requires its counts): look once it is.
  if (!cs.status) return { ...out, nextCheckAtMs: input.nowMs };
  // A policy whose duration is refused is left as it stands: neither applied nor withdrawn.
  if (durations.failures.length > 0) return out;
  const status = cs.status;
  const d: Draft = {
    cs,
    now: input.nowMs,
    status,
    out,
    members: membersOf(cs, input.pods),
    activity: new Map(),
    vms: {},
    patch: {},
    idleSuspendedSince: status.idleSuspendedSince,
    nextChecks: [],
    suspended: cs.spec.suspend === true,
    fleetSince: ms(status.idleSuspendedSince),
  };
  const { own, others } = hibernationsByPod(cs, input.hibernations);
  const members = idleMembersOf(d, input, others);
  if (!applyExpiry(d, durations.expiryAfterMs)) applyIdle(d, members, durations.idleAfterMs);
  if ((d.idleSuspendedSince ?? null) !== (status.idleSuspendedSince ?? null))
    d.patch.idleSuspendedSince = d.idleSuspendedSince ?? null;
  if (Object.keys(d.vms).length > 0) d.patch.vms = d.vms;
  if (Object.keys(d.patch).length > 0) out.status = d.patch;
  hibernationWrites(d, own);
  const future = d.nextChecks.filter((t) => t > d.now);
  if (future.length > 0) out.nextCheckAtMs = Math.min(...future);
  return out;
}

/** The labels of a CocoonHibernation the idle policy creates for a member of `cs`. */
export function idleHibernationLabels(cs: CocoonSet): Record<string, string> {
  return { [LABELS.name]: cs.metadata.name ?? "" };
}
