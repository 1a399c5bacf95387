/**
 * `pulumi up` of a suspend or a wake: after the usual convergence, the slots resource keeps
 * running the engine's passes until the fleet is Suspended (every VM hibernated, as the pass
 * gates it) or, for a wake, Running with every VM up again, or until its timeout. Between
 * passes it waits on a watch of the fleet's pods (a node agent's state change), at most the
 * planner's requeue delay (the registry tag the gate also reads has no watch).
 * Behaviour: docs/behaviour.md §7.4.
 */
import type { CocoonSet, Pod } from "../../engine/spec/index.js";
import {
  isSuspendRegistrySilence,
  listFleetPods,
  podSelector,
  readCocoonSet,
  runPass,
  type PassFailure,
  type PassOptions,
} from "../../engine/execute/index.js";
import { paths, WaitTimeoutError, waitForList, type KubeClient } from "../../engine/kube/index.js";
import { BrandedError } from "../../engine/kube/branded-error.js";
import {
  describePods,
  lifecyclePods,
  suspendPending,
  wakePending,
  type LifecycleChange,
} from "./lifecycle-view.js";

/** The longest wait between two passes when no pod changes (the planner's own poll). */
const MAX_IDLE_MS = 5_000;

/** Thrown when the fleet did not reach the phase `pulumi up` waits for in time. */
class LifecycleTimeoutError extends BrandedError {
  constructor(
    message: string,
    /** The pods still waited for. */
    readonly pending: string[],
  ) {
    super(message);
  }
}

/**
 * Thrown when a suspend or a wake cannot finish: the CocoonSet is gone, the fleet is
 * Failed, or a pass failed for another reason than the registry's silence (`failures`).
 */
class LifecycleFailedError extends BrandedError {
  constructor(
    message: string,
    /** The pass failures that stopped the wait; empty when the fleet itself did. */
    readonly failures: readonly PassFailure[] = [],
  ) {
    super(message);
  }
}

/** Options of {@link awaitLifecycle}. */
export interface LifecycleWaitOptions {
  /** The pass options (the registry among them). */
  pass: PassOptions;
  timeoutMs: number;
  /** The input that sets the timeout, named in the timeout message. */
  timeoutField: string;
  /** One progress line (the Pulumi log of the slots resource). */
  log(line: string): void;
}

/** What the last pass of the wait saw. */
export interface LifecycleWaitResult {
  cocoonSet: CocoonSet;
  passes: number;
}

/** A fingerprint of the pods' versions, to wait until any of them changes. */
function versions(pods: readonly { metadata?: { name?: string; resourceVersion?: string } }[]) {
  return pods
    .map((p) => `${p.metadata?.name ?? ""}@${p.metadata?.resourceVersion ?? ""}`)
    .sort()
    .join(",");
}

/**
 * Runs passes until the fleet has suspended (`suspend`: phase `Suspended`, no pod left to
 * hibernate) or woken (`wake`: phase `Running`, every managed pod's VM `ready`). A pass
 * error other than a conflict or the registry's silence fails at once; on timeout the error
 * names the pods still waited for and their lifecycle states.
 */
export async function awaitLifecycle(
  client: KubeClient,
  namespace: string,
  name: string,
  change: LifecycleChange,
  opts: LifecycleWaitOptions,
): Promise<LifecycleWaitResult> {
  const deadline = Date.now() + opts.timeoutMs;
  const target = change === "suspend" ? "Suspended" : "Running";
  let lastLine = "";
  for (let passes = 1; ; passes++) {
    const cs = await readCocoonSet(client, namespace, name);
    if (!cs)
      throw new LifecycleFailedError(
        `CocoonSet ${namespace}/${name} is gone; nothing to ${change}`,
      );
    // The pods as they were before the pass: the wait below ends on any change since, so a
    // node agent's write that lands while the pass runs is never missed.
    const seen = versions(await listFleetPods(client, cs));
    const result = await runPass(client, cs, opts.pass);
    if (result.conflicted) continue;
    const silences = result.failures.filter(isSuspendRegistrySilence);
    const registryError = silences[0]?.message ?? "";
    const others = result.failures.filter((f) => !isSuspendRegistrySilence(f));
    if (others.length > 0) {
      throw new LifecycleFailedError(
        `${change} of fleet ${namespace}/${name}: ${others.map((f) => f.message).join("; ")}`,
        others,
      );
    }
    const pods: Pod[] = await listFleetPods(client, result.cocoonSet);
    const phase = result.cocoonSet.status?.phase ?? "unknown";
    // A registry that did not answer leaves the plan empty: every pod is still in question.
    const pending =
      change === "wake"
        ? wakePending(result.cocoonSet, pods)
        : registryError
          ? lifecyclePods(result.cocoonSet, pods).map((p) => p.metadata?.name ?? "")
          : suspendPending(result.plan);
    const done = phase === target && pending.length === 0 && registryError === "";
    const line = `${namespace}/${name}: ${change} pass ${passes}: phase ${phase}, ${pending.length} pod(s) ${change === "suspend" ? "not hibernated" : "not awake"} yet${registryError ? ` (${registryError})` : ""}`;
    if (done || line.replace(/pass \d+: /, "") !== lastLine) {
      opts.log(done ? `${namespace}/${name}: ${target} after ${passes} pass(es)` : line);
      lastLine = line.replace(/pass \d+: /, "");
    }
    if (done) return { cocoonSet: result.cocoonSet, passes };
    if (phase === "Failed") {
      throw new LifecycleFailedError(
        `${change} of fleet ${namespace}/${name}: the fleet is Failed (its main agent is terminal): ${result.cocoonSet.status?.conditions?.map((c) => c.message).join("; ") ?? ""}`,
      );
    }
    if (Date.now() >= deadline) {
      const seconds = Math.round(opts.timeoutMs / 1000);
      const what =
        change === "suspend" ? "pods that did not hibernate" : "pods whose VM is not up again";
      throw new LifecycleTimeoutError(
        `${change} of fleet ${namespace}/${name} did not finish within ${seconds}s (${opts.timeoutField}): phase ${phase}; ${what}: ${describePods(pods, pending) || "none"}${registryError ? `; ${registryError}` : ""}. The CocoonSet keeps its spec; the next \`pulumi up\` waits again`,
        pending,
      );
    }
    if (result.requeueAfterMs === 0) continue;
    const idle = Math.min(result.requeueAfterMs ?? MAX_IDLE_MS, MAX_IDLE_MS, deadline - Date.now());
    try {
      await waitForList(client, paths.pods(namespace), (items) => versions(items) !== seen, {
        labelSelector: podSelector(name),
        timeoutMs: Math.max(1, idle),
        description: `a change of the pods of CocoonSet ${namespace}/${name}`,
      });
    } catch (e) {
      if (!WaitTimeoutError.isInstance(e)) throw e;
    }
  }
}
