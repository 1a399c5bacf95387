/**
 * What the slots resource says and waits for: around a suspend or a wake of its fleet, the
 * change a new spec asks for, the one-line summary preview prints for it, and which pods a
 * suspend or a wake still waits for (behaviour.md §7.4); before `pulumi up` returns, every
 * member the spec asks to run Ready as the CocoonSet's status counts it, and no pod beyond
 * the spec left, with the timeout message that says, per member, why it is not Ready (§7.3).
 * Pure: the slots resource (slots.ts) and its waits (deploy-wait.ts) feed it the cluster's
 * objects.
 */
import { asksHibernate } from "../../engine/lifecycle/index.js";
import { attributedView } from "../../engine/attribution/index.js";
import type { Plan } from "../../engine/plan/index.js";
import {
  agentPodName,
  classifyPods,
  isOwnedPod,
  isReady,
  isTerminal,
  isTerminating,
  toolboxPodName,
} from "../../engine/pods/index.js";
import {
  ANNOTATIONS,
  ANNOTATION_TRUE,
  LIFECYCLE_STATES,
  effectiveSuspend,
  type CocoonSet,
  type CocoonSetSpec,
  type Pod,
} from "../../engine/spec/index.js";
import type { SlotMap } from "./slot-view.js";

/** A flip of `spec.suspend` between two deploys. */
export type LifecycleChange = "suspend" | "wake";

/** How long `pulumi up` waits for a suspend or a wake by default, in seconds. */
export const DEFAULT_SUSPEND_TIMEOUT_SECONDS = 300;

/**
 * The change from the last deploy's spec to the new one: `suspend` when `spec.suspend`
 * turns true, `wake` when it turns from true to anything else, none otherwise (also when
 * the new value is not known yet, or there is no last deploy: a fleet created suspended is
 * a create, not a suspend).
 */
export function lifecycleChange(
  oldSpec: Partial<CocoonSetSpec> | undefined,
  newSpec: Partial<CocoonSetSpec> | undefined,
  isUnknown: (v: unknown) => boolean,
): LifecycleChange | undefined {
  if (oldSpec === undefined || newSpec === undefined || isUnknown(newSpec.suspend)) return;
  const was = oldSpec.suspend === true;
  const is = newSpec.suspend === true;
  if (!was && is) return "suspend";
  if (was && !is) return "wake";
  return undefined;
}

/** Whether a pod has a VM lifecycle the node agent reports on (static toolboxes have none). */
function managed(pod: Pod): boolean {
  return pod.metadata?.annotations?.[ANNOTATIONS.managed] === ANNOTATION_TRUE;
}

/** The pods a suspend or a wake concerns: owned, managed, live and not terminal. */
export function lifecyclePods(cs: CocoonSet, pods: readonly Pod[]): Pod[] {
  return pods.filter((p) => isOwnedPod(cs, p) && managed(p) && !isTerminal(p) && !isTerminating(p));
}

/**
 * How many pods the change moves: of the live pods when they could be listed, else of the
 * desired slots (every slot but a static toolbox).
 */
export function lifecycleCount(
  cs: CocoonSet,
  pods: readonly Pod[] | undefined,
  slots: SlotMap,
): number {
  if (pods !== undefined) return lifecyclePods(cs, pods).length;
  return Object.values(slots).filter((s) => s.mode !== "static").length;
}

/** The line preview prints for a suspend or a wake of the fleet. */
export function lifecycleSummary(
  change: LifecycleChange,
  namespace: string,
  name: string,
  count: number,
): string {
  const one = count === 1;
  return change === "suspend"
    ? `suspend fleet ${namespace}/${name} (${count} pod${one ? " hibernates" : "s hibernate"}; the slots are kept)`
    : `wake fleet ${namespace}/${name} (${count} pod${one ? " wakes" : "s wake"} from the hibernation snapshots)`;
}

/**
 * The pods a suspend still waits for, as the pass planned them (sorted, unique): those to
 * hibernate and, with `hibernatePolicy: release`, those to delete or still terminating (the
 * seat is free once they are gone).
 */
export function suspendPending(plan: Plan): string[] {
  const waits = new Set(["hibernate", "wait-hibernation", "release", "wait-release"]);
  const names = plan.steps.filter((s) => waits.has(s.decision)).map((s) => s.podName);
  return [...new Set(names)].sort();
}

/**
 * The pods a wake still waits for (sorted): a pod still asked to hibernate, or whose node
 * agent reports a state other than `ready` (`hibernated`, `hibernating`, `creating`). A pod
 * with no lifecycle state at all has no node agent reporting on it and is not waited for.
 */
export function wakePending(cs: CocoonSet, pods: readonly Pod[]): string[] {
  const out: string[] = [];
  for (const pod of lifecyclePods(cs, pods)) {
    const state = pod.metadata?.annotations?.[ANNOTATIONS.lifecycleState];
    if (asksHibernate(pod) || (state !== undefined && state !== LIFECYCLE_STATES.ready))
      out.push(pod.metadata?.name ?? "");
  }
  return out.sort();
}

/** `name (lifecycle state S)` for each named pod, for a timeout message. */
export function describePods(pods: readonly Pod[], names: readonly string[]): string {
  const byName = new Map(pods.map((p) => [p.metadata?.name ?? "", p]));
  return names
    .map((n) => {
      const pod = byName.get(n);
      if (!pod) return `${n} (gone)`;
      const state = pod.metadata?.annotations?.[ANNOTATIONS.lifecycleState];
      return `${n} (${state ? `lifecycle state ${state}` : "no lifecycle state reported"})`;
    })
    .join(", ");
}

/** One member `up` waits for. */
export interface AwaitedMember {
  /** The slot key of the Fleet's outputs: "0" (the main agent), "1".. or a toolbox's name. */
  member: string;
  /** What it is, for messages: `main agent`, `sub-agent 2`, `toolbox browser`. */
  role: string;
  /** The pod name the member runs in. */
  pod: string;
  /**
   * The pod of that name, when there is one: the member's own, or one being deleted, or (with
   * {@link foreign}) one that is not the fleet's member.
   */
  live?: Pod;
  /** The pod name is held by a pod the engine did not record as this member. */
  foreign?: boolean;
  /** Ready as the status counts it: the pod's Ready condition True and the VM not failed. */
  ready: boolean;
}

/** Where the fleet stands against what `up` waits for. */
export interface Readiness {
  /** Every member the spec asks to run, in slot order, toolboxes after. */
  awaited: AwaitedMember[];
  /** Names of the members not Ready yet (pod names), in the same order. */
  notReady: string[];
  /**
   * Members' pods beyond the spec (a scale-down's, a removed toolbox's) not being deleted yet,
   * by name: the status says Scaling while one is left.
   */
  leaving: string[];
}

/**
 * Whether the member's VM is asked to hibernate, or hibernates: a hibernate request on its pod
 * (a suspend, a CocoonHibernation) or the node agent's state `hibernating`/`hibernated`. Such a
 * member is not asked to run, so `up` does not wait for it.
 */
function hibernating(pod: Pod): boolean {
  const state = pod.metadata?.annotations?.[ANNOTATIONS.lifecycleState];
  return (
    asksHibernate(pod) ||
    state === LIFECYCLE_STATES.hibernating ||
    state === LIFECYCLE_STATES.hibernated
  );
}

/**
 * The members `up` waits for and where each stands. A suspended fleet (`spec.suspend`, or the idle policy's `status.idleSuspendedSince`) asks
 * none to run; otherwise the main agent, sub-agents 1..replicas and each toolbox, except a
 * member whose pod {@link hibernating} says is not asked to run. Members are read from the
 * engine's record (as the status reads them), so a pod someone else made is no member.
 */
export function readiness(cs: CocoonSet, pods: readonly Pod[]): Readiness {
  const view = attributedView(cs, pods);
  const classified = classifyPods(view, pods);
  const name = cs.metadata.name ?? "";
  const replicas = cs.spec.agent.replicas ?? 0;
  const toolboxes = (cs.spec.toolboxes ?? []).map((t) => t.name);
  const leaving = [
    ...[...classified.subAgents].filter(([slot]) => slot > replicas).map(([, p]) => p),
    ...[...classified.toolboxes].filter(([tb]) => !toolboxes.includes(tb)).map(([, p]) => p),
  ]
    .map((p) => p.metadata?.name ?? "")
    .sort();
  if (effectiveSuspend(cs)) return { awaited: [], notReady: [], leaving: [] };
  const awaited: AwaitedMember[] = [];
  const byName = new Map(pods.map((p) => [p.metadata?.name ?? "", p]));
  const add = (member: string, role: string, pod: string, own: Pod | undefined) => {
    if (own && hibernating(own)) return;
    // No member pod: say what holds the name, a pod being deleted or someone else's.
    const live = own ?? byName.get(pod);
    awaited.push({
      member,
      role,
      pod,
      ...(live ? { live } : {}),
      ...(!own && live && !isTerminating(live) ? { foreign: true } : {}),
      ready: own !== undefined && isReady(own) && !isTerminal(own),
    });
  };
  add("0", "main agent", agentPodName(name, 0), classified.main);
  for (let slot = 1; slot <= replicas; slot++)
    add(
      String(slot),
      `sub-agent ${slot}`,
      agentPodName(name, slot),
      classified.subAgents.get(slot),
    );
  for (const tb of toolboxes)
    add(tb, `toolbox ${tb}`, toolboxPodName(name, tb), classified.toolboxes.get(tb));
  return {
    awaited,
    notReady: awaited.filter((m) => !m.ready).map((m) => m.pod),
    leaving,
  };
}

/** A Warning event about a pod, as the readiness timeout names it. */
export interface PodWarning {
  reason: string;
  message: string;
}

/** A container's state as the API reports it (the engine's pod type keeps only its keys). */
interface ContainerState {
  waiting?: { reason?: string; message?: string };
  terminated?: { reason?: string; message?: string };
}

/** The first container waiting or terminated with a reason, as `container C waiting: R (M)`. */
function containerWhy(pod: Pod): string | undefined {
  for (const c of pod.status?.containerStatuses ?? []) {
    const state: ContainerState | undefined = c.state;
    for (const [kind, s] of [
      ["waiting", state?.waiting],
      ["terminated", state?.terminated],
    ] as const) {
      if (s?.reason)
        return `container ${c.name} ${kind}: ${s.reason}${s.message ? ` (${s.message})` : ""}`;
    }
  }
  return undefined;
}

/**
 * Why a member is not Ready, in a few words from its pod (pure): `no pod` (or a name another
 * pod holds), `terminating`,
 * the pod's phase with the condition that holds it (PodScheduled, then Initialized,
 * ContainersReady, Ready: the first that is False, with its reason and message), a
 * container's waiting reason, the VM's failed lifecycle state, and the last Warning event
 * about the pod when one is known.
 */
export function notReadyWhy(m: { live?: Pod; foreign?: boolean }, warning?: PodWarning): string {
  const pod = m.live;
  if (!pod) return "no pod";
  if (m.foreign)
    return "no pod: its name is held by a pod that is not this fleet's member (see the CocoonSet's SlotBlocked condition)";
  const parts: string[] = [];
  if (isTerminating(pod)) parts.push("terminating");
  const phase = pod.status?.phase ?? "Pending";
  const lifecycle = pod.metadata?.annotations?.[ANNOTATIONS.lifecycleState];
  if (phase === "Failed" || phase === "Succeeded") {
    const why = [pod.status?.reason, pod.status?.message].filter(Boolean).join(": ");
    parts.push(`phase ${phase}${why ? ` (${why})` : ""}`);
  } else {
    parts.push(`phase ${phase}`);
    const conditions = pod.status?.conditions ?? [];
    const held = ["PodScheduled", "Initialized", "ContainersReady", "Ready"]
      .map((type) => conditions.find((c) => c.type === type))
      .find((c) => c !== undefined && c.status !== "True");
    if (held) {
      const detail = [held.reason, held.message].filter(Boolean).join(": ");
      parts.push(`${held.type} ${held.status}${detail ? ` (${detail})` : ""}`);
    } else if (conditions.length === 0 && phase === "Pending") {
      parts.push(
        pod.spec?.nodeName ? `not started yet on node ${pod.spec.nodeName}` : "not scheduled yet",
      );
    }
    const container = containerWhy(pod);
    if (container) parts.push(container);
  }
  if (lifecycle?.toLowerCase() === LIFECYCLE_STATES.failed) {
    const message = pod.metadata?.annotations?.[ANNOTATIONS.lifecycleStateMessage];
    parts.push(`VM lifecycle state failed${message ? ` (${message})` : ""}`);
  }
  if (warning) parts.push(`last Warning event ${warning.reason}: ${warning.message}`);
  return parts.join(", ");
}

/**
 * The message of a readiness wait that ran out of time: how many members are Ready, then each
 * one that is not (its pod, its role, why) and each pod beyond the spec still present.
 */
export function readinessTimeoutMessage(
  fleet: string,
  seconds: number,
  r: Readiness,
  warnings: ReadonlyMap<string, PodWarning>,
): string {
  const ready = r.awaited.length - r.notReady.length;
  const members = r.awaited
    .filter((m) => !m.ready)
    .map((m) => `${m.pod} (${m.role}): ${notReadyWhy(m, warnings.get(m.pod))}`);
  const leaving = r.leaving.map((p) => `${p}: beyond the spec, not deleted yet`);
  return (
    `fleet ${fleet} was not Ready within ${seconds}s (timeoutSeconds): ${ready} of ${r.awaited.length} member(s) Ready; ` +
    // A message that ends a sentence of its own (the scheduler's do) gets no second period.
    `${[...members, ...leaving].join("; ").replace(/\.$/, "")}. ` +
    "The fleet is left as it is and the next `pulumi up` waits again; `skipAwait: true` on the Fleet returns without waiting"
  );
}

/** One progress line of the readiness wait, e.g. `NS/NAME: 3 of 4 member(s) Ready; waiting for fleet-big`. */
export function readinessLine(fleet: string, r: Readiness): string {
  const ready = r.awaited.length - r.notReady.length;
  const waiting = [...r.notReady, ...r.leaving.map((p) => `${p} to go`)];
  return `${fleet}: ${ready} of ${r.awaited.length} member(s) Ready${waiting.length ? `; waiting for ${waiting.join(", ")}` : ""}`;
}

/** An event as the events.k8s.io/v1 API lists it (the fields read here). */
export interface ClusterEvent {
  metadata?: { creationTimestamp?: string };
  regarding?: { uid?: string; name?: string; kind?: string };
  type?: string;
  reason?: string;
  note?: string;
  eventTime?: string | null;
  series?: { lastObservedTime?: string } | null;
  deprecatedLastTimestamp?: string | null;
}

/** When an event was last seen: its series' last time, else its time, else its creation. */
function lastSeen(e: ClusterEvent): string {
  return (
    e.series?.lastObservedTime ??
    e.deprecatedLastTimestamp ??
    e.eventTime ??
    e.metadata?.creationTimestamp ??
    ""
  );
}

/**
 * The last Warning event about each pod, keyed by pod name (pure): only events that regard a
 * pod of the given uids (a pod recreated under the same name has a new uid, so the old one's
 * events are not its).
 */
export function lastWarnings(
  events: readonly ClusterEvent[],
  pods: ReadonlyMap<string, string>,
): Map<string, PodWarning> {
  const byUid = new Map([...pods].map(([name, uid]) => [uid, name]));
  const best = new Map<string, ClusterEvent>();
  for (const e of events) {
    if (e.type !== "Warning" || e.regarding?.kind !== "Pod") continue;
    const name = byUid.get(e.regarding.uid ?? "");
    if (name === undefined || e.regarding.uid === "") continue;
    const before = best.get(name);
    if (!before || lastSeen(e) >= lastSeen(before)) best.set(name, e);
  }
  return new Map(
    [...best].map(([name, e]) => [
      name,
      { reason: e.reason ?? "", message: (e.note ?? "").trim() },
    ]),
  );
}
