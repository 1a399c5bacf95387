/**
 * The engine's execution: one reconcile pass of a CocoonSet against the cluster. It reads
 * what the plan needs through the pass's reader (live-plan.ts), asks the pure planner what to
 * do, and carries the plan out.
 * The provider (`pulumi up`) and the controller call exactly this.
 *
 * Guarantees: a step's actions run in order and the step stops at its first failure, so a
 * rebuild's history write always lands before its delete; sub-agent creates run at most
 * `fanOut` at a time and one failure does not stop the others; the first error is reported
 * after every step settled.
 * Behaviour: docs/behaviour.md §3.
 */
import { holdBackSteps } from "../plan/index.js";
import { type CocoonSet } from "../spec/index.js";
import { type KubeClient } from "../kube/index.js";
import { type PassOptions } from "./pass-options.js";
import { planLive } from "./live-plan.js";
import { PassAborted, type PassResult, refusalFailure } from "./pass-result.js";
import { gatePassHooks } from "./hook-gate.js";
import {
  type PassContext,
  STALLED_REQUEUE_MS,
  announceCreates,
  executeSetup,
  executeSteps,
  recordOwnSnapshots,
  rememberCreates,
  writePassStatus,
  writeRecord,
} from "./pass-executor.js";

/** Runs one pass: list, plan, execute, and write status when nothing changed. */
export async function runPass(
  client: KubeClient,
  input: CocoonSet,
  opts: PassOptions = {},
): Promise<PassResult> {
  const live = await planLive(client, input, opts);
  const { pods, record } = live;
  const { plan: planned, heldBack } = holdBackSteps(live.plan, opts.outstanding ?? new Set());
  // spec.hooks: a hibernation's hook is called before it is written (docs/lifecycle.md).
  const { plan, failures: hooksHeld } = opts.dryRun
    ? { plan: planned, failures: [] }
    : await gatePassHooks(client, live.view, planned, pods, opts);
  const result: PassResult = {
    plan,
    created: [],
    deleted: [],
    failures: [...plan.refusals.map(refusalFailure), ...hooksHeld],
    requeueAfterMs: plan.requeueAfterMs,
    statusWritten: false,
    cocoonSet: input,
    pods,
  };
  if (heldBack.length > 0) result.heldBack = heldBack;
  if (opts.dryRun) return result;
  const ctx: PassContext = { client, plan, result, opts, hooks: opts.hooks ?? {} };
  // The finalizer first: no pod is created for a CocoonSet whose deletion would not wait.
  if (!(await executeSetup(ctx))) return result;
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
