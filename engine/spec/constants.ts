// Names and numbers the engine shares with cocoon-operator and with the other layers.
// They are wire contract: changing one breaks compatibility with live clusters.

import { API_VERSION, GROUP, PLURAL, VERSION } from "../kube/api-names.js";

// The API's identity is defined below the core, where the client's REST paths read it.
export { API_VERSION, GROUP, PLURAL, VERSION };

/** Kind of the custom resource. */
export const KIND = "CocoonSet";
/** List kind of the custom resource. */
export const LIST_KIND = "CocoonSetList";
/** Singular resource name. */
export const SINGULAR = "cocoonset";
/** Short names; `cs` collides with the built-in componentstatuses, so docs spell `cocoonsets`. */
export const SHORT_NAMES: readonly string[] = ["cs"];
/** `kubectl get cocoon` lists every resource in this category. */
export const CATEGORIES: readonly string[] = ["cocoon"];
/** Name of the CustomResourceDefinition object. */
export const CRD_NAME = `${PLURAL}.${GROUP}`;

/** Finalizer the engine adds on first sight and removes after the fleet is released. */
export const FINALIZER = "cocoonset.cocoonstack.io/finalizer";

/** Labels stamped on every pod the engine builds. */
export const LABELS = {
  /** CocoonSet name; the engine lists its pods by this label. */
  name: "cocoonset.cocoonstack.io/name",
  /** `main`, `sub-agent` or `toolbox`. */
  role: "cocoonset.cocoonstack.io/role",
  /** Slot number for agents, toolbox name for toolboxes. */
  slot: "cocoonset.cocoonstack.io/slot",
  /** Recommended app label, set to the CocoonSet name. */
  appName: "app.kubernetes.io/name",
  /** Recommended managed-by label, set to {@link MANAGED_BY}. */
  managedBy: "app.kubernetes.io/managed-by",
  /** The fleet's shard bucket (engine/spec/shard-bucket.ts), which a sharded controller selects on. */
  shardBucket: "cocoonset.cocoonstack.io/shard-bucket",
} as const;

/** Value of the `app.kubernetes.io/managed-by` label. */
export const MANAGED_BY = "cocoonset";

/** Labels on every object an Operator installs (its controller Deployments are found by them). */
export const OPERATOR_LABELS = {
  [LABELS.managedBy]: MANAGED_BY,
  "app.kubernetes.io/part-of": "cocoonset",
} as const;

/** Pod roles, as carried by the role label. */
export const ROLES = {
  main: "main",
  subAgent: "sub-agent",
  toolbox: "toolbox",
} as const;

/** A pod role. */
export type Role = (typeof ROLES)[keyof typeof ROLES];

/** Annotations on pods (VM contract read by the virtual kubelet) and on the CocoonSet. */
export const ANNOTATIONS = {
  vmName: "vm.cocoonstack.io/name",
  image: "cocoonset.cocoonstack.io/image",
  mode: "cocoonset.cocoonstack.io/mode",
  os: "cocoonset.cocoonstack.io/os",
  storage: "cocoonset.cocoonstack.io/storage",
  network: "cocoonset.cocoonstack.io/network",
  snapshotPolicy: "cocoonset.cocoonstack.io/snapshot-policy",
  managed: "cocoonset.cocoonstack.io/managed",
  forcePull: "cocoonset.cocoonstack.io/force-pull",
  generation: "cocoonset.cocoonstack.io/generation",
  forkFrom: "vm.cocoonstack.io/fork-from",
  connType: "vm.cocoonstack.io/conn-type",
  backend: "vm.cocoonstack.io/backend",
  noDirectIO: "vm.cocoonstack.io/no-direct-io",
  probePort: "vm.cocoonstack.io/probe-port",
  /** Runtime VM id; the engine writes it only for static toolboxes. */
  vmID: "vm.cocoonstack.io/id",
  /** Runtime VM IP; the engine writes it only for static toolboxes. */
  vmIP: "vm.cocoonstack.io/ip",
  /** VNC port; the engine writes it only for static toolboxes. */
  vncPort: "vm.cocoonstack.io/vnc-port",
  /** Lifecycle state reported by the virtual kubelet; `failed` makes a pod terminal. */
  lifecycleState: "vm.cocoonstack.io/lifecycle-state",
  /** Human message accompanying the lifecycle state. */
  lifecycleStateMessage: "vm.cocoonstack.io/lifecycle-state-message",
  /**
   * The pod's `cocoonset.cocoonstack.io/generation` the node agent saw when it wrote the
   * lifecycle state; written together with the state.
   */
  lifecycleObservedGeneration: "vm.cocoonstack.io/lifecycle-observed-generation",
  /** `"true"` asks the node agent to snapshot the VM to `<vm>:hibernate` and stop it. */
  hibernate: "vm.cocoonstack.io/hibernate",
  /** `"true"` on a new pod: boot its VM from `<vm>:hibernate` instead of the image. */
  restoreFromHibernate: "vm.cocoonstack.io/restore-from-hibernate",
  /** `"true"` on a pod deleted to free its seat: the node keeps its local snapshot. */
  keepSnapshotOnDelete: "vm.cocoonstack.io/keep-snapshot-on-delete",
  /** `"true"` on a sub-agent pod that exhausted its rebuild budget. */
  deadLetter: "cocoonset.cocoonstack.io/dead-letter",
  /** Rebuild history JSON, on the CocoonSet. */
  rebuildHistory: "cocoonset.cocoonstack.io/rebuild-history",
  /**
   * The VM names whose snapshot tags the deletion drops, comma-separated and sorted, on the
   * CocoonSet: written before its pods are released, so the clean-up still knows them.
   */
  deleteVmNames: "cocoonset.cocoonstack.io/delete-vm-names",
  /**
   * The main agent's node at a slot-release suspend, on the CocoonSet: the wake prefers it,
   * and its presence marks a wake in flight (docs/behaviour.md §3.16).
   */
  hibernatedOnNode: "cocoonset.cocoonstack.io/hibernated-on-node",
  /**
   * A lifecycle hook (spec.hooks) still to be answered for this pod, as `<moment> <cause>
   * <decided-at>` (engine/idle/hooks.ts): written before a hibernation's hook is called and
   * cleared by the hibernation's own write; written by a wake and cleared once its hook was.
   * A controller stopped in between calls again with the same event id.
   */
  hookPending: "cocoonset.cocoonstack.io/hook-pending",
  /**
   * The hibernation snapshots the pass had recorded and then found gone from the registry,
   * JSON keyed by VM name, on the CocoonSet: the `SnapshotLost` condition reads it, and the
   * user removes it to acknowledge the loss (docs/behaviour.md §3.20).
   */
  lostSnapshots: "cocoonset.cocoonstack.io/lost-snapshots",
} as const;

/** Lifecycle states the node agent writes to {@link ANNOTATIONS.lifecycleState}. */
export const LIFECYCLE_STATES = {
  creating: "creating",
  ready: "ready",
  hibernating: "hibernating",
  hibernated: "hibernated",
  failed: "failed",
} as const;

/** Registry tags of a VM's snapshots (the repository is the VM name). */
export const SNAPSHOT_TAGS = {
  /** Written by hibernation, read by wake and restore. */
  hibernate: "hibernate",
  /** Written when a pod is deleted, where the snapshot policy asks for it. */
  latest: "latest",
} as const;

/** The only value boolean annotations ever carry. */
export const ANNOTATION_TRUE = "true";

/** Node labels the pods select on. */
export const NODE_LABELS = {
  /** Node pool of a cocoon node. */
  pool: "cocoonstack.io/pool",
  /** Guest-visible CPU ABI class a node can resume snapshots for. */
  snapshotClass: "cocoonstack.io/snapshot-cpu-class",
  /** Well-known hostname label used for the main agent's node affinity. */
  hostname: "kubernetes.io/hostname",
} as const;

/** Taint key of virtual-kubelet nodes, tolerated by every engine pod. */
export const VIRTUAL_KUBELET_TAINT = "virtual-kubelet.io/provider";

/** Container image of the single pod container; the VM image travels in an annotation. */
export const PLACEHOLDER_IMAGE = "registry.invalid/cocoonset/placeholder:never-pulled";

/** Name of the single container of every engine pod. */
export const AGENT_CONTAINER = "agent";

/** Rebuilds a sub-agent slot gets before it is parked in dead-letter. */
export const MAX_REBUILD_ATTEMPTS = 4;

/** Wait before rebuild number `count + 1`, indexed by `count` (the last entry repeats). */
export const BACKOFF_SCHEDULE_SECONDS: readonly number[] = [0, 1, 5, 30];

/** Sub-agent creates in flight at once during fan-out. */
export const DEFAULT_FANOUT = 8;

/** How long `Hibernating` may last before a CocoonHibernation is `Failed` (cocoon-operator: 3 minutes). */
export const DEFAULT_HIBERNATE_TIMEOUT_MS = 3 * 60_000;
/** How long `Waking` may last before a CocoonHibernation is `Failed` (cocoon-operator: 5 minutes). */
export const DEFAULT_WAKE_TIMEOUT_MS = 5 * 60_000;

/** Requeue delay while the main agent is not Ready, or its old pod is still terminating. */
export const MAIN_RETRY_MS = 5_000;

/**
 * Largest accepted `agent.replicas`. One CocoonSet is one node-bound fleet (sub-agents are
 * hard-bound to the main agent's node), so four digits is already far beyond a real node.
 */
export const MAX_REPLICAS = 1000;

/** Largest accepted number of toolboxes; bounds the CRD's CEL uniqueness check. */
export const MAX_TOOLBOXES = 64;

/** Event reasons the engine emits. */
export const EVENT_REASONS = {
  subAgentRebuilding: "SubAgentRebuilding",
  subAgentDeadLetter: "SubAgentDeadLetter",
  /** The main agent's pod is in phase Failed. */
  mainAgentFailed: "MainAgentFailed",
  /** The main agent's VM reported lifecycle state `failed` (checked before the phase). */
  podLifecycleFailed: "PodLifecycleFailed",
  recoveredFromFailure: "RecoveredFromFailure",
  subAgentPodVanishing: "SubAgentPodVanishing",
  /** A slot-release wake's main agent pod cannot be scheduled (Warning). */
  wakeNoCapacity: "WakeNoCapacity",
  /** A hibernation snapshot the pass had recorded is gone from the registry (Warning). */
  snapshotLost: "SnapshotLost",
  /** A pod this CocoonSet does not own holds a member's name (Warning). */
  slotBlocked: "SlotBlocked",
  /** A migration to `spec.nodeName` is refused before anything hibernates (Warning). */
  migrationRefused: "MigrationRefused",
  /** A sub-agent's node refused its pod (the kubelet's admission: `OutOfcpu`, ...) (Warning). */
  nodeRefused: "NodeRefused",
  /**
   * A pass needed the snapshot registry while its circuit breaker was open: refused at once
   * and requeued for when the registry is asked again (Warning, controller only).
   */
  snapshotRegistryUnanswered: "SnapshotRegistryUnanswered",
  /**
   * The fleet made no progress towards its spec for `spec.progressDeadlineSeconds` (Warning);
   * also the reason of the condition `Progressing` `False` it sets.
   */
  progressDeadlineExceeded: "ProgressDeadlineExceeded",
  /** The apiserver's admission refused a pod create (403, not a quota) (Warning). */
  failedCreate: "FailedCreate",
  /**
   * A member's pod is not created because the node it must land on is cordoned or carries a
   * `NoSchedule` taint the pod does not tolerate (Warning).
   */
  nodeUnfit: "NodeUnfit",
  /** A lifecycle hook failed under `failurePolicy: Fail`: the transition waits (Warning). */
  hookFailed: "HookFailed",
  /** A lifecycle hook failed under `failurePolicy: Ignore`: the transition went on (Warning). */
  hookFailureIgnored: "HookFailureIgnored",
} as const;

/** Seconds without progress after which a fleet reports `ProgressDeadlineExceeded`. */
export const DEFAULT_PROGRESS_DEADLINE_SECONDS = 600;

/** Metric names (without the `cocoonset_` prefix) the plan asks the executor to count. */
export const PLAN_METRICS = {
  subAgentRebuild: "subagent_rebuild_total",
  subAgentDeadLetter: "subagent_dead_letter_total",
  /** Pods deleted by a slot-release suspend (labels namespace, cocoonset). */
  slotReleasePodsDeleted: "slot_release_pods_deleted_total",
  /** Slot-release wakes completed (labels namespace, cocoonset, placement). */
  slotReleaseWake: "slot_release_wake_total",
  /** Slot-release wake passes that found the main agent unschedulable. */
  slotReleaseWakeUnschedulable: "slot_release_wake_unschedulable_total",
} as const;
