// The plan's vocabulary: what a pass decides for each member, the actions the executor
// carries out, and why a plan refuses part of the spec. Types only: the planner (plan.ts) and
// the planners it delegates to (migrate.ts, slot-release.ts) build these; the engine, the
// preview and `cocoonset plan` read them.
import type { PLAN_METRICS } from "../spec/constants.js";
import type { CocoonSetStatus } from "../spec/generated/types.js";
import type { PodManifest } from "../spec/kube-types.js";
import type { LostSnapshotMark } from "../snapshots/lost-snapshots.js";
import type { NodeRefusal } from "../pods/node-refusal.js";
import type { RebuildHistory } from "../pods/rebuild-history.js";
import type { SlotCreateLog, SlotCreateRecord } from "../pods/vanish.js";

/** What a plan step is about. */
export type PlanTarget =
  | { role: "main"; slot: 0 }
  | { role: "sub-agent"; slot: number }
  | { role: "toolbox"; name: string };

/** The decision taken for one member. */
export type Decision =
  /** The pod is missing: create it. */
  | "create"
  /** The pod no longer matches the spec: delete it (recreated next pass). */
  | "delete-drifted"
  /** The toolbox pod is terminal: delete it (recreated next pass, no backoff). */
  | "delete-terminal"
  /** The sub-agent slot is above `replicas`: delete it. */
  | "scale-down"
  /** The toolbox is no longer in the spec: delete it. */
  | "delete-extra"
  /** The sub-agent is terminal and its backoff is over: record the attempt, then delete. */
  | "rebuild"
  /** The sub-agent is terminal and out of attempts: mark it dead-letter and leave it. */
  | "dead-letter"
  /** The dead-lettered sub-agent's spec changed: forget its history, then delete. */
  | "reset-dead-letter"
  /** The sub-agent is terminal and still in backoff. */
  | "wait-backoff"
  /** The sub-agent's pod keeps vanishing right after creation: wait before creating it again. */
  | "wait-vanished"
  /** The main agent is not Ready yet; sub-agents and toolboxes wait for it. */
  | "wait-main"
  /** The main agent is terminal; it is not rebuilt automatically. */
  | "main-failed"
  /** The main agent is Ready again after the fleet was Failed. */
  | "recovered"
  /** The fleet is suspended: ask the pod's VM to hibernate (`vm.cocoonstack.io/hibernate`). */
  | "hibernate"
  /** The fleet is suspended and this pod's VM has not hibernated yet. */
  | "wait-hibernation"
  /** The fleet is no longer suspended: withdraw the pod's hibernate request. */
  | "wake"
  /** Slot release: record the VM names and the main agent's node on the CocoonSet. */
  | "release-stash"
  /** Slot release: every VM hibernated; delete the pod to free its seat. */
  | "release"
  /** Slot-release wake: the main agent is created again, restoring from its snapshot. */
  | "wake-restore"
  /** Slot-release wake: the restored main agent's VM is not live yet. */
  | "wait-wake"
  /** Slot-release wake: the VM is live; drop its snapshot tag and the node hint. */
  | "wake-complete"
  /**
   * Slot release: a released pod is still terminating (a suspend's seat is free once it is
   * gone; a wake's restore would meet its name).
   */
  | "wait-release"
  /** A VM name the fleet asks for is held by another live fleet: nothing is created (vm-names.ts). */
  | "refuse-vm-names"
  /** Another pod holds the member's name: the slot stays empty (blocked.ts). */
  | "blocked"
  /**
   * The node the member must land on is cordoned or has a `NoSchedule` taint its pod does not
   * tolerate: the pod is not created (placement.ts).
   */
  | "wait-placement"
  /**
   * The fleet made no progress towards its spec for its deadline (progress.ts): a Warning
   * names what it waits for, once per message.
   */
  | "stalled"
  /** A step of a migration to `spec.nodeName` (migrate.ts). */
  | MigrationDecision;

/** How the executor treats AlreadyExists on a create. */
export type AlreadyExistsPolicy =
  /** Counts as success (a concurrent pass created it). */
  | "success"
  /** The old pod is still terminating: requeue after {@link MAIN_RETRY_MS}. */
  | "retry-later"
  /** Read the pod: it is a conflict error unless this CocoonSet controls it as that toolbox. */
  | "check-owner";

/** One thing the executor does against the cluster. */
export type PlanAction =
  | {
      kind: "create-pod";
      pod: PodManifest;
      onAlreadyExists: AlreadyExistsPolicy;
      /**
       * A rebuild's replacement: created only when the step's delete removed the old pod at
       * once (the apiserver's answer says so: no finalizers, grace period 0, as for a terminal
       * pod); otherwise the next pass creates it, once the watch shows the old one gone.
       */
      afterRemoval?: boolean;
    }
  /** Delete with a uid precondition; NotFound is fine. */
  | { kind: "delete-pod"; name: string; uid: string }
  /** Merge-patch annotations onto the pod (uid precondition); null removes a key. */
  | {
      kind: "annotate-pod";
      name: string;
      uid: string;
      annotations: Record<string, string | null>;
      /** A failure is logged and the step goes on (a slot release's keep-snapshot flag). */
      bestEffort?: boolean;
    }
  /** Merge-patch annotations onto the CocoonSet; null removes a key. */
  | { kind: "annotate-cocoonset"; annotations: Record<string, string | null> }
  /** Delete a tag from the snapshot registry (a missing tag counts as deleted). */
  | { kind: "delete-snapshot-tag"; vm: string; tag: string }
  /**
   * Write the CocoonSet's status now, before the step's next action (a wake's Waking, a
   * migration's Migrating).
   */
  | { kind: "write-status"; status: CocoonSetStatus }
  /** Merge-patch the rebuild-history annotation of the CocoonSet to `value`. */
  | { kind: "write-history"; value: string }
  /** Emit an event on the plan's object (the CocoonSet, or the CocoonHibernation). */
  | { kind: "event"; type: "Normal" | "Warning"; reason: string; message: string }
  /**
   * Add `finalizer` to the plan's object when the copy planned from lacks it (finalizer.ts:
   * a JSON patch whose `test` op checks the list as read).
   */
  | { kind: "add-finalizer"; finalizer: string }
  /** Remove only `finalizer` from the plan's object; an object already gone counts as done. */
  | { kind: "remove-finalizer"; finalizer: string }
  /** Increment a counter (name without the `cocoonset_` prefix). */
  | {
      kind: "count-metric";
      metric: (typeof PLAN_METRICS)[keyof typeof PLAN_METRICS];
      /** Labels besides `namespace` and `cocoonset` (a wake's `placement`). */
      labels?: Record<string, string>;
    };

/** One member's decision and the actions that carry it out. */
export interface PlanStep {
  target: PlanTarget;
  decision: Decision;
  /** Name of the pod concerned. */
  podName: string;
  /** Drifted fields (delete-drifted, reset-dead-letter). */
  drift?: string[];
  /** Rebuild attempt number, 1..4 (rebuild). */
  attempt?: number;
  /** Remaining backoff (wait-backoff, wait-vanished). */
  waitMs?: number;
  /** What the next pass needs before it can go on (plan-wait.ts): the main agent's steps. */
  wait?: StepWait;
  /** Sub-agent creates: what to remember in the create log once the create succeeded. */
  createRecord?: SlotCreateRecord;
  /** Sub-agent creates: may run concurrently with the neighbouring concurrent steps. */
  concurrent?: boolean;
  /**
   * The step boots or wakes a VM whose recorded snapshot is gone (lost-snapshots.ts): the
   * loss is recorded on the CocoonSet and announced before the step's own actions.
   */
  lostSnapshot?: LostSnapshotMark;
  /**
   * blocked, migrate-refused, wait-placement, stalled, and waits that can last (a hibernation,
   * an unschedulable restore): what stops it (the holder of the name, the unfit node, ...).
   */
  why?: string;
  /** rebuild, wait-backoff, dead-letter: the sub-agent's pod is one its node refused. */
  nodeRefusal?: NodeRefusal;
  /** Run in order; stop this step at the first failure. */
  actions: PlanAction[];
}

/** The plan of one pass. */
export interface Plan {
  cocoonSet: { namespace: string; name: string; uid: string };
  /** Steps in execution order. */
  steps: PlanStep[];
  /**
   * What the plan refused or could not decide, reported after the steps ran. When the
   * spec's toolbox names are invalid the plan has no steps at all, so nothing is mutated.
   */
  refusals: Refusal[];
  /** Rebuild history after every write in this plan. */
  history: RebuildHistory;
  /**
   * The create log the pass starts from, pruned; the executor adds the `createRecord` of
   * each create that succeeded and keeps the result for the next pass.
   */
  createLog: SlotCreateLog;
  /** 0: requeue at once; a number: requeue after that delay; undefined: wait for a change. */
  requeueAfterMs: number | undefined;
  /** Whether any step creates or deletes a pod. */
  mutatesPods: boolean;
  /**
   * The status to write after the steps, when they all succeeded and it differs: for a pass
   * that changes no pod, or a slot release's Suspended (written with its deletes).
   */
  status?: CocoonSetStatus;
  /** Maximum sub-agent creates in flight. */
  fanOut: number;
  /**
   * Pods the plan keeps whose `cocoonset.cocoonstack.io/generation` annotation is not the
   * CocoonSet's generation: the executor stamps them before the steps, so the virtual
   * kubelet can echo the generation each pod was last reconciled at (as cocoon-operator does).
   */
  generationStamps: GenerationStamp[];
  /**
   * Run before anything else of the pass (its record writes, stamps and steps), in order;
   * the pass stops at the first failure: the finalizer the caller keeps, when missing.
   */
  setup: PlanAction[];
}

/**
 * What one step waits for before the next pass can make progress (plan-wait.ts settles it
 * with what the pass did).
 */
export type StepWait =
  /**
   * The pod Ready; terminal is a failure. `created`: the step creates it, and a create that
   * met a pod of that name waits for that one to go first.
   */
  | { kind: "pod-ready"; pod: string; created?: boolean }
  /** A waking VM live, or its pod unschedulable or terminal: the next pass tells which. */
  | { kind: "vm-live"; pod: string }
  /** The pod's next change (the node agent's report), at most `maxMs`: it polls the registry. */
  | { kind: "pod-change"; pod: string; maxMs: number }
  /** Nothing waiting can change: `message` says why (a failed main agent, no seat in the pool). */
  | { kind: "stuck"; message: string };

/** One pod whose generation annotation is to be brought up to date. */
export interface GenerationStamp {
  name: string;
  uid: string;
  /** The CocoonSet's generation, as annotation text. */
  generation: string;
}

/** What a migration pass decided for the main agent. */
export type MigrationDecision =
  /** Persist Migrating, then ask the main agent's VM to hibernate where it runs. */
  | "migrate"
  /** A `<vm>:hibernate` tag this migration did not ask for: drop it before quiescing. */
  | "migrate-drop-stale"
  /** Waiting: for the snapshot on the old node, or for the restored VM on the target. */
  | "wait-migration"
  /** The snapshot is there: delete the old pod (on the old node). */
  | "migrate-evict"
  /** The old pod is gone: create the main agent again on the target, restoring. */
  | "migrate-restore"
  /** Quiesced on the node asked for (a re-target back mid-way): wake it where it is. */
  | "migrate-wake"
  /** The restored VM is live: drop the snapshot; the next pass settles to Running. */
  | "migrate-complete"
  /**
   * The restore's pod waits unbound, pinned to a node that is no longer the target (the
   * target changed or was cleared): delete it, the next pass restores it again.
   */
  | "migrate-retarget"
  /** The target node does not exist, is not Ready or does not fit: nothing hibernates. */
  | "migrate-refused";

/** What a plan needed the snapshot registry for, when it did not answer. */
export type RegistryNeed =
  /** A retain or release suspend's gate: which VMs have hibernated. */
  | "suspend"
  /** A migration to `spec.nodeName`: whether the main agent's snapshot exists. */
  | "migrate"
  /** A slot-release wake: whether the released main agent's snapshot exists. */
  | "wake"
  /** A pod about to be created that a CocoonHibernation says is hibernated. */
  | "restore";

/**
 * Why a plan refuses part of the spec or stops short of it. Callers branch on `kind` and
 * its fields; `message` is for people (events, logs, `pulumi up`'s error) and is never
 * parsed.
 */
export type Refusal =
  /** A toolbox name the CRD refuses (an integer, a duplicate): nothing at all is planned. */
  | { kind: "toolbox-name"; index: number; toolbox: string; message: string }
  /** A toolbox's pod name is held by a pod that is not this CocoonSet's toolbox. */
  | { kind: "toolbox-taken"; toolbox: string; podName: string; message: string }
  /** A VM name the fleet asks for is held by another live fleet (vm-names.ts). */
  | { kind: "vm-name-clash"; message: string }
  /** `hibernatePolicy: release` asks for a suspend, and the executor knows no registry. */
  | { kind: "registry-missing"; message: string }
  /**
   * The snapshot registry did not answer what the plan needed (`need`): what depends on it
   * is not planned (fail closed) and the next pass asks again. `registryError` is the
   * registry's own error; `podName` the pod a restore was for.
   */
  | {
      kind: "registry-unanswered";
      need: RegistryNeed;
      registryError: string;
      podName?: string;
      message: string;
    };
