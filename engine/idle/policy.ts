// The idle policy (spec.idle): which members to hibernate because nobody used them for
// `after`, which to wake because somebody did, and when the whole fleet is idle enough to be
// suspended. Pure: the caller gathers each member's last activity (its activity Lease's
// renewal, or the controller's own create, wake or rebuild) and carries the decision out
// through the per-member hibernation and the suspend it already has. Behaviour:
// docs/lifecycle-design.md, "Idle policy, expiry and hooks".

/** The main agent (slot 0), a sub-agent, or a toolbox. */
export type IdleMemberKind = "main" | "sub-agent" | "toolbox";

/**
 * Where a member stands for the idle policy:
 * - `running`: its VM runs; the policy may hibernate it;
 * - `idle-hibernated`: the policy hibernated it (since `idleSince`); activity wakes it;
 * - `held`: someone else decided its state (a CocoonHibernation, a rebuild in backoff, a
 *   dead-letter); the policy neither hibernates nor wakes it, and it does not keep the
 *   fleet from being idle;
 * - `absent`: no pod yet (being built); it keeps the fleet awake until it runs.
 */
export type IdleMemberState = "running" | "idle-hibernated" | "held" | "absent";

/** One member as the idle policy sees it. */
export interface IdleMember {
  /** The member's key in status.vms: the slot number, or the toolbox's name. */
  key: string;
  kind: IdleMemberKind;
  state: IdleMemberState;
  /** Its last activity; unknown counts as now (a member is never hibernated on a guess). */
  lastActivity?: Date;
  /** Set while `idle-hibernated`: when the policy hibernated it. */
  idleSince?: Date;
}

/** What the policy decides from. */
export interface IdleInput {
  /** spec.idle.after in milliseconds; undefined when the fleet has no idle policy. */
  afterMs: number | undefined;
  now: Date;
  /** spec.suspend (or an expiry's suspend): the fleet is asleep whatever the policy says. */
  suspended: boolean;
  /** status.idleSuspendedSince: the policy holds the whole fleet suspended since then. */
  fleetIdleSince?: Date;
  members: readonly IdleMember[];
}

/** One member to hibernate or wake, and the activity the decision rests on. */
export interface IdleMemberDecision {
  key: string;
  /** The member's last activity (for a wake: the activity after its hibernation). */
  lastActivity: Date;
}

/** What the fleet as a whole does. */
export type IdleFleetDecision =
  | { kind: "none" }
  | { kind: "suspend"; lastActivity: Date }
  | { kind: "wake"; lastActivity?: Date };

/** The policy's answer for one pass. */
export interface IdleDecision {
  hibernate: IdleMemberDecision[];
  wake: IdleMemberDecision[];
  fleet: IdleFleetDecision;
  /** When the next member goes idle if nobody uses it: the controller looks again then. */
  nextCheckAt?: Date;
}

const NOTHING: IdleDecision = { hibernate: [], wake: [], fleet: { kind: "none" } };

/** The member's last activity, an unknown one counting as `now`. */
function activityOf(m: IdleMember, now: Date): Date {
  return m.lastActivity ?? now;
}

/** Whether the member has gone `afterMs` without activity at `now`. */
function isIdle(m: IdleMember, afterMs: number, now: Date): boolean {
  return now.getTime() - activityOf(m, now).getTime() >= afterMs;
}

/** Every member the policy hibernated, to wake because the policy is gone. */
function wakeAll(input: IdleInput): IdleDecision {
  return {
    hibernate: [],
    wake: input.members
      .filter((m) => m.state === "idle-hibernated")
      .map((m) => ({ key: m.key, lastActivity: activityOf(m, input.now) })),
    fleet: input.fleetIdleSince ? { kind: "wake" } : { kind: "none" },
  };
}

/** The latest activity of any member (the fleet's), or undefined without members. */
function fleetLastActivity(members: readonly IdleMember[], now: Date): Date | undefined {
  let latest: Date | undefined;
  for (const m of members) {
    const a = activityOf(m, now);
    if (!latest || a > latest) latest = a;
  }
  return latest;
}

/**
 * When the policy's answer changes next if nobody is active: the first running sub-agent or
 * toolbox to go idle, or the moment the whole fleet would be idle (the main agent is only
 * ever suspended with the rest).
 */
function nextDeadline(
  input: IdleInput,
  afterMs: number,
  main: IdleMember | undefined,
  considered: readonly IdleMember[],
): Date | undefined {
  const deadline = (m: IdleMember): number => activityOf(m, input.now).getTime() + afterMs;
  const future: number[] = [];
  for (const m of input.members)
    if (m.state === "running" && m.kind !== "main" && !isIdle(m, afterMs, input.now))
      future.push(deadline(m));
  if (main?.state === "running" && considered.every((m) => m.state !== "absent"))
    future.push(Math.max(...considered.map(deadline)));
  const next = Math.min(...future.filter((t) => t > input.now.getTime()));
  return Number.isFinite(next) ? new Date(next) : undefined;
}

/**
 * The idle policy's decision for one pass. Without a policy, whatever it hibernated wakes;
 * a suspended fleet is left alone; an idle-suspended one wakes on any activity after its
 * suspension; otherwise an idle fleet (the main agent and every member that runs or
 * is being built) is suspended whole, or else each idle sub-agent and toolbox is hibernated
 * and each idle-hibernated member used since is woken.
 */
export function planIdle(input: IdleInput): IdleDecision {
  const { afterMs, now, members } = input;
  if (afterMs === undefined) return wakeAll(input);
  if (input.suspended) return NOTHING;
  if (input.fleetIdleSince) {
    const since = input.fleetIdleSince;
    const woken = members.find((m) => m.lastActivity && m.lastActivity > since);
    return woken
      ? { ...NOTHING, fleet: { kind: "wake", lastActivity: woken.lastActivity } }
      : NOTHING;
  }
  const considered = members.filter((m) => m.state !== "held");
  const main = members.find((m) => m.kind === "main");
  const allIdle =
    main !== undefined &&
    main.state === "running" &&
    considered.every((m) => m.state !== "absent" && isIdle(m, afterMs, now));
  if (allIdle) {
    const last = fleetLastActivity(considered, now) ?? now;
    return { ...NOTHING, fleet: { kind: "suspend", lastActivity: last } };
  }
  const hibernate: IdleMemberDecision[] = [];
  const wake: IdleMemberDecision[] = [];
  for (const m of members) {
    if (m.state === "running" && m.kind !== "main" && isIdle(m, afterMs, now)) {
      hibernate.push({ key: m.key, lastActivity: activityOf(m, now) });
    } else if (m.state === "idle-hibernated" && m.lastActivity && m.idleSince) {
      if (m.lastActivity > m.idleSince) wake.push({ key: m.key, lastActivity: m.lastActivity });
    }
  }
  const nextCheckAt = nextDeadline(input, afterMs, main, considered);
  return { hibernate, wake, fleet: { kind: "none" }, nextCheckAt };
}
