/**
 * The planners of the retain suspend and of the wake (docs/behaviour.md §3.15): which owned
 * pods are asked to hibernate or have the request withdrawn, and what the suspend waits for.
 * Pure; the pass planner folds their answer into its plan (engine/planner/plan.ts).
 */
import { memberPodVm } from "../attribution/attribution.js";
import { ANNOTATIONS, ANNOTATION_TRUE } from "../spec/constants.js";
import type { CocoonSet } from "../spec/generated/types.js";
import type { Pod } from "../spec/kube-types.js";
import type { ClassifiedPods } from "../pods/classify.js";
import { buildAgentPod } from "../pods/pod-builder.js";
import { isTerminating } from "../pods/pod-state.js";
import { wakesFromSnapshot, type LostSnapshotMark } from "../snapshots/lost-snapshots.js";
import type { PlanAction, PlanStep, PlanTarget } from "../plan/plan-types.js";
import { memberLabel } from "../plan/plan-render.js";
import { hibernationHeld, type HibernationTarget } from "./restore-intent.js";
import type { SlotReleasePlan } from "./slot-release.js";
import {
  SUSPEND_POLL_MS,
  asksHibernate,
  deletionHold,
  hibernationGate,
  missingTagWhy,
  suspendUnanswered,
  type SnapshotFacts,
} from "./suspend.js";

/** A lost snapshot's mark on the step that found it: the VM and the member it belonged to. */
export function lostMark(target: PlanTarget, vm: string | undefined): LostSnapshotMark | undefined {
  return vm ? { vm, member: memberLabel(target) } : undefined;
}

/** The owned pods with their plan targets: main, sub-agents by slot, toolboxes by name. */
function members(pods: ClassifiedPods): { target: PlanTarget; pod: Pod }[] {
  const out: { target: PlanTarget; pod: Pod }[] = [];
  if (pods.main) out.push({ target: { role: "main", slot: 0 }, pod: pods.main });
  for (const slot of [...pods.subAgents.keys()].sort((a, b) => a - b))
    out.push({ target: { role: "sub-agent", slot }, pod: pods.subAgents.get(slot) as Pod });
  for (const name of [...pods.toolboxes.keys()].sort())
    out.push({ target: { role: "toolbox", name }, pod: pods.toolboxes.get(name) as Pod });
  return out;
}

function hibernateAction(pod: Pod, value: string | null): PlanAction {
  return {
    kind: "annotate-pod",
    name: pod.metadata?.name ?? "",
    uid: pod.metadata?.uid ?? "",
    annotations: { [ANNOTATIONS.hibernate]: value },
  };
}

/**
 * `spec.suspend` with the retain policy: the main agent is created if missing (restoring
 * from its snapshot when there is one), every owned pod is asked to hibernate, and the fleet
 * is Suspending until every VM has, then Suspended. Nothing else of the normal pass runs: no
 * sub-agent or toolbox is created or rebuilt.
 */
export function planRetainSuspend(
  cs: CocoonSet,
  pods: ClassifiedPods,
  facts: SnapshotFacts,
  hibernations: readonly HibernationTarget[] = [],
): SlotReleasePlan {
  if ("error" in facts)
    return { steps: [], refusals: [suspendUnanswered(facts.error)], writeStatus: false };
  if (!pods.main) {
    const pod = buildAgentPod(cs, 0);
    // Fail-closed restore intent: the registry was asked, and a snapshot is never booted over.
    if (facts.hibernate.has(pod.metadata.annotations?.[ANNOTATIONS.vmName] ?? ""))
      pod.metadata.annotations = {
        ...pod.metadata.annotations,
        [ANNOTATIONS.restoreFromHibernate]: ANNOTATION_TRUE,
      };
    const create: PlanStep = {
      target: { role: "main", slot: 0 },
      decision: "create",
      podName: pod.metadata.name,
      wait: { kind: "pod-ready", pod: pod.metadata.name, created: true },
      actions: [{ kind: "create-pod", pod, onAlreadyExists: "retry-later" }],
    };
    return { steps: [create], refusals: [], writeStatus: true };
  }
  const all = members(pods);
  const gate = hibernationGate(
    cs,
    all.map((m) => m.pod),
    facts.hibernate,
  );
  const pending = new Set(gate.pending);
  const steps: PlanStep[] = [];
  for (const { target, pod } of all) {
    const podName = pod.metadata?.name ?? "";
    if (!asksHibernate(pod) && !isTerminating(pod)) {
      const held = deletionHold(target, podName, hibernations);
      if (held) {
        pending.add(podName);
        steps.push(held);
        continue;
      }
      steps.push({
        target,
        decision: "hibernate",
        podName,
        actions: [hibernateAction(pod, ANNOTATION_TRUE)],
      });
    } else if (pending.has(podName)) {
      const why = missingTagWhy(cs, pod, facts.hibernate);
      steps.push({
        target,
        decision: "wait-hibernation",
        podName,
        ...(why !== undefined ? { why: `${memberLabel(target)}: ${why}` } : {}),
        actions: [],
      });
    }
  }
  return {
    steps,
    refusals: [],
    ...(pending.size > 0 ? { waitMs: SUSPEND_POLL_MS } : {}),
    writeStatus: true,
    phase: pending.size > 0 ? "Suspending" : "Suspended",
  };
}

/**
 * Not suspended: withdraw every hibernate request still on an owned pod (a wake), except
 * where a CocoonHibernation keeps it. A VM that would wake from a snapshot the registry no
 * longer has is marked lost first.
 */
export function planWake(
  cs: CocoonSet,
  pods: ClassifiedPods,
  facts: SnapshotFacts | undefined,
  hibernations: readonly HibernationTarget[],
): PlanStep[] {
  const tags = facts && !("error" in facts) ? facts.hibernate : undefined;
  const steps: PlanStep[] = [];
  for (const { target, pod } of members(pods)) {
    if (!asksHibernate(pod) || isTerminating(pod)) continue;
    // A CocoonHibernation that wants this pod hibernated keeps its request.
    if (hibernationHeld(hibernations, pod.metadata?.name ?? "")) continue;
    const vm = memberPodVm(cs, pod);
    const gone = tags !== undefined && wakesFromSnapshot(pod) && !tags.has(vm);
    steps.push({
      target,
      decision: "wake",
      podName: pod.metadata?.name ?? "",
      lostSnapshot: gone ? lostMark(target, vm) : undefined,
      actions: [hibernateAction(pod, null)],
    });
  }
  return steps;
}
