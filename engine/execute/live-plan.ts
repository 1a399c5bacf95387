/**
 * The reading half of a pass: everything it reads of the cluster and the registry, through
 * one {@link Reader}, then the pure plan. Nothing here writes: the pass executes this plan
 * (pass.ts), and `cocoonset plan` prints it (preview.ts).
 */
import {
  migrationStartTarget,
  namesToRead,
  needsHibernationTargets,
  placementNodeToRead,
  type SnapshotFacts,
} from "../lifecycle/index.js";
import type { Plan } from "../plan/index.js";
import { planPass } from "../planner/index.js";
import { classifyPods } from "../pods/index.js";
import { attributedView, hibernationHolds, withHibernationMarks } from "../attribution/index.js";
import {
  hibernationTargets,
  needsVmNameCheck,
  vmHeldByHibernation,
  vmNameClash,
} from "../snapshots/index.js";
import type { CocoonSet, Pod } from "../spec/index.js";
import type { KubeClient } from "../kube/index.js";
import { namespaceOf } from "../kube/objects.js";
import { createdRecords, forgetRecorded } from "./created.js";
import type { PassOptions } from "./pass-options.js";
import { freshReader, readOwnSnapshotFacts } from "./pass-reads.js";
import type { Reader } from "./reader.js";

/** A plan of the live cluster, the pods and the registry facts it was planned with. */
export interface LivePlan {
  /**
   * The CocoonSet as planned: the one read, with what the engine knows of its members that
   * its status does not say yet (engine/attribution).
   */
  view: CocoonSet;
  plan: Plan;
  pods: Pod[];
  snapshots: SnapshotFacts | undefined;
  /** The fleet's snapshot record to write before the steps, when it grows. */
  record?: string;
}

/** The fleet's pods and the holders of the names the pass may create. */
async function readPods(reader: Reader, cs: CocoonSet): Promise<Pod[]> {
  const listed = await reader.fleetPods(cs);
  const names = namesToRead(cs, listed);
  return names.length === 0 ? listed : [...listed, ...(await reader.nameHolders(cs, names))];
}

/**
 * Reads what a pass reads (the fleet's pods, the fleets and CocoonHibernations holding its VM
 * names, the CocoonHibernations of its namespace, the registry's facts, the migration target's
 * node and the main agent's) and plans, changing nothing. Each read is asked only when the
 * plan needs it: a steady fleet asks for its pods alone.
 */
export async function planLive(
  client: KubeClient,
  read: CocoonSet,
  opts: PassOptions,
): Promise<LivePlan> {
  const reader = opts.reads ?? freshReader(client);
  const pods = await readPods(reader, read);
  forgetRecorded(read);
  // Every decision below reads the fleet's members and VMs from the engine's own record.
  const read0 = attributedView(read, pods, createdRecords(read));
  const fleets = needsVmNameCheck(read0, pods)
    ? await reader.cocoonSetsForVmNames(read0)
    : undefined;
  // A fleet refused for its VM names asks the registry nothing about them.
  const holds =
    fleets && opts.registry
      ? hibernationHolds(await reader.hibernationsForVmNames(read0))
      : undefined;
  const refused =
    (fleets && vmNameClash(read0, fleets)) || (holds && vmHeldByHibernation(read0, holds));
  const registry = refused ? undefined : opts.registry;
  // Only with a registry and when a pod may be built or an unsuspend may withdraw a hibernate
  // request: a steady fleet asks nothing.
  const hibernations =
    registry && needsHibernationTargets(read0, pods)
      ? hibernationTargets(await reader.hibernations(namespaceOf(read0)))
      : undefined;
  const { facts: snapshots, record } = await readOwnSnapshotFacts(
    registry,
    read0,
    pods,
    hibernations,
  );
  // The record's hibernation marks follow what the registry and the node agent say now.
  const cs = withHibernationMarks(
    read0,
    pods,
    snapshots && !("error" in snapshots) ? snapshots.hibernate : undefined,
  );
  const target = registry
    ? migrationStartTarget(cs, classifyPods(cs, pods), hibernations)
    : undefined;
  const targetNode = target === undefined ? undefined : await reader.node(target);
  const bindTo = placementNodeToRead(cs, pods);
  const placementNode = bindTo === undefined ? undefined : await reader.node(bindTo);
  const plan = planPass({
    fleets,
    hibernationHolds: holds,
    targetNode,
    placementNode,
    hibernations,
    cocoonSet: cs,
    pods,
    nowMs: (opts.now ?? Date.now)(),
    fanOut: opts.fanOut,
    createLog: opts.createLogs?.get(cs.metadata.uid ?? ""),
    snapshots,
    finalizer: opts.finalizer,
  });
  return { view: cs, plan, pods, snapshots, record };
}
