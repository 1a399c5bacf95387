/**
 * The reads behind `cocoonset plan`'s forecast of the idle and expiry policies: the fleet's
 * pods and its members' activity Leases (two LISTs by the fleet's name label), handed to the
 * pure forecast (engine/idle/forecast.ts). Nothing is read for a fleet without a policy.
 */
import { paths, type KubeClient } from "../kube/index.js";
import {
  idleMembers,
  newFleetMembers,
  policyForecast,
  type ActivityLease,
  type PolicyForecast,
} from "../idle/index.js";
import type { CocoonSet } from "../spec/index.js";
import { listFleetPods, podSelector } from "./pass-reads.js";

/**
 * The forecast of `cs`'s idle and expiry policies at `now`, or undefined when its spec has
 * neither.
 */
export async function readPolicyForecast(
  client: KubeClient,
  cs: CocoonSet,
  opts: { exists: boolean; now: Date },
): Promise<PolicyForecast | undefined> {
  if (!cs.spec.idle && !cs.spec.expiry) return undefined;
  // A fleet not created yet has no pods or Leases: its members start with their creation.
  if (!opts.exists) return policyForecast(cs, newFleetMembers(cs, opts.now), opts.now);
  const ns = cs.metadata.namespace ?? "default";
  const [pods, leases] = await Promise.all([
    listFleetPods(client, cs),
    client
      .list<ActivityLease>(paths.leases(ns), { labelSelector: podSelector(cs.metadata.name ?? "") })
      .then((l) => l.items),
  ]);
  return policyForecast(cs, idleMembers(cs, pods, leases), opts.now);
}
