// Status derivation: counts, per-member entries, phase and the Ready/Progressing conditions,
// computed from the live pods. Time is injected so transitions are testable.
// Behaviour: docs/behaviour.md §3.12.
import { memberPodVm } from "../attribution/attribution.js";
import { ANNOTATIONS, ROLES } from "../spec/constants.js";
import { classifyPods, type ClassifiedPods } from "../pods/classify.js";
import type {
  AgentStatus,
  CocoonSet,
  CocoonSetPhase,
  CocoonSetStatus,
  Condition,
  ConnType,
  ToolboxStatus,
} from "../spec/generated/types.js";
import type { Pod } from "../spec/kube-types.js";
import { isReady, isTerminal } from "../pods/pod-state.js";
import { nodeRefusal } from "../pods/node-refusal.js";
import { readLostSnapshots } from "../snapshots/lost-snapshots.js";
import { deadlineCondition, judgeProgress, progressDeadlineSeconds } from "./progress.js";
import { rfc3339Seconds } from "../kube/objects.js";
import { FrozenMemo } from "../spec/frozen.js";

/** The condition of a fleet whose expiry (spec.expiry) is near: written by the idle step. */
export const EXPIRING_CONDITION = "Expiring";

/** Inputs of {@link deriveStatus}. */
export interface StatusInput {
  /** The CocoonSet; its current status supplies the previous condition transition times. */
  cocoonSet: CocoonSet;
  /** Every pod listed for it (classification happens here). */
  pods: readonly Pod[];
  /** Current time in milliseconds since the epoch. */
  nowMs: number;
  /**
   * Sub-agent slots whose pods keep vanishing right after creation (see vanish.ts): they
   * set the Degraded condition. Once Degraded was reported it stays listed, False, after.
   */
  vanishingSlots?: readonly number[];
  /** The phase, when the pass decided it (a suspend); derived from the pods otherwise. */
  phase?: CocoonSetPhase;
  /**
   * Members whose pod name another pod holds (blocked.ts), one message each: they set the
   * SlotBlocked condition. Undefined when the pass did not look (the previous condition stays).
   */
  blocked?: readonly string[];
  /**
   * Why a migration to `spec.nodeName` is refused (migrate.ts), for the MigrationRefused
   * condition; undefined when the pass did not look.
   */
  migrationRefused?: readonly string[];
  /**
   * Why new members are not placed on the node they are bound to (placement.ts), for the
   * PlacementBlocked condition; undefined when the pass did not look.
   */
  placementBlocked?: readonly string[];
  /**
   * What the pass waits for, one line each (progress.ts): named by the condition
   * `Progressing` once the progress deadline is exceeded. @default none
   */
  waitingFor?: readonly string[];
}

function compact<T extends object>(value: T): T {
  return Object.fromEntries(
    Object.entries(value).filter(([, v]) => v !== undefined && v !== ""),
  ) as T;
}

/**
 * The connection protocol of a toolbox: the spec's, else VNC when it has a VNC port, else
 * inferred from its OS (android: adb, windows: rdp, others: ssh), as cocoon-operator reports.
 */
function connectionType(os: string | undefined, hasVNCPort: boolean, override?: string) {
  if (override) return override as ConnType;
  if (hasVNCPort) return "vnc";
  if (os === "android") return "adb";
  if (os === "windows") return "rdp";
  return "ssh";
}

/**
 * Whether a member counts as ready in the status: its pod is Ready and its VM has not
 * failed. A VM whose lifecycle state is `failed` can sit in a pod that still reports Ready;
 * counting it would make the counts, the entries and the phase tell different stories.
 */
export function memberReady(pod: Pod): boolean {
  return isReady(pod) && !isTerminal(pod);
}

/** A member's phase as the status reports it: `Failed` once it is terminal, else the pod's. */
export function memberPhase(pod: Pod): string | undefined {
  return isTerminal(pod) ? "Failed" : pod.status?.phase;
}

// The IP reported is the VM's, from the annotation the virtual kubelet writes (as
// cocoon-operator reports it); the pod's own status.podIP is not read.
// An entry is kept per frozen pod (engine/spec/frozen.ts) while its slot and recorded VM are
// the same: a pass over a converged fleet builds none.
function agentEntry(cs: CocoonSet, slot: number, pod: Pod): AgentStatus {
  // The recorded member's VM, not the pod's annotation (anyone who may edit the pod writes it).
  const vm = memberPodVm(cs, pod);
  return AGENT_ENTRY.get(pod, [slot, vm], () => buildAgentEntry(slot, vm, pod));
}

const AGENT_ENTRY = new FrozenMemo<Pod, AgentStatus>();
const TOOLBOX_ENTRY = new FrozenMemo<Pod, ToolboxStatus>();

function buildAgentEntry(slot: number, vm: string, pod: Pod): AgentStatus {
  const a = pod.metadata?.annotations ?? {};
  return compact<AgentStatus>({
    slot,
    role: slot === 0 ? ROLES.main : ROLES.subAgent,
    podName: pod.metadata?.name,
    vmName: vm || undefined,
    vmID: a[ANNOTATIONS.vmID],
    ip: a[ANNOTATIONS.vmIP],
    phase: memberPhase(pod),
    forkedFrom: a[ANNOTATIONS.forkFrom],
    nodeRefusal: nodeRefusal(pod),
  });
}

function toolboxEntry(cs: CocoonSet, name: string, pod: Pod): ToolboxStatus {
  const vm = memberPodVm(cs, pod);
  return TOOLBOX_ENTRY.get(pod, [name, vm], () => buildToolboxEntry(name, vm, pod));
}

function buildToolboxEntry(name: string, vm: string, pod: Pod): ToolboxStatus {
  const a = pod.metadata?.annotations ?? {};
  const vncPort = Number.parseInt(a[ANNOTATIONS.vncPort] ?? "", 10);
  return compact<ToolboxStatus>({
    name,
    podName: pod.metadata?.name,
    vmName: vm || undefined,
    vmID: a[ANNOTATIONS.vmID],
    ip: a[ANNOTATIONS.vmIP],
    phase: memberPhase(pod),
    connType: connectionType(a[ANNOTATIONS.os], vncPort > 0, a[ANNOTATIONS.connType]),
    vncPort: vncPort > 0 ? vncPort : undefined,
  });
}

/**
 * The fleet phase: no main agent or a main agent that is not Ready → Pending; a terminal
 * main agent → Failed; any desired member missing or not Ready, or an extra one still
 * present → Scaling; otherwise Running.
 */
function fleetPhase(cs: CocoonSet, pods: ClassifiedPods): CocoonSetPhase {
  const main = pods.main;
  if (!main) return "Pending";
  if (isTerminal(main)) return "Failed";
  if (!memberReady(main)) return "Pending";
  const replicas = cs.spec.agent.replicas ?? 0;
  const toolboxes = new Set((cs.spec.toolboxes ?? []).map((t) => t.name));
  for (let slot = 1; slot <= replicas; slot++) {
    const pod = pods.subAgents.get(slot);
    if (!pod || !memberReady(pod)) return "Scaling";
  }
  for (const name of toolboxes) {
    const pod = pods.toolboxes.get(name);
    if (!pod || !memberReady(pod)) return "Scaling";
  }
  const extraAgent = [...pods.subAgents.keys()].some((slot) => slot > replicas);
  const extraToolbox = [...pods.toolboxes.keys()].some((name) => !toolboxes.has(name));
  return extraAgent || extraToolbox ? "Scaling" : "Running";
}

/** A condition that keeps its transition time while its status is unchanged. */
export function condition(
  previous: readonly Condition[] | undefined,
  next: Omit<Condition, "lastTransitionTime">,
  nowMs: number,
): Condition {
  const before = previous?.find((c) => c.type === next.type);
  const lastTransitionTime =
    before && before.status === next.status ? before.lastTransitionTime : rfc3339Seconds(nowMs);
  return { ...next, lastTransitionTime };
}

/** Derives the status of a CocoonSet from its pods. */
export function deriveStatus(input: StatusInput): CocoonSetStatus {
  const cs = input.cocoonSet;
  const pods = classifyPods(cs, input.pods);
  const replicas = cs.spec.agent.replicas ?? 0;
  const specToolboxes = cs.spec.toolboxes ?? [];
  const generation = cs.metadata.generation;

  let readyAgents = pods.main && memberReady(pods.main) ? 1 : 0;
  for (const [slot, pod] of pods.subAgents) {
    if (slot <= replicas && memberReady(pod)) readyAgents++;
  }
  const readyToolboxes = specToolboxes.filter((t) => {
    const pod = pods.toolboxes.get(t.name);
    return pod !== undefined && memberReady(pod);
  }).length;
  const desiredAgents = 1 + replicas;
  const desiredToolboxes = specToolboxes.length;

  const agents: AgentStatus[] = pods.main ? [agentEntry(cs, 0, pods.main)] : [];
  for (const slot of [...pods.subAgents.keys()].sort((a, b) => a - b)) {
    agents.push(agentEntry(cs, slot, pods.subAgents.get(slot) as Pod));
  }
  const toolboxes = [...pods.toolboxes.keys()]
    .sort()
    .map((name) => toolboxEntry(cs, name, pods.toolboxes.get(name) as Pod));

  const phase = input.phase ?? fleetPhase(cs, pods);
  const counts = `${readyAgents}/${desiredAgents} agents ready, ${readyToolboxes}/${desiredToolboxes} toolboxes ready`;
  const allReady =
    phase !== "Failed" && readyAgents === desiredAgents && readyToolboxes === desiredToolboxes;
  const reconciling = phase === "Pending" || phase === "Scaling";
  const previous = cs.status?.conditions;
  const conditions: Condition[] = [
    condition(
      previous,
      compact({
        type: "Ready",
        status: allReady ? "True" : "False",
        reason: allReady ? "AllAgentsReady" : "AgentsNotReady",
        message: counts,
        observedGeneration: generation,
      }),
      input.nowMs,
    ),
    condition(
      previous,
      compact({
        type: "Progressing",
        status: reconciling ? "True" : "False",
        reason: reconciling ? "Reconciling" : "Stable",
        // The phase, whatever it is, as cocoon-operator writes it (a converged fleet:
        // False, Stable, "Running").
        message: phase,
        observedGeneration: generation,
      }),
      input.nowMs,
    ),
  ];
  // A condition that is reported once it first applies, then kept (False) when it is over.
  const notice = (
    type: string,
    messages: readonly string[] | undefined,
    reasons: [string, string],
    quiet: string,
  ) => {
    const before = previous?.find((c) => c.type === type);
    // The pass did not look: what was stored stays.
    if (messages === undefined) {
      if (before) conditions.push(before);
      return;
    }
    if (messages.length === 0 && !before) return;
    const on = messages.length > 0;
    conditions.push(
      condition(
        previous,
        compact({
          type,
          status: on ? "True" : "False",
          reason: on ? reasons[0] : reasons[1],
          message: on ? messages.join("; ") : quiet,
          observedGeneration: generation,
        }),
        input.nowMs,
      ),
    );
  };
  const vanishing = input.vanishingSlots ?? [];
  notice(
    "Degraded",
    vanishing.length > 0
      ? [
          `the pods of sub-agent slot(s) ${vanishing.join(", ")} vanish right after creation; they are recreated with backoff`,
        ]
      : [],
    ["PodsVanishing", "PodsStable"],
    "no pod vanished right after creation lately",
  );
  const lost = readLostSnapshots(cs);
  const vms = [...lost.entries()]
    .sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0))
    .map(([vm, e]) => `${vm}:${e.tag}${e.member ? ` (${e.member})` : ""}`);
  notice(
    "SnapshotLost",
    lost.size > 0
      ? [
          `recorded hibernation snapshots no longer in the registry: ${vms.join(", ")}; those VMs started without their saved state (remove the annotation ${ANNOTATIONS.lostSnapshots} to acknowledge)`,
        ]
      : [],
    ["SnapshotNotFound", "NoSnapshotLost"],
    "no recorded snapshot is missing",
  );
  notice(
    "SlotBlocked",
    input.blocked,
    ["ForeignPod", "NoForeignPod"],
    "no member's pod name is held by another pod",
  );
  notice(
    "MigrationRefused",
    input.migrationRefused,
    ["TargetNodeUnfit", "NoRefusal"],
    "no migration is refused",
  );
  notice(
    "PlacementBlocked",
    input.placementBlocked,
    ["NodeUnfit", "NodeFit"],
    "the node the new members are bound to takes them",
  );

  // The idle and expiry policies' condition is the controller's idle step's (engine/idle/):
  // a pass keeps it as stored.
  const expiring = previous?.find((c) => c.type === EXPIRING_CONDITION);
  if (expiring) conditions.push(expiring);

  const status = compact<CocoonSetStatus>({
    observedGeneration: generation,
    phase,
    readyAgents,
    desiredAgents,
    readyToolboxes,
    desiredToolboxes,
    agents,
    toolboxes,
    conditions,
    // The engine's record is carried, never derived from the pods (engine/attribution).
    vms: cs.status?.vms,
    // The idle step's record, carried as the member records are.
    idleSuspendedSince: cs.status?.idleSuspendedSince,
    expiresAt: cs.status?.expiresAt,
  });
  // The progress deadline: judged on what this status says against the stored one.
  const verdict = judgeProgress({
    previous: cs.status,
    next: status,
    deadlineSeconds: progressDeadlineSeconds(cs),
    waitingFor: input.waitingFor ?? [],
    nowMs: input.nowMs,
  });
  if (verdict.lastProgressTime !== undefined) status.lastProgressTime = verdict.lastProgressTime;
  if (verdict.exceeded !== undefined)
    status.conditions = conditions.map((c) =>
      c.type === "Progressing"
        ? deadlineCondition(previous, verdict.exceeded as string, generation, input.nowMs)
        : c,
    );
  return status;
}

/** Whether an object's field counts: absent, null and an empty list say the same. */
function kept(v: unknown): boolean {
  return v !== undefined && v !== null && !(Array.isArray(v) && v.length === 0);
}

/**
 * Whether two JSON values say the same thing under {@link statusEqual}'s rules, compared in
 * place: no copy and no serialisation (a status names every member of a fleet, and this runs
 * on every pass).
 */
function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    // In a list, absent and null are both written as null.
    for (let i = 0; i < a.length; i++) if (!sameJson(a[i] ?? null, b[i] ?? null)) return false;
    return true;
  }
  if (a === null || b === null || typeof a !== "object" || typeof b !== "object") return false;
  const x = a as Record<string, unknown>;
  const y = b as Record<string, unknown>;
  let count = 0;
  for (const k in x) {
    if (!Object.hasOwn(x, k) || !kept(x[k])) continue;
    count++;
    if (!Object.hasOwn(y, k) || !kept(y[k]) || !sameJson(x[k], y[k])) return false;
  }
  for (const k in y) if (Object.hasOwn(y, k) && kept(y[k])) count--;
  return count === 0;
}

/**
 * Whether two statuses say the same thing, so a no-op status write can be skipped. Key order,
 * absent versus empty lists, and absent versus null fields do not count as differences.
 */
export function statusEqual(
  a: CocoonSetStatus | undefined,
  b: CocoonSetStatus | undefined,
): boolean {
  return sameJson(a ?? {}, b ?? {});
}
