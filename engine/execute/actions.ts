/**
 * The one executor of plan actions, for both plans: the CocoonSet pass's steps
 * (pass-executor.ts) and the CocoonHibernation plan (hibernation.ts) carry each action out
 * here, as do a deletion's finalizer actions (deletion.ts). An action writes to the plan's
 * own object (its subject), to its pods or to the snapshot registry; what it did is noted in
 * the caller's outcome.
 *
 * Guarantees: {@link runActions} runs actions in order and stops at the first failure,
 * thrown as the API error (the caller notes or raises it); a best-effort action that fails
 * is logged and passed.
 */
import { isFollowedMember } from "../lifecycle/index.js";
import { quotaRefusalOf, type PlanAction } from "../plan/index.js";
import { type HibernationAction } from "../hibernation/index.js";
import { removedAtOnce } from "../pods/index.js";
import { CREATE_TOKEN_ANNOTATION, tokenDigest } from "../attribution/index.js";
import {
  ANNOTATIONS,
  type CocoonHibernation,
  type CocoonSet,
  type CocoonSetStatus,
  type Pod,
} from "../spec/index.js";
import type { CocoonHibernationStatus } from "../spec/generated/hibernation-types.js";
import {
  isAlreadyExists,
  isForbidden,
  KubeApiError,
  isConflict,
  PatchType,
  paths,
  type KubeClient,
} from "../kube/index.js";
import { BrandedError, errorMessage } from "../kube/branded-error.js";
import type { PassResult } from "./pass-result.js";
import type { EngineHooks } from "./pass-options.js";
import type { SnapshotRegistry } from "./snapshots.js";
import { rememberCreated } from "./created.js";
import { addFinalizerTo, removeFinalizerFrom } from "./finalizer.js";

/** Any action of either plan. */
export type Action = PlanAction | HibernationAction;

/** The object a plan is about; `object` is its latest copy, kept current by the writes. */
export type Subject =
  | { kind: "CocoonSet"; object: CocoonSet }
  | { kind: "CocoonHibernation"; object: CocoonHibernation };

/** A log line an executor writes through its caller's logger. */
export type LogHook = (
  level: "info" | "warn" | "error" | "debug",
  msg: string,
  fields?: Record<string, unknown>,
) => void;

/** What the executor reports through, bound to the plan's subject by the caller. */
export interface ActionHooks {
  event?(type: "Normal" | "Warning", reason: string, message: string): void;
  metric?(name: string, labels?: Record<string, string>): void;
  observe?(metric: string, result: string, seconds: number): void;
  log?: LogHook;
  podWritten?: EngineHooks["podWritten"];
  nameHeld?: EngineHooks["nameHeld"];
}

/** What the actions did, as the CocoonSet pass reports it (its {@link PassResult}). */
export type ActionOutcome = Pick<
  PassResult,
  | "created"
  | "deleted"
  | "namesHeld"
  | "quotaRefusal"
  | "admissionRefusal"
  | "requeueAfterMs"
  | "statusWritten"
>;

/** What the executor works with. */
export interface ActionContext {
  client: KubeClient;
  subject: Subject;
  hooks: ActionHooks;
  outcome: ActionOutcome;
  registry?: SnapshotRegistry;
  /**
   * The resourceVersion a CocoonSet write that must not follow a stale view is conditioned on
   * (the rebuild history's): the one planned from, or the pass's own record writes' (pass-executor.ts).
   * @default the subject's
   */
  precondition?: () => string | undefined;
}

/** The step an action belongs to: for the log, and what its delete found. */
export interface StepState {
  podName: string;
  decision: string;
  fields?: Record<string, unknown>;
  /** The step's delete removed the pod at once (grace 0, no finalizers). */
  removed?: boolean;
}

/** An empty outcome, for a plan whose actions create and delete no pod. */
export function noOutcome(): ActionOutcome {
  return { created: [], deleted: [], requeueAfterMs: undefined, statusWritten: false };
}

/** Runs `actions` in order; the first failure is thrown (see the module's guarantees). */
export async function runActions(
  ctx: ActionContext,
  step: StepState,
  actions: readonly Action[],
  aborted: () => boolean = () => false,
): Promise<void> {
  for (const action of actions) {
    if (aborted()) return;
    await performAction(ctx, step, action);
  }
}

/**
 * Whether `e`, thrown by `action`, says the copy planned from was overtaken by another
 * writer: the history's resourceVersion precondition (409), or the finalizer's `test` op
 * (422, or 409). Planning again from the newer copy is the fix.
 */
export function overtaken(action: Action, e: unknown): boolean {
  if (action.kind === "write-history") return isConflict(e);
  if (action.kind === "add-finalizer")
    return KubeApiError.isInstance(e) && (e.status === 422 || e.status === 409);
  return false;
}

/** The namespace and name of the subject, and its paths. */
function where(subject: Subject): { ns: string; path: string; statusPath: string } {
  const ns = subject.object.metadata.namespace ?? "default";
  const name = subject.object.metadata.name ?? "";
  return subject.kind === "CocoonSet"
    ? { ns, path: paths.cocoonSet(ns, name), statusPath: paths.cocoonSetStatus(ns, name) }
    : {
        ns,
        path: paths.cocoonHibernation(ns, name),
        statusPath: paths.cocoonHibernationStatus(ns, name),
      };
}

/** The CocoonSet of a plan whose action only a CocoonSet plan has. */
function cocoonSetOf(subject: Subject): CocoonSet {
  // A programmer error: the hibernation planner plans none of these.
  if (subject.kind !== "CocoonSet") throw new Error("a CocoonSet action in another plan");
  return subject.object;
}

/** Carries out one action (see the module's guarantees). */
export async function performAction(
  ctx: ActionContext,
  step: StepState,
  action: Action,
): Promise<void> {
  const { client, subject, hooks } = ctx;
  const { path, statusPath } = where(subject);
  switch (action.kind) {
    case "create-pod":
    case "delete-pod":
    case "annotate-pod":
      return podAction(ctx, step, action);
    case "annotate-cocoonset":
      cocoonSetOf(subject);
      subject.object = await client.patch<CocoonSet>(
        path,
        { metadata: { annotations: action.annotations } },
        PatchType.merge,
      );
      hooks.log?.("info", "annotated the CocoonSet", { annotations: action.annotations });
      return;
    case "delete-snapshot-tag":
      try {
        if (!ctx.registry) throw new NoRegistry();
        await ctx.registry.deleteManifest(action.vm, action.tag);
        hooks.log?.("info", "deleted snapshot tag", { vm: action.vm, tag: action.tag });
      } catch (e) {
        if (!("bestEffort" in action && action.bestEffort === true)) throw e;
        // Not fatal, but loud: a registry refusing deletes leaks every snapshot.
        hooks.log?.("error", "could not delete the hibernate snapshot", {
          err: errorMessage(e),
          vm: action.vm,
        });
      }
      return;
    case "write-status":
      await writeStatus(ctx, statusPath, action.status);
      hooks.log?.(subject.kind === "CocoonSet" ? "debug" : "info", "wrote the status", {
        phase: action.status.phase,
        decision: step.decision,
      });
      return;
    case "write-history":
      // Conditional on the resourceVersion we planned from: a concurrent writer makes this
      // fail (409) and the pass is retried on fresh data, never on stale counts.
      subject.object = await client.patch<CocoonSet>(
        path,
        {
          metadata: {
            resourceVersion: ctx.precondition
              ? ctx.precondition()
              : subject.object.metadata.resourceVersion,
            annotations: { [ANNOTATIONS.rebuildHistory]: action.value },
          },
        },
        PatchType.merge,
      );
      return;
    case "add-finalizer":
      if (subject.kind === "CocoonSet")
        subject.object = await addFinalizerTo(client, path, subject.object, action.finalizer);
      else subject.object = await addFinalizerTo(client, path, subject.object, action.finalizer);
      hooks.log?.("debug", "added the finalizer", { finalizer: action.finalizer });
      return;
    case "remove-finalizer":
      await removeFinalizerFrom(client, path, subject.object, action.finalizer);
      hooks.log?.("info", "released the finalizer", {
        finalizer: action.finalizer,
        decision: step.decision,
      });
      return;
    case "event":
      hooks.event?.(action.type, action.reason, action.message);
      return;
    case "count-metric":
      hooks.metric?.(action.metric, action.labels);
      return;
    case "observe-duration":
      hooks.observe?.(action.metric, action.result, action.seconds);
      return;
  }
}

/** An action on one of the plan's pods. */
async function podAction(
  ctx: ActionContext,
  step: StepState,
  action: Extract<Action, { kind: "create-pod" | "delete-pod" | "annotate-pod" }>,
): Promise<void> {
  const { client, subject, hooks, outcome } = ctx;
  const { ns } = where(subject);
  switch (action.kind) {
    case "create-pod":
      if (action.afterRemoval === true && step.removed !== true) return;
      return createPod(ctx, step, action);
    case "delete-pod": {
      const answer = await client.deleteObject<Pod>(paths.pod(ns, action.name), {
        uid: action.uid,
      });
      if (answer === undefined) return;
      step.removed = removedAtOnce(answer);
      outcome.deleted.push(action.name);
      hooks.podWritten?.("delete", { name: action.name, uid: action.uid });
      hooks.log?.("info", "deleted pod", {
        pod: action.name,
        decision: step.decision,
        ...step.fields,
      });
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
      hooks.log?.("info", "annotated pod", {
        pod: action.name,
        annotations: action.annotations,
        decision: step.decision,
      });
      return;
    }
  }
}

/**
 * A status write: the CocoonSet's carries the generation it was planned at and removes what
 * the new status leaves out; the CocoonHibernation's is merged as planned.
 */
async function writeStatus(
  ctx: ActionContext,
  statusPath: string,
  status: CocoonSetStatus | CocoonHibernationStatus,
): Promise<void> {
  const { client, subject } = ctx;
  if (subject.kind === "CocoonHibernation") {
    subject.object = await client.patch<CocoonHibernation>(statusPath, { status }, PatchType.merge);
    return;
  }
  // Persisted before the step's next action: a phase that marks work in flight.
  const s = status as CocoonSetStatus;
  subject.object = await client.patch<CocoonSet>(
    statusPath,
    {
      status: {
        ...s,
        observedGeneration: subject.object.metadata.generation,
        ...statusClears(s),
      },
    },
    PatchType.merge,
  );
  ctx.outcome.statusWritten = true;
}

/**
 * The optional status fields a merge patch must remove explicitly (null) when the new status
 * leaves them out: `lastProgressTime` is kept only while the fleet is under way.
 */
export function statusClears(status: CocoonSetStatus): Record<string, null> {
  return status.lastProgressTime === undefined ? { lastProgressTime: null } : {};
}

/** A pod create; a 409 is answered by the one owner check, {@link nameHolder}. */
async function createPod(
  ctx: ActionContext,
  step: StepState,
  action: Extract<Action, { kind: "create-pod" }>,
): Promise<void> {
  const { client, subject, hooks, outcome } = ctx;
  const cs = cocoonSetOf(subject);
  const { ns } = where(subject);
  try {
    const created = await client.create<Pod>(paths.pods(ns), action.pod);
    const token = action.pod.metadata?.annotations?.[CREATE_TOKEN_ANNOTATION];
    rememberCreated(cs, step.podName, created.metadata?.uid ?? "", token && tokenDigest(token));
    outcome.created.push(step.podName);
    hooks.podWritten?.("create", { name: step.podName, uid: created.metadata?.uid ?? "" });
    hooks.log?.("info", "created pod", { pod: step.podName, decision: step.decision });
    return;
  } catch (err) {
    // The apiserver names a refusing ResourceQuota only in its Status message (no field
    // carries it): the one place the engine reads an error's text, an outside one.
    const quota = isForbidden(err) ? quotaRefusalOf(errorMessage(err)) : undefined;
    if (quota) outcome.quotaRefusal ??= quota;
    else if (isForbidden(err)) outcome.admissionRefusal ??= errorMessage(err);
    if (!isAlreadyExists(err)) throw err;
    // Who holds the name matters to a caller that creates before it reads names (the
    // controller: nameHeld) and to a toolbox whose name must be this CocoonSet's.
    const ask = hooks.nameHeld !== undefined || action.onAlreadyExists === "check-owner";
    const holder = ask ? await nameHolder(ctx, step.podName) : "unasked";
    if (holder === "other") {
      if (hooks.nameHeld) return;
      // Plain Error: the step's runner reports it as the cause of a StepFailure, the typed
      // failure callers see.
      throw new Error(`pod ${step.podName} already exists and is not this CocoonSet's`, {
        cause: err,
      });
    }
    // The previous pod of this name is still terminating.
    if (action.onAlreadyExists === "retry-later")
      outcome.requeueAfterMs = Math.min(outcome.requeueAfterMs ?? 5000, 5000);
  }
}

/**
 * The one owner check after a create met a pod of the same name (409): reads who holds the
 * name. This CocoonSet's own member (its controller reference and the labels its reads
 * select) means the caller's view was behind: reported as written, for the caller to expect
 * it. Another's pod is reported through {@link EngineHooks.nameHeld} and the pass runs again
 * at once.
 */
async function nameHolder(ctx: ActionContext, podName: string): Promise<"own" | "other" | "gone"> {
  const { client, subject, hooks, outcome } = ctx;
  const cs = cocoonSetOf(subject);
  const holder = await client.getOrUndefined<Pod>(paths.pod(where(subject).ns, podName));
  if (!holder) return "gone";
  // Expected like a create only when the watch can show it: a pod that names this CocoonSet
  // as its controller but lacks the labels it selects on would be waited for for ever.
  if (isFollowedMember(cs, holder)) {
    hooks.podWritten?.("create", { name: podName, uid: holder.metadata?.uid ?? "" });
    return "own";
  }
  if (hooks.nameHeld) {
    hooks.nameHeld(podName);
    (outcome.namesHeld ??= []).push(podName);
    hooks.log?.("info", "a pod that is not this CocoonSet's holds the name; planning again", {
      pod: podName,
    });
  }
  return "other";
}

/** A tag delete was planned and the engine was given no registry to delete it from. */
class NoRegistry extends BrandedError {
  constructor() {
    super("no snapshot registry to delete the tag from");
  }
}
