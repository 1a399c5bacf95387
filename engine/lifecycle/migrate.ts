// Migration of the main agent to `spec.nodeName`: the pure steps of one pass. The VM is
// quiesced where it runs (snapshot to `<vm>:hibernate`), its pod deleted once the snapshot
// is there, recreated on the target with restore intent, and the snapshot dropped only
// once the new VM is live. Only with a snapshot registry. Behaviour: docs/behaviour.md
// §3.17; the upstream rules it follows: docs/lifecycle-design.md.
import type { ClassifiedPods } from "../pods/classify.js";
import { ANNOTATIONS, ANNOTATION_TRUE, NODE_LABELS, SNAPSHOT_TAGS } from "../spec/constants.js";
import type { CocoonSet, CocoonSetStatus } from "../spec/generated/types.js";
import type { Pod } from "../spec/kube-types.js";
import type { MigrationDecision, PlanAction, Refusal, PlanStep } from "../plan/plan-types.js";
import { agentPodName, buildAgentPod, vmNameFor } from "../pods/pod-builder.js";
import { isTerminal, vmLive } from "../pods/pod-state.js";
import { asksHibernate, hibernationGate, type SnapshotFacts } from "./suspend.js";
import { unschedulableMessage } from "./unschedulable.js";
import { hibernationHeld, type HibernationTarget } from "../snapshots/hibernation-targets.js";
import { namespaceOf } from "../kube/objects.js";

/** Requeue delay while a migration waits (the registry has no watch; as upstream polls). */
export const MIGRATE_POLL_MS = 5_000;

/** The node a migration would start towards, as the executor read it. */
export type TargetNodeFacts =
  | {
      name: string;
      /** The Node, or undefined when it does not exist. */
      node?: {
        metadata?: { labels?: Record<string, string> };
        spec?: { unschedulable?: boolean };
        status?: { conditions?: { type?: string; status?: string }[] };
      };
    }
  | { name: string; error: string };

/**
 * Why the target cannot take the main agent, or undefined when it can: it exists, is Ready
 * and schedulable, and carries the fleet's pool and (when set) CPU class labels, as the
 * restored pod's node selector requires.
 */
export function targetNodeProblem(cs: CocoonSet, facts: TargetNodeFacts): string | undefined {
  const name = facts.name;
  if ("error" in facts) return `node "${name}" could not be read: ${facts.error}`;
  const node = facts.node;
  if (!node) return `node "${name}" does not exist`;
  const ready = node.status?.conditions?.find((c) => c.type === "Ready")?.status === "True";
  if (!ready) return `node "${name}" is not Ready`;
  if (node.spec?.unschedulable) return `node "${name}" is cordoned (unschedulable)`;
  const labels = node.metadata?.labels ?? {};
  const pool = cs.spec.nodePool ?? "default";
  if (labels[NODE_LABELS.pool] !== pool)
    return `node "${name}" is not in the pool "${pool}" (label ${NODE_LABELS.pool}: ${labels[NODE_LABELS.pool] ?? "none"})`;
  const cpuClass = cs.spec.snapshotCompatibilityClass ?? "";
  if (cpuClass !== "" && labels[NODE_LABELS.snapshotClass] !== cpuClass)
    return `node "${name}" does not have the CPU class "${cpuClass}" (label ${NODE_LABELS.snapshotClass}: ${labels[NODE_LABELS.snapshotClass] ?? "none"})`;
  return undefined;
}

/** Inputs of {@link planMigration}. */
export interface MigrationInput {
  /** The CocoonSet, defaults applied. */
  cs: CocoonSet;
  /** Its owned live pods. */
  owned: ClassifiedPods;
  /** The registry facts of the pass. */
  facts: SnapshotFacts;
  /** The status the pass would write with phase Migrating (for persisting it first). */
  migratingStatus: () => CocoonSetStatus;
  /** The namespace's CocoonHibernations (hibernation-targets.ts). @default none */
  hibernations?: readonly HibernationTarget[];
  /** The target node, read before a migration starts ({@link migrationStartTarget}). */
  targetNode?: TargetNodeFacts;
}

/** A pass that migration owns: its steps, or the registry's silence that stopped it. */
export interface MigrationPlan {
  steps: PlanStep[];
  refusals: Refusal[];
  /** Requeue after this long: every migration pass polls; at once after a dropped tag. */
  waitMs: number;
  /**
   * Whether the steps persist the phase themselves (a write before their first side
   * effect); when false the pass writes status Migrating after its steps as usual.
   */
  persistsPhase: boolean;
  /** The restore's pod cannot be scheduled on the target: why (the MigrationRefused condition). */
  unschedulable?: string;
}

/** Whether the phase Migrating is stored: the durable mark of a migration in flight. */
function migratingNow(cs: CocoonSet): boolean {
  return cs.status?.phase === "Migrating";
}

/** The steady state of a pinned fleet: the main agent live on the node asked for. */
function settledOn(main: Pod | undefined, desired: string): boolean {
  return (
    main !== undefined && main.spec?.nodeName === desired && vmLive(main) && !asksHibernate(main)
  );
}

/**
 * Whether a pass that is not suspending consults migration (and so the main agent's
 * `<vm>:hibernate` tag): `spec.nodeName` set, or Migrating stored, unless the main agent is
 * terminal (triaged first) or already settled on the target with no migration in flight.
 */
function migrationConsults(
  cs: CocoonSet,
  owned: ClassifiedPods,
  hibernations: readonly HibernationTarget[] = [],
): boolean {
  if (cs.spec.suspend === true) return false;
  const desired = cs.spec.nodeName ?? "";
  if (desired === "" && !migratingNow(cs)) return false;
  if (owned.main && isTerminal(owned.main)) return false;
  // A main agent a CocoonHibernation keeps hibernated on the node asked for is no migration
  // (as cocoon-operator: that hibernation is the long-lived idle state), asked before the probe.
  const main = owned.main;
  if (
    main &&
    asksHibernate(main) &&
    (desired === "" || main.spec?.nodeName === desired) &&
    hibernationHeld(hibernations, main.metadata?.name ?? "")
  )
    return false;
  return migratingNow(cs) || !settledOn(owned.main, desired);
}

/**
 * The node the executor reads before planning: `spec.nodeName` when this pass may start a
 * migration (the main agent runs on another node and was not asked to hibernate yet), so a
 * target that cannot take it is refused before anything hibernates. Undefined otherwise.
 */
export function migrationStartTarget(
  cs: CocoonSet,
  owned: ClassifiedPods,
  hibernations: readonly HibernationTarget[] = [],
): string | undefined {
  const desired = cs.spec.nodeName ?? "";
  const main = owned.main;
  if (desired === "") return undefined;
  // No main agent: a restore onto the target may be next (after a release or an evict).
  if (!main) return migrationConsults(cs, owned, hibernations) ? desired : undefined;
  if (asksHibernate(main)) return undefined;
  const node = main.spec?.nodeName ?? "";
  if (node === "" || node === desired) return undefined;
  return migrationConsults(cs, owned, hibernations) ? desired : undefined;
}

/** The node a pod is pinned to by a required hostname affinity, or "" when none. */
function pinnedNode(pod: Pod): string {
  const terms =
    pod.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution
      ?.nodeSelectorTerms ?? [];
  for (const term of terms)
    for (const e of term.matchExpressions ?? [])
      if (e.key === NODE_LABELS.hostname && e.operator === "In" && e.values?.length === 1)
        return e.values[0];
  return "";
}

/** The VM names migration asks the registry about: slot 0's, when it consults at all. */
export function migrationProbes(cs: CocoonSet, owned: ClassifiedPods): string[] {
  if (!migrationConsults(cs, owned)) return [];
  return [vmNameFor(namespaceOf(cs), cs.metadata.name ?? "", 0)];
}

/**
 * The migration steps after which a pass waits on the node agent: its next report on the
 * main agent's pod, at most a poll of the registry (docs/behaviour.md §3.17).
 */
const WAITS_ON_NODE: ReadonlySet<MigrationDecision> = new Set<MigrationDecision>([
  "migrate",
  "migrate-drop-stale",
  "wait-migration",
  "migrate-evict",
  "migrate-restore",
  "migrate-wake",
]);

function mainStep(cs: CocoonSet, decision: MigrationDecision, actions: PlanAction[]): PlanStep {
  const podName = agentPodName(cs.metadata.name ?? "", 0);
  return {
    target: { role: "main", slot: 0 },
    decision,
    podName,
    ...(WAITS_ON_NODE.has(decision)
      ? { wait: { kind: "pod-change", pod: podName, maxMs: MIGRATE_POLL_MS } }
      : {}),
    actions,
  };
}

function annotate(pod: Pod, value: string | null): PlanAction {
  return {
    kind: "annotate-pod",
    name: pod.metadata?.name ?? "",
    uid: pod.metadata?.uid ?? "",
    annotations: { [ANNOTATIONS.hibernate]: value },
  };
}

/** The pass when the registry did not say whether the main agent's snapshot exists. */
function registryUnanswered(error: string): MigrationPlan {
  return {
    steps: [],
    refusals: [
      {
        kind: "registry-unanswered",
        need: "migrate",
        registryError: error,
        message: `[spec.nodeName] cannot tell whether the main agent's snapshot exists: the snapshot registry did not answer: ${error}`,
      },
    ],
    waitMs: MIGRATE_POLL_MS,
    persistsPhase: false,
  };
}

/** A target node that cannot take the main agent, said before it moves or is restored there. */
function targetRefusal(
  input: MigrationInput,
  { tagged, elsewhere, desired }: { tagged: boolean; elsewhere: boolean; desired: string },
): { refused: string } | undefined {
  const { cs } = input;
  const main = input.owned.main;
  // Before anything hibernates: a target that cannot take the main agent refuses the move.
  const problem =
    elsewhere && main && !asksHibernate(main) && input.targetNode?.name === desired
      ? targetNodeProblem(cs, input.targetNode)
      : undefined;
  if (problem !== undefined)
    return {
      refused: `[spec.nodeName] ${problem}: the migration is refused and the main agent stays where it runs`,
    };
  // Before a restore onto the target that no migration of ours started (a released seat's
  // wake with nodeName set): a target that cannot take it is said, and nothing is pinned
  // there. Mid-move (Migrating stored) the restore goes on, and an unschedulable one is said.
  const restoreProblem =
    !main && tagged && !migratingNow(cs) && input.targetNode?.name === desired && desired !== ""
      ? targetNodeProblem(cs, input.targetNode)
      : undefined;
  if (restoreProblem !== undefined)
    return {
      refused: `[spec.nodeName] ${restoreProblem}: the main agent is not restored there; it waits for the node (or a change of spec.nodeName)`,
    };
  return undefined;
}

/**
 * Plans a pass of a migration, or returns undefined when migration has nothing to do and
 * the normal pass goes on (no target, settled, aborted before the snapshot, a fresh create).
 * The rules, in order, with `desired` = `spec.nodeName` and the main agent's tag:
 *
 * - no tag, and the main agent runs on another node than `desired`: persist Migrating,
 *   then ask it to hibernate (`migrate`); without the tag in any other case: not handled;
 * - tag, main agent on another node: if this migration did not ask it to hibernate the tag
 *   is stale and dropped (restoring it would roll the VM back); once the hibernation gate
 *   holds for it, delete it (`migrate-evict`), else wait;
 * - tag, no main agent: create it with restore-from-hibernate (on `desired` through its
 *   hostname affinity; this also finishes a migration whose target was cleared);
 * - tag, main agent asked to hibernate on `desired` (or no target): wake it in place;
 * - tag, main agent's VM not live: wait while Migrating is stored, else not handled;
 * - tag, VM live: drop the tag (`migrate-complete`).
 *
 * A pass that consults the registry and gets no answer changes nothing.
 */
export function planMigration(
  input: MigrationInput,
): MigrationPlan | { refused: string } | undefined {
  const { cs, owned, facts } = input;
  if (!migrationConsults(cs, owned, input.hibernations)) return undefined;
  const desired = cs.spec.nodeName ?? "";
  const main = owned.main;
  const vm = vmNameFor(namespaceOf(cs), cs.metadata.name ?? "", 0);
  const handled = (steps: PlanStep[], persistFirst = false): MigrationPlan => {
    const persist = persistFirst && !migratingNow(cs);
    if (persist && steps.length > 0)
      steps[0].actions.unshift({ kind: "write-status", status: input.migratingStatus() });
    // A dropped tag changes what the next pass decides and no watch reports it: at once.
    const dropsTag = steps.some((s) => s.actions.some((a) => a.kind === "delete-snapshot-tag"));
    return { steps, refusals: [], waitMs: dropsTag ? 0 : MIGRATE_POLL_MS, persistsPhase: persist };
  };
  if ("error" in facts) return registryUnanswered(facts.error);
  const tagged = facts.hibernate.has(vm);
  const mainNode = main?.spec?.nodeName ?? "";
  const elsewhere = main !== undefined && desired !== "" && mainNode !== "" && mainNode !== desired;

  const refused = targetRefusal(input, { tagged, elsewhere, desired });
  if (refused) return refused;
  if (!tagged) {
    if (!elsewhere || !main) return undefined;
    if (asksHibernate(main)) return handled([mainStep(cs, "wait-migration", [])], true);
    return handled([mainStep(cs, "migrate", [annotate(main, ANNOTATION_TRUE)])], true);
  }
  const dropTag: PlanAction = { kind: "delete-snapshot-tag", vm, tag: SNAPSHOT_TAGS.hibernate };
  if (elsewhere && main) {
    if (!asksHibernate(main)) return handled([mainStep(cs, "migrate-drop-stale", [dropTag])], true);
    const gate = hibernationGate(cs, [main], facts.hibernate);
    if (gate.pending.length > 0) return handled([mainStep(cs, "wait-migration", [])], true);
    const evict: PlanAction = {
      kind: "delete-pod",
      name: main.metadata?.name ?? "",
      uid: main.metadata?.uid ?? "",
    };
    return handled([mainStep(cs, "migrate-evict", [evict])], true);
  }
  if (!main) {
    const pod = buildAgentPod(cs, 0);
    pod.metadata.annotations = {
      ...pod.metadata.annotations,
      [ANNOTATIONS.restoreFromHibernate]: ANNOTATION_TRUE,
    };
    const create: PlanAction = { kind: "create-pod", pod, onAlreadyExists: "retry-later" };
    return handled([mainStep(cs, "migrate-restore", [create])], true);
  }
  if (asksHibernate(main))
    return handled([mainStep(cs, "migrate-wake", [annotate(main, null)])], true);
  // The restore's pod is still unbound and pinned elsewhere than the target now asked for
  // (changed back, or cleared: "to any node"): it is replaced; the tag keeps the state.
  const pin = pinnedNode(main);
  if (!main.spec?.nodeName && migratingNow(cs) && pin !== "" && pin !== desired) {
    const replace: PlanAction = {
      kind: "delete-pod",
      name: main.metadata?.name ?? "",
      uid: main.metadata?.uid ?? "",
    };
    return handled([mainStep(cs, "migrate-retarget", [replace])]);
  }
  if (!vmLive(main)) {
    // Without the stored phase this is a wake of some other kind in flight, not ours.
    if (!migratingNow(cs)) return undefined;
    // The restore cannot be placed (the target cordoned or full mid-move): said, not silent.
    const unplaced = unschedulableMessage(main);
    if (unplaced !== undefined) {
      const step = mainStep(cs, "wait-migration", []);
      step.why = `[spec.nodeName] the restore pod ${main.metadata?.name ?? ""} cannot be scheduled on node "${desired || pin}": ${unplaced}`;
      return { ...handled([step]), unschedulable: step.why };
    }
    return handled([mainStep(cs, "wait-migration", [])]);
  }
  return handled([mainStep(cs, "migrate-complete", [dropTag])], true);
}
