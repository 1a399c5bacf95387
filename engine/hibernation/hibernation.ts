// Per-pod hibernate and wake (the CocoonHibernation resource): what the next reconcile of
// one CR does, from the CR, its target pod, the other CRs of the namespace, the registry's
// answer and the time. Pure: the plan is engine actions (hibernation-plan.ts), carried out
// by the engine (engine/execute/hibernation.ts). Behaviour: docs/behaviour.md §3.18; the
// upstream it matches: docs/lifecycle-design.md ("CocoonHibernation").
import {
  ANNOTATIONS,
  ANNOTATION_TRUE,
  DEFAULT_HIBERNATE_TIMEOUT_MS,
  DEFAULT_WAKE_TIMEOUT_MS,
  LABELS,
  LIFECYCLE_STATES,
  MANAGED_BY,
  SNAPSHOT_TAGS,
} from "../spec/constants.js";
import type {
  CocoonHibernation,
  CocoonHibernationPhase,
  CocoonHibernationStatus,
  Condition,
} from "../spec/generated/hibernation-types.js";
import { HIBERNATION_FINALIZER } from "../spec/hibernation-schema.js";
import { finalizerActions } from "../plan/finalizer.js";
import {
  HIBERNATION_METRICS,
  type HibernationAction,
  type HibernationPlan,
} from "./hibernation-plan.js";
import type { Pod } from "../spec/kube-types.js";
import { vmLive } from "../pods/pod-state.js";
import { asksHibernate } from "../lifecycle/suspend.js";
import type { CocoonSet } from "../spec/generated/types.js";
import { effectiveSuspend } from "../spec/defaults.js";
import { attributePodVm, vmNameHolders } from "../snapshots/vm-names.js";
import { namespaceOf, rfc3339Seconds } from "../kube/objects.js";

/** Poll interval while a transition is in flight or the pod is not there yet. */
export const HIBERNATION_POLL_MS = 5_000;

/** Event reasons of the CocoonHibernation controller (the first five as upstream's). */
export const HIBERNATION_EVENTS = {
  hibernated: "Hibernated",
  wokenActive: "WokenActive",
  retryRequested: "RetryRequested",
  hibernateTimedOut: "HibernateTimedOut",
  wakeTimedOut: "WakeTimedOut",
  /** Ours: a second CR for a pod that another CR already targets (upstream's webhook refuses it). */
  duplicate: "DuplicateHibernation",
  /** Ours: the controller runs without `--oci-registry` and cannot confirm a snapshot. */
  noRegistry: "RegistryNotConfigured",
  /** Ours: the pod's VM name is not one the controller can attribute to it (vm-names.ts). */
  vmNameMismatch: "VMNameMismatch",
  /** Ours: the snapshot a Hibernated CR recorded is gone from the registry (Warning). */
  snapshotLost: "SnapshotLost",
} as const;

/**
 * What the registry said about `<vm>:hibernate`, when the plan needed to know; `error` is
 * the registry client's own text (the plan's refusal carries it, naming the VM).
 */
export type TagFact = { exists: boolean } | { error: string };

/** Inputs of {@link planHibernation}. */
export interface HibernationInput {
  cr: CocoonHibernation;
  /** The pod `spec.podRef` names, when it exists. */
  pod: Pod | undefined;
  /** Every CocoonHibernation of the namespace (may include `cr` itself). */
  all: readonly CocoonHibernation[];
  /** Whether the controller has a snapshot registry. */
  registry: boolean;
  /**
   * The cluster's CocoonSets that could name the pod's VM (`vk-<ns>-<pod>`) or the one the CR
   * recorded (any others change nothing): the pod's VM name is acted on only when it is the
   * one the controller derives for that pod and no other fleet holds it (vm-names.ts).
   * Omitted: not checked.
   */
  fleets?: readonly CocoonSet[];
  /** The answer for {@link hibernationProbe}'s VM; omitted when none was asked. */
  tag?: TagFact;
  nowMs: number;
  /** @default DEFAULT_HIBERNATE_TIMEOUT_MS */
  hibernateTimeoutMs?: number;
  /** @default DEFAULT_WAKE_TIMEOUT_MS */
  wakeTimeoutMs?: number;
}

/** One event on the CR. */
type HibernationEvent = Extract<HibernationAction, { kind: "event" }>;

/** The parts of one plan, before they are put in the executor's order. */
interface Parts {
  /** Set (`"true"`) or remove (`null`) the target pod's hibernate annotation (by uid). */
  annotate?: { pod: string; uid: string; value: typeof ANNOTATION_TRUE | null };
  /** Drop `<vm>:hibernate` (best effort). */
  dropTag?: string;
  /** The status to write; undefined when it is already so. */
  status?: CocoonHibernationStatus;
  events: HibernationEvent[];
  /** A transition ended: its duration, for the histogram. */
  observe?: Extract<HibernationAction, { kind: "observe-duration" }>;
}

/**
 * The actions of a plan, in the order they run: the pod's request first (what the node
 * agent acts on), the tag, the status, then the events and the histogram that report it.
 */
function ordered(parts: Parts): HibernationAction[] {
  const actions: HibernationAction[] = [];
  if (parts.annotate) {
    const { pod, uid, value } = parts.annotate;
    actions.push({
      kind: "annotate-pod",
      name: pod,
      uid,
      annotations: { [ANNOTATIONS.hibernate]: value },
    });
  }
  if (parts.dropTag)
    actions.push({
      kind: "delete-snapshot-tag",
      vm: parts.dropTag,
      tag: SNAPSHOT_TAGS.hibernate,
      bestEffort: true,
    });
  if (parts.status) actions.push({ kind: "write-status", status: parts.status });
  actions.push(...parts.events);
  if (parts.observe) actions.push(parts.observe);
  return actions;
}

function event(type: HibernationEvent["type"], reason: string, message: string): HibernationEvent {
  return { kind: "event", type, reason, message };
}

const READY = "Ready";

/** The VM name the node agent runs for the pod (`vm.cocoonstack.io/name`), or "". */
function podVmName(pod: Pod | undefined): string {
  return pod?.metadata?.annotations?.[ANNOTATIONS.vmName] ?? "";
}

/**
 * The completion gate of one pod: the node agent reports `hibernated` for a generation at
 * least the pod's own generation stamp (a stale state of an earlier round is rejected).
 */
function podReportsHibernated(pod: Pod): boolean {
  const a = pod.metadata?.annotations ?? {};
  const observed = Number(a[ANNOTATIONS.lifecycleObservedGeneration] ?? "");
  const stamp = Number(a[ANNOTATIONS.generation] ?? "0");
  return (
    a[ANNOTATIONS.lifecycleState] === LIFECYCLE_STATES.hibernated &&
    Number.isFinite(observed) &&
    observed >= (Number.isFinite(stamp) ? stamp : 0)
  );
}

function readyOf(cr: CocoonHibernation): Condition | undefined {
  return cr.status?.conditions?.find((c) => c.type === READY);
}

function transitionMs(cr: CocoonHibernation): number | undefined {
  const t = readyOf(cr)?.lastTransitionTime;
  const ms = t ? Date.parse(t) : NaN;
  return Number.isFinite(ms) ? ms : undefined;
}

/** Go's spelling of a duration, as upstream's messages print it (`3m0s`, `1.5s`). */
export function goDuration(ms: number): string {
  if (ms < 1000) return `${ms}ms`;
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor((ms % 3_600_000) / 60_000);
  const s = (ms % 60_000) / 1000;
  const sec = `${Number.isInteger(s) ? s : s.toFixed(3).replace(/0+$/, "")}s`;
  if (h > 0) return `${h}h${m}m${sec}`;
  if (m > 0) return `${m}m${sec}`;
  return sec;
}

/**
 * The CR of `all` that holds the pod: the oldest live CR targeting it (by creation time,
 * then the one that already recorded the VM, then name). Upstream's admission webhook refuses a second CR for one pod; here the
 * reconciler refuses every CR but this one (docs/behaviour.md §3.18).
 */
function podHolder(
  all: readonly CocoonHibernation[],
  podName: string,
): CocoonHibernation | undefined {
  const live = all.filter((o) => !o.metadata.deletionTimestamp && o.spec?.podRef?.name === podName);
  // Creation times have a resolution of one second: within one, a CR that already acted on
  // the pod (it recorded the VM) keeps it.
  const acted = (o: CocoonHibernation) => ((o.status?.vmName ?? "") !== "" ? 0 : 1);
  live.sort(
    (a, b) =>
      (a.metadata.creationTimestamp ?? "").localeCompare(b.metadata.creationTimestamp ?? "") ||
      acted(a) - acted(b) ||
      (a.metadata.name ?? "").localeCompare(b.metadata.name ?? ""),
  );
  return live[0];
}

/** Whether another live CR still tracks this CR's VM (by status or by the same pod). */
function vmHeldByAnother(cr: CocoonHibernation, all: readonly CocoonHibernation[]): boolean {
  const vm = cr.status?.vmName ?? "";
  return all.some(
    (o) =>
      o.metadata.uid !== cr.metadata.uid &&
      !o.metadata.deletionTimestamp &&
      ((vm !== "" && o.status?.vmName === vm) || o.spec?.podRef?.name === cr.spec?.podRef?.name),
  );
}

/** Which transition this reconcile drives: a reversed desire first finishes the one in flight. */
function flowOf(cr: CocoonHibernation): "hibernate" | "wake" | undefined {
  const phase = cr.status?.phase;
  switch (cr.spec?.desire) {
    case "Hibernate":
      return phase === "Waking" ? "wake" : "hibernate";
    case "Wake":
      return phase === "Hibernating" ? "hibernate" : "wake";
    default:
      return undefined;
  }
}

/**
 * The VM whose `<vm>:hibernate` tag the next reconcile needs to know about, if any: only a
 * hibernate whose pod already passed the node agent's gate (so a VM still hibernating costs
 * no request).
 */
export function hibernationProbe(input: Omit<HibernationInput, "tag">): string | undefined {
  const { cr, pod } = input;
  if (cr.metadata.deletionTimestamp || !input.registry || !pod) return undefined;
  if (!(cr.metadata.finalizers ?? []).includes(HIBERNATION_FINALIZER)) return undefined;
  const vm = podVmName(pod);
  if (vm === "" || podHolder(input.all, cr.spec.podRef.name)?.metadata.uid !== cr.metadata.uid)
    return undefined;
  if (input.fleets && "refusal" in attributePodVm(pod, input.fleets, cr.status?.vmName))
    return undefined;
  return flowOf(cr) === "hibernate" && podReportsHibernated(pod) ? vm : undefined;
}

/** A status with the Ready condition as `phase` implies, or undefined when nothing moved. */
function statusFor(
  cr: CocoonHibernation,
  nowMs: number,
  phase: CocoonHibernationPhase,
  vmName: string | undefined,
  ready: { status: "True" | "False"; reason: string; message: string },
): CocoonHibernationStatus | undefined {
  const generation = cr.metadata.generation ?? 0;
  const old = cr.status ?? {};
  const prev = readyOf(cr);
  const vm = vmName ?? old.vmName;
  // A deadline phase entered from another phase restarts its clock (a Failed → Waking
  // retry must not inherit the old one): the transition time is now even when Ready stays False.
  const restart = (phase === "Hibernating" || phase === "Waking") && old.phase !== phase;
  const same =
    old.phase === phase &&
    (old.vmName ?? "") === (vm ?? "") &&
    old.observedGeneration === generation &&
    prev?.status === ready.status &&
    prev.reason === ready.reason &&
    prev.message === ready.message &&
    prev.observedGeneration === generation;
  if (same) return undefined;
  const now = rfc3339Seconds(nowMs);
  const condition: Condition = {
    type: READY,
    status: ready.status,
    reason: ready.reason,
    message: ready.message,
    observedGeneration: generation,
    lastTransitionTime:
      !restart && prev?.status === ready.status && prev.lastTransitionTime
        ? prev.lastTransitionTime
        : now,
  };
  const others = (old.conditions ?? []).filter((c) => c.type !== READY);
  return {
    observedGeneration: generation,
    phase,
    ...(vm ? { vmName: vm } : {}),
    conditions: [...others, condition],
  };
}

function phaseStatus(
  cr: CocoonHibernation,
  nowMs: number,
  phase: CocoonHibernationPhase,
  vmName: string,
): CocoonHibernationStatus | undefined {
  const done = phase === "Hibernated" || phase === "Active";
  return statusFor(cr, nowMs, phase, vmName, {
    status: done ? "True" : "False",
    reason: done ? "Done" : phase === "Failed" ? "Failed" : "Pending",
    message: phase,
  });
}

function failedStatus(cr: CocoonHibernation, nowMs: number, message: string) {
  return statusFor(cr, nowMs, "Failed", undefined, { status: "False", reason: "Failed", message });
}

/** Pending never demotes Hibernated or Waking: they carry the CocoonSet's restore intent. */
function pendingStatus(cr: CocoonHibernation, nowMs: number, message: string) {
  const phase = cr.status?.phase;
  if (phase === "Hibernated" || phase === "Waking") return undefined;
  return statusFor(cr, nowMs, "Pending", undefined, {
    status: "False",
    reason: "Pending",
    message,
  });
}

/** Whether the controller's pod watch (the managed pods) brings this pod's changes to its CRs. */
function podWatched(pod: Pod): boolean {
  return pod.metadata?.labels?.[LABELS.managedBy] === MANAGED_BY;
}

/**
 * When a hibernate that waits for the node agent on a watched pod looks again: at its deadline. The node
 * agent's answer is an annotation on the pod, whose change reaches the CR through the pod
 * watch at once; a poll meanwhile would only repeat the same pass (and, once the answer came,
 * run one pass more for nothing). The registry is not watched: a pod that reports hibernated
 * while its tag is not seen yet is polled (HIBERNATION_POLL_MS).
 * Transition times have a resolution of one second, and the deadline is passed only once
 * `elapsed > timeout`: a second more.
 */
export function hibernateDeadlineMs(timeoutMs: number, elapsedMs: number | undefined): number {
  return Math.max(HIBERNATION_POLL_MS, timeoutMs - (elapsedMs ?? 0) + 1000);
}

/** Seconds in the current deadline phase, when the CR is in `phase`. */
function elapsedIn(cr: CocoonHibernation, phase: CocoonHibernationPhase, nowMs: number) {
  if (cr.status?.phase !== phase) return undefined;
  const since = transitionMs(cr);
  return since === undefined ? undefined : nowMs - since;
}

/**
 * Plans one reconcile of a CocoonHibernation (docs/behaviour.md §3.18). The finalizer first;
 * then the pod and its VM name must exist (else `Pending`, polled); the CR must be the one
 * holding the pod (else `Failed`); a registry must be configured (else `Failed`). Then the
 * transition the desire (or the one in flight) asks for.
 */
export function planHibernation(input: HibernationInput): HibernationPlan {
  const { cr, pod, nowMs } = input;
  const events: HibernationEvent[] = [];
  const ns = cr.metadata.namespace ?? "";
  if (cr.metadata.deletionTimestamp) return planHibernationDeletion(input);
  const finalizer = finalizerActions(cr.metadata, HIBERNATION_FINALIZER, "live");
  if (finalizer.length > 0)
    return { actions: finalizer, requeueAfterMs: 0, decision: "add-finalizer" };
  const podName = cr.spec?.podRef?.name ?? "";
  if (!pod) {
    return {
      actions: ordered({
        status: pendingStatus(cr, nowMs, `pod ${ns}/${podName} not yet present`),
        events,
      }),
      requeueAfterMs: HIBERNATION_POLL_MS,
      decision: "wait-pod",
    };
  }
  const vm = podVmName(pod);
  if (vm === "") {
    return {
      actions: ordered({
        status: pendingStatus(
          cr,
          nowMs,
          `pod ${ns}/${podName} has no ${ANNOTATIONS.vmName} annotation yet`,
        ),
        events,
      }),
      requeueAfterMs: HIBERNATION_POLL_MS,
      decision: "wait-vm-name",
    };
  }
  // The annotation is anyone's to write: act only on a VM name the controller can attribute.
  const attributed = input.fleets ? attributePodVm(pod, input.fleets, cr.status?.vmName) : { vm };
  if ("refusal" in attributed) {
    const status = failedStatus(cr, nowMs, attributed.refusal);
    if (status)
      events.push(event("Warning", HIBERNATION_EVENTS.vmNameMismatch, attributed.refusal));
    return { actions: ordered({ status, events }), decision: "refuse-vm-name" };
  }
  const holder = podHolder(input.all, podName);
  if (holder && holder.metadata.uid !== cr.metadata.uid) {
    const message = `pod ${ns}/${podName} is already targeted by CocoonHibernation ${holder.metadata.name}; one CocoonHibernation per pod`;
    const status = failedStatus(cr, nowMs, message);
    if (status) events.push(event("Warning", HIBERNATION_EVENTS.duplicate, message));
    return { actions: ordered({ status, events }), decision: "refuse-duplicate" };
  }
  if (!input.registry) {
    const message =
      "no snapshot registry is configured (--oci-registry / OCI_REGISTRY): hibernation cannot be confirmed";
    const status = failedStatus(cr, nowMs, message);
    if (status) events.push(event("Warning", HIBERNATION_EVENTS.noRegistry, message));
    return { actions: ordered({ status, events }), decision: "no-registry" };
  }
  const flow = flowOf(cr);
  if (!flow) {
    return {
      actions: ordered({
        status: failedStatus(cr, nowMs, `unknown desire "${String(cr.spec?.desire)}"`),
        events,
      }),
      decision: "unknown-desire",
    };
  }
  if (cr.status?.phase === "Failed") {
    events.push(
      event(
        "Normal",
        HIBERNATION_EVENTS.retryRequested,
        `retrying ${cr.spec.desire} after prior failure`,
      ),
    );
  }
  const plan =
    flow === "hibernate" ? planHibernate(input, pod, vm, events) : planWake(input, pod, vm, events);
  // A reversed desire waits for the transition in flight: once that is over, the one asked
  // for starts at once (this pass's own status write does not bring the CR back).
  const reversed = (flow === "hibernate") !== (cr.spec.desire === "Hibernate");
  return reversed && plan.requeueAfterMs === undefined && !plan.refusal
    ? { ...plan, requeueAfterMs: 0 }
    : plan;
}

function exitEvent(
  cr: CocoonHibernation,
  next: CocoonHibernationPhase,
  nowMs: number,
  result: "ok" | "timeout",
): Parts["observe"] {
  const phase = cr.status?.phase;
  if (phase !== "Hibernating" && phase !== "Waking") return undefined;
  if (phase === next) return undefined;
  const since = transitionMs(cr);
  if (since === undefined) return undefined;
  return {
    kind: "observe-duration",
    metric: phase === "Hibernating" ? HIBERNATION_METRICS.hibernate : HIBERNATION_METRICS.wake,
    result,
    seconds: Math.max(0, (nowMs - since) / 1000),
  };
}

function planHibernate(
  input: HibernationInput,
  pod: Pod,
  vm: string,
  events: HibernationEvent[],
): HibernationPlan {
  const { cr, nowMs } = input;
  const timeoutMs = input.hibernateTimeoutMs ?? DEFAULT_HIBERNATE_TIMEOUT_MS;
  const annotate = asksHibernate(pod)
    ? undefined
    : {
        pod: pod.metadata?.name ?? "",
        uid: pod.metadata?.uid ?? "",
        value: ANNOTATION_TRUE as typeof ANNOTATION_TRUE,
      };
  const elapsed = elapsedIn(cr, "Hibernating", nowMs);
  const overdue = elapsed !== undefined && elapsed > timeoutMs;
  if (podReportsHibernated(pod)) {
    const tag = input.tag;
    if (tag && "error" in tag && !overdue) {
      // A registry that keeps failing still meets the deadline below.
      return {
        actions: ordered({ annotate, events }),
        refusal: { kind: "snapshot-registry-unanswered", vm, detail: tag.error },
        decision: "probe-failed",
      };
    }
    if (tag && "exists" in tag && tag.exists) {
      const status = phaseStatus(cr, nowMs, "Hibernated", vm);
      if (status && cr.status?.phase !== "Hibernated") {
        events.push(
          event("Normal", HIBERNATION_EVENTS.hibernated, `snapshot ${vm} pushed to the registry`),
        );
      }
      return {
        actions: ordered({
          annotate,
          status,
          events,
          observe: exitEvent(cr, "Hibernated", nowMs, "ok"),
        }),
        decision: "hibernated",
      };
    }
    if (tag && "exists" in tag && !tag.exists && cr.status?.phase === "Hibernated") {
      // The snapshot this CR recorded is gone: said once, and the phase kept, so a pod built
      // again reports the loss too (docs/behaviour.md §3.20) instead of booting quietly.
      const message = `snapshot ${vm}:hibernate was recorded and is no longer in the registry; a wake or a rebuild starts the VM without its saved state`;
      const status = statusFor(cr, nowMs, "Hibernated", vm, {
        status: "False",
        reason: "SnapshotLost",
        message,
      });
      if (status) events.push(event("Warning", HIBERNATION_EVENTS.snapshotLost, message));
      return { actions: ordered({ annotate, status, events }), decision: "snapshot-lost" };
    }
  }
  if (overdue) {
    events.push(
      event(
        "Warning",
        HIBERNATION_EVENTS.hibernateTimedOut,
        `snapshot ${vm} not confirmed in the registry within ${goDuration(timeoutMs)}`,
      ),
    );
    return {
      actions: ordered({
        annotate,
        status: failedStatus(cr, nowMs, `hibernate not confirmed within ${goDuration(timeoutMs)}`),
        events,
        observe: exitEvent(cr, "Failed", nowMs, "timeout"),
      }),
      decision: "hibernate-timed-out",
    };
  }
  return {
    actions: ordered({ annotate, status: phaseStatus(cr, nowMs, "Hibernating", vm), events }),
    requeueAfterMs:
      podReportsHibernated(pod) || !podWatched(pod)
        ? HIBERNATION_POLL_MS
        : hibernateDeadlineMs(timeoutMs, elapsed),
    decision: "wait-hibernated",
  };
}

function planWake(
  input: HibernationInput,
  pod: Pod,
  vm: string,
  events: HibernationEvent[],
): HibernationPlan {
  const { cr, nowMs } = input;
  const timeoutMs = input.wakeTimeoutMs ?? DEFAULT_WAKE_TIMEOUT_MS;
  const annotate = asksHibernate(pod)
    ? { pod: pod.metadata?.name ?? "", uid: pod.metadata?.uid ?? "", value: null }
    : undefined;
  // As upstream: a running container with a VM id is awake (the node agent drops the id at
  // hibernation and writes a fresh one once the VM is cloned back).
  if (vmLive(pod)) {
    const status = phaseStatus(cr, nowMs, "Active", vm);
    if (status && cr.status?.phase !== "Active") {
      events.push(
        event(
          "Normal",
          HIBERNATION_EVENTS.wokenActive,
          `pod ${pod.metadata?.namespace ?? ""}/${pod.metadata?.name ?? ""} is running`,
        ),
      );
    }
    return {
      actions: ordered({
        annotate,
        dropTag: vm,
        status,
        events,
        observe: exitEvent(cr, "Active", nowMs, "ok"),
      }),
      decision: "woken",
    };
  }
  const elapsed = elapsedIn(cr, "Waking", nowMs);
  if (elapsed !== undefined && elapsed > timeoutMs) {
    events.push(
      event(
        "Warning",
        HIBERNATION_EVENTS.wakeTimedOut,
        `the node agent did not report the container running within ${goDuration(timeoutMs)}`,
      ),
    );
    return {
      actions: ordered({
        annotate,
        status: failedStatus(
          cr,
          nowMs,
          `wake timed out after ${goDuration(timeoutMs)}; the node agent never reported the container running`,
        ),
        events,
        observe: exitEvent(cr, "Failed", nowMs, "timeout"),
      }),
      decision: "wake-timed-out",
    };
  }
  return {
    actions: ordered({ annotate, status: phaseStatus(cr, nowMs, "Waking", vm), events }),
    requeueAfterMs: HIBERNATION_POLL_MS,
    decision: "wait-woken",
  };
}

/**
 * Whether a CR of namespace `ns` may drop `<vm>:hibernate`: the name is one of that
 * namespace's (`vk-<ns>-…`) and no fleet of another namespace holds it (a status recorded
 * before the name was checked, or a fleet created since, never costs another tenant its VM).
 */
function mayDropFromNamespace(ns: string, vm: string, fleets: readonly CocoonSet[]): boolean {
  if (!vm.startsWith(`vk-${ns}-`)) return false;
  return (
    vmNameHolders(
      vm,
      fleets.filter((f) => namespaceOf(f) !== ns),
    ).length === 0
  );
}

/**
 * Whether a suspended fleet of namespace `ns` (its spec, or its idle policy) holds `vm`: the
 * VM's snapshot is that suspend's, which its gate and its wake need.
 */
function suspendHolds(ns: string, vm: string, fleets: readonly CocoonSet[]): boolean {
  const suspended = fleets.filter((f) => namespaceOf(f) === ns && effectiveSuspend(f));
  return vmNameHolders(vm, suspended).length > 0;
}

/**
 * A CR being deleted: drop `<status.vmName>:hibernate` unless another live CR still tracks
 * that VM (the last holder drops it), then release the finalizer. Best effort: the tag
 * delete's failure does not hold the CR.
 */
function planHibernationDeletion(
  input: Pick<HibernationInput, "cr" | "all" | "registry" | "fleets">,
): HibernationPlan {
  const { cr } = input;
  if (!(cr.metadata.finalizers ?? []).includes(HIBERNATION_FINALIZER))
    return { actions: [], decision: "deleted" };
  const vm = cr.status?.vmName ?? "";
  // A CR that woke its VM dropped the tag then (planWake): a tag there now is a later
  // hibernation's, of its fleet's suspend or another CR, which this deletion must not take
  // (the suspend would wait for it forever, and its wake restore nothing). Nor does a CR whose
  // VM's fleet is suspended: whichever hibernation pushed the tag, that suspend holds it now
  // (a CR woken by its fleet and deleted before it was Active met the suspend that followed).
  const drop =
    input.registry &&
    vm !== "" &&
    cr.status?.phase !== "Active" &&
    !vmHeldByAnother(cr, input.all) &&
    !suspendHolds(namespaceOf(cr), vm, input.fleets ?? []) &&
    (!input.fleets || mayDropFromNamespace(namespaceOf(cr), vm, input.fleets));
  return {
    actions: [
      ...ordered({ dropTag: drop ? vm : undefined, events: [] }),
      ...finalizerActions(cr.metadata, HIBERNATION_FINALIZER, "released"),
    ],
    decision: drop ? "drop-tag" : vm !== "" ? "keep-tag" : "release",
  };
}
