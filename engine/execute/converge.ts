/**
 * `converge`: the one loop that runs passes and waits between them, for `pulumi up` (until
 * nothing is left to do now, the main agent Ready first) and for what a deploy waits for
 * after it (a suspend or a wake to finish, the fleet Ready: a {@link ConvergeGoal}). What it
 * waits for after each pass is typed: the plan states it (engine/plan/plan-wait.ts) and
 * {@link awaitPassWait} waits for it on a watch, within the deadline, naming what it waited
 * for when it gives up.
 * Behaviour: docs/behaviour.md §3.13, §7.3, §7.4.
 */
import { attributedView } from "../attribution/index.js";
import { unschedulableMessage } from "../lifecycle/index.js";
import { hibernationsInFlight } from "../snapshots/index.js";
import { describeWait, passWait, type PassWait } from "../plan/index.js";
import { agentPodName, isReady, isTerminal, vmLive } from "../pods/index.js";
import { LABELS, type CocoonSet, type Pod } from "../spec/index.js";
import {
  paths,
  waitForList,
  waitForObject,
  WaitTimeoutError,
  type KubeClient,
} from "../kube/index.js";
import { awaitObjectsGone } from "../release/index.js";
import { createdRecords } from "./created.js";
import { runPass } from "./pass.js";
import { BrandedError } from "../kube/branded-error.js";
import { namespaceOf } from "../kube/objects.js";
import { freshReader, podSelector } from "./pass-reads.js";
import { type PassOptions } from "./pass-options.js";
import type { Reader } from "./reader.js";
import { type PassFailure, type PassResult } from "./pass-result.js";

/** Thrown when the main agent does not become Ready in time, or fails. */
class MainAgentNotReadyError extends BrandedError {
  constructor(message: string) {
    super(message);
  }
}

/** Thrown when the CocoonSet to converge does not exist. */
class CocoonSetNotFoundError extends BrandedError {}

/** The longest wait between two passes of a goal when no pod changes (the planner's own poll). */
const GOAL_IDLE_MS = 5_000;

/** What one pass of a goal's wait saw, for the goal to judge. */
export interface GoalView {
  /** The CocoonSet after the pass. */
  cocoonSet: CocoonSet;
  /** The fleet's pods after the pass. */
  pods: Pod[];
  /** The pass's result. */
  result: PassResult;
  /** The message of the first failure the goal tolerated (else ""). */
  tolerated: string;
  /** Whether no pod changed while the pass ran: then the status it wrote describes `pods`. */
  stable: boolean;
  /** How many passes the wait ran, this one included. */
  passes: number;
}

/**
 * What a deploy waits for after the convergence (provider/dynamic/deploy-wait.ts): its
 * judgement of each pass, and the errors it gives up with.
 */
export interface ConvergeGoal {
  /** The pass failures the wait lets through (they are retried until the deadline). */
  tolerated(f: PassFailure): boolean;
  /** Done or not, and the progress line, logged when `key` differs from the last one logged. */
  judge(v: GoalView): { done: boolean; key: string; line: string };
  /** One progress line. */
  log(line: string): void;
  /** The error of pass failures, or of a Failed fleet, that stop the wait. */
  failed(messages: string[], failures: readonly PassFailure[]): Error;
  /** The error of a CocoonSet that is gone. */
  gone(): Error;
  /** The error of a wait out of time. */
  timedOut(v: GoalView): Promise<Error>;
}

/** Options of {@link converge}. */
export interface ConvergeOptions extends PassOptions {
  /** Deadline for the whole convergence, main agent wait included. @default 300000 */
  timeoutMs?: number;
  /** Passes at most (a guard against a plan that never settles). @default 20, none with a goal */
  maxPasses?: number;
  /** Run passes until this goal is met instead of until a pass has nothing left to do now. */
  until?: ConvergeGoal;
}

/**
 * Runs passes until one changes nothing (or, with `until`, until the goal is met): after a
 * pass that created or deleted pods the next runs at once; in between it waits for what the
 * plan states (the main agent Ready, a VM restored, the node agent's next report, a pod of
 * the same name gone), failing with a readable message on timeout or when the main agent is
 * terminal. Sub-agents in rebuild backoff are left to the controller (the result reports the
 * wait).
 */
export async function converge(
  client: KubeClient,
  namespace: string,
  name: string,
  opts: ConvergeOptions = {},
): Promise<PassResult> {
  const goal = opts.until;
  const deadline = Date.now() + (opts.timeoutMs ?? 300_000);
  const maxPasses = opts.maxPasses ?? (goal ? Infinity : 20);
  const reader = opts.reads ?? freshReader(client);
  // Remembered across the passes of this call, so a vanishing slot is backed off here too.
  opts = { ...opts, reads: reader, createLogs: opts.createLogs ?? new Map() };
  const fleet = `${namespace}/${name}`;
  let last: PassResult | undefined;
  let lastKey = "";
  for (let round = 1, passes = 1; round <= maxPasses; round++, passes++) {
    const cs = await reader.cocoonSet(namespace, name);
    if (!cs) {
      if (goal) throw goal.gone();
      throw new CocoonSetNotFoundError(
        `CocoonSet ${fleet} does not exist (with Pulumi, the Fleet component creates it before its slots)`,
      );
    }
    last = await runPass(client, cs, opts);
    // A conflict means someone else (the controller) wrote first: read again and plan again.
    if (last.conflicted) continue;
    let wait: PassWait;
    if (goal) {
      const judged = await judgeGoal(reader, goal, last, passes, deadline, lastKey);
      if (judged.done) return last;
      lastKey = judged.key;
      wait = judged.wait;
    } else {
      if (last.failures.length > 0) return last;
      wait = passWait(last.plan, last);
    }
    if (wait.kind === "none" && !goal) return last;
    if (wait.kind === "pod-change") {
      // These passes wait on the node agent, not on work of ours: the deadline bounds them.
      if (Date.now() >= deadline) return last;
      round--;
    }
    await awaitPassWait(client, cs, wait, deadline, opts);
  }
  return last!;
}

/**
 * A goal's judgement of one pass: throws when it fails or runs out of time, else says whether
 * it is done and what to wait for before the next pass (any change of the fleet's pods since
 * the pass read them, at most the planner's requeue delay).
 */
async function judgeGoal(
  reader: Reader,
  goal: ConvergeGoal,
  result: PassResult,
  passes: number,
  deadline: number,
  lastKey: string,
): Promise<{ done: boolean; key: string; wait: PassWait }> {
  const tolerated = result.failures.filter((f) => goal.tolerated(f));
  const others = result.failures.filter((f) => !goal.tolerated(f));
  if (others.length > 0)
    throw goal.failed(
      others.map((f) => f.message),
      others,
    );
  const before = versions(fleetLabelled(result.cocoonSet, result.pods));
  const pods = await reader.fleetPods(result.cocoonSet);
  const view: GoalView = {
    cocoonSet: result.cocoonSet,
    pods,
    result,
    tolerated: tolerated[0]?.message ?? "",
    stable: versions(pods) === before,
    passes,
  };
  const { done, key, line } = goal.judge(view);
  if (done || key !== lastKey) goal.log(line);
  if (done) return { done, key, wait: { kind: "none" } };
  if (result.cocoonSet.status?.phase === "Failed") {
    const why = result.cocoonSet.status?.conditions?.map((c) => c.message).join("; ") ?? "";
    throw goal.failed([`the fleet is Failed (its main agent is terminal): ${why}`], []);
  }
  if (Date.now() >= deadline) throw await goal.timedOut(view);
  if (result.requeueAfterMs === 0 || !view.stable)
    return { done, key, wait: { kind: "next-pass" } };
  const idle = Math.min(result.requeueAfterMs ?? GOAL_IDLE_MS, GOAL_IDLE_MS);
  return { done, key, wait: { kind: "none", maxMs: idle, since: before } };
}

/** The pods among `pods` that carry the fleet's label (a pass's reads add name holders). */
function fleetLabelled(cs: CocoonSet, pods: readonly Pod[]): Pod[] {
  return pods.filter((p) => p.metadata?.labels?.[LABELS.name] === cs.metadata.name);
}

/** A fingerprint of the pods' versions, to wait until any of them changes. */
function versions(pods: readonly { metadata?: { name?: string; resourceVersion?: string } }[]) {
  return pods
    .map((p) => `${p.metadata?.name ?? ""}@${p.metadata?.resourceVersion ?? ""}`)
    .sort()
    .join(",");
}

/**
 * Waits (watch) for what a pass left to wait for, within `deadline`. A wait bounded by a poll
 * (a change of a pod, of the fleet's pods) returns when its bound passes; the others fail
 * naming what they waited for (a WaitTimeoutError on a watch's timeout).
 */
export async function awaitPassWait(
  client: KubeClient,
  cs: CocoonSet,
  wait: PassWait,
  deadline: number,
  opts: ConvergeOptions,
): Promise<void> {
  const ns = namespaceOf(cs);
  const fleet = `${ns}/${cs.metadata.name ?? ""}`;
  const description = describeWait(wait, fleet);
  const timeoutMs = Math.max(1000, deadline - Date.now());
  // A wait on the fleet's pods, until the deadline.
  const fleetPods = { labelSelector: podSelector(cs.metadata.name ?? ""), timeoutMs, description };
  switch (wait.kind) {
    case "next-pass":
      return;
    case "hibernations-done":
      await waitForList<Pod>(
        client,
        paths.pods(ns),
        (pods) => hibernatingMembers(cs, pods).length === 0,
        fleetPods,
      );
      return;
    case "objects-gone":
      await awaitObjectsGone(client, ns, wait, deadline);
      return;
    case "stuck":
      throw new MainAgentNotReadyError(wait.message);
    case "pod-ready":
      await waitForMainReady(client, cs, deadline);
      return;
    case "vm-live":
      // Restored and live, or unschedulable (no seat in the pool) or terminal: the next pass
      // reports which.
      await waitForObject<Pod>(
        client,
        paths.pods(ns),
        wait.pod,
        (pod) =>
          pod === undefined ||
          vmLive(pod) ||
          isTerminal(pod) ||
          unschedulableMessage(pod) !== undefined,
        { timeoutMs, description },
      );
      return;
    case "pod-gone":
      opts.hooks?.log?.(
        "info",
        "pod of the same name is still terminating; waiting for it to be gone",
        { pod: wait.pod },
      );
      await waitForObject<Pod>(client, paths.pods(ns), wait.pod, notTerminating, {
        timeoutMs,
        description,
      });
      return;
    case "terminating-gone":
      await waitForList<Pod>(
        client,
        paths.pods(ns),
        (items) => !items.some((p) => p.metadata?.deletionTimestamp),
        fleetPods,
      );
      return;
    case "pod-change":
      await untilBound(() => waitForPodChange(client, ns, wait.pod, deadline, wait.maxMs));
      return;
    case "none": {
      const since = wait.since;
      const bound = Math.min(wait.maxMs ?? GOAL_IDLE_MS, deadline - Date.now());
      await untilBound(() =>
        waitForList<Pod>(client, paths.pods(ns), (items) => versions(items) !== since, {
          labelSelector: podSelector(cs.metadata.name ?? ""),
          timeoutMs: Math.max(1, bound),
          description,
        }),
      );
      return;
    }
  }
}

/**
 * The members of `cs` hibernating now: the members as the engine recorded them
 * (engine/attribution), the node agent's reports of theirs.
 */
export function hibernatingMembers(cs: CocoonSet, pods: readonly Pod[]): string[] {
  return hibernationsInFlight(attributedView(cs, pods, createdRecords(cs)), pods);
}

/** Runs a wait whose timeout is a poll's bound, not a failure. */
async function untilBound(wait: () => Promise<unknown>): Promise<void> {
  try {
    await wait();
  } catch (e) {
    if (!WaitTimeoutError.isInstance(e)) throw e;
  }
}

/** Waits (watch) until the named pod changes (appears, goes, or gets a new resourceVersion). */
async function waitForPodChange(
  client: KubeClient,
  namespace: string,
  podName: string,
  deadline: number,
  maxMs: number,
): Promise<void> {
  const key = (p: Pod | undefined) =>
    p ? `${p.metadata?.uid}/${p.metadata?.resourceVersion}` : "gone";
  const seen = key(await client.getOrUndefined<Pod>(paths.pod(namespace, podName)));
  await waitForObject<Pod>(client, paths.pods(namespace), podName, (p) => key(p) !== seen, {
    timeoutMs: Math.max(100, Math.min(deadline - Date.now(), maxMs)),
    description: `a change of pod ${namespace}/${podName}`,
  });
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

/** A pod gone, or no longer terminating. */
function notTerminating(pod: Pod | undefined): boolean {
  return pod === undefined || !pod.metadata?.deletionTimestamp;
}
