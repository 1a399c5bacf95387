// The slot plan of one pass. planPass is pure: given the CocoonSet, its pods,
// the rebuild history and the time, it returns what the executor must do, in order. The
// executor performs each step's actions in sequence and stops that step at its first failure.
// Behaviour: docs/behaviour.md §3.
import {
  recordedHibernated,
  unrecordedClaim,
  type HibernationHold,
} from "../attribution/attribution.js";
import {
  ANNOTATIONS,
  ANNOTATION_TRUE,
  DEFAULT_FANOUT,
  EVENT_REASONS,
  LABELS,
  MAIN_RETRY_MS,
  MAX_REBUILD_ATTEMPTS,
  PLAN_METRICS,
  ROLES,
} from "../spec/constants.js";
import { backoffRemainingMs } from "../pods/backoff.js";
import {
  deadLetterMessage,
  nodeRefusal,
  nodeRefusedMessage,
  rebuildingMessage,
  type NodeRefusal,
} from "../pods/node-refusal.js";
import { classifyPods, isOwnedPod } from "../pods/classify.js";
import { suspendView, withDefaults } from "../spec/defaults.js";
import { agentDrift, toolboxDrift } from "../pods/drift.js";
import type { CocoonSet, CocoonSetStatus, ToolboxSpec } from "../spec/generated/types.js";
import type { Pod } from "../spec/kube-types.js";
import {
  agentPodName,
  buildAgentPod,
  buildToolboxPod,
  toolboxPodName,
  vmNameFor,
} from "../pods/pod-builder.js";
import {
  isControlledBy,
  isLifecycleFailed,
  isReady,
  isTerminal,
  isTerminating,
} from "../pods/pod-state.js";
import {
  readRebuildHistory,
  serializeRebuildHistory,
  type RebuildEntry,
  type RebuildHistory,
} from "../pods/rebuild-history.js";
import { deriveStatus, statusEqual } from "../plan/status.js";
import {
  decideRecreate,
  pruneCreateLog,
  VANISH_REPORT_AFTER,
  VANISH_WINDOW_MS,
  vanishingSlots,
  type SlotCreateLog,
  type SlotCreateRecord,
} from "../pods/vanish.js";
import { INTEGER_NAME_PATTERN } from "../spec/schema-source.js";
import { suspendsRetaining, type SnapshotFacts } from "../lifecycle/suspend.js";
import {
  planSlotRelease,
  releasedSnapshotLost,
  type SlotReleasePlan,
} from "../lifecycle/slot-release.js";
import { applyRestoreIntent, type HibernationTarget } from "../lifecycle/restore-intent.js";
import { planMigration, type TargetNodeFacts } from "../lifecycle/migrate.js";
import { lostMark, planRetainSuspend, planWake } from "../lifecycle/suspend-wake.js";
import { memberLabel } from "../plan/plan-render.js";
import { finalizerActions } from "../plan/finalizer.js";
import { unschedulableMessage } from "../lifecycle/unschedulable.js";
import type {
  GenerationStamp,
  Plan,
  PlanAction,
  Refusal,
  PlanStep,
  PlanTarget,
} from "../plan/plan-types.js";
import type { CocoonSetPhase } from "../spec/generated/types.js";
import {
  VM_NAME_CONDITION,
  VM_NAME_CONFLICT_REASON,
  vmHeldByHibernation,
  vmNameClash,
  vmNameClashMessage,
  type VmNameClash,
} from "../snapshots/vm-names.js";
import {
  lostSnapshotMessage,
  readLostSnapshots,
  serializeLostSnapshots,
  type LostSnapshotMark,
} from "../snapshots/lost-snapshots.js";
import { BLOCKED_POLL_MS, blockedMessage, foreignHolder } from "../lifecycle/blocked.js";
import { deadlineWarning, storedDeadlineRecheckMs } from "../plan/progress.js";
import { staticVmClash, staticVmClashMessage } from "../snapshots/static-vms.js";
import { placementProblem, type PlacementNode } from "../capacity/placement.js";
import { namespaceOf, rfc3339Seconds } from "../kube/objects.js";

/** Inputs of {@link planPass}. */
export interface PlanInput {
  /** The CocoonSet as read (defaults are applied here). */
  cocoonSet: CocoonSet;
  /**
   * Every pod listed by the CocoonSet's name label, plus any pod found under a toolbox's
   * pod name (for conflict detection). Pods of other owners are never acted upon.
   */
  pods: readonly Pod[];
  /** Current time in milliseconds since the epoch. */
  nowMs: number;
  /** Rebuild history; read from the CocoonSet's annotation when omitted. */
  history?: RebuildHistory;
  /** The engine's own recent sub-agent creates (see vanish.ts). @default empty */
  createLog?: SlotCreateLog;
  /** Maximum sub-agent creates in flight. @default 8 */
  fanOut?: number;
  /**
   * What the snapshot registry holds, asked by the executor (see {@link SnapshotFacts}).
   * Suspend and unsuspend are planned only when it is given: an executor that knows no
   * registry keeps `spec.suspend` stored but not acted on. A registry that did not answer
   * fails a suspend closed: nothing is planned and the error is reported.
   */
  snapshots?: SnapshotFacts;
  /**
   * The CocoonHibernations targeting pods of the namespace (restore-intent.ts): a pod
   * rebuilt while its CR is Hibernated restores from its snapshot, and an unsuspend leaves
   * a CR's hibernate request in place. @default none
   */
  hibernations?: readonly HibernationTarget[];
  /**
   * The cluster's CocoonSets (this one may be among them): a fleet that asks for a VM name
   * another live fleet holds is refused (vm-names.ts). Omitted: not checked.
   */
  fleets?: readonly CocoonSet[];
  /**
   * The VMs live CocoonHibernations recorded (engine/attribution): a fleet that asks for one
   * of them, not recorded by itself, is refused as for a fleet's. Omitted: not checked.
   */
  hibernationHolds?: readonly HibernationHold[];
  /** The target node of a migration about to start, as read (migrate.ts). @default unread */
  targetNode?: TargetNodeFacts;
  /**
   * The node new sub-agents are bound to (the main agent's), as read: a cordoned node or an
   * untolerated NoSchedule taint keeps them from being created (placement.ts). @default unread
   */
  placementNode?: PlacementNode;
  /**
   * The finalizer the caller keeps on the CocoonSet (the controller's): the plan's setup adds
   * it when the CocoonSet lacks it. @default none (`pulumi up` and `cocoonset plan` add none)
   */
  finalizer?: string;
}

/** How often a pass looks again at a node that did not take new members (no watch on nodes). */
const PLACEMENT_POLL_MS = 30_000;

/** How often a refused migration looks at its target node again (no watch on nodes). */
const MIGRATION_REFUSED_POLL_MS = 30_000;

/** Checks toolbox names the way the CRD does; any refusal stops the pass before it mutates. */
function toolboxNameErrors(toolboxes: readonly ToolboxSpec[]): Refusal[] {
  const refusals: Refusal[] = [];
  const seen = new Set<string>();
  const refuse = (index: number, toolbox: string, message: string) =>
    refusals.push({ kind: "toolbox-name", index, toolbox, message });
  toolboxes.forEach((tb, i) => {
    if (new RegExp(INTEGER_NAME_PATTERN).test(tb.name)) {
      refuse(
        i,
        tb.name,
        `[toolboxes[${i}].name] must not be an integer (it would collide with sub-agent slots)`,
      );
    }
    if (seen.has(tb.name))
      refuse(i, tb.name, `[toolboxes[${i}].name] duplicate toolbox name "${tb.name}"`);
    seen.add(tb.name);
  });
  return refusals;
}

function deletePod(pod: Pod): PlanAction {
  return { kind: "delete-pod", name: pod.metadata?.name ?? "", uid: pod.metadata?.uid ?? "" };
}

/** Plans the replacement of a drifted pod; false (nothing planned) when it matches the spec. */
function replaceIfDrifted(
  draft: PlanDraft,
  target: PlanTarget,
  podName: string,
  pod: Pod,
  drift: readonly string[],
): boolean {
  if (drift.length === 0) return false;
  draft.steps.push({
    target,
    decision: "delete-drifted",
    podName,
    drift: [...drift],
    actions: [deletePod(pod)],
  });
  return true;
}

function isOwnedToolbox(cs: CocoonSet, pod: Pod, name: string): boolean {
  const labels = pod.metadata?.labels ?? {};
  return (
    isControlledBy(pod, cs.metadata.uid ?? "") &&
    labels[LABELS.role] === ROLES.toolbox &&
    labels[LABELS.slot] === name
  );
}

// The plan being drafted by one call of planPass, shared by the helpers below (a "pass" is the
// whole reconcile that reads, plans and executes).
interface PlanDraft {
  cs: CocoonSet;
  name: string;
  namespace: string;
  replicas: number;
  input: PlanInput;
  steps: PlanStep[];
  refusals: Refusal[];
  /** Remaining waits; the smallest becomes the requeue delay of a quiet pass. */
  waits: number[];
  /** The history as it will be after the writes planned so far. */
  history: Map<number, RebuildEntry>;
  /** The create log, pruned; slots whose pod this pass deletes itself are dropped. */
  createLog: Map<number, SlotCreateRecord>;
  /** Members another pod blocks, one message each; undefined when the pass did not look. */
  blocked?: string[];
  /** Why a migration is refused; undefined when the pass did not look. */
  migrationRefused?: string[];
  /** Why new members are not placed; undefined when the pass did not look. */
  placementBlocked?: string[];
}

/**
 * How long a pod that claims this CocoonSet without being recorded is waited for before its
 * slot is reported blocked: longer than a pass that created it takes to record it.
 */
export const UNRECORDED_GRACE_MS = 30_000;

/**
 * Whether another pod holds the member's name; if so the slot is planned as blocked (the
 * event is added in {@link finish}, once per holder) and nothing is created for it.
 */
function blockedByForeignPod(draft: PlanDraft, target: PlanTarget, podName: string): boolean {
  const holder = foreignHolder(draft.cs, draft.input.pods, podName);
  if (!holder) return false;
  // A pod that claims this CocoonSet and is not recorded may be another writer's create of
  // moments ago (`pulumi up` and the controller both create; the record lands at the end of
  // the creating pass): it is waited for quietly first, and never adopted (docs/security.md).
  const claim = unrecordedClaim(draft.cs, holder);
  const born = Date.parse(holder.metadata?.creationTimestamp ?? "");
  if (claim !== "" && Number.isFinite(born) && draft.input.nowMs - born < UNRECORDED_GRACE_MS) {
    const why = `pod ${podName} ${claim}; waiting for its record`;
    draft.steps.push({ target, decision: "blocked", podName, why, actions: [] });
    draft.waits.push(MAIN_RETRY_MS);
    return true;
  }
  const message = blockedMessage(memberLabel(target), holder, draft.cs);
  (draft.blocked ??= []).push(message);
  draft.steps.push({ target, decision: "blocked", podName, why: message, actions: [] });
  draft.waits.push(BLOCKED_POLL_MS);
  return true;
}

/**
 * A pod about to be created, with restore intent where a CocoonHibernation asks for it; and
 * the VM, when that CR says it is hibernated and its snapshot is gone.
 */
function restoring<P extends Pod & { metadata: { name: string } }>(
  draft: PlanDraft,
  pod: P,
): { pod: P; lost?: string } | undefined {
  // A member the record says waits in its snapshot (its pod was deleted during a wake, say)
  // restores from it as a Hibernated CocoonHibernation would have it (engine/attribution).
  const member = pod.metadata.name.slice(draft.name.length + 1);
  // A loss already reported (the wake found the tag gone) is not reported again.
  const marked = recordedHibernated(draft.cs, member);
  const waiting =
    draft.cs.spec.suspend !== true &&
    marked !== undefined &&
    !readLostSnapshots(draft.cs).has(marked);
  const targets = waiting
    ? [...(draft.input.hibernations ?? []), { pod: pod.metadata.name, phase: "Hibernated" }]
    : draft.input.hibernations;
  const r = applyRestoreIntent(pod, targets, draft.input.snapshots);
  if ("refusal" in r) {
    draft.refusals.push(r.refusal);
    return undefined;
  }
  return { pod: r.pod as P, lost: r.lost };
}

function writeHistory(draft: PlanDraft, next: Map<number, RebuildEntry>): PlanAction {
  draft.history = next;
  return { kind: "write-history", value: serializeRebuildHistory(next, draft.replicas) };
}

/** Plans the main agent; returns it when it is Ready and the pass may go on. */
function planMain(draft: PlanDraft, main: Pod | undefined): Pod | undefined {
  const target: PlanTarget = { role: "main", slot: 0 };
  const podName = agentPodName(draft.name, 0);
  if (!main) {
    draft.blocked ??= [];
    if (blockedByForeignPod(draft, target, podName)) return undefined;
    const built = restoring(draft, buildAgentPod(draft.cs, 0));
    if (!built) return undefined;
    draft.steps.push({
      target,
      decision: "create",
      podName,
      wait: { kind: "pod-ready", pod: podName, created: true },
      lostSnapshot: lostMark(target, built.lost),
      actions: [{ kind: "create-pod", pod: built.pod, onAlreadyExists: "retry-later" }],
    });
    return undefined;
  }
  if (replaceIfDrifted(draft, target, podName, main, agentDrift(draft.cs, 0, main)))
    return undefined;
  if (isTerminal(main)) {
    // The VM's own report wins over the pod phase, in reason as in detail.
    const byLifecycle = isLifecycleFailed(main);
    const detail =
      main.metadata?.annotations?.[ANNOTATIONS.lifecycleStateMessage] ||
      (byLifecycle ? "lifecycle state failed" : "phase Failed");
    const failed = `main agent pod ${podName} failed (${detail}); it is not rebuilt automatically`;
    draft.steps.push({
      target,
      decision: "main-failed",
      podName,
      wait: {
        kind: "stuck",
        message: `main agent pod ${namespaceOf(draft.cs)}/${podName} failed; it is not rebuilt automatically (delete it or change the spec)`,
      },
      actions: [
        {
          kind: "event",
          type: "Warning",
          reason: byLifecycle ? EVENT_REASONS.podLifecycleFailed : EVENT_REASONS.mainAgentFailed,
          message: failed,
        },
      ],
    });
    return undefined;
  }
  if (!isReady(main)) {
    const unplaced = unschedulableMessage(main);
    draft.steps.push({
      target,
      decision: "wait-main",
      podName,
      wait: { kind: "pod-ready", pod: podName },
      ...(unplaced !== undefined
        ? { why: `main agent: pod ${podName} cannot be scheduled: ${unplaced}` }
        : {}),
      actions: [],
    });
    draft.waits.push(MAIN_RETRY_MS);
    return undefined;
  }
  if (draft.cs.status?.phase === "Failed") {
    draft.steps.push({
      target,
      decision: "recovered",
      podName,
      actions: [
        {
          kind: "event",
          type: "Normal",
          reason: EVENT_REASONS.recoveredFromFailure,
          message: `main agent pod ${podName} is Ready again`,
        },
      ],
    });
  }
  return main;
}

/** Where new sub-agents go: next to the main agent's VM, on its node. */
interface SubAgentPlacement {
  mainVMName: string;
  mainNodeName?: string;
}

/**
 * A rebuild's replacement, created in the rebuild's own step once its delete removed the old
 * pod at once (a terminal pod without finalizers: the apiserver answers grace 0), which saves
 * the next pass its wait for the watch. None where the create needs more than the build: a
 * node that takes no new members (no `placement`), a restore the registry must answer or whose
 * snapshot is lost; the next pass plans those creates as it plans any other.
 */
function replacementCreate(
  draft: PlanDraft,
  slot: number,
  placement: SubAgentPlacement | undefined,
): PlanAction[] {
  if (!placement) return [];
  const refusals = draft.refusals.length;
  const built = restoring(draft, buildAgentPod(draft.cs, slot, placement));
  // A refusal here is the next pass's to report, with the create it stops.
  draft.refusals.length = refusals;
  if (!built || built.lost !== undefined) return [];
  return [{ kind: "create-pod", pod: built.pod, onAlreadyExists: "success", afterRemoval: true }];
}

/** Triage of an existing sub-agent (docs/behaviour.md §3.6): dead-letter, terminal, drifted. */
function triageSubAgent(
  draft: PlanDraft,
  slot: number,
  pod: Pod,
  placement?: SubAgentPlacement,
): void {
  const target: PlanTarget = { role: "sub-agent", slot };
  const podName = pod.metadata?.name ?? agentPodName(draft.name, slot);

  if (pod.metadata?.annotations?.[ANNOTATIONS.deadLetter] === ANNOTATION_TRUE) {
    // A spec edit is how users clear dead-letter: the slot starts over with a fresh budget.
    const drift = agentDrift(draft.cs, slot, pod);
    if (drift.length === 0) return;
    const actions: PlanAction[] = [];
    if (draft.history.has(slot)) {
      const next = new Map(draft.history);
      next.delete(slot);
      actions.push(writeHistory(draft, next));
    }
    actions.push(deletePod(pod));
    draft.steps.push({
      target,
      decision: "reset-dead-letter",
      podName,
      drift: [...drift],
      actions,
    });
    return;
  }

  if (isTerminal(pod)) {
    const entry = draft.history.get(slot);
    const count = entry?.count ?? 0;
    // A pod its node refused is rebuilt all the same (room may free up; the slot cannot move,
    // it is bound next to the main agent), but every report of it names the refusal, and the
    // Warning NodeRefused is posted once per refused pod, by the step that acts on it.
    const refused = nodeRefusal(pod);
    const refusedEvent = (attempt: number | "dead-letter"): PlanAction[] =>
      refused
        ? [
            {
              kind: "event",
              type: "Warning",
              reason: EVENT_REASONS.nodeRefused,
              message: nodeRefusedMessage(slot, podName, refused, attempt),
            },
          ]
        : [];
    const marked: { nodeRefusal?: NodeRefusal } = refused ? { nodeRefusal: refused } : {};
    if (count >= MAX_REBUILD_ATTEMPTS) {
      draft.steps.push({
        target,
        decision: "dead-letter",
        podName,
        ...marked,
        actions: [
          {
            kind: "annotate-pod",
            name: podName,
            uid: pod.metadata?.uid ?? "",
            annotations: { [ANNOTATIONS.deadLetter]: ANNOTATION_TRUE },
          },
          { kind: "count-metric", metric: PLAN_METRICS.subAgentDeadLetter },
          ...refusedEvent("dead-letter"),
          {
            kind: "event",
            type: "Warning",
            reason: EVENT_REASONS.subAgentDeadLetter,
            message: deadLetterMessage(slot, podName, refused),
          },
        ],
      });
      return;
    }
    const remaining = backoffRemainingMs(entry, draft.input.nowMs);
    if (remaining > 0) {
      draft.steps.push({
        target,
        decision: "wait-backoff",
        podName,
        waitMs: remaining,
        ...marked,
        actions: [],
      });
      draft.waits.push(remaining);
      return;
    }
    const attempt = count + 1;
    const next = new Map(draft.history);
    next.set(slot, { count: attempt, lastDeleted: new Date(draft.input.nowMs).toISOString() });
    const replacement = replacementCreate(draft, slot, placement);
    draft.steps.push({
      target,
      decision: "rebuild",
      podName,
      attempt,
      ...marked,
      // The slot's create log starts afresh with this create, as the next pass's would.
      ...(replacement.length > 0 && {
        createRecord: decideRecreate(undefined, draft.input.nowMs).record,
      }),
      actions: [
        // Persisted before the delete: a failed delete must not hand out a free attempt.
        writeHistory(draft, next),
        deletePod(pod),
        { kind: "count-metric", metric: PLAN_METRICS.subAgentRebuild },
        ...refusedEvent(attempt),
        {
          kind: "event",
          type: "Normal",
          reason: EVENT_REASONS.subAgentRebuilding,
          message: rebuildingMessage(slot, attempt, refused),
        },
        ...replacement,
      ],
    });
    return;
  }

  replaceIfDrifted(draft, target, podName, pod, agentDrift(draft.cs, slot, pod));
}

/** Triage of existing slots, fan-out of the missing ones, then scale-down. */
function planSubAgents(draft: PlanDraft, subAgents: ReadonlyMap<number, Pod>, main: Pod): void {
  const mainVMName = vmNameFor(draft.namespace, draft.name, 0);
  const placement: SubAgentPlacement = { mainVMName, mainNodeName: main.spec?.nodeName };
  const creates: PlanStep[] = [];
  // The node the new sub-agents are bound to must take them (the kubelet would not refuse).
  const node = draft.input.placementNode;
  const unfit =
    node && node.name === main.spec?.nodeName
      ? placementProblem(buildAgentPod(draft.cs, 1, placement), node)
      : undefined;
  const unplaced: number[] = [];
  // Every missing slot is looked at here: the list is complete (empty clears the condition).
  draft.placementBlocked = [];
  // Every slot is looked at: the blocked list is complete (an empty one clears the condition).
  draft.blocked ??= [];
  for (let slot = 1; slot <= draft.replicas; slot++) {
    const pod = subAgents.get(slot);
    if (pod) {
      triageSubAgent(draft, slot, pod, unfit === undefined ? placement : undefined);
      continue;
    }
    const podName = agentPodName(draft.name, slot);
    if (blockedByForeignPod(draft, { role: "sub-agent", slot }, podName)) continue;
    if (unfit !== undefined) {
      unplaced.push(slot);
      draft.steps.push({
        target: { role: "sub-agent", slot },
        decision: "wait-placement",
        podName,
        why: `slot ${slot}: pod ${podName} is not created: ${unfit}`,
        actions: [],
      });
      continue;
    }
    const recreate = decideRecreate(draft.createLog.get(slot), draft.input.nowMs);
    if (recreate.waitMs > 0) {
      draft.steps.push({
        target: { role: "sub-agent", slot },
        decision: "wait-vanished",
        podName,
        waitMs: recreate.waitMs,
        actions: [],
      });
      draft.waits.push(recreate.waitMs);
      continue;
    }
    const built = restoring(draft, buildAgentPod(draft.cs, slot, placement));
    if (!built) continue;
    const actions: PlanAction[] = [
      { kind: "create-pod", pod: built.pod, onAlreadyExists: "success" },
    ];
    const { vanished } = recreate.record;
    if (vanished >= VANISH_REPORT_AFTER) {
      actions.push({
        kind: "event",
        type: "Warning",
        reason: EVENT_REASONS.subAgentPodVanishing,
        message: `slot ${slot}: pod ${podName} vanished ${vanished} times in a row within ${VANISH_WINDOW_MS / 1000} s of its creation; recreating it with backoff`,
      });
    }
    creates.push({
      target: { role: "sub-agent", slot },
      decision: "create",
      podName,
      concurrent: true,
      createRecord: recreate.record,
      lostSnapshot: lostMark({ role: "sub-agent", slot }, built.lost),
      actions,
    });
  }
  // A pod the engine deletes itself (rebuild, drift, dead-letter reset) did not vanish: its
  // slot's next create starts a fresh record.
  for (const step of draft.steps) {
    if (step.target.role === "sub-agent" && step.actions.some((a) => a.kind === "delete-pod")) {
      draft.createLog.delete(step.target.slot);
    }
  }
  draft.steps.push(...creates);
  if (unplaced.length > 0) {
    draft.placementBlocked = [
      `sub-agent slot(s) ${unplaced.join(", ")} not created: ${unfit ?? ""} (sub-agents are bound to the main agent's node)`,
    ];
    draft.waits.push(PLACEMENT_POLL_MS);
  }
  for (const slot of [...subAgents.keys()].sort((a, b) => a - b)) {
    if (slot <= draft.replicas) continue;
    const pod = subAgents.get(slot) as Pod;
    draft.steps.push({
      target: { role: "sub-agent", slot },
      decision: "scale-down",
      podName: pod.metadata?.name ?? agentPodName(draft.name, slot),
      actions: [deletePod(pod)],
    });
  }
}

/** Replaces terminal or drifted toolboxes at once, creates missing ones, drops extras. */
function planToolboxes(draft: PlanDraft, toolboxes: ReadonlyMap<string, Pod>): void {
  const wanted = new Set<string>();
  for (const toolbox of draft.cs.spec.toolboxes ?? []) {
    wanted.add(toolbox.name);
    const target: PlanTarget = { role: "toolbox", name: toolbox.name };
    const podName = toolboxPodName(draft.name, toolbox.name);
    const squatter = draft.input.pods.find(
      (p) => p.metadata?.name === podName && !isOwnedToolbox(draft.cs, p, toolbox.name),
    );
    if (squatter) {
      draft.refusals.push({
        kind: "toolbox-taken",
        toolbox: toolbox.name,
        podName,
        message: `toolbox ${toolbox.name}: pod ${podName} already exists and is not this CocoonSet's toolbox`,
      });
      continue;
    }
    const pod = toolboxes.get(toolbox.name);
    if (!pod) {
      const built = restoring(draft, buildToolboxPod(draft.cs, toolbox));
      if (!built) continue;
      draft.steps.push({
        target,
        decision: "create",
        podName,
        lostSnapshot: lostMark(target, built.lost),
        actions: [{ kind: "create-pod", pod: built.pod, onAlreadyExists: "check-owner" }],
      });
    } else if (isTerminal(pod)) {
      draft.steps.push({ target, decision: "delete-terminal", podName, actions: [deletePod(pod)] });
    } else {
      replaceIfDrifted(draft, target, podName, pod, toolboxDrift(draft.cs, toolbox, pod));
    }
  }
  for (const extra of [...toolboxes.keys()].sort()) {
    if (wanted.has(extra)) continue;
    const pod = toolboxes.get(extra) as Pod;
    draft.steps.push({
      target: { role: "toolbox", name: extra },
      decision: "delete-extra",
      podName: pod.metadata?.name ?? toolboxPodName(draft.name, extra),
      actions: [deletePod(pod)],
    });
  }
}

/** Live pods of this CocoonSet, not deleted by the plan, whose generation annotation lags. */
function generationStamps(draft: PlanDraft, steps: readonly PlanStep[]): GenerationStamp[] {
  const generation = draft.cs.metadata.generation;
  if (generation === undefined) return [];
  const deleted = new Set(
    steps.flatMap((s) => s.actions.flatMap((a) => (a.kind === "delete-pod" ? [a.uid] : []))),
  );
  const want = String(generation);
  return draft.input.pods
    .filter(
      (p) =>
        isOwnedPod(draft.cs, p) &&
        !isTerminating(p) &&
        !deleted.has(p.metadata?.uid ?? "") &&
        p.metadata?.annotations?.[ANNOTATIONS.generation] !== want,
    )
    .map((p) => ({ name: p.metadata?.name ?? "", uid: p.metadata?.uid ?? "", generation: want }))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/**
 * Records the lost snapshots the steps found (each such step first writes the whole record
 * of this pass, so concurrent creates write the same value, then warns), and announces each
 * newly blocked member once: a holder already named in the stored condition is not again.
 */
function announce(draft: PlanDraft): void {
  const record = readLostSnapshots(draft.cs);
  const fresh = draft.steps.filter((s) => s.lostSnapshot && !record.has(s.lostSnapshot.vm));
  for (const s of fresh) {
    const mark = s.lostSnapshot as LostSnapshotMark;
    record.set(mark.vm, {
      member: mark.member,
      tag: "hibernate",
      at: rfc3339Seconds(draft.input.nowMs),
    });
  }
  if (fresh.length > 0) {
    const value = serializeLostSnapshots(record);
    for (const s of fresh)
      s.actions.unshift(
        { kind: "annotate-cocoonset", annotations: { [ANNOTATIONS.lostSnapshots]: value } },
        {
          kind: "event",
          type: "Warning",
          reason: EVENT_REASONS.snapshotLost,
          message: lostSnapshotMessage(s.lostSnapshot as LostSnapshotMark),
        },
      );
    // The status this pass writes already shows the record.
    draft.cs = {
      ...draft.cs,
      metadata: {
        ...draft.cs.metadata,
        annotations: { ...draft.cs.metadata.annotations, [ANNOTATIONS.lostSnapshots]: value },
      },
    };
  }
  const told = (type: string) => {
    const stored = draft.cs.status?.conditions?.find((c) => c.type === type);
    return stored?.status === "True" ? (stored.message ?? "") : "";
  };
  const notices = [
    { decision: "blocked", type: "SlotBlocked", reason: EVENT_REASONS.slotBlocked },
    {
      decision: "migrate-refused",
      type: "MigrationRefused",
      reason: EVENT_REASONS.migrationRefused,
    },
    // A migration's restore the scheduler cannot place: the wake has no seat there.
    { decision: "wait-migration", type: "MigrationRefused", reason: EVENT_REASONS.wakeNoCapacity },
  ];
  const placement = draft.placementBlocked?.[0];
  const first = draft.steps.find((s) => s.decision === "wait-placement");
  if (placement !== undefined && first && told("PlacementBlocked") !== placement)
    first.actions.push({
      kind: "event",
      type: "Warning",
      reason: EVENT_REASONS.nodeUnfit,
      message: placement,
    });
  for (const n of notices) {
    const stored = told(n.type);
    for (const s of draft.steps)
      if (s.decision === n.decision && s.why && !stored.includes(s.why))
        s.actions.push({ kind: "event", type: "Warning", reason: n.reason, message: s.why });
  }
}

function finish(draft: PlanDraft, writeStatus: boolean, phase?: CocoonSetPhase): Plan {
  announce(draft);
  const mutatesPods = draft.steps.some((s) =>
    s.actions.some((a) => a.kind === "create-pod" || a.kind === "delete-pod"),
  );
  // The Failed phase is only cleared by a status write, which waits for a quiet pass;
  // announcing the recovery in that same pass announces it once.
  const steps = mutatesPods ? draft.steps.filter((s) => s.decision !== "recovered") : draft.steps;
  const plan: Plan = {
    cocoonSet: { namespace: draft.namespace, name: draft.name, uid: draft.cs.metadata.uid ?? "" },
    steps,
    refusals: draft.refusals,
    history: draft.history,
    createLog: draft.createLog,
    requeueAfterMs: mutatesPods ? 0 : draft.waits.length > 0 ? Math.min(...draft.waits) : undefined,
    mutatesPods,
    fanOut: draft.input.fanOut ?? DEFAULT_FANOUT,
    generationStamps: generationStamps(draft, steps),
    setup: finalizerActions(draft.cs.metadata, draft.input.finalizer, "live"),
  };
  if (writeStatus && !mutatesPods) {
    const status = deriveStatus({
      cocoonSet: draft.cs,
      pods: draft.input.pods,
      nowMs: draft.input.nowMs,
      vanishingSlots: vanishingSlots(draft.createLog),
      phase,
      blocked: draft.blocked,
      migrationRefused: draft.migrationRefused,
      placementBlocked: draft.placementBlocked,
      waitingFor: waitingFor(draft, steps),
    });
    if (!statusEqual(draft.cs.status, status)) plan.status = status;
    announceStall(plan, draft.cs.status, status);
  }
  // A fleet under way is looked at again when its deadline runs out, event or not.
  const recheck = storedDeadlineRecheckMs(draft.cs, draft.input.nowMs);
  if (recheck !== undefined && !mutatesPods)
    plan.requeueAfterMs = Math.min(plan.requeueAfterMs ?? recheck, recheck);
  return plan;
}

/** The Warning of an exceeded progress deadline, posted with the status that first says it. */
function announceStall(
  plan: Plan,
  stored: CocoonSetStatus | undefined,
  next: CocoonSetStatus,
): void {
  const message = deadlineWarning(stored, next);
  if (message === undefined) return;
  plan.steps.push({
    target: { role: "main", slot: 0 },
    decision: "stalled",
    podName: agentPodName(plan.cocoonSet.name, 0),
    why: message,
    actions: [
      {
        kind: "event",
        type: "Warning",
        reason: EVENT_REASONS.progressDeadlineExceeded,
        message: `${plan.cocoonSet.namespace}/${plan.cocoonSet.name}: ${message}`,
      },
    ],
  });
}

/**
 * What a pass waits for, one line each, for the progress deadline's message: the steps that
 * say why they wait, the members still coming up, the dead-lettered slots, and the refusals.
 */
function waitingFor(draft: PlanDraft, steps: readonly PlanStep[]): string[] {
  const out: string[] = [];
  for (const s of steps) {
    const member = memberLabel(s.target);
    if (s.why) {
      out.push(s.why.startsWith(member) ? s.why : `${member}: ${s.why}`);
      continue;
    }
    switch (s.decision) {
      case "wait-main":
        out.push(`main agent: pod ${s.podName} is not Ready`);
        break;
      case "wait-hibernation":
        out.push(`${member}: the VM of pod ${s.podName} has not hibernated yet`);
        break;
      case "wait-wake":
      case "wait-migration":
        out.push(`${member}: the restored VM of pod ${s.podName} is not live yet`);
        break;
      case "wait-backoff":
      case "wait-vanished":
        out.push(`${member}: pod ${s.podName} is recreated with backoff`);
        break;
      case "main-failed":
        out.push(`main agent: pod ${s.podName} failed and is not rebuilt automatically`);
        break;
      case "dead-letter":
        out.push(`${member}: pod ${s.podName} exhausted its rebuilds and is left in dead-letter`);
        break;
      case "rebuild":
        out.push(`${member}: pod ${s.podName} failed and is rebuilt`);
        break;
    }
  }
  const pods = classifyPods(draft.cs, draft.input.pods);
  for (const [slot, pod] of [...pods.subAgents].sort(([a], [b]) => a - b))
    if (
      slot <= draft.replicas &&
      pod.metadata?.annotations?.[ANNOTATIONS.deadLetter] === ANNOTATION_TRUE
    )
      out.push(
        `slot ${slot}: pod ${pod.metadata?.name ?? ""} is in dead-letter (edit the spec to retry it)`,
      );
  for (const [slot, pod] of [...pods.subAgents].sort(([a], [b]) => a - b))
    if (slot <= draft.replicas && !isReady(pod) && !isTerminal(pod))
      out.push(`slot ${slot}: pod ${pod.metadata?.name ?? ""} is not Ready${pendingWhy(pod)}`);
  for (const r of draft.refusals) out.push(r.message);
  return out;
}

/** `: <the scheduler's message>` for a pod the scheduler cannot place, else "". */
function pendingWhy(pod: Pod): string {
  const c = pod.status?.conditions?.find(
    (x) => x.type === "PodScheduled" && x.status === "False" && x.reason === "Unschedulable",
  );
  return c ? ` (unschedulable: ${c.message ?? ""})` : "";
}

/**
 * Folds a lifecycle planner's answer (engine/lifecycle/: the retain suspend, the slot
 * release's suspend and wake) into the plan.
 */
function finishLifecycle(draft: PlanDraft, part: SlotReleasePlan): Plan {
  draft.steps.push(...part.steps);
  draft.refusals.push(...part.refusals);
  if (part.waitMs !== undefined) draft.waits.push(part.waitMs);
  const plan = finish(draft, part.writeStatus, part.phase);
  if (part.statusAfter) plan.status = part.statusAfter;
  return plan;
}

/**
 * A fleet refused for a VM name another live fleet holds (docs/behaviour.md §2.7): no pod is
 * touched; the condition and a Warning are written once (while the message stays the same)
 * and the error is reported on every pass until the clash is gone.
 */
function planVmNameRefusal(draft: PlanDraft, clash: VmNameClash | string): Plan {
  const message = typeof clash === "string" ? clash : vmNameClashMessage(draft.cs, clash);
  draft.refusals.push({ kind: "vm-name-clash", message });
  const said = draft.cs.status?.conditions?.some(
    (c) => c.type === VM_NAME_CONDITION && c.status === "False" && c.message === message,
  );
  if (!said) {
    const status = deriveStatus({
      cocoonSet: draft.cs,
      pods: draft.input.pods,
      nowMs: draft.input.nowMs,
    });
    status.conditions = [
      ...(status.conditions ?? []),
      {
        type: VM_NAME_CONDITION,
        status: "False",
        reason: VM_NAME_CONFLICT_REASON,
        message,
        observedGeneration: draft.cs.metadata.generation,
        lastTransitionTime: rfc3339Seconds(draft.input.nowMs),
      },
    ];
    draft.steps.push({
      target: { role: "main", slot: 0 },
      decision: "refuse-vm-names",
      podName: agentPodName(draft.name, 0),
      actions: [
        { kind: "write-status", status },
        { kind: "event", type: "Warning", reason: VM_NAME_CONFLICT_REASON, message },
      ],
    });
  }
  return finish(draft, false);
}

/**
 * Plans one reconcile pass of a CocoonSet. Pure: no I/O, time comes from `nowMs`.
 * The main agent comes first; sub-agents and toolboxes are planned only once it is Ready.
 */
export function planPass(input: PlanInput): Plan {
  // The effective suspend (spec.suspend, or the idle policy's status.idleSuspendedSince).
  const cs = withDefaults(suspendView(input.cocoonSet));
  const replicas = cs.spec.agent.replicas ?? 0;
  const pods = classifyPods(cs, input.pods);
  const pruned = pruneCreateLog(
    input.createLog ?? new Map(),
    pods.subAgents,
    replicas,
    input.nowMs,
  );
  const draft: PlanDraft = {
    cs,
    name: cs.metadata.name ?? "",
    namespace: namespaceOf(cs),
    replicas,
    input,
    steps: [],
    refusals: [],
    // A slot reported as vanishing is looked at again once its pod outlived the window.
    waits: pruned.recheckMs === undefined ? [] : [pruned.recheckMs],
    history: new Map(input.history ?? readRebuildHistory(cs)),
    createLog: pruned.log,
  };
  const nameErrors = toolboxNameErrors(cs.spec.toolboxes ?? []);
  if (nameErrors.length > 0) {
    draft.refusals.push(...nameErrors);
    return finish(draft, false);
  }
  const clash =
    (input.fleets ? vmNameClash(cs, input.fleets) : undefined) ??
    (input.hibernationHolds ? vmHeldByHibernation(cs, input.hibernationHolds) : undefined);
  if (clash) return planVmNameRefusal(draft, clash);
  // A static toolbox's VM id or IP another live fleet holds is refused alike (static-vms.ts).
  const staticClash = input.fleets ? staticVmClash(cs, input.fleets) : undefined;
  if (staticClash) return planVmNameRefusal(draft, staticVmClashMessage(cs, staticClash));
  // A failed main agent is triaged first, suspended or not (as cocoon-operator does).
  const facts = input.snapshots;
  if (facts && suspendsRetaining(cs) && !(pods.main && isTerminal(pods.main)))
    return finishLifecycle(draft, planRetainSuspend(cs, pods, facts, input.hibernations));
  // Migration owns the pass while in flight (it does nothing while suspended); before a
  // slot-release wake and the unsuspend, which would withdraw the hibernate request it makes
  // (docs/behaviour.md §3.17), as cocoon-operator orders them.
  const migrating = (): CocoonSetStatus =>
    deriveStatus({
      cocoonSet: cs,
      pods: input.pods,
      nowMs: input.nowMs,
      vanishingSlots: vanishingSlots(draft.createLog),
      phase: "Migrating",
    });
  const migration = facts
    ? planMigration({
        cs,
        owned: pods,
        facts,
        migratingStatus: migrating,
        hibernations: input.hibernations,
        targetNode: input.targetNode,
      })
    : undefined;
  if (migration && "refused" in migration) {
    // Nothing hibernates; the fleet goes on where it runs, and looks again later.
    draft.migrationRefused = [migration.refused];
    draft.steps.push({
      target: { role: "main", slot: 0 },
      decision: "migrate-refused",
      podName: agentPodName(draft.name, 0),
      why: migration.refused,
      actions: [],
    });
    draft.waits.push(MIGRATION_REFUSED_POLL_MS);
    // No main agent to go on with (a released seat's wake): nothing is created on a node that
    // cannot take it; the wake waits, said, and looks at the node again.
    if (!pods.main) {
      const stored = cs.status?.phase;
      return finish(
        draft,
        true,
        stored === "Suspended" || stored === "Waking" ? "Waking" : undefined,
      );
    }
  } else if (migration) {
    // A restore the scheduler cannot place on the target is said in MigrationRefused.
    if (migration.unschedulable !== undefined) draft.migrationRefused = [migration.unschedulable];
    draft.steps.push(...migration.steps);
    draft.refusals.push(...migration.refusals);
    draft.waits.push(migration.waitMs);
    return finish(draft, migration.refusals.length === 0 && !migration.persistsPhase, "Migrating");
  }
  // hibernatePolicy release: its suspend, and the wake from a released seat (slot-release.ts).
  const released = planSlotRelease({
    cocoonSet: cs,
    owned: pods,
    pods: input.pods,
    snapshots: facts,
    hibernations: input.hibernations,
    nowMs: input.nowMs,
  });
  if (released) return finishLifecycle(draft, released);
  if (facts && !migration) draft.migrationRefused = [];
  if (facts && !cs.spec.suspend)
    draft.steps.push(...planWake(cs, pods, facts, input.hibernations ?? []));
  // A released seat whose snapshot is gone: the main agent boots fresh, and says so.
  const lostMain = releasedSnapshotLost(cs, pods, facts);
  const main = planMain(draft, pods.main);
  if (lostMain)
    for (const s of draft.steps)
      if (s.target.role === "main" && s.decision === "create")
        s.lostSnapshot ??= lostMark(s.target, lostMain);
  if (main) {
    planSubAgents(draft, pods.subAgents, main);
    planToolboxes(draft, pods.toolboxes);
  }
  // A replacement main that is not Ready yet must not overwrite Failed with Pending: the
  // Failed phase is what announces RecoveredFromFailure once the main is Ready again.
  const waitingAfterFailure =
    cs.status?.phase === "Failed" && draft.steps.some((s) => s.decision === "wait-main");
  return finish(draft, !waitingAfterFailure);
}
