/**
 * The engine's execution of one CocoonHibernation reconcile, next to the CocoonSet's pass
 * (pass.ts): read the facts (the CR's pod, the namespace's CRs, the fleets, and the
 * registry's `<vm>:hibernate` tag when the plan needs it), ask the pure planner
 * (engine/hibernation/hibernation.ts), and carry its actions out in order through the one
 * executor of plan actions (actions.ts). The controller's reconciler calls
 * {@link runHibernationPass}.
 *
 * Guarantees: actions run in plan order and the first failure stops the rest (thrown as
 * the API error), except a best-effort tag delete, which is logged and passed; a planner
 * refusal is returned as data after the actions ran.
 * Behaviour: docs/behaviour.md §3.18.
 */
import {
  hibernationProbe,
  planHibernation,
  hibernationRefusalMessage,
  type HibernationInput,
  type HibernationPlan,
  type HibernationRefusal,
  type TagFact,
} from "../hibernation/index.js";
import { podVmName } from "../attribution/index.js";
import { ANNOTATIONS, SNAPSHOT_TAGS, type CocoonHibernation, type Pod } from "../spec/index.js";
import { gateHibernationHook, hibernationWakeRecord } from "./hook-gate.js";
import { BrandedError, errorMessage } from "../kube/branded-error.js";
import { paths, type KubeClient } from "../kube/index.js";
import { noOutcome, runActions, type LogHook, type Subject } from "./actions.js";
import type { SnapshotRegistry } from "./snapshots.js";
import { freshReader } from "./pass-reads.js";
import type { Reader } from "./reader.js";

/** Hooks through which the hibernation executor reports what it did. */
export interface HibernationHooks {
  /** An event on the CocoonHibernation (the controller posts it to the events API). */
  event?(cr: CocoonHibernation, type: "Normal" | "Warning", reason: string, message: string): void;
  /** One finished transition: `metric` is a histogram name, `result` `ok` or `timeout`. */
  observe?(metric: string, result: string, seconds: number): void;
  log?: LogHook;
}

/** Options of {@link runHibernationPass}. */
export interface HibernationPassOptions {
  /** The snapshot registry (`--oci-registry`); without it every live CR is `Failed`, saying so. */
  registry?: SnapshotRegistry;
  /** @default DEFAULT_HIBERNATE_TIMEOUT_MS */
  hibernateTimeoutMs?: number;
  /** @default DEFAULT_WAKE_TIMEOUT_MS */
  wakeTimeoutMs?: number;
  /** Clock. @default Date.now */
  now?: () => number;
  hooks?: HibernationHooks;
  /**
   * Where the fleets a VM name could belong to are read: the controller's caches, else
   * afresh. The CR and its pod are always read afresh: a pass acts on the pod's annotations
   * (a hook is called once per hibernation), which a lagging cache could show without the
   * last pass's write. @default freshReader(client)
   */
  reads?: Reader;
  /**
   * The live CRs that target the pod `pod` of namespace `ns`, from an informer's cache; undefined
   * while it cannot answer (then the namespace's CRs are listed). The planner needs only those
   * of the CR's own pod: listing the whole namespace on every pass costs as much as the
   * namespace has CRs, so a fleet of idle members cost the square of its size.
   */
  hibernationsOfPod?: (ns: string, pod: string) => readonly CocoonHibernation[] | undefined;
}

/** What one hibernation pass did. */
export interface HibernationPassResult {
  plan: HibernationPlan;
  /** What the planner could not decide (the actions before it ran); retried with backoff. */
  refusal?: HibernationRefusal;
  /** 0: again at once; n: after n ms; undefined: only on a change. */
  requeueAfterMs: number | undefined;
}

/** A CocoonHibernation reconcile the planner refused to finish; `refusal` says why. */
export class HibernationRefused extends BrandedError {
  constructor(readonly refusal: HibernationRefusal) {
    super(hibernationRefusalMessage(refusal));
  }
}

/**
 * The planner's inputs for `cr`, read from the cluster: its pod, the namespace's CRs, the
 * fleets a VM name could belong to, and the registry's answer for the one VM
 * {@link hibernationProbe} names (a failure to answer is a fact too).
 */
async function readHibernationInput(
  client: KubeClient,
  cr: CocoonHibernation,
  opts: Omit<HibernationPassOptions, "hooks"> = {},
): Promise<HibernationInput> {
  const ns = cr.metadata.namespace ?? "";
  const registry = opts.registry;
  const podName = cr.spec?.podRef?.name ?? "";
  // A CR being deleted may share its VM with a CR of another pod (vmHeldByAnother): the list.
  const cached = cr.metadata.deletionTimestamp ? undefined : opts.hibernationsOfPod?.(ns, podName);
  const all = cached
    ? // The CR as just read, in place of the cache's copy (which may lag or lack it).
      [cr, ...cached.filter((o) => o.metadata.uid !== cr.metadata.uid)]
    : // Afresh, not from a cache: a deletion drops a tag no other live CR may still need.
      await freshReader(client).hibernations(ns);
  const pod = podName ? await client.getOrUndefined<Pod>(paths.pod(ns, podName)) : undefined;
  // The fleets the pod's VM or the VM the CR recorded could belong to: the pod's annotation
  // is believed only when the controller can attribute it (docs/behaviour.md §3.18). A
  // member's pod is `<cs>-<member>` and its VM `vk-<ns>-<cs>-<member>`, so its fleet is
  // among those naming `vk-<ns>-<pod>`, as is any other fleet that claims that name.
  const vms = [podName && podVmName(ns, podName), cr.status?.vmName ?? ""];
  const fleets = await (opts.reads ?? freshReader(client)).cocoonSetsNamingVms(
    ns,
    vms.filter((vm) => vm !== ""),
  );
  const input: HibernationInput = {
    cr,
    pod,
    all,
    fleets,
    registry: registry !== undefined,
    nowMs: (opts.now ?? Date.now)(),
    hibernateTimeoutMs: opts.hibernateTimeoutMs,
    wakeTimeoutMs: opts.wakeTimeoutMs,
  };
  const vm = hibernationProbe(input);
  if (vm && registry) {
    let tag: TagFact;
    try {
      tag = { exists: await registry.hasManifest(vm, SNAPSHOT_TAGS.hibernate) };
    } catch (e) {
      tag = { error: errorMessage(e) };
    }
    input.tag = tag;
  }
  return input;
}

/** A CocoonHibernation's hibernation held back by its fleet's hook (failurePolicy Fail). */
class HibernationHookHeld extends BrandedError {}

/**
 * The plan with the fleet's hooks around its pod write: a hibernation is called first and,
 * when its hook failed under Fail, nothing of the plan is carried out (HibernationHookHeld is
 * thrown, retried with backoff); a wake writes its after-wake record, which the fleet's pass
 * calls once the VM runs. A pod of no fleet with hooks gets the plan unchanged.
 */
async function withHibernationHooks(
  client: KubeClient,
  cr: CocoonHibernation,
  input: HibernationInput,
  plan: HibernationPlan,
  opts: HibernationPassOptions,
): Promise<HibernationPlan> {
  const index = plan.actions.findIndex((a) => a.kind === "annotate-pod");
  const action = plan.actions[index];
  if (!input.pod || action?.kind !== "annotate-pod") return plan;
  const owner = input.pod.metadata?.ownerReferences?.find((r) => r.controller === true);
  const fleet = input.fleets?.find((f) => owner !== undefined && f.metadata.uid === owner.uid);
  const now = new Date((opts.now ?? Date.now)());
  let extra: Record<string, string | null> | undefined;
  if (action.annotations[ANNOTATIONS.hibernate] === null) {
    extra = hibernationWakeRecord(fleet, now);
  } else {
    const gate = await gateHibernationHook(
      client,
      fleet,
      input.pod,
      cr.metadata.ownerReferences,
      cr.metadata.generation,
      now,
      {
        event: (type, reason, message) => opts.hooks?.event?.(cr, type, reason, message),
        log: (level, msg, fields) => opts.hooks?.log?.(level, msg, fields),
      },
    );
    if (!gate.go) throw new HibernationHookHeld(gate.message ?? "the lifecycle hook failed");
    extra = gate.clear;
  }
  if (!extra) return plan;
  const actions = [...plan.actions];
  actions[index] = { ...action, annotations: { ...action.annotations, ...extra } };
  return { ...plan, actions };
}

/** One reconcile of `cr`: read, plan, execute; the refusal, if any, is returned. */
export async function runHibernationPass(
  client: KubeClient,
  cr: CocoonHibernation,
  opts: HibernationPassOptions = {},
): Promise<HibernationPassResult> {
  const input = await readHibernationInput(client, cr, opts);
  // spec.hooks of the pod's fleet: called before the hibernation is written (hook-gate.ts).
  const plan = await withHibernationHooks(client, cr, input, planHibernation(input), opts);
  const hooks = opts.hooks ?? {};
  // The one executor of plan actions (actions.ts), with the CR as the plan's subject.
  const subject: Subject = { kind: "CocoonHibernation", object: cr };
  await runActions(
    {
      client,
      subject,
      registry: opts.registry,
      outcome: noOutcome(),
      hooks: {
        event: (type, reason, message) => hooks.event?.(cr, type, reason, message),
        observe: (metric, result, seconds) => hooks.observe?.(metric, result, seconds),
        log: (level, msg, fields) => hooks.log?.(level, msg, fields),
      },
    },
    { podName: cr.spec?.podRef?.name ?? "", decision: plan.decision },
    plan.actions,
  );
  return { plan, refusal: plan.refusal, requeueAfterMs: plan.requeueAfterMs };
}
