/**
 * The executor of a pass: carries a plan's steps out against the cluster, in order, and
 * writes the fleet's record and status.
 *
 * Guarantees: a step's actions run in order and the step stops at its first failure, so a
 * rebuild's history write always lands before its delete; sub-agent creates run at most
 * `fanOut` at a time and one failure does not stop the others; the first error is reported
 * after every step settled.
 */
import pLimit from "p-limit";
import { stableJson } from "../spec/stable-json.js";
import { isFollowedMember, SNAPSHOT_OWNER_ANNOTATION } from "../lifecycle/index.js";
import {
  ADMISSION_REASON,
  deadlineWarning,
  quotaBlockedStatus,
  quotaRefusalOf,
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
import {
  isAlreadyExists,
  isConflict,
  isForbidden,
  isNotFound,
  PatchType,
  paths,
  type KubeClient,
} from "../kube/index.js";
import { errorMessage } from "../kube/branded-error.js";
import { type PassResult, StaleCocoonSet, StepFailure } from "./pass-result.js";
import { type CreateLogs, type EngineHooks, type PassOptions } from "./pass-options.js";
import { createdRecords } from "./created.js";
import { rememberCreated } from "./created.js";

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
  const update = recordUpdate(ctx.recorded ?? result.cocoonSet, known);
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

/**
 * After a create met a pod of the same name (409): reads who holds the name. Another's pod
 * is reported through {@link EngineHooks.nameHeld} and the pass runs again at once; this
 * CocoonSet's own pod means the caller's view was behind, so it is reported as written, for
 * the caller to expect it.
 */
async function nameHolder(ctx: PassContext, podName: string): Promise<"own" | "other" | "gone"> {
  const { client, plan, result, hooks } = ctx;
  const holder = await client.getOrUndefined<Pod>(paths.pod(plan.cocoonSet.namespace, podName));
  if (!holder) return "gone";
  // Expected like a create only when the watch can show it: a pod that names this CocoonSet
  // as its controller but lacks the labels it selects on would be waited for for ever.
  if (isFollowedMember(result.cocoonSet, holder)) {
    hooks.podWritten?.("create", { name: podName, uid: holder.metadata?.uid ?? "" });
    return "own";
  }
  hooks.nameHeld?.(podName);
  (result.namesHeld ??= []).push(podName);
  hooks.log?.("info", "a pod that is not this CocoonSet's holds the name; planning again", {
    pod: podName,
  });
  return "other";
}

/** Carries out one action of a step against the cluster (or the registry). */
async function performAction(ctx: PassContext, step: PlanStep, action: PlanAction): Promise<void> {
  const { client, plan, result, opts, hooks } = ctx;
  const ns = plan.cocoonSet.namespace;
  switch (action.kind) {
    case "create-pod": {
      try {
        const created = await client.create<Pod>(paths.pods(ns), action.pod);
        rememberCreated(result.cocoonSet, step.podName, created.metadata?.uid ?? "");
        result.created.push(step.podName);
        hooks.podWritten?.("create", { name: step.podName, uid: created.metadata?.uid ?? "" });
        hooks.log?.("info", "created pod", { pod: step.podName, decision: step.decision });
      } catch (err) {
        // The apiserver names a refusing ResourceQuota only in its Status message (no field
        // carries it): the one place the engine reads an error's text, an outside one.
        const quota = isForbidden(err) ? quotaRefusalOf(errorMessage(err)) : undefined;
        if (quota) result.quotaRefusal ??= quota;
        else if (isForbidden(err)) result.admissionRefusal ??= errorMessage(err);
        if (!isAlreadyExists(err)) throw err;
        if (hooks.nameHeld) {
          const holder = await nameHolder(ctx, step.podName);
          // Another's pod is reported; for a toolbox, who holds it is now known.
          if (holder === "other" || action.onAlreadyExists === "check-owner") return;
        }
        if (action.onAlreadyExists === "success") return;
        if (action.onAlreadyExists === "retry-later") {
          // The previous pod of this name is still terminating.
          result.requeueAfterMs = Math.min(result.requeueAfterMs ?? 5000, 5000);
          return;
        }
        const existing = await client.get<Pod>(paths.pod(ns, step.podName));
        const owner = existing.metadata?.ownerReferences?.find((r) => r.controller);
        if (owner?.uid !== plan.cocoonSet.uid) {
          // Plain Error: the step's runner reports it as the cause of a StepFailure, the
          // typed failure callers see.
          throw new Error(
            `pod ${step.podName} already exists and is not this CocoonSet's toolbox`,
            { cause: err },
          );
        }
      }
      return;
    }
    case "delete-pod": {
      if (await client.delete(paths.pod(ns, action.name), { uid: action.uid })) {
        result.deleted.push(action.name);
        hooks.podWritten?.("delete", { name: action.name, uid: action.uid });
        hooks.log?.("info", "deleted pod", {
          pod: action.name,
          decision: step.decision,
          drift: step.drift,
          nodeRefusal: step.nodeRefusal,
        });
      }
      return;
    }
    case "annotate-pod": {
      try {
        const patched = await client.patch<Pod>(
          paths.pod(ns, action.name),
          { metadata: { uid: action.uid, annotations: action.annotations } },
          PatchType.merge,
        );
        hooks.podWritten?.("patch", {
          name: action.name,
          uid: action.uid,
          resourceVersion: patched.metadata?.resourceVersion,
        });
      } catch (e) {
        if (!action.bestEffort) throw e;
        // A lost keep-snapshot flag costs the wake a registry pull, not the seat.
        hooks.log?.("warn", "could not annotate pod; going on", {
          pod: action.name,
          annotations: action.annotations,
          error: errorMessage(e),
        });
        return;
      }
      hooks.log?.("info", "annotated pod", { pod: action.name, annotations: action.annotations });
      return;
    }
    case "annotate-cocoonset": {
      result.cocoonSet = await client.patch<CocoonSet>(
        paths.cocoonSet(ns, plan.cocoonSet.name),
        { metadata: { annotations: action.annotations } },
        PatchType.merge,
      );
      hooks.log?.("info", "annotated the CocoonSet", { annotations: action.annotations });
      return;
    }
    case "delete-snapshot-tag": {
      // A programmer error: the planner plans a tag deletion only from registry facts.
      if (!opts.registry) throw new Error("no snapshot registry to delete the tag from");
      await opts.registry.deleteManifest(action.vm, action.tag);
      hooks.log?.("info", "deleted snapshot tag", { vm: action.vm, tag: action.tag });
      return;
    }
    case "write-status": {
      // Persisted before the step's next action: a phase that marks work in flight.
      result.cocoonSet = await client.patch<CocoonSet>(
        paths.cocoonSetStatus(ns, plan.cocoonSet.name),
        {
          status: {
            ...action.status,
            observedGeneration: result.cocoonSet.metadata.generation,
            ...statusClears(action.status),
          },
        },
        PatchType.merge,
      );
      result.statusWritten = true;
      return;
    }
    case "write-history": {
      // Conditional on the resourceVersion we planned from: a concurrent writer makes
      // this fail (409) and the pass is retried on fresh data, never on stale counts.
      result.cocoonSet = await client.patch<CocoonSet>(
        paths.cocoonSet(ns, plan.cocoonSet.name),
        {
          metadata: {
            resourceVersion: result.cocoonSet.metadata.resourceVersion,
            annotations: { [ANNOTATIONS.rebuildHistory]: action.value },
          },
        },
        PatchType.merge,
      );
      return;
    }
    case "event":
      hooks.event?.(result.cocoonSet, action.type, action.reason, action.message);
      return;
    case "count-metric":
      hooks.metric?.(action.metric, result.cocoonSet, action.labels);
      return;
  }
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
  const runStep = async (step: PlanStep): Promise<void> => {
    for (const action of step.actions) {
      if (aborted()) return;
      try {
        await performAction(ctx, step, action);
      } catch (e) {
        // No line per failed step: a quota can refuse hundreds a pass. The caller reports the
        // pass once (passFailureSummary).
        result.failures.push(new StepFailure(step.podName, step.decision, e));
        if (isConflict(e) && action.kind === "write-history") {
          result.conflicted = true;
          result.failures.push(new StaleCocoonSet());
        }
        return;
      }
    }
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
  try {
    result.cocoonSet = await client.patch<CocoonSet>(
      path,
      {
        ...(precondition && { metadata: { resourceVersion: preconditionVersion(ctx) } }),
        status: { ...status, observedGeneration: cs.metadata.generation, ...statusClears(status) },
      },
      PatchType.merge,
    );
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
 * The optional status fields a merge patch must remove explicitly (null) when the new status
 * leaves them out: `lastProgressTime` is kept only while the fleet is under way.
 */
function statusClears(status: CocoonSetStatus): Record<string, null> {
  return status.lastProgressTime === undefined ? { lastProgressTime: null } : {};
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
