/**
 * The executor of a pass: carries a plan's setup and steps out against the cluster, in order,
 * each action through the one executor of plan actions (actions.ts), and writes the fleet's
 * record and status.
 *
 * Guarantees: a step's actions run in order and the step stops at its first failure, so a
 * rebuild's history write always lands before its delete; sub-agent creates run at most
 * `fanOut` at a time and one failure does not stop the others; the first error is reported
 * after every step settled.
 */
import pLimit from "p-limit";
import { stableJson } from "../spec/stable-json.js";
import { SNAPSHOT_OWNER_ANNOTATION } from "../lifecycle/index.js";
import {
  ADMISSION_REASON,
  deadlineWarning,
  quotaBlockedStatus,
  statusEqual,
  type Plan,
  type PlanAction,
  type PlanStep,
} from "../plan/index.js";
import { vanishingSlots, type SlotCreateRecord } from "../pods/index.js";
import { randomBytes } from "node:crypto";
import {
  CREATE_TOKEN_ANNOTATION,
  attributedView,
  memberOf,
  memberRole,
  memberVm,
  recordUpdate,
  tokenDigest,
} from "../attribution/index.js";
import {
  ANNOTATIONS,
  EVENT_REASONS,
  type CocoonSet,
  type CocoonSetStatus,
  type Pod,
} from "../spec/index.js";
import type { VMRecord } from "../spec/generated/types.js";
import { isConflict, isNotFound, PatchType, paths, type KubeClient } from "../kube/index.js";
import { type PassResult, StaleCocoonSet, StepFailure } from "./pass-result.js";
import { type CreateLogs, type EngineHooks, type PassOptions } from "./pass-options.js";
import {
  createdRecords,
  holdTokensAhead,
  takeTokenAhead,
  tokenAhead,
  type TokenAhead,
} from "./created.js";
import {
  type ActionContext,
  overtaken,
  performAction,
  statusClears,
  type StepState,
} from "./actions.js";

/** Requeue delay of a pass whose planned changes all met existing pods. */
export const STALLED_REQUEUE_MS = 1000;

/** What the executor of one pass works with; `result.cocoonSet` is the latest CocoonSet. */
export interface PassContext {
  client: KubeClient;
  plan: Plan;
  result: PassResult;
  opts: PassOptions;
  hooks: EngineHooks;
  /**
   * The CocoonSet as the pass's own record writes left it (`status.vms`). Kept apart from
   * `result.cocoonSet`, whose resourceVersion stays the one planned from: the preconditions
   * of the history and status writes must still catch a view another writer overtook.
   */
  recorded?: CocoonSet;
}

/**
 * Writes into `status.vms` what the engine knows of the fleet's members and its status does not
 * say yet (engine/attribution): the pods this pass created, and those of earlier passes whose
 * record did not land. A merge of the map's keys: no precondition is needed, and no other
 * writer's key is touched. A failure is noted; the process still knows them (CREATED).
 */
export async function writeRecord(ctx: PassContext, view: CocoonSet): Promise<void> {
  const { client, plan, result, hooks } = ctx;
  const known = attributedView(view, [], createdRecords(view));
  const stored = ctx.recorded ?? result.cocoonSet;
  const update = withoutTokened(stored, recordUpdate(stored, known));
  if (!update) return;
  try {
    ctx.recorded = await client.patch<CocoonSet>(
      paths.cocoonSetStatus(plan.cocoonSet.namespace, plan.cocoonSet.name),
      // A status is written whole the first time: the schema requires its counts.
      {
        status: {
          ...((ctx.recorded ?? result.cocoonSet).status ? {} : firstCounts(view)),
          vms: update,
        },
      },
      PatchType.merge,
    );
    hooks.log?.("debug", "recorded the fleet's members", {
      members: Object.keys(update).join(","),
    });
  } catch (e) {
    if (isNotFound(e)) return;
    result.failures.push(new StepFailure(plan.cocoonSet.name, "member record", e));
  }
}

/**
 * Before the pass creates pods: each create gets a random token on its pod, and the token's
 * digest goes into `status.vms` first (engine/attribution). Should the process stop after a
 * create and before the record of the pod's uid, the next pass still knows that pod as the
 * member's; no one else can make a pod carry a token only its digest was shown of. False (a
 * failure noted, nothing created) when the record cannot be written.
 */
export async function announceCreates(ctx: PassContext): Promise<boolean> {
  const { client, plan, result } = ctx;
  const cs = result.cocoonSet;
  const name = plan.cocoonSet.name;
  const entries: Record<string, VMRecord> = {};
  for (const step of plan.steps)
    for (const action of step.actions) {
      if (action.kind !== "create-pod") continue;
      const member = step.podName.slice(name.length + 1);
      if (!step.podName.startsWith(`${name}-`) || memberRole(member) === undefined) continue;
      // Announced ahead by an earlier status write, and the record still shows it: no write.
      const ahead = takeTokenAhead(cs, member);
      const stored = (ctx.recorded ?? cs).status?.vms?.[member]?.createToken;
      if (ahead !== undefined && stored === ahead.digest) {
        action.pod.metadata.annotations = {
          ...action.pod.metadata.annotations,
          [CREATE_TOKEN_ANNOTATION]: ahead.token,
        };
        continue;
      }
      const token = randomBytes(16).toString("hex");
      action.pod.metadata.annotations = {
        ...action.pod.metadata.annotations,
        [CREATE_TOKEN_ANNOTATION]: token,
      };
      entries[member] = { vm: memberVm(cs, member), createToken: tokenDigest(token) };
    }
  if (Object.keys(entries).length === 0) return true;
  try {
    ctx.recorded = await client.patch<CocoonSet>(
      paths.cocoonSetStatus(plan.cocoonSet.namespace, name),
      { status: { ...(cs.status ? {} : firstCounts(cs)), vms: entries } },
      PatchType.merge,
    );
    return true;
  } catch (e) {
    result.failures.push(new StepFailure(name, "create announcement", e));
    return false;
  }
}

/**
 * `update` without the entries that only add the uid of a pod the stored record already names
 * by its create token: the pod is the member's by that token (engine/attribution) until the
 * next status write, which carries the whole record, writes its uid. A rebuild's pass then
 * writes the CocoonSet twice (the token, the history) instead of three times.
 */
function withoutTokened(
  stored: CocoonSet,
  update: Record<string, VMRecord> | undefined,
): Record<string, VMRecord> | undefined {
  if (!update) return undefined;
  const out: Record<string, VMRecord> = {};
  for (const [member, entry] of Object.entries(update)) {
    const have = stored.status?.vms?.[member];
    const tokened =
      have?.createToken !== undefined &&
      have.createToken === entry.createToken &&
      have.vm === entry.vm &&
      (have.hibernated ?? false) === (entry.hibernated ?? false);
    if (!tokened) out[member] = entry;
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

/** The counts a CocoonSet's first status must carry, as nothing is ready yet. */
function firstCounts(cs: CocoonSet): Omit<CocoonSetStatus, "vms"> {
  return {
    readyAgents: 0,
    desiredAgents: 1 + Math.max(0, cs.spec.agent?.replicas ?? 0),
    readyToolboxes: 0,
    desiredToolboxes: (cs.spec.toolboxes ?? []).length,
  };
}

/** Writes the fleet's record of its own snapshots; false (a failure noted) when it cannot. */
export async function recordOwnSnapshots(ctx: PassContext, record: string): Promise<boolean> {
  const { client, plan, result, hooks } = ctx;
  try {
    result.cocoonSet = await client.patch<CocoonSet>(
      paths.cocoonSet(plan.cocoonSet.namespace, plan.cocoonSet.name),
      { metadata: { annotations: { [SNAPSHOT_OWNER_ANNOTATION]: record } } },
      PatchType.merge,
    );
    hooks.log?.("info", "recorded the fleet's own hibernation snapshots", { record });
    return true;
  } catch (e) {
    result.failures.push(new StepFailure(plan.cocoonSet.name, "snapshot record", e));
    return false;
  }
}

/** The executor's context of a pass: the CocoonSet (the result's copy), hooks bound to it. */
function actionContext(ctx: PassContext): ActionContext {
  const { client, result, opts, hooks } = ctx;
  return {
    client,
    registry: opts.registry,
    outcome: result,
    // The result's copy is the subject: the actions' writes keep it current.
    subject: {
      kind: "CocoonSet",
      get object() {
        return result.cocoonSet;
      },
      set object(cs: CocoonSet) {
        result.cocoonSet = cs;
      },
    },
    hooks: {
      event: (type, reason, message) => hooks.event?.(result.cocoonSet, type, reason, message),
      metric: (name, labels) => hooks.metric?.(name, result.cocoonSet, labels),
      log: (level, msg, fields) => hooks.log?.(level === "error" ? "warn" : level, msg, fields),
      podWritten: (kind, pod) => hooks.podWritten?.(kind, pod),
      // Absent when the caller has none: the create's 409 then asks who holds the name only
      // for a toolbox.
      nameHeld: hooks.nameHeld && ((podName) => hooks.nameHeld?.(podName)),
    },
    precondition: () => preconditionVersion(ctx),
  };
}

/** Runs `actions` as one step; a failure is noted (a 409 of an overtaken view, as such). */
async function runNoted(
  ctx: PassContext,
  actx: ActionContext,
  step: StepState,
  actions: readonly PlanAction[],
): Promise<boolean> {
  const { result, opts } = ctx;
  let current: PlanAction | undefined;
  try {
    for (const action of actions) {
      if (opts.signal?.aborted === true) return false;
      current = action;
      await performAction(actx, step, action);
    }
    return true;
  } catch (e) {
    // No line per failed step: a quota can refuse hundreds a pass. The caller reports the
    // pass once (passFailureSummary).
    const stale = current !== undefined && overtaken(current, e);
    // A finalizer's failed `test` (422) says only that the view was overtaken, as the
    // StaleCocoonSet below does: it is no failed step (a 409 is noted as one, as before).
    if (!stale || isConflict(e))
      result.failures.push(new StepFailure(step.podName, step.decision, e));
    if (stale) {
      result.conflicted = true;
      result.failures.push(new StaleCocoonSet());
    }
    return false;
  }
}

/**
 * The plan's setup (the finalizer the caller keeps), before anything else of the pass;
 * false (a failure noted) when it could not run.
 */
export async function executeSetup(ctx: PassContext): Promise<boolean> {
  if (ctx.plan.setup.length === 0) return true;
  const step: StepState = { podName: ctx.plan.cocoonSet.name, decision: "setup" };
  return runNoted(ctx, actionContext(ctx), step, ctx.plan.setup);
}

/**
 * The plan's generation stamps, then its steps: sequential steps in order, each run of
 * consecutive concurrent steps through one bounded pool (the fan-out). A failed action ends
 * its step, noted among the failures; the other steps go on.
 */
export async function executeSteps(ctx: PassContext): Promise<void> {
  const { client, plan, result, opts, hooks } = ctx;
  const ns = plan.cocoonSet.namespace;
  const aborted = () => opts.signal?.aborted === true;
  const actx = actionContext(ctx);
  const runStep = async (step: PlanStep): Promise<void> => {
    const state: StepState = {
      podName: step.podName,
      decision: step.decision,
      fields: { drift: step.drift, nodeRefusal: step.nodeRefusal },
    };
    await runNoted(ctx, actx, state, step.actions);
  };

  const limit = pLimit(Math.max(1, plan.fanOut));
  // Generation stamps first (uid precondition: a pod replaced meanwhile is left alone).
  await Promise.all(
    plan.generationStamps.map((stamp) =>
      limit(async () => {
        if (aborted()) return;
        try {
          await client.patch(
            paths.pod(ns, stamp.name),
            {
              metadata: {
                uid: stamp.uid,
                annotations: { [ANNOTATIONS.generation]: stamp.generation },
              },
            },
            PatchType.merge,
          );
        } catch (e) {
          if (isNotFound(e) || isConflict(e)) return;
          result.failures.push(new StepFailure(stamp.name, "generation stamp", e));
        }
      }),
    ),
  );

  for (let i = 0; i < plan.steps.length;) {
    const step = plan.steps[i];
    if (!step.concurrent) {
      await runStep(step);
      i++;
      continue;
    }
    const batch: PlanStep[] = [];
    while (i < plan.steps.length && plan.steps[i].concurrent) batch.push(plan.steps[i++]);
    let done = 0;
    await Promise.all(
      batch.map((s) =>
        limit(async () => {
          // Once a ResourceQuota refused a create, the creates still to start would be refused
          // alike: they are not sent (the next pass tries again).
          if (
            (result.quotaRefusal || result.admissionRefusal !== undefined) &&
            s.actions[0]?.kind === "create-pod"
          ) {
            result.unsentCreates = (result.unsentCreates ?? 0) + 1;
          } else await runStep(s);
          done++;
          hooks.progress?.(done, batch.length);
        }),
      ),
    );
  }
}

/**
 * The resourceVersion the pass's status write is conditioned on: the one it planned from,
 * or, when the pass's own record writes (`status.vms`, merged without a precondition) came
 * after it, theirs, provided that the object they returned differs from the planned one in
 * nothing but that map. Another writer's change in between moves something else (the spec's
 * generation, an annotation, the rest of the status), and then the planned version stands and
 * the write meets the conflict it must. Without this, a pass that announces creates every
 * time (creates a quota or admission refuses) would never write the status that says so.
 */
function preconditionVersion(ctx: PassContext): string | undefined {
  const planned = ctx.result.cocoonSet;
  const mine = ctx.recorded;
  const version = (o: CocoonSet) => Number(o.metadata.resourceVersion ?? "");
  if (!mine || !(version(mine) > version(planned))) return planned.metadata.resourceVersion;
  // A fleet planned with no status got its first one from the record write: the counts it
  // must carry, and the map.
  const status = (o: CocoonSet) =>
    o.status === undefined ? firstCounts(planned) : { ...o.status, vms: undefined };
  const rest = (o: CocoonSet) =>
    stableJson({
      generation: o.metadata.generation,
      annotations: o.metadata.annotations ?? {},
      labels: o.metadata.labels ?? {},
      finalizers: o.metadata.finalizers ?? [],
      deletion: o.metadata.deletionTimestamp ?? "",
      status: status(o),
    });
  return rest(mine) === rest(planned)
    ? mine.metadata.resourceVersion
    : planned.metadata.resourceVersion;
}

/**
 * The status a pass ends with: the plan's when the pass had no failure; when a quota stopped
 * it, what the pods say with a condition naming the quota (docs/behaviour.md §3.12), since
 * such a pass never gets to the quiet pass that writes status.
 */
export async function writePassStatus(ctx: PassContext, pods: Pod[]): Promise<void> {
  const { client, plan, result, opts } = ctx;
  const cs = result.cocoonSet;
  const path = paths.cocoonSetStatus(plan.cocoonSet.namespace, plan.cocoonSet.name);
  let status: CocoonSetStatus | undefined;
  if (plan.status && result.failures.length === 0) {
    status = plan.status;
  } else if (result.quotaRefusal || result.admissionRefusal !== undefined) {
    const blocked = quotaBlockedStatus({
      cocoonSet: cs,
      pods,
      nowMs: (opts.now ?? Date.now)(),
      vanishingSlots: vanishingSlots(plan.createLog),
      refusal: result.quotaRefusal ?? { admission: result.admissionRefusal ?? "" },
      missing: plan.steps.filter((s) => s.actions.some((a) => a.kind === "create-pod")).length,
    });
    if (!statusEqual(cs.status, blocked)) status = blocked;
  }
  if (!status) return;
  const precondition = opts.cocoonSetFromCache === true;
  // Only a conditioned write announces ahead: one without a precondition could replace the
  // token of another writer's create in flight (its pod then would be no one's).
  const ahead = precondition && status === plan.status ? tokensAhead(cs, status, pods) : undefined;
  try {
    result.cocoonSet = await client.patch<CocoonSet>(
      path,
      {
        ...(precondition && { metadata: { resourceVersion: preconditionVersion(ctx) } }),
        status: {
          ...status,
          ...(ahead && { vms: ahead.vms }),
          observedGeneration: cs.metadata.generation,
          ...statusClears(status),
        },
      },
      PatchType.merge,
    );
    if (ahead) holdTokensAhead(cs, ahead.tokens);
  } catch (e) {
    if (!precondition || !isConflict(e)) throw e;
    result.conflicted = true;
    result.failures.push(new StaleCocoonSet());
    return;
  }
  result.statusWritten = true;
  if (status === plan.status) return;
  // A refusal's status is written here, not planned: its Warnings are posted here too, once
  // each (while the stored status already says the same, nothing is posted).
  const hooks = ctx.hooks;
  const refusalOf = (s: CocoonSetStatus | undefined) =>
    s?.conditions?.find((c) => c.type === "ReplicaFailure" && c.reason === ADMISSION_REASON)
      ?.message;
  const refusal = refusalOf(status);
  if (refusal !== undefined && refusal !== refusalOf(cs.status))
    hooks.event?.(result.cocoonSet, "Warning", EVENT_REASONS.failedCreate, refusal);
  const stall = deadlineWarning(cs.status, status);
  if (stall !== undefined)
    hooks.event?.(
      result.cocoonSet,
      "Warning",
      EVENT_REASONS.progressDeadlineExceeded,
      `${plan.cocoonSet.namespace}/${plan.cocoonSet.name}: ${stall}`,
    );
}

/**
 * The status' record with a fresh create token's digest for each member whose live pod the
 * record names by uid and whose next token is not announced yet (see AHEAD in created.ts),
 * and those tokens; undefined when there is none to announce. A pod named by its uid is no
 * longer named by its token, so replacing the digest takes nothing from it.
 */
function tokensAhead(
  cs: CocoonSet,
  status: CocoonSetStatus,
  pods: readonly Pod[],
): { vms: Record<string, VMRecord>; tokens: Map<string, TokenAhead> } | undefined {
  const record = status.vms;
  if (!record) return undefined;
  const view: CocoonSet = { ...cs, status };
  const tokens = new Map<string, TokenAhead>();
  const vms: Record<string, VMRecord> = { ...record };
  for (const pod of pods) {
    const uid = pod.metadata?.uid ?? "";
    if (uid === "" || pod.metadata?.deletionTimestamp) continue;
    const member = memberOf(view, pod);
    const entry = member === undefined ? undefined : record[member];
    if (member === undefined || entry?.podUID !== uid) continue;
    const held = tokenAhead(cs, member);
    if (held !== undefined && entry.createToken === held.digest) continue;
    const token = randomBytes(16).toString("hex");
    const digest = tokenDigest(token);
    tokens.set(member, { token, digest });
    vms[member] = { ...entry, createToken: digest };
  }
  return tokens.size > 0 ? { vms, tokens } : undefined;
}

/** Keeps the pruned create log plus a record for each create that went through. */
export function rememberCreates(logs: CreateLogs, plan: Plan, created: readonly string[]): void {
  const next = new Map<number, SlotCreateRecord>(plan.createLog);
  const done = new Set(created);
  for (const step of plan.steps) {
    if (step.createRecord && step.target.role === "sub-agent" && done.has(step.podName)) {
      next.set(step.target.slot, step.createRecord);
    }
  }
  if (next.size > 0) logs.set(plan.cocoonSet.uid, next);
  else logs.delete(plan.cocoonSet.uid);
}
