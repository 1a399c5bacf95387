/**
 * The engine's execution: one reconcile pass of a CocoonSet against the cluster. It lists
 * the CocoonSet's pods once, asks the pure planner what to do, and carries the plan out.
 * The provider (`pulumi up`) and the controller call exactly this.
 *
 * Guarantees: a step's actions run in order and the step stops at its first failure, so a
 * rebuild's history write always lands before its delete; sub-agent creates run at most
 * `fanOut` at a time and one failure does not stop the others; the first error is reported
 * after every step settled.
 * Behaviour: docs/behaviour.md §3.
 */
import {
  placementNodeToRead,
  migrationStartTarget,
  type SnapshotFacts,
} from "../lifecycle/index.js";
import { holdBackSteps, type Plan } from "../plan/index.js";
import { planPass } from "../planner/index.js";
import { classifyPods } from "../pods/index.js";
import { attributedView, withHibernationMarks } from "../attribution/index.js";
import { vmHeldByHibernation, vmNameClash } from "../snapshots/index.js";
import { type CocoonSet, type Pod } from "../spec/index.js";
import { type KubeClient } from "../kube/index.js";
import { type PassOptions } from "./pass-options.js";
import { apiReads } from "./pass-reads.js";
import { createdRecords } from "./created.js";
import { PassAborted, type PassResult, refusalFailure } from "./pass-result.js";
import {
  type PassContext,
  STALLED_REQUEUE_MS,
  announceCreates,
  executeSteps,
  recordOwnSnapshots,
  rememberCreates,
  writePassStatus,
  writeRecord,
} from "./pass-executor.js";
import {
  readFleetsForVmNames,
  readHibernationHolds,
  readHibernationTargets,
  readOwnSnapshotFacts,
  readTargetNode,
} from "./pass-reads.js";

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

/**
 * Reads what a pass reads (the fleet's pods, the fleets holding its VM names, the
 * CocoonHibernations, the registry's facts, the migration target's node) and plans, changing
 * nothing: the pass executes this plan, and `cocoonset plan` prints it (preview.ts).
 */
export async function planLive(
  client: KubeClient,
  read: CocoonSet,
  opts: PassOptions,
): Promise<LivePlan> {
  const reads = opts.reads ?? apiReads(client);
  const pods = await reads.fleetPods(read);
  // Every decision below reads the fleet's members and VMs from the engine's own record.
  const read0 = attributedView(read, pods, createdRecords(read));
  const fleets = await readFleetsForVmNames(client, read0, pods, reads);
  // A fleet refused for its VM names asks the registry nothing about them.
  const hibernationHolds =
    fleets && opts.registry ? await readHibernationHolds(client, read0) : undefined;
  const refused =
    (fleets && vmNameClash(read0, fleets)) ||
    (hibernationHolds && vmHeldByHibernation(read0, hibernationHolds));
  const registry = refused ? undefined : opts.registry;
  const hibernations = await readHibernationTargets(client, registry, read0, pods);
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
  const targetNode = target === undefined ? undefined : await readTargetNode(client, target);
  const bindTo = placementNodeToRead(cs, pods);
  const placementNode = bindTo === undefined ? undefined : await readTargetNode(client, bindTo);
  const plan = planPass({
    fleets,
    hibernationHolds,
    targetNode,
    placementNode,
    hibernations,
    cocoonSet: cs,
    pods,
    nowMs: (opts.now ?? Date.now)(),
    fanOut: opts.fanOut,
    createLog: opts.createLogs?.get(cs.metadata.uid ?? ""),
    snapshots,
  });
  return { view: cs, plan, pods, snapshots, record };
}

/** Runs one pass: list, plan, execute, and write status when nothing changed. */
export async function runPass(
  client: KubeClient,
  input: CocoonSet,
  opts: PassOptions = {},
): Promise<PassResult> {
  const live = await planLive(client, input, opts);
  const { pods, record } = live;
  const { plan, heldBack } = holdBackSteps(live.plan, opts.outstanding ?? new Set());
  const result: PassResult = {
    plan,
    created: [],
    deleted: [],
    failures: plan.refusals.map(refusalFailure),
    requeueAfterMs: plan.requeueAfterMs,
    statusWritten: false,
    cocoonSet: input,
  };
  if (heldBack.length > 0) result.heldBack = heldBack;
  if (opts.dryRun) return result;
  const ctx: PassContext = { client, plan, result, opts, hooks: opts.hooks ?? {} };
  if (record !== undefined && plan.refusals.length === 0) {
    // Before any step: a slot release or a migration deletes the pod that was the evidence.
    if (!(await recordOwnSnapshots(ctx, record))) return result;
  }
  // What the record lacks before the steps (a hibernation mark that moved): written first, so
  // the pass that acts on the member next reads it.
  if (opts.signal?.aborted !== true) await writeRecord(ctx, live.view);
  // An aborted pass starts nothing, so it announces nothing either.
  if (opts.signal?.aborted !== true && !(await announceCreates(ctx))) return result;
  await executeSteps(ctx);
  if (opts.createLogs) rememberCreates(opts.createLogs, plan, result.created);
  if (opts.signal?.aborted === true) {
    result.failures.push(new PassAborted());
    return result;
  }
  // A view known to be behind the pass's own writes says nothing the status may repeat.
  if (heldBack.length === 0) await writePassStatus(ctx, pods);
  await writeRecord(ctx, live.view);
  // A name found held: the next pass reads that pod and plans the slot as blocked.
  if (result.created.length > 0 || result.deleted.length > 0 || result.namesHeld)
    result.requeueAfterMs = 0;
  else if (heldBack.length > 0) {
    // The watch event that settles the expectation enqueues the fleet; this is the fallback.
    // A plan's "at once" came from the view that is behind: running it again before the
    // watch catches up would only spin.
    const wait = opts.heldBackRequeueMs ?? STALLED_REQUEUE_MS;
    const planned = result.requeueAfterMs;
    result.requeueAfterMs = planned !== undefined && planned > 0 ? Math.min(planned, wait) : wait;
  } else if (plan.mutatesPods) {
    // Every create met a pod of the same name (one still terminating, or another writer's):
    // nothing changed, so running again at once would only spin.
    result.stalled = true;
    result.requeueAfterMs = STALLED_REQUEUE_MS;
  }
  return result;
}
