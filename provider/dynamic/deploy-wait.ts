/**
 * What `pulumi up` waits for after the usual convergence, as goals of the engine's one loop
 * (`converge`): the passes run until the fleet is Suspended (every VM hibernated, as the pass
 * gates it) or, for a wake, Running with every VM up again (behaviour.md §7.4), and then until
 * every member the spec asks to run is Ready (§7.3), or until the wait's timeout. Between
 * passes the loop waits on a watch of the fleet's pods (a kubelet's or a node agent's change),
 * at most the planner's requeue delay (the registry tag the suspend gate also reads has no
 * watch). The passes write the CocoonSet's status, so the one `up` returns with describes the
 * pods it waited for.
 */
import type { CocoonSet } from "../../engine/spec/index.js";
import {
  converge,
  isSuspendRegistrySilence,
  type ConvergeGoal,
  type GoalView,
  type PassFailure,
  type PassOptions,
} from "../../engine/execute/index.js";
import { paths, type KubeClient } from "../../engine/kube/index.js";
import { BrandedError } from "../../engine/kube/branded-error.js";
import {
  describePods,
  lastWarnings,
  lifecyclePods,
  readiness,
  readinessLine,
  readinessTimeoutMessage,
  suspendPending,
  wakePending,
  type ClusterEvent,
  type LifecycleChange,
  type PodWarning,
} from "./deploy-view.js";

/** Thrown when the fleet did not reach the phase `pulumi up` waits for in time. */
export class DeployWaitTimeoutError extends BrandedError {
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
export class DeployWaitFailedError extends BrandedError {
  constructor(
    message: string,
    /** The pass failures that stopped the wait; empty when the fleet itself did. */
    readonly failures: readonly PassFailure[] = [],
  ) {
    super(message);
  }
}

/** Options of {@link awaitLifecycle} and {@link awaitReady}. */
export interface DeployWaitOptions {
  /** The pass options (the registry among them). */
  pass: PassOptions;
  timeoutMs: number;
  /** The input that sets the timeout, named in the timeout message. */
  timeoutField: string;
  /**
   * The seconds the timeout message names, when the wait had only what an earlier step left
   * of `timeoutField`'s budget. @default `timeoutMs` in seconds
   */
  budgetSeconds?: number;
  /** One progress line (the Pulumi log of the slots resource). */
  log(line: string): void;
}

/** What the last pass of the wait saw. */
export interface DeployWaitResult {
  cocoonSet: CocoonSet;
  passes: number;
}

/** What a wait waits for: its judgement of each pass, and its messages. */
interface WaitGoal {
  /** The pass failures the wait lets through (they are retried until the timeout). */
  tolerated(f: PassFailure): boolean;
  /** The error of the pass failures (or the Failed fleet) that stop the wait. */
  failed(messages: string[]): string;
  /** Done or not, and the progress line ({@link ConvergeGoal.judge}). */
  judge(v: GoalView): { done: boolean; key: string; line: string };
  /** The error of a wait out of time. */
  timedOut(v: GoalView): Promise<{ message: string; pending: string[] }>;
}

/**
 * Runs the engine's passes (`converge`, the one loop) until the goal says done: it fails at
 * once on a pass failure the goal does not tolerate and on a fleet that is Failed; on timeout
 * with the goal's message.
 */
async function passesUntil(
  client: KubeClient,
  namespace: string,
  name: string,
  /** What the wait does, as in "nothing to X" once the CocoonSet is gone. */
  what: string,
  goal: WaitGoal,
  opts: DeployWaitOptions,
): Promise<DeployWaitResult> {
  let passes = 0;
  const until: ConvergeGoal = {
    tolerated: (f) => goal.tolerated(f),
    judge: (v) => {
      passes = v.passes;
      return goal.judge(v);
    },
    log: (line) => opts.log(line),
    failed: (messages, failures) => new DeployWaitFailedError(goal.failed(messages), failures),
    gone: () =>
      new DeployWaitFailedError(`CocoonSet ${namespace}/${name} is gone; nothing to ${what}`),
    timedOut: async (v) => {
      const { message, pending } = await goal.timedOut(v);
      return new DeployWaitTimeoutError(message, pending);
    },
  };
  const last = await converge(client, namespace, name, {
    ...opts.pass,
    timeoutMs: opts.timeoutMs,
    until,
  });
  return { cocoonSet: last.cocoonSet, passes };
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
  opts: DeployWaitOptions,
): Promise<DeployWaitResult> {
  const target = change === "suspend" ? "Suspended" : "Running";
  const pendingOf = (v: GoalView) =>
    change === "wake"
      ? wakePending(v.cocoonSet, v.pods)
      : // A registry that did not answer leaves the plan empty: every pod is still in question.
        v.tolerated
        ? lifecyclePods(v.cocoonSet, v.pods).map((p) => p.metadata?.name ?? "")
        : suspendPending(v.result.plan);
  return passesUntil(
    client,
    namespace,
    name,
    change,
    {
      tolerated: isSuspendRegistrySilence,
      failed: (messages) => `${change} of fleet ${namespace}/${name}: ${messages.join("; ")}`,
      judge(v) {
        const phase = v.cocoonSet.status?.phase ?? "unknown";
        const pending = pendingOf(v);
        const done = phase === target && pending.length === 0 && v.tolerated === "";
        const key = `phase ${phase}, ${pending.length} pod(s) ${change === "suspend" ? "not hibernated" : "not awake"} yet${v.tolerated ? ` (${v.tolerated})` : ""}`;
        return {
          done,
          key,
          line: done
            ? `${namespace}/${name}: ${target} after ${v.passes} pass(es)`
            : `${namespace}/${name}: ${change} pass ${v.passes}: ${key}`,
        };
      },
      timedOut(v) {
        const phase = v.cocoonSet.status?.phase ?? "unknown";
        const pending = pendingOf(v);
        const seconds = Math.round(opts.timeoutMs / 1000);
        const what =
          change === "suspend" ? "pods that did not hibernate" : "pods whose VM is not up again";
        return Promise.resolve({
          message: `${change} of fleet ${namespace}/${name} did not finish within ${seconds}s (${opts.timeoutField}): phase ${phase}; ${what}: ${describePods(v.pods, pending) || "none"}${v.tolerated ? `; ${v.tolerated}` : ""}. The CocoonSet keeps its spec; the next \`pulumi up\` waits again`,
          pending,
        });
      },
    },
    opts,
  );
}

/**
 * Runs passes until every member the spec asks to run is Ready and the CocoonSet's status says
 * so (deploy-view.ts): done after a pass during which no pod changed, so the status that
 * pass wrote was derived from those very pods (phase `Running`, ready counts equal to the
 * desired ones). A suspended fleet has no member to wait for. Any pass failure other than a
 * conflict fails at once; on timeout the error names each member that is not Ready and why,
 * with the last Warning event about its pod.
 */
export async function awaitReady(
  client: KubeClient,
  namespace: string,
  name: string,
  opts: DeployWaitOptions,
): Promise<DeployWaitResult> {
  const fleet = `${namespace}/${name}`;
  return passesUntil(
    client,
    namespace,
    name,
    "wait for",
    {
      tolerated: () => false,
      failed: (messages) => `waiting for fleet ${fleet} to be Ready: ${messages.join("; ")}`,
      judge(v) {
        const r = readiness(v.cocoonSet, v.pods);
        const done = v.stable && r.notReady.length === 0 && r.leaving.length === 0;
        const line = readinessLine(fleet, r);
        return {
          done,
          key: line,
          line: done ? `${fleet}: ${r.awaited.length} member(s) Ready` : line,
        };
      },
      async timedOut(v) {
        const r = readiness(v.cocoonSet, v.pods);
        const uids = new Map(
          r.awaited
            .filter((m) => !m.ready && m.live?.metadata?.uid)
            .map((m): [string, string] => [m.pod, m.live?.metadata?.uid ?? ""]),
        );
        const warnings = uids.size > 0 ? await podWarnings(client, namespace, uids) : new Map();
        return {
          message: readinessTimeoutMessage(
            fleet,
            opts.budgetSeconds ?? Math.round(opts.timeoutMs / 1000),
            r,
            warnings,
          ),
          pending: [...r.notReady, ...r.leaving],
        };
      },
    },
    opts,
  );
}

/**
 * The last Warning event about each of the pods (name → uid), from one list of the
 * namespace's events; none when they cannot be read (a caller without the right to list
 * events still gets the pods' own words).
 */
async function podWarnings(
  client: KubeClient,
  namespace: string,
  pods: ReadonlyMap<string, string>,
): Promise<Map<string, PodWarning>> {
  try {
    const events = await client.list<ClusterEvent>(paths.events(namespace));
    return lastWarnings(events.items, pods);
  } catch {
    return new Map();
  }
}
