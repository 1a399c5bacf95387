/**
 * The lifecycle hooks (spec.hooks) around the transitions the engine carries out: before a
 * member hibernates (a suspend, the idle policy's suspend, a CocoonHibernation), after it
 * wakes, and before a fleet expires. A fleet without spec.hooks is not touched: no read, no
 * write, no step changed.
 *
 * Guarantees: a hibernation's hook is called before the hibernation is written, and the
 * decision's time is written to the pod (annotation `hook-pending`) before the call, so a
 * caller stopped between the call and the write calls again with the same event id and the
 * write happens once (it clears the record in the same patch). A wake writes its record in
 * the wake's own patch; the hook is called once the VM runs again, and the record cleared
 * after. Neither the body nor the URL's credentials reach a log or an event.
 * Behaviour: docs/lifecycle.md, "Hooks".
 */
import pLimit from "p-limit";
import { callHook, hooksUrlProblem } from "../hooks/index.js";
import {
  fleetSubject,
  formatHookRecord,
  hibernationCause,
  hookEvent,
  hookFailureMessage,
  hookPolicy,
  hookRecordFor,
  hookTarget,
  hookVerdict,
  memberSubject,
  podHookRecord,
  suspendCause,
  type HookCause,
  type HookMoment,
  type HookOutcome,
  type HookRecord,
  type HookSubject,
  type HookVerdict,
} from "../idle/index.js";
import { memberOf } from "../attribution/index.js";
import { vmLive } from "../pods/pod-state.js";
import type { Plan, PlanAction, PlanStep } from "../plan/index.js";
import {
  ANNOTATIONS,
  ANNOTATION_TRUE,
  EVENT_REASONS,
  type CocoonSet,
  type Pod,
} from "../spec/index.js";
import { BrandedError } from "../kube/branded-error.js";
import { PatchType, paths, type KubeClient } from "../kube/index.js";
import type { EngineHooks, PassOptions } from "./pass-options.js";
import { StepFailure } from "./pass-result.js";

/** Where a hook call reports what became of it. */
export interface HookReport {
  /** An event on the object the transition is about (the CocoonSet, a CocoonHibernation). */
  event?(type: "Normal" | "Warning", reason: string, message: string): void;
  log?(level: "info" | "warn" | "debug", msg: string, fields?: Record<string, unknown>): void;
  /** Cuts the call short: the transition does not go on and nothing is reported. */
  signal?: AbortSignal;
}

/** What one hook call came to. */
export interface HookCallResult {
  /** Whether the transition may go on (no hook, a 2xx, or a failure under `Ignore`). */
  go: boolean;
  /** The call's verdict; undefined when the fleet has no hook (nothing was called). */
  verdict?: HookVerdict;
  /** The failure's line, as the event said it. */
  message?: string;
  /** The signal cut the call short. */
  aborted?: boolean;
}

/** A transition held back because its hook failed under `failurePolicy: Fail`. */
export class HookHeld extends BrandedError {}

/**
 * Calls the fleet's hook about one transition (`record`: its moment, cause and decision time)
 * and says whether the transition may go on. A failed call is said in a Warning event
 * (`HookFailed` under Fail, `HookFailureIgnored` under Ignore); a 2xx in one info line. The
 * log and the event show the hook's URL without credentials or query, never the body.
 */
export async function callLifecycleHook(
  cs: CocoonSet,
  subject: HookSubject,
  record: HookRecord,
  report: HookReport = {},
): Promise<HookCallResult> {
  const policy = hookPolicy(cs);
  if (!policy) return { go: true };
  const event = hookEvent(subject, record.moment, record.cause, record.decidedAt);
  const problem = hooksUrlProblem(cs.spec);
  const outcome: HookOutcome = problem
    ? { ok: false, reason: problem }
    : await callHook(policy, event, report.signal);
  if (report.signal?.aborted) return { go: false, aborted: true };
  const verdict = hookVerdict(outcome, policy.failurePolicy);
  const about = subject.pod ? `pod ${subject.pod}` : `fleet ${subject.cocoonSet}`;
  if (outcome.ok) {
    report.log?.("info", "called the lifecycle hook", {
      hook: hookTarget(policy.url),
      moment: record.moment,
      cause: record.cause,
      ...(subject.pod ? { pod: subject.pod } : {}),
      status: outcome.status,
    });
    return { go: true, verdict };
  }
  const held = verdict === "hold";
  const message = hookFailureMessage(
    policy.url,
    record,
    about,
    withoutSecrets(outcome.reason, policy.url),
    held ? "hold" : "proceed-despite-failure",
  );
  report.event?.(
    "Warning",
    held ? EVENT_REASONS.hookFailed : EVENT_REASONS.hookFailureIgnored,
    message,
  );
  return { go: !held, verdict, message };
}

/**
 * Before a transition of the fleet as a whole (an expiry: `BeforeExpire`, cause `expiry`):
 * calls the hook and says whether the transition may go on. `decidedAt` must be the same for
 * every call about one transition (an expiry's `status.expiresAt`), so a repeated call
 * carries the same event id. A caller told `go: false` leaves the fleet as it is and asks
 * again later (the failure was said in a Warning event); with no hook it is `go: true` at once.
 */
export function beforeTransition(
  cs: CocoonSet,
  moment: HookMoment,
  cause: HookCause,
  decidedAt: Date,
  report: HookReport = {},
): Promise<HookCallResult> {
  return callLifecycleHook(cs, fleetSubject(cs), { moment, cause, decidedAt }, report);
}

/** The URL's user name and password, should an error's text repeat them, replaced. */
function withoutSecrets(text: string, url: string): string {
  let out = text;
  try {
    const u = new URL(url);
    for (const secret of [u.password, u.username, u.search.slice(1)])
      if (secret.length > 0) out = out.split(secret).join("***");
  } catch {
    // A URL that does not parse was never called: its problem names no secret.
  }
  return out;
}

/** Writes (or clears, with null) the pod's hook record; the pod's uid is the precondition. */
async function writeRecord(
  client: KubeClient,
  pod: Pod,
  value: string | null,
  hooks: Pick<EngineHooks, "podWritten">,
): Promise<void> {
  const name = pod.metadata?.name ?? "";
  const uid = pod.metadata?.uid ?? "";
  const patched = await client.patch<Pod>(
    paths.pod(pod.metadata?.namespace ?? "", name),
    { metadata: { uid, annotations: { [ANNOTATIONS.hookPending]: value } } },
    PatchType.merge,
  );
  hooks.podWritten?.("patch", { name, uid, resourceVersion: patched.metadata?.resourceVersion });
}

/** The annotate action of a step that sets the hibernate request to `value`, if it has one. */
function hibernateWrite(step: PlanStep, value: string | null): number {
  return step.actions.findIndex(
    (a) => a.kind === "annotate-pod" && a.annotations[ANNOTATIONS.hibernate] === value,
  );
}

/** `step` with its action at `index` also writing the hook record `value`. */
function withRecord(step: PlanStep, index: number, value: string | null): PlanStep {
  const actions = step.actions.map((a, i): PlanAction => {
    if (i !== index) return a;
    if (a.kind === "annotate-pod")
      return { ...a, annotations: { ...a.annotations, [ANNOTATIONS.hookPending]: value } };
    if (a.kind === "create-pod") {
      const meta = a.pod.metadata;
      return {
        ...a,
        pod: {
          ...a.pod,
          metadata: {
            ...meta,
            annotations: { ...meta.annotations, [ANNOTATIONS.hookPending]: value ?? "" },
          },
        },
      };
    }
    return a;
  });
  return { ...step, actions };
}

/** What the gate leaves of a pass's plan, and the steps it held as failures. */
export interface GatedPlan {
  plan: Plan;
  failures: StepFailure[];
}

/**
 * The hook step of a pass, between planning and executing: for a fleet with spec.hooks, each
 * hibernation the plan writes is called first (and held under Fail when the call failed),
 * each wake it writes carries its after-wake record, and each member whose record says a wake
 * waits for its hook and whose VM runs again has it called and the record cleared. A fleet
 * without spec.hooks gets its plan back as it was.
 */
export async function gatePassHooks(
  client: KubeClient,
  cs: CocoonSet,
  plan: Plan,
  pods: readonly Pod[],
  opts: PassOptions,
): Promise<GatedPlan> {
  if (!hookPolicy(cs)) return { plan, failures: [] };
  const hooks = opts.hooks ?? {};
  const now = new Date((opts.now ?? Date.now)());
  const byName = new Map(pods.map((p) => [p.metadata?.name ?? "", p]));
  const failures: StepFailure[] = [];
  const report: HookReport = {
    event: (type, reason, message) => hooks.event?.(cs, type, reason, message),
    log: (level, msg, fields) => hooks.log?.(level, msg, fields),
    signal: opts.signal,
  };
  const limit = pLimit(Math.max(1, opts.fanOut ?? 8));
  const before = async (step: PlanStep, index: number, pod: Pod): Promise<PlanStep | undefined> => {
    const { record, write } = hookRecordFor(
      pod,
      "BeforeHibernate",
      suspendCause(cs),
      now,
      cs.metadata.generation,
    );
    try {
      if (write) await writeRecord(client, pod, formatHookRecord(record), hooks);
    } catch (e) {
      failures.push(new StepFailure(step.podName, step.decision, e));
      return undefined;
    }
    const called = await callLifecycleHook(cs, memberSubject(cs, pod), record, report);
    if (called.go) return withRecord(step, index, null);
    if (!called.aborted)
      failures.push(
        new StepFailure(step.podName, step.decision, new HookHeld(called.message ?? "")),
      );
    return undefined;
  };
  const gated = await Promise.all(
    plan.steps.map((step) =>
      limit(async (): Promise<PlanStep | undefined> => {
        const pod = byName.get(step.podName);
        const hibernate = hibernateWrite(step, ANNOTATION_TRUE);
        if (step.decision === "hibernate" && hibernate >= 0 && pod)
          return before(step, hibernate, pod);
        const afterWake = formatHookRecord({ moment: "AfterWake", cause: "wake", decidedAt: now });
        const wake = hibernateWrite(step, null);
        if (step.decision === "wake" && wake >= 0) return withRecord(step, wake, afterWake);
        if (step.decision === "wake-restore") {
          const create = step.actions.findIndex((a) => a.kind === "create-pod");
          if (create >= 0) return withRecord(step, create, afterWake);
        }
        return step;
      }),
    ),
  );
  // A pod this pass writes anyway is left to the next pass, which sees the write.
  const acting = new Set(plan.steps.filter((s) => s.actions.length > 0).map((s) => s.podName));
  await Promise.all(
    pods
      .filter((pod) => {
        const name = pod.metadata?.name ?? "";
        return (
          podHookRecord(pod)?.moment === "AfterWake" &&
          vmLive(pod) &&
          !acting.has(name) &&
          !(opts.outstanding?.has(name) ?? false) &&
          memberOf(cs, pod) !== undefined
        );
      })
      .map((pod) => limit(() => afterWake(client, cs, pod, report, hooks, failures))),
  );
  const steps = gated.filter((s): s is PlanStep => s !== undefined);
  return { plan: { ...plan, steps }, failures };
}

/** The after-wake hook of a member whose VM runs again; its record cleared once answered. */
async function afterWake(
  client: KubeClient,
  cs: CocoonSet,
  pod: Pod,
  report: HookReport,
  hooks: EngineHooks,
  failures: StepFailure[],
): Promise<void> {
  const record = podHookRecord(pod);
  if (!record) return;
  const name = pod.metadata?.name ?? "";
  const called = await callLifecycleHook(cs, memberSubject(cs, pod), record, report);
  if (called.aborted) return;
  if (!called.go) {
    failures.push(new StepFailure(name, "after-wake-hook", new HookHeld(called.message ?? "")));
    return;
  }
  try {
    await writeRecord(client, pod, null, hooks);
  } catch (e) {
    failures.push(new StepFailure(name, "after-wake-hook", e));
  }
}

/**
 * A CocoonHibernation's hibernation of `pod`: when the pod's fleet has spec.hooks, the hook
 * is called first (cause `idle` for a CocoonHibernation the fleet controls, else
 * `hibernation`) and the answer says whether the hibernation may be written; `clear` is the
 * annotation the hibernation's patch must carry to clear the record. Without a fleet or
 * hooks: go on, nothing to clear.
 */
export async function gateHibernationHook(
  client: KubeClient,
  fleet: CocoonSet | undefined,
  pod: Pod,
  crOwners: readonly { uid?: string; controller?: boolean }[] | undefined,
  crGeneration: number | undefined,
  now: Date,
  report: HookReport,
): Promise<{ go: boolean; message?: string; clear?: Record<string, null> }> {
  if (!fleet || !hookPolicy(fleet)) return { go: true };
  const cause = hibernationCause(fleet.metadata.uid ?? "", crOwners);
  const { record, write } = hookRecordFor(pod, "BeforeHibernate", cause, now, crGeneration);
  if (write) await writeRecord(client, pod, formatHookRecord(record), {});
  const called = await callLifecycleHook(fleet, memberSubject(fleet, pod), record, report);
  return called.go
    ? { go: true, clear: { [ANNOTATIONS.hookPending]: null } }
    : { go: false, message: called.message };
}

/** The record a CocoonHibernation's wake writes with its patch, when the fleet has hooks. */
export function hibernationWakeRecord(
  fleet: CocoonSet | undefined,
  now: Date,
): Record<string, string> | undefined {
  if (!fleet || !hookPolicy(fleet)) return undefined;
  return {
    [ANNOTATIONS.hookPending]: formatHookRecord({
      moment: "AfterWake",
      cause: "hibernation",
      decidedAt: now,
    }),
  };
}
