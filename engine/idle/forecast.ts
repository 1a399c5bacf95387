// The policy's forecast for `cocoonset plan`: which members the idle policy hibernates next and
// when, when the whole fleet is suspended, and when the fleet expires, if nobody is active
// from now on. Pure: it runs planIdle forward from each deadline to the next (so it answers as
// the controller's decider will) and reads expiryState. Behaviour: docs/lifecycle.md.
import { classifyPods, isTerminal } from "../pods/index.js";
import { ANNOTATIONS, type CocoonSet, type Pod } from "../spec/index.js";
import { parseDuration } from "../spec/duration.js";
import { leaseActivity, type ActivityLease } from "./activity.js";
import { expiryState, type ExpiryState } from "./expiry.js";
import { planIdle, type IdleMember } from "./policy.js";

/** One moment of the idle forecast: what the policy does then. */
export interface IdleForecastStep {
  at: Date;
  /** Members hibernated then (sub-agents and toolboxes, by key). */
  hibernate: string[];
  /** Members woken then (activity came after their hibernation). */
  wake: string[];
  /** What the fleet as a whole does then. */
  fleet?: "suspend" | "wake";
}

/** The forecast of spec.idle and spec.expiry for one fleet at one moment. */
export interface PolicyForecast {
  now: Date;
  idle?: {
    after: string;
    /** spec.suspend holds the fleet: the idle policy does nothing. */
    suspended: boolean;
    /** The idle policy holds the fleet suspended since then (status.idleSuspendedSince). */
    idleSuspendedSince?: Date;
    /** Each member's last activity, by key (unknown ones are left out). */
    lastActivity: Record<string, Date>;
    steps: IdleForecastStep[];
  };
  expiry?: ExpiryState & {
    after: string;
    since: "creation" | "idle";
    action: "suspend" | "delete";
  };
}

const later = (a: Date | undefined, b: Date | undefined) => (!a ? b : !b ? a : a > b ? a : b);

function dateOf(text: string | undefined | null): Date | undefined {
  const ms = text ? Date.parse(text) : NaN;
  return Number.isFinite(ms) ? new Date(ms) : undefined;
}

/**
 * Each member as the idle policy sees it, from the live CocoonSet (its status.vms), its pods
 * and the namespace's activity Leases: idle-hibernated when status.vms records `idleSince`;
 * held when its pod is asked to hibernate by someone else (a CocoonHibernation, a suspend);
 * running when its pod runs; absent otherwise. Its last activity is the latest of its Lease's
 * renewal, the `lastActivity` status.vms records and its pod's creation (the controller's
 * own create, wake or rebuild of it).
 */
export function idleMembers(
  cs: CocoonSet,
  pods: readonly Pod[],
  leases: readonly ActivityLease[],
): IdleMember[] {
  const classified = classifyPods(cs, pods);
  const renewed = leaseActivity(cs, leases);
  const vms = cs.status?.vms ?? {};
  const member = (key: string, kind: IdleMember["kind"], pod: Pod | undefined): IdleMember => {
    const vm = vms[key];
    const idleSince = dateOf(vm?.idleSince);
    const live = pod !== undefined && !isTerminal(pod);
    const asked = pod?.metadata?.annotations?.[ANNOTATIONS.hibernate] === "true";
    const state: IdleMember["state"] = idleSince
      ? "idle-hibernated"
      : live && asked
        ? "held"
        : live
          ? "running"
          : "absent";
    const lastActivity = later(
      later(renewed.get(key), dateOf(vm?.lastActivity)),
      dateOf(pod?.metadata?.creationTimestamp),
    );
    return {
      key,
      kind,
      state,
      ...(lastActivity ? { lastActivity } : {}),
      ...(idleSince ? { idleSince } : {}),
    };
  };
  const out: IdleMember[] = [member("0", "main", classified.main)];
  for (let slot = 1; slot <= (cs.spec.agent?.replicas ?? 0); slot++)
    out.push(member(String(slot), "sub-agent", classified.subAgents.get(slot)));
  for (const tb of cs.spec.toolboxes ?? [])
    out.push(member(tb.name, "toolbox", classified.toolboxes.get(tb.name)));
  return out;
}

/**
 * The members of a fleet not created yet, as the policy will see them once it is: each running,
 * its creation (the controller's own activity) at `now`.
 */
export function newFleetMembers(cs: CocoonSet, now: Date): IdleMember[] {
  const running = (key: string, kind: IdleMember["kind"]): IdleMember => ({
    key,
    kind,
    state: "running",
    lastActivity: now,
  });
  const out = [running("0", "main")];
  for (let slot = 1; slot <= (cs.spec.agent?.replicas ?? 0); slot++)
    out.push(running(String(slot), "sub-agent"));
  for (const tb of cs.spec.toolboxes ?? []) out.push(running(tb.name, "toolbox"));
  return out;
}

/**
 * The idle policy run forward from `now` with no activity after it: at each moment it acts,
 * what it hibernates or wakes, until it suspends the fleet or has nothing left to do. A wake
 * counts as the controller's own activity, as it does in the controller.
 */
function idleSteps(
  afterMs: number,
  now: Date,
  suspended: boolean,
  fleetIdleSince: Date | undefined,
  start: readonly IdleMember[],
): IdleForecastStep[] {
  const members = start.map((m) => ({ ...m }));
  const steps: IdleForecastStep[] = [];
  let at = now;
  // Each step hibernates a member or ends: members + 2 steps bound it.
  for (let i = 0; i < members.length + 2; i++) {
    const d = planIdle({ afterMs, now: at, suspended, fleetIdleSince, members });
    const fleet = d.fleet.kind === "none" ? undefined : d.fleet.kind;
    if (d.hibernate.length > 0 || d.wake.length > 0 || fleet) {
      steps.push({
        at,
        hibernate: d.hibernate.map((h) => h.key),
        wake: d.wake.map((w) => w.key),
        ...(fleet ? { fleet } : {}),
      });
    }
    if (fleet) break;
    for (const h of d.hibernate) {
      const m = members.find((x) => x.key === h.key);
      if (m) Object.assign(m, { state: "idle-hibernated", idleSince: at });
    }
    for (const w of d.wake) {
      const m = members.find((x) => x.key === w.key);
      if (m) Object.assign(m, { state: "running", idleSince: undefined, lastActivity: at });
    }
    if (!d.nextCheckAt || d.nextCheckAt <= at) break;
    at = d.nextCheckAt;
  }
  return steps;
}

/**
 * What spec.idle and spec.expiry will do to `cs` if nobody is active from `now`, from its
 * members as {@link idleMembers} reads them. Undefined parts for a policy the spec lacks.
 */
export function policyForecast(
  cs: CocoonSet,
  members: readonly IdleMember[],
  now: Date,
): PolicyForecast {
  const out: PolicyForecast = { now };
  const idle = cs.spec.idle;
  if (idle) {
    const suspended = cs.spec.suspend === true;
    const idleSuspendedSince = dateOf(cs.status?.idleSuspendedSince);
    const lastActivity: Record<string, Date> = {};
    for (const m of members) if (m.lastActivity) lastActivity[m.key] = m.lastActivity;
    out.idle = {
      after: idle.after,
      suspended,
      ...(idleSuspendedSince ? { idleSuspendedSince } : {}),
      lastActivity,
      steps: idleSteps(parseDuration(idle.after), now, suspended, idleSuspendedSince, members),
    };
  }
  const expiry = cs.spec.expiry;
  if (expiry) {
    const since = expiry.since ?? "creation";
    const action = expiry.action ?? "suspend";
    const createdAt = dateOf(cs.metadata.creationTimestamp) ?? now;
    let fleetActivity: Date | undefined;
    for (const m of members) fleetActivity = later(fleetActivity, m.lastActivity);
    const state = expiryState(
      { afterMs: parseDuration(expiry.after), since, action },
      createdAt,
      fleetActivity,
      now,
    );
    out.expiry = { ...state, after: expiry.after, since, action };
  }
  return out;
}

/** `in 1h5m`, `in 30s`, `now`: how far `at` is from `now`. */
function inTime(at: Date, now: Date): string {
  let s = Math.round((at.getTime() - now.getTime()) / 1000);
  if (s <= 0) return "now";
  const d = Math.floor(s / 86_400);
  s -= d * 86_400;
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  const parts = [d && `${d}d`, h && `${h}h`, m && `${m}m`, s && !d && `${s}s`].filter(Boolean);
  return `in ${parts.join("")}`;
}

/** A member's key as the plan's lines name it. */
function memberName(key: string): string {
  return /^\d+$/.test(key) ? `slot ${key}` : `toolbox ${key}`;
}

const names = (keys: readonly string[]) => keys.map(memberName).join(", ");

/** The forecast as the lines `cocoonset plan` prints after the plan (none without a policy). */
export function renderPolicyForecast(f: PolicyForecast): string[] {
  const lines: string[] = [];
  const when = (at: Date) => `${at.toISOString()} (${inTime(at, f.now)})`;
  if (f.idle) {
    const head = `idle policy (after ${f.idle.after})`;
    if (f.idle.suspended) {
      lines.push(`${head}: the fleet is suspended (spec.suspend); the policy waits for the wake`);
    } else {
      if (f.idle.idleSuspendedSince)
        lines.push(
          `${head}: the fleet is suspended for being idle since ${f.idle.idleSuspendedSince.toISOString()}; activity on any member wakes it`,
        );
      else if (f.idle.steps.length === 0)
        lines.push(`${head}: nothing to hibernate (no member runs yet, or none can be idle)`);
      else lines.push(`${head}, if no member is active from now:`);
      for (const s of f.idle.steps) {
        const what = [
          s.wake.length > 0 ? `wake ${names(s.wake)}` : "",
          s.hibernate.length > 0 ? `hibernate ${names(s.hibernate)}` : "",
          s.fleet === "suspend" ? "suspend the fleet (every member idle)" : "",
          s.fleet === "wake" ? "wake the fleet (activity since its suspension)" : "",
        ].filter(Boolean);
        lines.push(`  ${when(s.at)}: ${what.join("; ")}`);
      }
    }
  }
  if (f.expiry) {
    const e = f.expiry;
    const head = `expiry (after ${e.after} since ${e.since}, then ${e.action})`;
    lines.push(
      e.due
        ? `${head}: due since ${e.expiresAt.toISOString()}: the controller ${e.action === "delete" ? "deletes" : "suspends"} the fleet`
        : `${head}: ${when(e.expiresAt)}; Expiring ${e.expiring ? "since" : "from"} ${e.announcedAt.toISOString()}`,
    );
  }
  return lines;
}

/** The forecast as `cocoonset plan -o json|yaml` prints it, times in RFC 3339. */
export function policyForecastToJSON(f: PolicyForecast): Record<string, unknown> {
  const iso = (d: Date) => d.toISOString();
  const out: Record<string, unknown> = {};
  if (f.idle) {
    out.idle = {
      after: f.idle.after,
      suspended: f.idle.suspended,
      ...(f.idle.idleSuspendedSince ? { idleSuspendedSince: iso(f.idle.idleSuspendedSince) } : {}),
      lastActivity: Object.fromEntries(
        Object.entries(f.idle.lastActivity).map(([k, d]) => [k, iso(d)]),
      ),
      next: f.idle.steps.map((s) => ({
        at: iso(s.at),
        hibernate: s.hibernate,
        wake: s.wake,
        ...(s.fleet ? { fleet: s.fleet } : {}),
      })),
    };
  }
  if (f.expiry) {
    const e = f.expiry;
    out.expiry = {
      after: e.after,
      since: e.since,
      action: e.action,
      expiresAt: iso(e.expiresAt),
      announcedAt: iso(e.announcedAt),
      expiring: e.expiring,
      due: e.due,
    };
  }
  return out;
}
