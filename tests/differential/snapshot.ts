/**
 * Normalised snapshots of what a controller left in the cluster for one CocoonSet, so the
 * Go peer `cocoon-operator` and the project's controller can be compared field by field.
 *
 * A snapshot keeps only what both controllers promise: per pod its name, labels, the
 * `cocoonstack.io` annotations, owner reference, container, scheduling fields and its node
 * relative to the main agent's; for the CocoonSet its status (phase, counts, condition
 * types/statuses/reasons, agents and toolboxes lists), its own annotations, labels and
 * finalizers; the event reasons emitted for it; and the rebuild, dead-letter and slot-release
 * counters.
 * Names that embed the namespace are rewritten to `<ns>`, times to `<time>`.
 *
 * The differences the project makes on purpose are in {@link DELIBERATE}, each with its
 * reason; they are folded away on both sides before comparing. docs/differences.md ("Differences
 * from cocoon-operator") lists the same entries (a unit test keeps the two in step).
 */
import { PLACEHOLDER_IMAGE } from "../../engine/spec/constants.js";
import { HIBERNATION_KIND } from "../../engine/spec/hibernation-schema.js";
import {
  ANNOTATIONS,
  KIND,
  LABELS,
  type CocoonHibernation,
  type CocoonSet,
  type Pod,
} from "../../engine/spec/index.js";
import { paths, waitForList, WaitTimeoutError, type KubeClient } from "../../engine/kube/index.js";
import { OciRegistry } from "../../engine/registry/oci.js";
import { metricValue } from "../support/controller-process.js";

/** Which controller produced a snapshot. */
export type Side = "peer" | "ours";

/** One pod, normalised. */
export interface PodView {
  name: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  owner: {
    apiVersion?: string;
    kind?: string;
    name?: string;
    controller?: boolean;
    blockOwnerDeletion?: boolean;
  }[];
  container: { name?: string; image?: string; resources?: unknown };
  nodeSelector: Record<string, string>;
  tolerations: unknown[];
  affinity?: unknown;
  terminationGracePeriodSeconds?: number;
  /** `main's node`, `other node`, or `unbound` (agents); `bound` or `unbound` (toolboxes). */
  node: string;
  phase?: string;
}

/** What one controller left for one CocoonSet at one checkpoint. */
export interface Snapshot {
  exists: boolean;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  finalizers: string[];
  status: Record<string, unknown>;
  pods: PodView[];
  eventReasons: string[];
  metrics: {
    rebuilds: number;
    deadLetters: number;
    /**
     * The slot-release counters (namespace and cocoonset labels; wakes by placement). Pods
     * deleted is compared as whether any were: the peer counts a delete on every pass whose
     * cache still shows the pod (NotFound included), so a lagging informer counts one pod
     * twice, where ours counts each delete once; which pods are gone is compared in `pods`.
     * Wakes by placement are compared the same way, for the same reason: the peer counts a
     * wake on every pass whose cached CocoonSet still shows the node hint it has just cleared,
     * so a lagging cache counts one wake twice (one CI run: the peer 2, ours 1); which
     * placement was used, and the pods, are still compared.
     */
    slotReleasePodsDeleted: boolean;
    slotReleaseWakeHintNode: boolean;
    slotReleaseWakePool: boolean;
    slotReleaseWakeUnschedulable: number;
  };
  /**
   * The registry's tags of each agent's VM, when the scenario asked (a suspend, and the
   * deletion after it).
   */
  registryTags?: Record<string, string[]>;
  /** A CocoonHibernation of the scenario, when it asked for one. */
  hibernation?: HibernationView;
}

/** One CocoonHibernation, normalised: what both controllers write on it and emit for it. */
export interface HibernationView {
  exists: boolean;
  finalizers: string[];
  desire?: string;
  status: {
    phase?: string;
    vmName?: string;
    observedGenerationIsCurrent: boolean;
    conditions: { type?: string; status?: string; reason?: string; message?: string }[];
  };
  eventReasons: string[];
}

/** A difference the project makes on purpose, and how the comparison folds it away. */
export interface Deliberate {
  /** One line for docs/differences.md. */
  what: string;
  /** Why. */
  reason: string;
  /** Rewrites a snapshot of either side so the difference disappears. */
  fold(s: Snapshot, side: Side): void;
}

/** The peer's placeholder container image (never pulled by a virtual kubelet). */
export const PEER_PLACEHOLDER_IMAGE = "ghcr.io/cocoonstack/placeholder:latest";

/**
 * Every deliberate difference from cocoon-operator v0.3.3. Anything else a differential
 * test finds is a bug in the project.
 */
export const DELIBERATE: readonly Deliberate[] = [
  {
    what: "A CocoonHibernation's event `WokenActive` is emitted at every wake; the peer can leave it out.",
    reason:
      "the peer announces a phase exit only on its first sight of a new Ready transition time, which its informer cache misses when the wake completes before the `Waking` write reaches it; the project reads the CR from the apiserver on each reconcile and announces every exit",
    fold: (s) => {
      if (s.hibernation)
        s.hibernation.eventReasons = s.hibernation.eventReasons.filter((r) => r !== "WokenActive");
    },
  },
  {
    what: "Pods carry the extra label `app.kubernetes.io/managed-by: cocoonset`.",
    reason:
      "the orphan reaper and `cocoonset release` select what the project created by it; the peer has no reaper",
    fold: (s) => {
      for (const p of s.pods) delete p.labels[LABELS.managedBy];
    },
  },
  {
    what: "Pods and CocoonSets carry the extra label `cocoonset.cocoonstack.io/shard-bucket` (their fleet's bucket, 0–255, from a hash of the CocoonSet's namespace and name; the Fleet writes it on its CocoonSet), and the controller adds it to CocoonHibernations and to pods and CocoonSets written without it.",
    reason:
      "a sharded controller's informers select their own buckets on the apiserver, so each shard caches only its own fleets and their pods; the peer runs as one process",
    fold: (s) => {
      delete s.labels[LABELS.shardBucket];
      for (const p of s.pods) delete p.labels[LABELS.shardBucket];
    },
  },
  {
    what: `The pod container's placeholder image is \`${PLACEHOLDER_IMAGE}\` instead of \`${PEER_PLACEHOLDER_IMAGE}\`.`,
    reason:
      "a virtual kubelet never pulls it; on a real kubelet by mistake, a `.invalid` registry fails at once instead of pulling from a third-party registry",
    fold: (s) => {
      for (const p of s.pods)
        if (p.container.image === PLACEHOLDER_IMAGE || p.container.image === PEER_PLACEHOLDER_IMAGE)
          p.container.image = "<placeholder>";
    },
  },
  {
    what: "After a main agent pod that failed (event `MainAgentFailed`) is replaced, `RecoveredFromFailure` is always emitted once the replacement is Ready; the peer emits it only when the replacement is Ready before it first writes phase `Pending`.",
    reason:
      "the phase stays `Failed` until the replacement is Ready, so the recovery is announced every time instead of depending on a race",
    fold: (s) => {
      if (s.eventReasons.includes("MainAgentFailed"))
        s.eventReasons = s.eventReasons.filter((r) => r !== "RecoveredFromFailure");
    },
  },
  {
    what: "While the phase is `Failed`, condition `Ready` is `False` (reason `AgentsNotReady`) even when every pod still reports Ready; the peer keeps `True` (`AllAgentsReady`) next to phase `Failed`.",
    reason:
      "a failed main agent (for example a lifecycle state `failed` while its pod still reports Ready) leaves the fleet unusable, and `kubectl wait --for=condition=Ready` must not succeed on it; the peer derives the condition from the pod counts only",
    fold: (s) => {
      if (s.status.phase !== "Failed") return;
      const conditions = s.status.conditions as {
        type?: string;
        status?: string;
        reason?: string;
      }[];
      for (const c of conditions)
        if (c.type === "Ready") {
          c.status = "False";
          c.reason = "AgentsNotReady";
        }
    },
  },
  {
    what: "A fleet whose VM name (`vk-<namespace>-<cocoonset>-<member>`) another live fleet already holds is refused (condition `VMNamesAvailable` `False`, Warning `VMNameConflict` naming both, no pod; `cocoonset plan` and `pulumi preview` say so), and a deletion never drops a tag of a VM name another live fleet holds; the peer creates the pods and drops the tags.",
    reason:
      "a dash may sit in a namespace, a CocoonSet name or a toolbox name, so namespace `q-x` fleet `yy` and namespace `q` fleet `x-yy` derive the same VM names; the peer's scheme stays (node agents rely on it), and refusing the younger fleet is what keeps one tenant from restoring or dropping another's snapshot. The differential stories have no such pair, so nothing is folded",
    fold: () => undefined,
  },
  {
    what: "A CocoonHibernation acts only on a VM name the controller can attribute to its pod (a pod a CocoonSet of the namespace recorded as its member, carrying that member's VM name, or a standalone pod carrying `vk-<namespace>-<pod>`), held by no other fleet; any other is `Failed` with a Warning `VMNameMismatch`, and its deletion drops no tag of another namespace. The peer trusts the pod's `vm.cocoonstack.io/name`.",
    reason:
      "anyone who may create a pod may write that annotation, and the CR's finalizer and wake would then drop another namespace's snapshot tag. The differential scenario targets a fleet member, whose name is attributable, so nothing is folded",
    fold: () => undefined,
  },
  {
    what: "A CocoonHibernation deleted once it is `Active` drops no `:hibernate` tag (its wake dropped the one it took); the peer's finalizer drops the tag whatever the phase.",
    reason:
      "a tag there after the wake is a later hibernation's: a fleet's suspend that began while the deletion was queued lost its snapshots to the finalizer, so the suspend never reached `Suspended` and its wake restored those VMs without their state. The differential scenario deletes the CR while it is `Hibernated`, where both drop the tag, so nothing is folded",
    fold: () => undefined,
  },
  {
    what: "A pod is a fleet's member only when the engine recorded its uid in the CocoonSet's status (`status.vms`: by member, the VM name and the uid of the pod the engine created); a member's VM is the one its member derives, whatever the pod's `vm.cocoonstack.io/name` says; a pod that claims a slot (the fleet's labels, a controller owner reference) without being recorded is never adopted, asked to hibernate or woken (the slot is reported blocked after 30 s); each pod the engine creates carries a random token (annotation `attribution.cocoonset.cocoonstack.io/create-token`) whose digest the status holds before the create, so a pod created just before the controller stopped is still known as the member's; a deletion drops the tags of the VMs the status recorded (slots scaled away and released included), never one that the annotation `cocoonset.cocoonstack.io/delete-vm-names` or a pod's annotation names, nor one another fleet, a CocoonHibernation or a standalone pod holds; a fleet is refused a VM name a live CocoonHibernation recorded, as one another fleet holds. The annotation is still written as the peer writes it. The peer adopts pods by label and owner reference, and drops the tags that annotation and its pods name.",
    reason:
      "labels, annotations and owner references without `blockOwnerDeletion` are anyone's to write who may write the object: a tenant with rights on pods of one namespace made the peer adopt a forged member, overwrite a suspended fleet's snapshot with its own VM, and drop another namespace's snapshot (docs/security.md); the status subresource is the controller's alone. The differential stories plant no forgery and `status.vms` is not compared, so nothing is folded",
    fold: () => undefined,
  },
  {
    what: "A pod created for a member whose VM the CocoonSet's record marks hibernated (from the suspend until the VM runs again; its pod was deleted during a retain wake, say) restores from the fleet's own `:hibernate` snapshot, or reports it lost (`SnapshotLost`); the peer boots it fresh.",
    reason:
      "a wake cut short by a pod deletion booted the main agent without its state and said `Running`, with no `SnapshotLost`: silent data loss. No scenario deletes a pod during a wake, so nothing is folded",
    fold: () => undefined,
  },
  {
    what: "A fleet restores (suspend, slot-release wake, migration) only from a `:hibernate` tag it took: one its own live pod reports hibernated, or one it recorded on the CocoonSet, under its uid, in the annotation `snapshot.cocoonset.cocoonstack.io/taken-by`; and its deletion waits (at most 60 s) for a hibernation in flight before it drops the tags. The peer restores from any tag of the VM name and drops the tags at once.",
    reason:
      "a tag says nothing about who pushed it: a fleet deleted mid-suspend left one that a new fleet of the same name restored, booting the old fleet's VM. The record's key is outside the peer's `cocoonset.cocoonstack.io/` keys, so it is folded away",
    fold: (s) => {
      delete s.annotations["snapshot.cocoonset.cocoonstack.io/taken-by"];
    },
  },
  {
    what: "A pass whose pod creates a ResourceQuota refuses still writes the status (the phase and counts the pods give, and a condition `ReplicaFailure`, reason `QuotaExceeded`, naming the quota), logs one bounded line, and sends no further create once one was refused; the peer writes no status while a create fails, and logs the joined errors of every create it sent.",
    reason:
      "a fleet larger than its quota never reaches the quiet pass that writes status, so the peer's status stays empty (or stale) for as long as the quota is full, and its log grows with the number of refused creates; the condition type is the one a ReplicaSet uses for the same refusal. No scenario hits a quota, so nothing is folded",
    fold: (s) => {
      const conditions = s.status.conditions as { type?: string }[] | undefined;
      if (conditions) s.status.conditions = conditions.filter((c) => c.type !== "ReplicaFailure");
    },
  },
  {
    what: "A member whose VM reports lifecycle state `failed` while its pod still reports Ready is not counted in `readyAgents` (nor in the `Ready` condition's count), and its `agents[]` entry says phase `Failed`; the peer counts it ready and reports the pod's phase `Running`.",
    reason:
      'the status is one derivation: next to phase `Failed` and `AgentsNotReady`, "3/3 agents ready" and an entry `Running` contradicted it; the VM is what the user runs, not the pod',
    fold: (s, side) => {
      const failed = new Set(
        s.pods
          .filter((p) => p.annotations[ANNOTATIONS.lifecycleState] === "failed")
          .map((p) => p.name),
      );
      if (failed.size === 0) return;
      const podPhase = new Map(s.pods.map((p) => [p.name, p.phase]));
      let counted = 0;
      for (const a of (s.status.agents ?? []) as { podName?: string; phase?: string }[]) {
        if (!a.podName || !failed.has(a.podName)) continue;
        // The peer's view: the pod's phase, and a Running pod counted ready.
        if (side === "ours" && podPhase.get(a.podName) === "Running") counted++;
        a.phase = podPhase.get(a.podName);
      }
      if (counted === 0) return;
      s.status.readyAgents = Number(s.status.readyAgents ?? 0) + counted;
      for (const c of (s.status.conditions ?? []) as { type?: string; message?: string }[])
        if (c.type === "Ready" && c.message)
          c.message = c.message.replace(
            /^(\d+)\/(\d+) agents ready/,
            (_m, r: string, d: string) => `${Number(r) + counted}/${d} agents ready`,
          );
    },
  },
  {
    what: "A wake or rebuild whose recorded `<vm>:hibernate` snapshot is gone from the registry posts a Warning `SnapshotLost`, records the VM in the annotation `cocoonset.cocoonstack.io/lost-snapshots` and sets the condition `SnapshotLost`; the peer boots the VM fresh and says nothing.",
    reason:
      "a VM that starts without the state it was hibernated with is data loss, and a quiet `Running` hid it (for example after a CocoonHibernation's deletion dropped the tag of a pod still hibernated)",
    fold: (s) => {
      delete s.annotations[ANNOTATIONS.lostSnapshots];
      s.eventReasons = s.eventReasons.filter((r) => r !== "SnapshotLost");
      s.status.conditions = ((s.status.conditions ?? []) as { type?: string }[]).filter(
        (c) => c.type !== "SnapshotLost",
      );
    },
  },
  {
    what: "A sub-agent whose node refused its pod (the kubelet's admission: reason `OutOfcpu`, `OutOfmemory`, `OutOfpods`, `OutOf<resource>`, `NodeAffinity` or `UnexpectedAdmissionError`) is rebuilt and dead-lettered on the same schedule, but its `agents[]` entry carries `nodeRefusal` (node, reason, message), each refused pod gets a Warning `NodeRefused`, the `SubAgentRebuilding` message ends with `(node N refused it: OutOfcpu)` and the `SubAgentDeadLetter` message names the node, the reason and the kubelet's message; the peer rebuilds it with the messages of any failure.",
    reason:
      "sub-agents are bound to the main agent's node, so a node without room refuses them and the peer's status and events gave no hint of it: the slot looked like a crash loop. No scenario has a node refuse a pod, so nothing is folded",
    fold: () => undefined,
  },
  {
    what: "The CRD's `spec.agent.image` and `spec.toolboxes[].image` take printable ASCII without spaces only (pattern `^[!-~]*$`): a control character (an ANSI escape, BEL), whitespace or any non-ASCII character (a right-to-left override, a zero-width space) is refused, naming the field; the peer's CRD takes any string.",
    reason:
      "an image reference is printable ASCII in every grammar, and a control or format character in it reached logs, events and `kubectl` output, where it can recolour, ring, hide or reorder what an operator reads. The differential stories use plain references, so nothing is folded",
    fold: () => undefined,
  },
  {
    what: "The CRD declares `status.agents[]` and `status.toolboxes[]` atomic lists (`x-kubernetes-list-type: atomic`) and the record `status.vms` an atomic map; the peer's CRD keys `agents[]` by `slot` and `toolboxes[]` by `name`. The status is the same JSON: one entry per slot, in slot order, and one per toolbox, by name, each list written whole by the controller alone; `conditions[]` stays keyed by `type`.",
    reason:
      "with keyed lists the apiserver keeps a managed field per entry and recomputes them at every write of the CocoonSet: at 1,000 sub-agents that bookkeeping was nearly a third of the object (190 of 615 KiB) and more than half of the time of each write, a rebuild's history write included (400 against 160 ms, docs/benchmarks.md); only the controller writes the status, with merge patches, whose key-by-key merge of `vms` does not depend on the map type. The differential tier compares the status' JSON, not the CRD, so nothing is folded",
    fold: () => undefined,
  },
  {
    what: "A pass refused because the snapshot registry is unanswered (three calls in a row without an answer, then a cool-down in which it is not asked) posts a Warning `SnapshotRegistryUnanswered` and requeues for the end of the cool-down; a reconcile waits at most 2 s for a registry call. The peer writes no event and waits out each call's timeout on a worker.",
    reason:
      "a hung registry held every worker of the peer for its timeout, so fleets that need no registry stalled too; the event says why the fleet does not move. The differential stories' registry answers, so nothing is folded",
    fold: () => undefined,
  },
  {
    what: "A fleet that is neither `Running` nor `Suspended` and whose status has not moved (generation, phase, counts, members) for `spec.progressDeadlineSeconds` (default 600) gets `Progressing` `False` with reason `ProgressDeadlineExceeded`, a message naming what it waits for, and a Warning of that reason; while under way its status keeps `lastProgressTime`. The peer has no deadline and leaves such a fleet in its phase without a word.",
    reason:
      "a slot held by another pod, a vanished snapshot tag, an unschedulable restore or refused creates left fleets in a phase for ever with nothing in their status or events. The field `lastProgressTime` is not among the compared ones, and no scenario stays under way for ten minutes, so nothing is folded",
    fold: () => undefined,
  },
  {
    what: "A pass whose pod create the namespace's admission refuses (403 other than a quota: Pod Security, a webhook, a policy) writes the status with a condition `ReplicaFailure`, reason `FailedCreate`, quoting the apiserver, posts a Warning `FailedCreate` once, and sends no further create that pass; the peer writes no status while a create fails.",
    reason:
      "in a namespace enforcing Pod Security `restricted` the fleet's status stayed empty: no phase, no condition, no event. No scenario has such a namespace, so nothing is folded",
    fold: () => undefined,
  },
  {
    what: "Sub-agents are not created while their main agent's node is cordoned or has a `NoSchedule`/`NoExecute` taint they do not tolerate (condition `PlacementBlocked`, reason `NodeUnfit`, and a Warning `NodeUnfit`); a static toolbox's `staticVMID` or `staticIP` another live fleet holds is refused as a VM name clash is; a released seat's wake to a `spec.nodeName` that is missing, cordoned or unfit is refused (`MigrationRefused`, phase `Waking`, no pod) and a migration's restore the scheduler cannot place posts `WakeNoCapacity` and sets `MigrationRefused`. The peer binds the sub-agents there, copies the static identity, and waits in `Migrating` silently.",
    reason:
      "a pod bound by `nodeName` skips the scheduler, so the kubelet admitted sub-agents on a cordoned or tainted node; a static identity is anyone's to write in a CocoonSet; and a restore pinned to a node that cannot take it stayed `Migrating` for ever. No scenario cordons or taints a main agent's node or claims a static identity, so nothing is folded",
    fold: () => undefined,
  },
  {
    what: "A pod holding a member's name that names the CocoonSet as its controller but lacks the fleet's labels (`cocoonset.cocoonstack.io/name`, `app.kubernetes.io/managed-by`) is another's pod: the slot is blocked (`SlotBlocked`, naming the labels it lacks), not waited for as the fleet's own.",
    reason:
      "an ownerReference is anyone's to write in the namespace, and the controller's pod cache selects on those labels, so it waited for ever for a pod it would never see. No scenario plants such a pod, so nothing is folded",
    fold: () => undefined,
  },
];

const NS = "<ns>";

function replaceNs<T>(value: T, ns: string): T {
  return JSON.parse(JSON.stringify(value).split(ns).join(NS)) as T;
}

const TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

/** The rebuild history with its times replaced by `<time>` (keys and counts kept). */
function historyShape(raw: string): string {
  try {
    return JSON.stringify(JSON.parse(raw), (_k, v: unknown) =>
      typeof v === "string" && TIME.test(v) ? "<time>" : v,
    );
  } catch {
    return `unparsable: ${raw}`;
  }
}

const ownAnnotation = (k: string) =>
  k.startsWith("cocoonset.cocoonstack.io/") || k.startsWith("vm.cocoonstack.io/");

function pick(record: Record<string, string> | undefined, keep: (k: string) => boolean) {
  return Object.fromEntries(
    Object.entries(record ?? {})
      .filter(([k]) => keep(k))
      .sort(([a], [b]) => (a < b ? -1 : 1)),
  );
}

/**
 * The pod's generation annotation relative to the CocoonSet's generation: `<generation>` when
 * it is the current one, `<generation-N>` when N behind. The absolute numbers differ between
 * the two controllers: the peer's first update (the finalizer) writes its defaulted spec back
 * and so bumps the generation once more than the project's controller does.
 */
function relativeGeneration(raw: string, current: number | undefined): string {
  const n = Number(raw);
  if (!Number.isInteger(n) || current === undefined) return `unparsable: ${raw}`;
  return n === current ? "<generation>" : `<generation-${current - n}>`;
}

/** The node agent's per-boot values: whether one is set, not which (random per VM boot). */
const PER_BOOT = new Set<string>([ANNOTATIONS.vmID, ANNOTATIONS.vmIP]);

const OWN_NODE = "<the pod's node>";

/**
 * `value` with the pod's own node name put as `<the pod's node>`, in strings at any depth (a
 * restore message, a preferred-node affinity). Which of the identical simulated nodes the
 * scheduler picked first is not the controller's doing; whether a pod came back to the node
 * it names is. Other node names are kept as they are.
 */
export function ownNodeRelative<T>(value: T, node: string | undefined): T {
  if (!node) return value;
  const escaped = node.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const within = new RegExp(`(?<![\\w.-])${escaped}(?![\\w.-])`, "g");
  const walk = (v: unknown): unknown =>
    typeof v === "string"
      ? v.replace(within, OWN_NODE)
      : Array.isArray(v)
        ? v.map(walk)
        : v && typeof v === "object"
          ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x)]))
          : v;
  return walk(value) as T;
}

function podView(pod: Pod, mainNode: string | undefined, generation?: number): PodView {
  const md = pod.metadata ?? {};
  const spec = pod.spec ?? { containers: [] };
  const c = spec.containers?.[0] ?? {};
  const role = md.labels?.[LABELS.role];
  const nodeName = spec.nodeName;
  const node =
    role === "toolbox"
      ? nodeName
        ? "bound"
        : "unbound"
      : !nodeName
        ? "unbound"
        : nodeName === mainNode
          ? "main's node"
          : "other node";
  return {
    name: md.name ?? "",
    labels: pick(md.labels, () => true),
    annotations: {
      ...Object.fromEntries(
        Object.entries(pick(md.annotations, ownAnnotation)).map(([k, v]) => [
          k,
          PER_BOOT.has(k) ? "<set>" : ownNodeRelative(v, nodeName),
        ]),
      ),
      ...(md.annotations?.[ANNOTATIONS.lifecycleObservedGeneration] !== undefined
        ? {
            [ANNOTATIONS.lifecycleObservedGeneration]: relativeGeneration(
              md.annotations[ANNOTATIONS.lifecycleObservedGeneration],
              generation,
            ),
          }
        : {}),
      ...(md.annotations?.[ANNOTATIONS.generation] !== undefined
        ? {
            [ANNOTATIONS.generation]: relativeGeneration(
              md.annotations[ANNOTATIONS.generation],
              generation,
            ),
          }
        : {}),
    },
    owner: (md.ownerReferences ?? []).map((r) => ({
      apiVersion: r.apiVersion,
      kind: r.kind,
      name: r.name,
      controller: r.controller,
      blockOwnerDeletion: r.blockOwnerDeletion,
    })),
    container: { name: c.name, image: c.image, resources: c.resources ?? {} },
    nodeSelector: pick(spec.nodeSelector, () => true),
    tolerations: spec.tolerations ?? [],
    affinity: ownNodeRelative(spec.affinity, nodeName),
    terminationGracePeriodSeconds: spec.terminationGracePeriodSeconds,
    node,
    phase: pod.status?.phase,
  };
}

function statusView(cs: CocoonSet): Record<string, unknown> {
  const s = (cs.status ?? {}) as Record<string, unknown>;
  const conditions = ((s.conditions as Record<string, unknown>[] | undefined) ?? [])
    .map((c) => ({ type: c.type, status: c.status, reason: c.reason, message: c.message }))
    .sort((a, b) => String(a.type).localeCompare(String(b.type)));
  const strip = (list: unknown) =>
    ((list as Record<string, unknown>[] | undefined) ?? []).map((e) =>
      Object.fromEntries(
        Object.entries(e)
          .filter(([, v]) => v !== "" && v !== 0 && v !== null)
          // A VM's id and IP are random per boot: whether they are reported is compared.
          .map(([k, v]) => [k, k === "vmID" || k === "ip" ? "<set>" : v]),
      ),
    );
  return {
    phase: s.phase,
    observedGenerationIsCurrent: s.observedGeneration === cs.metadata.generation,
    readyAgents: s.readyAgents ?? 0,
    desiredAgents: s.desiredAgents ?? 0,
    readyToolboxes: s.readyToolboxes ?? 0,
    desiredToolboxes: s.desiredToolboxes ?? 0,
    conditions,
    agents: strip(s.agents),
    toolboxes: strip(s.toolboxes),
  };
}

/** The CocoonHibernation `ns/name` as both controllers leave it. */
async function hibernationView(
  client: KubeClient,
  ns: string,
  name: string,
  events: EventLike[],
): Promise<HibernationView> {
  const cr = await client.getOrUndefined<CocoonHibernation>(paths.cocoonHibernation(ns, name));
  const st = cr?.status;
  return {
    exists: cr !== undefined,
    finalizers: [...(cr?.metadata.finalizers ?? [])].sort(),
    desire: cr?.spec.desire,
    status: {
      phase: st?.phase,
      vmName: st?.vmName,
      observedGenerationIsCurrent: st?.observedGeneration === cr?.metadata.generation,
      conditions: (st?.conditions ?? [])
        .map((c) => ({ type: c.type, status: c.status, reason: c.reason, message: c.message }))
        .sort((a, b) => a.type.localeCompare(b.type)),
    },
    eventReasons: [
      ...new Set(
        events
          .filter((e) => e.regarding?.kind === HIBERNATION_KIND && e.regarding?.name === name)
          .map((e) => e.reason ?? ""),
      ),
    ].sort(),
  };
}

interface EventLike {
  reason?: string;
  regarding?: { kind?: string; name?: string };
}

/** The metric name prefix per side: upstream's `cocoon_operator_<name>` is `cocoonset_<name>`. */
const PREFIX: Record<Side, string> = { peer: "cocoon_operator_", ours: "cocoonset_" };

/**
 * The counters each controller bumps in the same step as it posts an event of the reason:
 * both post events without waiting for the post (the peer through client-go's broadcaster,
 * ours fire-and-forget), so a snapshot that read the counter may have come before the event was written.
 */
const EVENT_OF_COUNTER: Record<string, string> = {
  subagent_rebuild_total: "SubAgentRebuilding",
  subagent_dead_letter_total: "SubAgentDeadLetter",
};

/**
 * The namespace's events, once every event the counters of `metricsText` imply for the
 * CocoonSet `name` has been written (a watch, within 30 s; a reason still missing then is
 * left for the comparison to show).
 */
async function eventsImpliedBy(
  client: KubeClient,
  side: Side,
  ns: string,
  name: string,
  metricsText: string,
): Promise<EventLike[]> {
  const labels = { namespace: ns, cocoonset: name };
  const implied = Object.entries(EVENT_OF_COUNTER)
    .filter(([counter]) => metricValue(metricsText, `${PREFIX[side]}${counter}`, labels) > 0)
    .map(([, reason]) => reason);
  const has = (all: EventLike[]) =>
    implied.every((r) =>
      all.some((e) => e.reason === r && e.regarding?.kind === KIND && e.regarding?.name === name),
    );
  try {
    return await waitForList<EventLike & { metadata: object }>(client, paths.events(ns), has, {
      timeoutMs: 30_000,
      description: `events ${implied.join(", ")} of ${ns}/${name}`,
    });
  } catch (e) {
    if (!WaitTimeoutError.isInstance(e)) throw e;
    return (await client.list<EventLike & { metadata: object }>(paths.events(ns))).items;
  }
}

/** Reads and normalises what `side` left for the CocoonSet `ns/name`. */
export async function takeSnapshot(
  client: KubeClient,
  side: Side,
  ns: string,
  name: string,
  metricsText: () => Promise<string>,
  registry?: OciRegistry,
  /** The VMs whose tags to list instead of the ones the status names (a CocoonSet gone). */
  vms?: readonly string[],
  /** A CocoonHibernation to add to the snapshot. */
  hibernation?: string,
): Promise<Snapshot> {
  const cs = await client.getOrUndefined<CocoonSet>(paths.cocoonSet(ns, name));
  const pods = (
    await client.list<Pod>(paths.pods(ns), { labelSelector: `${LABELS.name}=${name}` })
  ).items
    .filter((p) => !p.metadata?.deletionTimestamp)
    .sort((a, b) => (a.metadata?.name ?? "").localeCompare(b.metadata?.name ?? "", "en"));
  const main = pods.find((p) => p.metadata?.labels?.[LABELS.role] === "main");
  const text = await metricsText();
  const events = await eventsImpliedBy(client, side, ns, name, text);
  const reasons = [
    ...new Set(
      events
        .filter((e) => e.regarding?.kind === KIND && e.regarding?.name === name)
        .map((e) => e.reason ?? ""),
    ),
  ].sort();
  const labels = { namespace: ns, cocoonset: name };
  const annotations = pick(cs?.metadata.annotations, (k) =>
    k.startsWith("cocoonset.cocoonstack.io/"),
  );
  // Which of the identical simulated nodes the scheduler picked is not the controller's doing.
  if (annotations[ANNOTATIONS.hibernatedOnNode] !== undefined)
    annotations[ANNOTATIONS.hibernatedOnNode] = "<node>";
  if (annotations[ANNOTATIONS.rebuildHistory] !== undefined)
    annotations[ANNOTATIONS.rebuildHistory] = historyShape(annotations[ANNOTATIONS.rebuildHistory]);
  const snap: Snapshot = {
    exists: cs !== undefined,
    labels: pick(cs?.metadata.labels, () => true),
    annotations,
    finalizers: [...(cs?.metadata.finalizers ?? [])].sort(),
    status: cs ? statusView(cs) : {},
    pods: pods.map((p) => podView(p, main?.spec?.nodeName, cs?.metadata.generation)),
    eventReasons: reasons,
    metrics: {
      rebuilds: metricValue(text, `${PREFIX[side]}subagent_rebuild_total`, labels),
      deadLetters: metricValue(text, `${PREFIX[side]}subagent_dead_letter_total`, labels),
      slotReleasePodsDeleted:
        metricValue(text, `${PREFIX[side]}slot_release_pods_deleted_total`, labels) > 0,
      slotReleaseWakeHintNode:
        metricValue(text, `${PREFIX[side]}slot_release_wake_total`, {
          ...labels,
          placement: "hint-node",
        }) > 0,
      slotReleaseWakePool:
        metricValue(text, `${PREFIX[side]}slot_release_wake_total`, {
          ...labels,
          placement: "pool",
        }) > 0,
      slotReleaseWakeUnschedulable: metricValue(
        text,
        `${PREFIX[side]}slot_release_wake_unschedulable_total`,
        labels,
      ),
    },
  };
  if (registry) {
    const tags: Record<string, string[]> = {};
    const names =
      vms ?? ((cs?.status?.agents ?? []) as { vmName?: string }[]).flatMap((a) => a.vmName ?? []);
    for (const vm of names) tags[vm] = await registry.listTags(vm);
    snap.registryTags = tags;
  }
  if (hibernation) snap.hibernation = await hibernationView(client, ns, hibernation, events);
  const out = replaceNs(snap, ns);
  for (const d of DELIBERATE) d.fold(out, side);
  return out;
}
