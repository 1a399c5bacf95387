/**
 * The reads behind `cocoonset plan`'s forecast of the idle and expiry policies: the fleet's
 * pods and its members' activity Leases, through a {@link Reader} as a pass reads, handed to
 * the pure forecast (engine/idle/forecast.ts). Nothing is read for a fleet without a policy.
 */
import {
  idleMembers,
  newFleetMembers,
  policyForecast,
  type PolicyForecast,
} from "../idle/index.js";
import type { CocoonSet } from "../spec/index.js";
import type { Reader } from "./reader.js";

/**
 * The forecast of `cs`'s idle and expiry policies at `now`, or undefined when its spec has
 * neither.
 */
export async function readPolicyForecast(
  reads: Reader,
  cs: CocoonSet,
  opts: { exists: boolean; now: Date },
): Promise<PolicyForecast | undefined> {
  if (!cs.spec.idle && !cs.spec.expiry) return undefined;
  // A fleet not created yet has no pods or Leases: its members start with their creation.
  if (!opts.exists) return policyForecast(cs, newFleetMembers(cs, opts.now), opts.now);
  const [pods, leases] = await Promise.all([reads.fleetPods(cs), reads.activityLeases(cs)]);
  return policyForecast(cs, idleMembers(cs, pods, leases), opts.now);
}
