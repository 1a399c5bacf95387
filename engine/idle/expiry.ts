// The expiry policy (spec.expiry): when a fleet expires, when it is announced, and whether
// it is due. Pure; the controller suspends or deletes a due fleet through the paths it
// already has. Behaviour: docs/lifecycle-design.md, "Idle policy, expiry and hooks".

/** The longest lead of the Expiring condition: an hour. */
const EXPIRING_LEAD_MAX_MS = 3_600_000;

/** spec.expiry with its duration parsed. */
export interface ExpiryPolicy {
  afterMs: number;
  since: "creation" | "idle";
  action: "suspend" | "delete";
}

/** Where a fleet stands with its expiry at one moment. */
export interface ExpiryState {
  /** When the policy acts. */
  expiresAt: Date;
  /** When the Expiring condition turns True: an hour ahead, or a tenth of `after` if later. */
  announcedAt: Date;
  /** `expiresAt` has come: carry out `action`. */
  due: boolean;
  /** Announced and not yet due. */
  expiring: boolean;
  /** When the state changes next if nothing else does (none once due). */
  nextCheckAt?: Date;
}

/** How long before `expiresAt` the expiry is announced. */
export function expiringLeadMs(afterMs: number): number {
  return Math.min(EXPIRING_LEAD_MAX_MS, Math.floor(afterMs / 10));
}

/**
 * The fleet's expiry at `now`: counted from its creation or, with `since: idle`, from the last
 * activity of any member (so activity pushes it back).
 */
export function expiryState(
  policy: ExpiryPolicy,
  createdAt: Date,
  lastActivity: Date | undefined,
  now: Date,
): ExpiryState {
  const base =
    policy.since === "idle" && lastActivity && lastActivity > createdAt ? lastActivity : createdAt;
  const expiresAt = new Date(base.getTime() + policy.afterMs);
  const announcedAt = new Date(expiresAt.getTime() - expiringLeadMs(policy.afterMs));
  const due = now >= expiresAt;
  const expiring = !due && now >= announcedAt;
  const nextCheckAt = due ? undefined : expiring ? expiresAt : announcedAt;
  return { expiresAt, announcedAt, due, expiring, nextCheckAt };
}
