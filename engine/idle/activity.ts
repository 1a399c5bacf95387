// Member activity as the idle policy reads it: one `coordination.k8s.io/v1` Lease per member,
// named after the member's pod, renewed by whatever knows the member is in use (the agent, a
// sidecar, the platform's gateway, the CLI). Pure: names, and the activity read
// from the Leases the caller listed.
// Behaviour: docs/lifecycle-design.md, "Idle policy, expiry and hooks".
import { agentPodName, toolboxPodName } from "../pods/pod-builder.js";
import type { CocoonSet } from "../spec/index.js";

/** The Lease a member's activity is renewed on: its pod's name and this suffix. */
const ACTIVITY_LEASE_SUFFIX = "-activity";

/** The name of the activity Lease of the member whose pod is `pod`. */
export function activityLeaseName(pod: string): string {
  return `${pod}${ACTIVITY_LEASE_SUFFIX}`;
}

/** A Lease as the activity read needs it. */
export interface ActivityLease {
  metadata: { name?: string };
  spec?: { renewTime?: string | null; acquireTime?: string | null };
}

/** The members of a fleet by key (slot number or toolbox name), with their pods' names. */
function memberPods(cs: CocoonSet): { key: string; pod: string }[] {
  const name = cs.metadata.name ?? "";
  const out: { key: string; pod: string }[] = [];
  for (let slot = 0; slot <= (cs.spec.agent?.replicas ?? 0); slot++)
    out.push({ key: String(slot), pod: agentPodName(name, slot) });
  for (const tb of cs.spec.toolboxes ?? [])
    out.push({ key: tb.name, pod: toolboxPodName(name, tb.name) });
  return out;
}

/**
 * Each member's last renewal, from the namespace's activity Leases (others ignored): its
 * `renewTime`, else its `acquireTime`. A time that does not parse counts as none.
 */
export function leaseActivity(cs: CocoonSet, leases: readonly ActivityLease[]): Map<string, Date> {
  const byName = new Map<string, ActivityLease>();
  for (const l of leases) if (l.metadata.name) byName.set(l.metadata.name, l);
  const out = new Map<string, Date>();
  for (const { key, pod } of memberPods(cs)) {
    const lease = byName.get(activityLeaseName(pod));
    const text = lease?.spec?.renewTime ?? lease?.spec?.acquireTime;
    const ms = text ? Date.parse(text) : NaN;
    if (Number.isFinite(ms)) out.set(key, new Date(ms));
  }
  return out;
}
