/**
 * `converge`: passes repeated until nothing is left to do now, waiting (watch) for the main
 * agent to be Ready in between (what `pulumi up` runs).
 * Behaviour: docs/behaviour.md §3.13.
 */
import { unschedulableMessage, MIGRATE_POLL_MS } from "../lifecycle/index.js";
import type { MigrationDecision } from "../plan/index.js";
import { isReady, isTerminal, vmLive, agentPodName } from "../pods/index.js";
import { type CocoonSet, type Pod } from "../spec/index.js";
import {
  paths,
  waitForList,
  waitForObject,
  WaitTimeoutError,
  type KubeClient,
} from "../kube/index.js";
import { runPass } from "./pass.js";
import { BrandedError } from "../kube/branded-error.js";
import { namespaceOf } from "../kube/objects.js";
import { podSelector, readCocoonSet } from "./pass-reads.js";
import { type PassOptions } from "./pass-options.js";
import { type PassResult } from "./pass-result.js";

/** Thrown when the main agent does not become Ready in time, or fails. */
class MainAgentNotReadyError extends BrandedError {
  constructor(message: string) {
    super(message);
  }
}

/** Thrown when the CocoonSet to converge does not exist. */
class CocoonSetNotFoundError extends BrandedError {}

/** Options of {@link converge}. */
export interface ConvergeOptions extends PassOptions {
  /** Deadline for the whole convergence, main agent wait included. @default 300000 */
  timeoutMs?: number;
  /** Passes at most (a guard against a plan that never settles). @default 20 */
  maxPasses?: number;
}

/**
 * Runs passes until one changes nothing: after a pass that created or deleted pods the
 * next runs at once; while the main agent is not Ready it waits for it (watch), failing
 * with a readable message on timeout or when the main agent is terminal. Sub-agents in
 * rebuild backoff are left to the controller (the result reports the wait).
 */
export async function converge(
  client: KubeClient,
  namespace: string,
  name: string,
  opts: ConvergeOptions = {},
): Promise<PassResult> {
  const deadline = Date.now() + (opts.timeoutMs ?? 300_000);
  const maxPasses = opts.maxPasses ?? 20;
  // Remembered across the passes of this call, so a vanishing slot is backed off here too.
  opts = { ...opts, createLogs: opts.createLogs ?? new Map() };
  let last: PassResult | undefined;
  for (let round = 1; round <= maxPasses; round++) {
    const cs = await readCocoonSet(client, namespace, name);
    if (!cs) {
      throw new CocoonSetNotFoundError(
        `CocoonSet ${namespace}/${name} does not exist (with Pulumi, the Fleet component creates it before its slots)`,
      );
    }
    last = await runPass(client, cs, opts);
    // A conflict means someone else (the controller) wrote first: re-read and plan again.
    if (last.failures.length > 0 && !last.conflicted) return last;
    if (last.conflicted) continue;
    const mainStep = last.plan.steps.find((s) => s.target.role === "main");
    if (mainStep?.decision === "main-failed") {
      throw new MainAgentNotReadyError(
        `main agent pod ${namespace}/${mainStep.podName} failed; it is not rebuilt automatically (delete it or change the spec)`,
      );
    }
    if (mainStep?.decision === "create" && !last.created.includes(mainStep.podName)) {
      // The create met a pod of that name: one still terminating (wait until it is gone,
      // then create), or another writer's (then wait for it to be Ready).
      await waitForSameNamePod(client, namespace, mainStep.podName, deadline, opts);
      continue;
    }
    if (mainStep?.decision === "wait-wake") {
      // A slot-release wake: wait (watch) until the restored VM is live, then go on.
      const full = mainStep.actions.find((a) => a.kind === "event");
      if (full && full.kind === "event") throw new MainAgentNotReadyError(full.message);
      await waitForWake(client, cs, deadline);
      continue;
    }
    if (mainStep?.decision === "wait-main" || mainStep?.decision === "create") {
      await waitForMainReady(client, cs, deadline);
      continue;
    }
    if (last.requeueAfterMs === 0) continue;
    if (mainStep && MIGRATION_WAITS.has(mainStep.decision)) {
      // A migration to spec.nodeName in flight: it polls the registry, so wait (watch) for
      // the next change of the main agent's pod, at most one poll interval, then plan again.
      // These passes wait on the node agent, not on work of ours: the deadline bounds them.
      if (Date.now() >= deadline) return last;
      await waitForPodChange(
        client,
        namespace,
        mainStep.podName,
        Math.min(deadline - Date.now(), last.requeueAfterMs ?? MIGRATE_POLL_MS),
      );
      round--;
      continue;
    }
    if (last.stalled) {
      // Same-name pods are still terminating: wait (watch) until they are gone, then go on.
      await waitForList(
        client,
        paths.pods(namespace),
        (items) => !items.some((p) => p.metadata.deletionTimestamp),
        {
          labelSelector: podSelector(name),
          timeoutMs: Math.max(1000, deadline - Date.now()),
          description: `terminating pods of CocoonSet ${namespace}/${name} to be gone`,
        },
      );
      continue;
    }
    return last;
  }
  return last!;
}

/** The migration steps after which a pass waits on the node agent (docs/behaviour.md §3.17). */
const MIGRATION_WAITS: ReadonlySet<string> = new Set<MigrationDecision>([
  "migrate",
  "migrate-drop-stale",
  "wait-migration",
  "migrate-evict",
  "migrate-restore",
  "migrate-wake",
]);

/**
 * Waits (watch) until the named pod changes (appears, goes, or gets a new resourceVersion),
 * at most `timeoutMs`; returns either way.
 */
async function waitForPodChange(
  client: KubeClient,
  namespace: string,
  podName: string,
  timeoutMs: number,
): Promise<void> {
  const key = (p: Pod | undefined) =>
    p ? `${p.metadata?.uid}/${p.metadata?.resourceVersion}` : "gone";
  const seen = key(await client.getOrUndefined<Pod>(paths.pod(namespace, podName)));
  try {
    await waitForObject<Pod>(client, paths.pods(namespace), podName, (p) => key(p) !== seen, {
      timeoutMs: Math.max(100, timeoutMs),
      description: `a change of pod ${namespace}/${podName}`,
    });
  } catch (e) {
    if (!(e instanceof WaitTimeoutError)) throw e;
  }
}

/**
 * Waits (watch) until the pod of this name is gone or is not terminating. Its create met it
 * while it was terminating: the next pass creates it again, or finds another writer's.
 */
async function waitForSameNamePod(
  client: KubeClient,
  namespace: string,
  podName: string,
  deadline: number,
  opts: ConvergeOptions,
): Promise<void> {
  opts.hooks?.log?.(
    "info",
    "pod of the same name is still terminating; waiting for it to be gone",
    {
      pod: podName,
    },
  );
  await waitForObject<Pod>(
    client,
    paths.pods(namespace),
    podName,
    (pod) => pod === undefined || !pod.metadata?.deletionTimestamp,
    {
      timeoutMs: Math.max(1000, deadline - Date.now()),
      description: `terminating pod ${namespace}/${podName} to be gone`,
    },
  );
}

/**
 * Waits (watch) until a waking main agent's VM is live, or it is unschedulable (no seat in
 * the pool) or terminal: the next pass reports which.
 */
async function waitForWake(client: KubeClient, cs: CocoonSet, deadline: number): Promise<void> {
  const ns = namespaceOf(cs);
  const podName = agentPodName(cs.metadata.name ?? "", 0);
  await waitForObject<Pod>(
    client,
    paths.pods(ns),
    podName,
    (pod) =>
      pod === undefined ||
      vmLive(pod) ||
      isTerminal(pod) ||
      unschedulableMessage(pod) !== undefined,
    {
      timeoutMs: Math.max(1000, deadline - Date.now()),
      description: `main agent pod ${ns}/${podName} to be restored from its snapshot`,
    },
  );
}

/** Waits (watch) until the main agent pod is Ready; fails when it is terminal or on timeout. */
export async function waitForMainReady(
  client: KubeClient,
  cs: CocoonSet,
  deadline: number,
): Promise<Pod> {
  const ns = namespaceOf(cs);
  const podName = agentPodName(cs.metadata.name ?? "", 0);
  const timeoutMs = Math.max(1000, deadline - Date.now());
  let terminal: Pod | undefined;
  try {
    const pod = await waitForObject<Pod>(
      client,
      paths.pods(ns),
      podName,
      (pod) => {
        if (pod && isTerminal(pod)) terminal = pod;
        return pod !== undefined && (isReady(pod) || isTerminal(pod));
      },
      { timeoutMs, description: `main agent pod ${ns}/${podName} to be Ready` },
    );
    if (terminal) {
      throw new MainAgentNotReadyError(
        `main agent pod ${ns}/${podName} failed (phase ${terminal.status?.phase ?? "unknown"}); sub-agents fork from it, so nothing else was created`,
      );
    }
    return pod!;
  } catch (e) {
    if (MainAgentNotReadyError.isInstance(e)) throw e;
    const current = await client.getOrUndefined<Pod>(paths.pod(ns, podName));
    const state = current
      ? `it exists (phase ${current.status?.phase ?? "unknown"}, node ${current.spec?.nodeName ?? "none"}, not Ready)`
      : "it does not exist";
    throw new MainAgentNotReadyError(
      `main agent pod ${ns}/${podName} was not Ready within ${Math.round(timeoutMs / 1000)}s: ${state}; is a node with label cocoonstack.io/pool=${cs.spec.nodePool ?? "default"} available?`,
    );
  }
}
