// `hibernatePolicy: release` (slot release), planned: a suspend that frees the fleet's
// scheduling seat once every VM's snapshot is in the registry, and the wake that restores
// the main agent from it, preferring the node it hibernated on. Pure: the registry facts
// come in as an input, the decisions go out as plan steps the executor carries out.
// Behaviour: docs/behaviour.md §3.16; the upstream it matches: docs/lifecycle-design.md.
import { unschedulableMessage } from "./unschedulable.js";
import { memberOf, memberRole, recordedVms } from "../attribution/attribution.js";
import { classifyPods, isOwnedPod, parseSlot, type ClassifiedPods } from "../pods/classify.js";
import {
  ANNOTATIONS,
  ANNOTATION_TRUE,
  EVENT_REASONS,
  MAIN_RETRY_MS,
  NODE_LABELS,
  PLAN_METRICS,
  SNAPSHOT_TAGS,
} from "../spec/constants.js";
import type { CocoonSet, CocoonSetPhase, CocoonSetStatus } from "../spec/generated/types.js";
import type { Affinity, Pod, PodManifest } from "../spec/kube-types.js";
import type { PlanAction, Refusal, PlanStep, PlanTarget, StepWait } from "../plan/plan-types.js";
import { agentPodName, buildAgentPod, vmNameFor } from "../pods/pod-builder.js";
import { isTerminal, isTerminating, vmLive } from "../pods/pod-state.js";
import { deriveStatus, statusEqual } from "../plan/status.js";
import {
  SUSPEND_POLL_MS,
  asksHibernate,
  deletionHold,
  gateProbes,
  hibernationGate,
  suspendUnanswered,
  type SnapshotFacts,
} from "./suspend.js";
import { deleteVmNamesStash, teardownVmNames } from "../snapshots/teardown.js";
import type { HibernationTarget } from "../snapshots/hibernation-targets.js";
import { namespaceOf } from "../kube/objects.js";

/** Where a completed wake's main agent landed: the `placement` label of the wake counter. */
type WakePlacement = "hint-node" | "pool";

/** Weight of the wake's preferred node affinity to the node hint (the strongest there is). */
export const HINT_AFFINITY_WEIGHT = 100;

/** The node hint a release suspend left on the CocoonSet ("" when none). */
function hibernatedOnNode(cs: CocoonSet): string {
  return cs.metadata.annotations?.[ANNOTATIONS.hibernatedOnNode] ?? "";
}

/** How a wake stands, read from the phase, the hint and the main agent. */
interface WakeState {
  hint: string;
  /** Waking, or an unfinished wake whose phase was overwritten (restored main, hint set). */
  waking: boolean;
  /** Suspended, or Suspending with the hint (the deletes ran before Suspended was written). */
  released: boolean;
}

function wakeState(cs: CocoonSet, main: Pod | undefined): WakeState {
  const hint = hibernatedOnNode(cs);
  const phase = cs.status?.phase;
  const unfinished =
    main !== undefined &&
    main.metadata?.annotations?.[ANNOTATIONS.restoreFromHibernate] === ANNOTATION_TRUE &&
    !asksHibernate(main) &&
    hint !== "";
  return {
    hint,
    waking: phase === "Waking" || unfinished,
    released: phase === "Suspended" || (phase === "Suspending" && hint !== ""),
  };
}

/**
 * The VMs whose `<vm>:hibernate` tag a release-policy pass consults: a release suspend's
 * gate (as the retain one), and a wake's slot 0 while its main agent is missing. Everything
 * else asks nothing, so a steady fleet costs the registry no request.
 */
export function slotReleaseProbes(cs: CocoonSet, pods: readonly Pod[]): string[] {
  const owned = classifyPods(cs, pods);
  if (owned.main && isTerminal(owned.main)) return [];
  if (cs.spec.suspend === true) {
    return cs.spec.hibernatePolicy === "release" ? gateProbes(cs, memberPods(owned)) : [];
  }
  const state = wakeState(cs, owned.main);
  if (owned.main || !(state.waking || state.released)) return [];
  return [vmNameFor(namespaceOf(cs), cs.metadata.name ?? "", 0)];
}

/** What the slot-release part of a pass decided; plan.ts folds it into the plan. */
export interface SlotReleasePlan {
  steps: PlanStep[];
  /** Why the pass failed closed (then there are no steps). */
  refusals: Refusal[];
  /** Requeue delay, when the pass waits. */
  waitMs?: number;
  /** Whether the pass writes the status as a quiet pass does (with {@link phase}). */
  writeStatus: boolean;
  /** The phase of that status; undefined: derived from the pods. */
  phase?: CocoonSetPhase;
  /** A status written after the steps even though they delete pods (Suspended). */
  statusAfter?: CocoonSetStatus;
}

/** Inputs of {@link planSlotRelease}. */
export interface SlotReleaseInput {
  /** The CocoonSet, defaults applied. */
  cocoonSet: CocoonSet;
  /** Its pods, classified. */
  owned: ClassifiedPods;
  /** Every pod the pass listed. */
  pods: readonly Pod[];
  /** The registry facts; undefined when the executor knows no registry. */
  snapshots: SnapshotFacts | undefined;
  /** The namespace's CocoonHibernations, when the pass read them. */
  hibernations?: readonly HibernationTarget[];
  nowMs: number;
}

/**
 * The slot-release part of a pass, or undefined when it does not concern this pass (the
 * normal flow goes on). A failed main agent is always left to the normal flow's triage.
 */
export function planSlotRelease(input: SlotReleaseInput): SlotReleasePlan | undefined {
  const { cocoonSet: cs, owned } = input;
  if (owned.main && isTerminal(owned.main)) return undefined;
  if (cs.spec.suspend === true) {
    return cs.spec.hibernatePolicy === "release" ? planReleaseSuspend(input) : undefined;
  }
  // Without a registry there is no snapshot to wake from: the normal flow boots.
  return input.snapshots ? planReleaseWake(input, input.snapshots) : undefined;
}

function failClosed(refusal: Refusal): SlotReleasePlan {
  return { steps: [], refusals: [refusal], writeStatus: false };
}

function memberPods(owned: ClassifiedPods): Pod[] {
  return members(owned).map((m) => m.pod);
}

function members(owned: ClassifiedPods): { target: PlanTarget; pod: Pod }[] {
  const out: { target: PlanTarget; pod: Pod }[] = [];
  if (owned.main) out.push({ target: { role: "main", slot: 0 }, pod: owned.main });
  for (const slot of [...owned.subAgents.keys()].sort((a, b) => a - b))
    out.push({ target: { role: "sub-agent", slot }, pod: owned.subAgents.get(slot) as Pod });
  for (const name of [...owned.toolboxes.keys()].sort())
    out.push({ target: { role: "toolbox", name }, pod: owned.toolboxes.get(name) as Pod });
  return out;
}

const nameOf = (pod: Pod) => pod.metadata?.name ?? "";
const MAIN: PlanTarget = { role: "main", slot: 0 };

/**
 * Suspend: every pod is asked to hibernate; once the gate holds, the VM names and the main
 * agent's node are recorded on the CocoonSet, then every pod that is not terminal is flagged
 * keep-snapshot-on-delete (best effort) and deleted; Suspended lands with the deletes.
 */
function planReleaseSuspend(input: SlotReleaseInput): SlotReleasePlan {
  const { cocoonSet: cs, owned } = input;
  const ns = namespaceOf(cs);
  const name = cs.metadata.name ?? "";
  const facts = input.snapshots;
  if (!facts)
    return failClosed({
      kind: "registry-missing",
      message: `hibernatePolicy=release on ${ns}/${name} requires a configured registry`,
    });
  if ("error" in facts) {
    return failClosed(suspendUnanswered(facts.error));
  }
  const all = members(owned);
  // Pods of the fleet still terminating (classification leaves them out): the seat is free
  // once they are gone, so the suspend waits them out.
  const leaving = leavingSteps(cs, input.pods);
  const leavingWaitMs = leaving.length > 0 ? SUSPEND_POLL_MS : undefined;
  // The seat is free already (or soon), or the set was suspended before its first boot.
  if (all.length === 0)
    return {
      steps: leaving,
      refusals: [],
      writeStatus: true,
      phase: "Suspended",
      waitMs: leavingWaitMs,
    };

  const steps: PlanStep[] = [];
  for (const { target, pod } of all) {
    if (asksHibernate(pod) || isTerminating(pod)) continue;
    const held = deletionHold(target, nameOf(pod), input.hibernations ?? []);
    if (held) {
      steps.push(held);
      continue;
    }
    steps.push({
      target,
      decision: "hibernate",
      podName: nameOf(pod),
      actions: [
        {
          kind: "annotate-pod",
          name: nameOf(pod),
          uid: pod.metadata?.uid ?? "",
          annotations: { [ANNOTATIONS.hibernate]: ANNOTATION_TRUE },
        },
      ],
    });
  }
  const gate = hibernationGate(
    cs,
    all.map((m) => m.pod),
    facts.hibernate,
  );
  if (steps.length > 0 || gate.pending.length > 0) {
    const asked = new Set(steps.map((s) => s.podName));
    for (const { target, pod } of all)
      if (gate.pending.includes(nameOf(pod)) && !asked.has(nameOf(pod)))
        steps.push({ target, decision: "wait-hibernation", podName: nameOf(pod), actions: [] });
    return { steps, refusals: [], waitMs: SUSPEND_POLL_MS, writeStatus: true, phase: "Suspending" };
  }

  // Every VM's snapshot is confirmed: record what the teardown and the wake need first.
  const ownedPods = all.map((m) => m.pod);
  const record: Record<string, string> = {};
  const stash = deleteVmNamesStash(cs, teardownVmNames(cs, ownedPods));
  if (stash !== undefined) record[ANNOTATIONS.deleteVmNames] = stash;
  const node = owned.main?.spec?.nodeName ?? "";
  if (node !== "" && hibernatedOnNode(cs) !== node) record[ANNOTATIONS.hibernatedOnNode] = node;
  if (Object.keys(record).length > 0) {
    steps.push({
      target: MAIN,
      decision: "release-stash",
      podName: owned.main ? nameOf(owned.main) : agentPodName(name, 0),
      actions: [{ kind: "annotate-cocoonset", annotations: record }],
    });
  }
  const deleted = new Set<string>();
  // Terminal pods carry no VM to keep; they stay for the triage after the wake.
  const released = all
    .filter(({ pod }) => !isTerminal(pod))
    .sort((a, b) => (nameOf(a.pod) < nameOf(b.pod) ? -1 : nameOf(a.pod) > nameOf(b.pod) ? 1 : 0));
  for (const { target, pod } of released) {
    const uid = pod.metadata?.uid ?? "";
    deleted.add(uid);
    steps.push({
      target,
      decision: "release",
      podName: nameOf(pod),
      actions: [
        {
          kind: "annotate-pod",
          name: nameOf(pod),
          uid,
          annotations: { [ANNOTATIONS.keepSnapshotOnDelete]: ANNOTATION_TRUE },
          bestEffort: true,
        },
        { kind: "delete-pod", name: nameOf(pod), uid },
        { kind: "count-metric", metric: PLAN_METRICS.slotReleasePodsDeleted },
      ],
    });
  }
  steps.push(...leaving);
  const plan: SlotReleasePlan = {
    steps,
    refusals: [],
    writeStatus: true,
    phase: "Suspended",
    waitMs: leavingWaitMs,
  };
  if (deleted.size > 0) {
    // The status of what is left once the deletes went through.
    const status = deriveStatus({
      cocoonSet: cs,
      pods: input.pods.filter((p) => !deleted.has(p.metadata?.uid ?? "")),
      nowMs: input.nowMs,
      phase: "Suspended",
    });
    if (!statusEqual(cs.status, status)) plan.statusAfter = status;
  }
  return plan;
}

/** A `wait-release` step for each of the fleet's pods still terminating. */
function leavingSteps(cs: CocoonSet, pods: readonly Pod[]): PlanStep[] {
  const steps: PlanStep[] = [];
  for (const pod of pods) {
    if (!isOwnedPod(cs, pod) || !isTerminating(pod)) continue;
    const member = memberOf(cs, pod);
    const role = member === undefined ? undefined : memberRole(member);
    const slot = role === "sub-agent" ? parseSlot(member) : undefined;
    const target: PlanTarget =
      role === "toolbox" && member !== undefined
        ? { role: "toolbox", name: member }
        : slot !== undefined
          ? { role: "sub-agent", slot }
          : MAIN;
    steps.push({ target, decision: "wait-release", podName: nameOf(pod), actions: [] });
  }
  return steps.sort((a, b) => (a.podName < b.podName ? -1 : a.podName > b.podName ? 1 : 0));
}

/** The preferred (soft) hostname affinity of a wake to the node hint. */
function hintAffinity(node: string): Affinity {
  return {
    nodeAffinity: {
      preferredDuringSchedulingIgnoredDuringExecution: [
        {
          weight: HINT_AFFINITY_WEIGHT,
          preference: {
            matchExpressions: [{ key: NODE_LABELS.hostname, operator: "In", values: [node] }],
          },
        },
      ],
    },
  };
}

/**
 * The main agent of a wake: restoring from its snapshot, preferring the node hint unless
 * `spec.nodeName` pins it (the pin's required affinity wins).
 */
function wakeMainPod(cs: CocoonSet, hint: string): PodManifest {
  const pod = buildAgentPod(cs, 0);
  pod.metadata.annotations = {
    ...pod.metadata.annotations,
    [ANNOTATIONS.restoreFromHibernate]: ANNOTATION_TRUE,
  };
  if (hint !== "" && !pod.spec.affinity) pod.spec.affinity = hintAffinity(hint);
  return pod;
}

/**
 * The main agent's VM when a wake from a released seat finds its snapshot gone although the
 * suspend recorded it (the VM in the stash, or the node hint set): the normal flow then boots
 * it fresh, and the pass reports the loss (docs/behaviour.md §3.20). Undefined otherwise,
 * including a set suspended before its first boot (nothing was recorded).
 */
export function releasedSnapshotLost(
  cs: CocoonSet,
  owned: ClassifiedPods,
  facts: SnapshotFacts | undefined,
): string | undefined {
  if (cs.spec.suspend === true || owned.main || !facts || "error" in facts) return undefined;
  const state = wakeState(cs, owned.main);
  if (!state.waking && !state.released) return undefined;
  const vm0 = vmNameFor(namespaceOf(cs), cs.metadata.name ?? "", 0);
  if (facts.hibernate.has(vm0)) return undefined;
  // The engine's record, not the stash annotation: anyone who may edit the CocoonSet writes that.
  return state.hint !== "" || recordedVms(cs).includes(vm0) ? vm0 : undefined;
}

/**
 * Wake (the set is no longer suspended): gated on the phase and the hint, not on the
 * policy, so a policy edit while suspended never boots fresh over the snapshot.
 */
function planReleaseWake(
  input: SlotReleaseInput,
  facts: SnapshotFacts,
): SlotReleasePlan | undefined {
  const { cocoonSet: cs, owned } = input;
  const main = owned.main;
  const state = wakeState(cs, main);
  if (!state.waking && !state.released) return undefined;
  const vm0 = vmNameFor(namespaceOf(cs), cs.metadata.name ?? "", 0);

  if (!main) {
    // The released pod is still terminating (classification leaves it out): wait it out,
    // the restore would only meet its name.
    if (
      input.pods.some(
        (p) =>
          isOwnedPod(cs, p) &&
          isTerminating(p) &&
          nameOf(p) === agentPodName(cs.metadata.name ?? "", 0),
      )
    )
      return {
        steps: [
          {
            target: MAIN,
            decision: "wait-release",
            podName: agentPodName(cs.metadata.name ?? "", 0),
            actions: [],
          },
        ],
        refusals: [],
        waitMs: MAIN_RETRY_MS,
        writeStatus: false,
      };
    // Fail closed: going on would boot fresh over a snapshot the registry could not confirm.
    if ("error" in facts)
      return failClosed({
        kind: "registry-unanswered",
        need: "wake",
        registryError: facts.error,
        message: `wake: ${facts.error}`,
      });
    // No snapshot: suspended before its first boot; the normal flow boots it.
    if (!facts.hibernate.has(vm0)) return undefined;
    const pod = wakeMainPod(cs, state.hint);
    const waking = deriveStatus({
      cocoonSet: cs,
      pods: input.pods,
      nowMs: input.nowMs,
      phase: "Waking",
    });
    const actions: PlanAction[] = [];
    // Waking is written before the create: a pass cut short between the two resumes here.
    if (!statusEqual(cs.status, waking)) actions.push({ kind: "write-status", status: waking });
    actions.push({ kind: "create-pod", pod, onAlreadyExists: "retry-later" });
    return {
      steps: [{ target: MAIN, decision: "wake-restore", podName: pod.metadata.name, actions }],
      refusals: [],
      waitMs: MAIN_RETRY_MS,
      writeStatus: false,
    };
  }

  if (state.waking && !vmLive(main)) {
    const actions: PlanAction[] = [];
    const why = unschedulableMessage(main);
    const noSeat = why === undefined ? undefined : `main pod ${nameOf(main)} unschedulable: ${why}`;
    // Unschedulable is the pool saying it has no seat: reported, and waited out (by the
    // controller; a deploy cannot wait for a seat, so it stops there).
    if (noSeat !== undefined) {
      actions.push(
        { kind: "count-metric", metric: PLAN_METRICS.slotReleaseWakeUnschedulable },
        { kind: "event", type: "Warning", reason: EVENT_REASONS.wakeNoCapacity, message: noSeat },
      );
    }
    const wait: StepWait =
      noSeat === undefined
        ? { kind: "vm-live", pod: nameOf(main) }
        : { kind: "stuck", message: noSeat };
    return {
      steps: [{ target: MAIN, decision: "wait-wake", podName: nameOf(main), wait, actions }],
      refusals: [],
      waitMs: SUSPEND_POLL_MS,
      writeStatus: true,
      phase: "Waking",
    };
  }

  if (state.waking) {
    const vm = vm0;
    const actions: PlanAction[] = [
      { kind: "delete-snapshot-tag", vm, tag: SNAPSHOT_TAGS.hibernate },
    ];
    // The hint is the wake's in-flight marker: a pass on a stale Waking without it has
    // counted this landing already.
    if (state.hint !== "") {
      const placement: WakePlacement = state.hint === main.spec?.nodeName ? "hint-node" : "pool";
      actions.push(
        { kind: "count-metric", metric: PLAN_METRICS.slotReleaseWake, labels: { placement } },
        { kind: "annotate-cocoonset", annotations: { [ANNOTATIONS.hibernatedOnNode]: null } },
      );
    }
    return {
      steps: [{ target: MAIN, decision: "wake-complete", podName: nameOf(main), actions }],
      refusals: [],
      waitMs: 0,
      writeStatus: true,
    };
  }

  // Released and a live main pod is listed: its delete never ran; it wakes in place.
  return undefined;
}
