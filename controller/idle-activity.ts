/**
 * The CocoonSet controller's part of the idle and expiry policies: the watch of the members'
 * activity Leases (selected by the fleet-name label, so a renewal reaches only this watch and
 * enqueues only its fleet), the watch of the CocoonHibernations the policy owns, and the
 * reads of the idle step (engine/execute/idle.ts) from the shared cache.
 * Behaviour: docs/lifecycle-design.md, "Idle policy, expiry and hooks".
 */
import {
  keyOf,
  namespaceOf,
  paths,
  type KubeClient,
  type KubeObject,
} from "../engine/kube/index.js";
import { leaseActivity, type IdleStepInput } from "../engine/idle/index.js";
import { runIdleStep, type EngineHooks, type Reader } from "../engine/execute/index.js";
import { KIND, LABELS, type CocoonSet } from "../engine/spec/index.js";
import type { Pod } from "../engine/spec/index.js";
import type { Kind } from "./cache.js";
import { hibernationChangeMatters, hibernationKind } from "./hibernation-controller.js";
import { trimForCache } from "./informer.js";
import type { Watch } from "./manager-types.js";
import type { ControllerMetrics, ObjectKey } from "./types.js";

/** The index of the activity Leases by their fleet (`namespace/name`). */
export const LEASES_BY_FLEET = "fleet";

/** The fleet an object names by its fleet-name label, as `namespace/name`. */
function fleetOfLabel(o: KubeObject): string | undefined {
  const name = o.metadata.labels?.[LABELS.name];
  const ns = o.metadata.namespace;
  return name && ns ? keyOf(ns, name) : undefined;
}

/** The members' activity Leases: only those carrying a fleet-name label. */
export const activityLeaseKind: Kind = {
  name: "activity-leases",
  path: (ns) => (ns === undefined ? "/apis/coordination.k8s.io/v1/leases" : paths.leases(ns)),
  labelSelector: LABELS.name,
  transform: trimForCache,
  indexes: {
    [LEASES_BY_FLEET]: (o) => {
      const fleet = fleetOfLabel(o);
      return fleet ? [fleet] : [];
    },
  },
};

interface LeaseLike {
  spec?: { renewTime?: string | null; acquireTime?: string | null };
}

/** A Lease update matters when its renewal moved (or its fleet label did). */
function leaseChangeMatters(a: KubeObject, b: KubeObject): boolean {
  const la = a as LeaseLike;
  const lb = b as LeaseLike;
  return (
    la.spec?.renewTime !== lb.spec?.renewTime ||
    la.spec?.acquireTime !== lb.spec?.acquireTime ||
    fleetOfLabel(a) !== fleetOfLabel(b)
  );
}

function keyOfFleet(fleet: string | undefined): ObjectKey[] {
  if (!fleet) return [];
  const i = fleet.indexOf("/");
  return [{ namespace: fleet.slice(0, i), name: fleet.slice(i + 1) }];
}

/** A renewal of a member's activity Lease enqueues its fleet. */
export const activityLeases: Watch = {
  kind: activityLeaseKind,
  map: (lease) => keyOfFleet(fleetOfLabel(lease)),
  updateMatters: leaseChangeMatters,
};

/** A CocoonHibernation the idle policy owns enqueues its fleet when it moves (its phase). */
export const idleHibernations: Watch = {
  kind: hibernationKind,
  map: (h) => {
    const ref = h.metadata.ownerReferences?.find((r) => r.kind === KIND && r.controller);
    return ref && h.metadata.namespace ? [{ namespace: h.metadata.namespace, name: ref.name }] : [];
  },
  updateMatters: hibernationChangeMatters,
};

/** How an idle step ended, for the reconciler. */
export interface IdleOutcome {
  /** The CocoonSet to run the pass on (after the step's status write). */
  cocoonSet: CocoonSet;
  /** When the policies look again (epoch ms), if nothing else happens before. */
  requeueAtMs?: number;
  /** The status write met a newer CocoonSet: plan again from it. */
  overtaken?: boolean;
  /** The CocoonSet was deleted (expired with `action: delete`). */
  deleted?: boolean;
}

/**
 * The idle step of one reconcile: reads (through the pass's Reader), decides and writes
 * (engine/execute/idle.ts), then counts: idle hibernations, wakes on demand, and the
 * members the policy holds hibernated.
 */
export async function runIdle(
  client: KubeClient,
  reads: Reader,
  cs: CocoonSet,
  pods: readonly Pod[],
  nowMs: number,
  hooks: EngineHooks,
  metrics: ControllerMetrics,
): Promise<IdleOutcome> {
  // The namespace's CocoonHibernations and the fleet's activity Leases, as a pass reads
  // (the session's cache, or afresh until it has listed).
  const [leases, hibernations] = await Promise.all([
    reads.activityLeases(cs),
    reads.hibernations(namespaceOf(cs)),
  ]);
  const input: IdleStepInput = { cocoonSet: cs, pods, leases, hibernations, nowMs };
  // What activity this step saw, by member (a test waits on it; an operator reads it).
  const renewals = Object.fromEntries(
    [...leaseActivity(cs, input.leases)].map(([k, d]) => [k, d.toISOString()]),
  );
  hooks.log?.("debug", "idle step", { renewals });
  const result = await runIdleStep(client, input, hooks);
  const ns = namespaceOf(cs);
  const name = cs.metadata.name ?? "";
  if (result.overtaken) return { cocoonSet: cs, overtaken: true };
  const { counts } = result.step;
  if (counts.hibernated > 0) metrics.idleHibernated?.(ns, name, counts.hibernated);
  if (counts.woken > 0) metrics.wokenOnDemand?.(ns, name, counts.woken);
  metrics.idleHibernatedMembers?.(ns, name, result.deleted ? 0 : counts.idleHibernated);
  if (result.deleted) return { cocoonSet: result.cocoonSet, deleted: true };
  return { cocoonSet: result.cocoonSet, requeueAtMs: result.step.nextCheckAtMs };
}
