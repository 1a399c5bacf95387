/**
 * The engine's execution of one CocoonHibernation reconcile, next to the CocoonSet's pass
 * (pass.ts): read the facts (the CR's pod, the namespace's CRs, the fleets, and the
 * registry's `<vm>:hibernate` tag when the plan needs it), ask the pure planner
 * (engine/hibernation/hibernation.ts), and carry its actions out in order. The controller's reconciler
 * calls {@link runHibernationPass}.
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
  type HibernationAction,
  type HibernationInput,
  type HibernationPlan,
  type HibernationRefusal,
  type TagFact,
} from "../hibernation/index.js";
import { SNAPSHOT_TAGS, type CocoonHibernation, type Pod } from "../spec/index.js";
import { BrandedError, errorMessage } from "../kube/branded-error.js";
import { PatchType, paths, type KubeClient } from "../kube/index.js";
import { addFinalizerTo, removeFinalizerFrom } from "./finalizer.js";
import type { SnapshotRegistry } from "./snapshots.js";
import { listCocoonSetsVisible } from "./pass-reads.js";

/** Hooks through which the hibernation executor reports what it did. */
export interface HibernationHooks {
  /** An event on the CocoonHibernation (the controller posts it to the events API). */
  event?(cr: CocoonHibernation, type: "Normal" | "Warning", reason: string, message: string): void;
  /** One finished transition: `metric` is a histogram name, `result` `ok` or `timeout`. */
  observe?(metric: string, result: string, seconds: number): void;
  log?(
    level: "info" | "warn" | "error" | "debug",
    msg: string,
    fields?: Record<string, unknown>,
  ): void;
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
  const all = (await client.list<CocoonHibernation>(paths.cocoonHibernations(ns))).items;
  const podName = cr.spec?.podRef?.name ?? "";
  const pod = podName ? await client.getOrUndefined<Pod>(paths.pod(ns, podName)) : undefined;
  // Every fleet a VM name could belong to: the pod's annotation is believed only when the
  // controller can attribute it (docs/behaviour.md §3.18).
  const fleets = await listCocoonSetsVisible(client, ns);
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

/** Carries out `plan`'s actions for `cr`, in order (see the module's guarantees). */
async function executeHibernationPlan(
  client: KubeClient,
  cr: CocoonHibernation,
  plan: HibernationPlan,
  opts: Pick<HibernationPassOptions, "registry" | "hooks"> = {},
): Promise<void> {
  const hooks = opts.hooks ?? {};
  const ns = cr.metadata.namespace ?? "";
  const name = cr.metadata.name ?? "";
  const crPath = paths.cocoonHibernation(ns, name);
  const perform = async (action: HibernationAction): Promise<void> => {
    switch (action.kind) {
      case "add-finalizer":
        await addFinalizerTo(client, crPath, cr, action.finalizer);
        hooks.log?.("debug", "added the finalizer");
        return;
      case "remove-finalizer":
        await removeFinalizerFrom(client, crPath, cr, action.finalizer);
        hooks.log?.("info", "released the finalizer", { decision: plan.decision });
        return;
      case "annotate-pod":
        await client.patch(
          paths.pod(ns, action.name),
          { metadata: { uid: action.uid, annotations: action.annotations } },
          PatchType.merge,
        );
        hooks.log?.("info", "annotated pod", {
          pod: action.name,
          annotations: action.annotations,
          decision: plan.decision,
        });
        return;
      case "delete-snapshot-tag":
        try {
          if (!opts.registry) throw new NoRegistry();
          await opts.registry.deleteManifest(action.vm, action.tag);
        } catch (e) {
          if (!action.bestEffort) throw e;
          // Not fatal, but loud: a registry refusing deletes leaks every snapshot.
          hooks.log?.("error", "could not delete the hibernate snapshot", {
            err: errorMessage(e),
            vm: action.vm,
          });
        }
        return;
      case "write-status":
        await client.patch(
          paths.cocoonHibernationStatus(ns, name),
          { status: action.status },
          PatchType.merge,
        );
        hooks.log?.("info", "wrote the status", {
          phase: action.status.phase,
          decision: plan.decision,
        });
        return;
      case "event":
        hooks.event?.(cr, action.type, action.reason, action.message);
        return;
      case "observe-duration":
        hooks.observe?.(action.metric, action.result, action.seconds);
        return;
    }
  };
  for (const action of plan.actions) await perform(action);
}

/** A tag delete was planned and the engine was given no registry to delete it from. */
class NoRegistry extends BrandedError {
  constructor() {
    super("no snapshot registry to delete the tag from");
  }
}

/** One reconcile of `cr`: read, plan, execute; the refusal, if any, is returned. */
export async function runHibernationPass(
  client: KubeClient,
  cr: CocoonHibernation,
  opts: HibernationPassOptions = {},
): Promise<HibernationPassResult> {
  const plan = planHibernation(await readHibernationInput(client, cr, opts));
  await executeHibernationPlan(client, cr, plan, opts);
  return { plan, refusal: plan.refusal, requeueAfterMs: plan.requeueAfterMs };
}
