/**
 * The engine's execution: one reconcile pass of a CocoonSet against the cluster. It lists
 * the CocoonSet's pods once, asks the pure planner what to do, and carries the plan out.
 * The provider (`pulumi up`) and the controller call exactly this.
 *
 * Guarantees: a step's actions run in order and the step stops at its first failure, so a
 * rebuild's history write always lands before its delete; sub-agent creates run at most
 * `fanOut` at a time and one failure does not stop the others; the first error is reported
 * after every step settled.
 * Behaviour: docs/behaviour.md §3.
 */
import pLimit from "p-limit";
import { stableJson } from "../spec/stable-json.js";
import {
  agentNamesToCheck,
  isFollowedMember,
  placementNodeToRead,
  migrationStartTarget,
  type TargetNodeFacts,
  needsHibernationTargets,
  ownSnapshotFacts,
  snapshotRecordUpdate,
  SNAPSHOT_OWNER_ANNOTATION,
  restoreProbes,
  type SnapshotFacts,
} from "../lifecycle/index.js";
import {
  ADMISSION_REASON,
  deadlineWarning,
  holdBackSteps,
  quotaBlockedStatus,
  quotaRefusalOf,
  statusEqual,
  summarizeFailures,
  type QuotaRefusal,
  type Plan,
  type PlanAction,
  type PlanStep,
  type Refusal,
} from "../plan/index.js";
import { planPass, snapshotProbes } from "../planner/index.js";
import {
  classifyPods,
  vanishingSlots,
  toolboxPodName,
  type SlotCreateLog,
  type SlotCreateRecord,
} from "../pods/index.js";
import { randomBytes } from "node:crypto";
import {
  CREATE_TOKEN_ANNOTATION,
  attributedView,
  memberRole,
  memberVm,
  recordedWakeProbes,
  recordUpdate,
  tokenDigest,
  withHibernationMarks,
  type HibernationHold,
} from "../attribution/index.js";
import {
  wakeProbes,
  hibernationTargets,
  needsVmNameCheck,
  vmHeldByHibernation,
  vmNameClash,
  type HibernationTarget,
} from "../snapshots/index.js";
import {
  ANNOTATIONS,
  EVENT_REASONS,
  LABELS,
  type CocoonHibernation,
  type CocoonSet,
  type CocoonSetStatus,
  type Pod,
} from "../spec/index.js";
import type { VMRecord } from "../spec/generated/types.js";
import {
  isAlreadyExists,
  isConflict,
  isForbidden,
  isNotFound,
  KubeApiError,
  PatchType,
  paths,
  type KubeClient,
  type KubeObject,
} from "../kube/index.js";
import { BrandedError, errorMessage } from "../kube/branded-error.js";
import { gatherSnapshotFacts, type SnapshotRegistry } from "./snapshots.js";
import { namespaceOf } from "../kube/objects.js";

/** Hooks through which the engine reports what it did (events, metrics, logs, progress). */
export interface EngineHooks {
  /** An event on the CocoonSet (the controller posts it to the events API). */
  event?(cs: CocoonSet, type: "Normal" | "Warning", reason: string, message: string): void;
  /**
   * A counter increment, e.g. `subagent_rebuild_total`; `labels` are the ones besides
   * namespace and cocoonset (a slot-release wake's `placement`).
   */
  metric?(name: string, cs: CocoonSet, labels?: Record<string, string>): void;
  /** One line per decision that changed the cluster. */
  log?(level: "info" | "warn" | "debug", msg: string, fields?: Record<string, unknown>): void;
  /** Progress of a fan-out: `done` of `total` creates settled. */
  progress?(done: number, total: number): void;
  /**
   * A create met a pod of the same name that is not this CocoonSet's (409, then one GET of
   * that name). With this hook the pass reports it here instead of failing the step, and asks
   * to run again at once: the caller's next read must include that pod (its reads then plan
   * the slot as blocked, §3.21, or refuse the toolbox). The controller sets it, since it
   * creates before it reads a name; without it the pass behaves as before (the name was read
   * before planning).
   */
  nameHeld?(podName: string): void;
  /**
   * A pod write the apiserver accepted: a create (the new pod's uid), a delete (the uid
   * deleted) or an annotation patch (the resourceVersion it answered with). The controller
   * expects its pod watch to show it (controller/expectations.ts).
   */
  podWritten?(
    kind: "create" | "delete" | "patch",
    pod: { name: string; uid: string; resourceVersion?: string },
  ): void;
}

/**
 * The engine's memory of its own recent sub-agent creates, by CocoonSet uid: what lets a
 * pass back off a slot whose pod keeps vanishing right after creation (engine/pods/vanish.ts).
 * It lives as long as the caller keeps it (the controller process, one `pulumi up`).
 */
export type CreateLogs = Map<string, SlotCreateLog>;

/**
 * Where a pass reads the fleet from. The default ({@link apiReads}) asks the apiserver
 * afresh, as `pulumi up`, preview and `cocoonset plan` do; the controller reads its informer
 * caches instead (controller/fleet-cache.ts). Either way the same `planPass` decides.
 */
export interface PassReads {
  /** The fleet's pods: its labelled pods, plus any pod holding a name the pass may create. */
  fleetPods(cs: CocoonSet): Promise<Pod[]>;
  /** The CocoonSets a VM name of `cs` could collide with (docs/behaviour.md §2.7). */
  cocoonSetsForVmNames(cs: CocoonSet): Promise<CocoonSet[]>;
}

/** The fresh reads of the apiserver: what every caller without an informer uses. */
export function apiReads(client: KubeClient): PassReads {
  return {
    fleetPods: (cs) => readFleetPods(client, cs),
    cocoonSetsForVmNames: (cs) => listCocoonSetsVisible(client, namespaceOf(cs)),
  };
}

/** Options of {@link runPass}. */
export interface PassOptions {
  /** Where the pass reads the fleet from. @default {@link apiReads} of the pass's client */
  reads?: PassReads;
  /**
   * Pod names the pass must not act on: writes of an earlier pass its reads do not show yet
   * (the controller's expectations, controller/expectations.ts). Their steps are held back,
   * the status is not written from such a view, and the pass is requeued after
   * `heldBackRequeueMs`. @default none
   */
  outstanding?: ReadonlySet<string>;
  /** Requeue delay of a pass that held steps back. @default {@link STALLED_REQUEUE_MS} */
  heldBackRequeueMs?: number;
  /**
   * The CocoonSet came from a cache that may be behind the apiserver: the end-of-pass status
   * write carries its resourceVersion as a precondition, so a view another writer has
   * overtaken writes no status; the write meets 409 and the result says `conflicted` (as a
   * rebuild history write always does), for the caller to plan again on a fresh read.
   * @default false (a fresh read: the status is merged without a precondition)
   */
  cocoonSetFromCache?: boolean;
  /** Create logs to read and update; without it every missing slot is created at once. */
  createLogs?: CreateLogs;
  /** Maximum sub-agent creates in flight. @default 8 */
  fanOut?: number;
  /** Clock. @default Date.now */
  now?: () => number;
  hooks?: EngineHooks;
  /** Plan only: perform nothing. */
  dryRun?: boolean;
  /**
   * The snapshot registry (the node agent's `OCI_REGISTRY`). With it, `spec.suspend` is
   * acted on: the pass asks it which `:hibernate` tags exist before planning. Without it
   * `suspend` is stored and not acted on (docs/behaviour.md §3.15).
   */
  registry?: SnapshotRegistry;
  /**
   * Stops the pass: once aborted, no further action starts (those in flight finish), no status
   * is written, and the result carries an error saying so. The controller aborts it when it
   * shuts down and the grace period for in-flight work has run out.
   */
  signal?: AbortSignal;
}

/** The error a pass reports when its signal stopped it. */
export const PASS_ABORTED = "stopped before the end of the pass: the caller aborted it";

/** What one pass did. */
export interface PassResult {
  plan: Plan;
  /** Pods the plan created (names). */
  created: string[];
  /** Pods the plan deleted (names). */
  deleted: string[];
  /** Names a create found held by a pod that is not the fleet's ({@link EngineHooks.nameHeld}). */
  namesHeld?: string[];
  /** Pods whose steps were held back: in {@link PassOptions.outstanding} (names). */
  heldBack?: string[];
  /** Every failure as a typed error, in step order (the planner's refusals first). */
  failures: PassFailure[];
  /** 0: run again at once; n: after n ms; undefined: only on a change. */
  requeueAfterMs: number | undefined;
  statusWritten: boolean;
  /** Every planned create or delete met a same-name pod: nothing changed this pass. */
  stalled?: boolean;
  /** A write met a newer CocoonSet (409): planning again on fresh data fixes it. */
  conflicted?: boolean;
  /** The CocoonSet after this pass's writes (history, status). */
  cocoonSet: CocoonSet;
  /** The ResourceQuota that refused a create of this pass, as the apiserver named it. */
  quotaRefusal?: QuotaRefusal;
  /**
   * The apiserver's message when its admission (Pod Security, a webhook, a policy; not a
   * quota) refused a create of this pass (403).
   */
  admissionRefusal?: string;
  /** Creates not sent because a ResourceQuota had refused one before them in this pass. */
  unsentCreates?: number;
}

/**
 * One bounded line for a pass that fell short (counts by decision, the quota that refused,
 * the first failure): what the controller logs and reports, however many steps failed.
 */
export function passFailureSummary(result: PassResult): string {
  return summarizeFailures(
    result.failures.map((f) =>
      StepFailure.isInstance(f)
        ? {
            pod: f.pod,
            decision: f.decision,
            message: f.cause instanceof Error ? f.cause.message : String(f.cause),
          }
        : { message: f.message },
    ),
    result.unsentCreates,
    result.quotaRefusal,
  );
}

/** The planner refused part of the spec (a toolbox name another pod holds, bad names). */
export class PlanRefusal extends BrandedError {
  constructor(
    /** The planner's refusal, as data. */
    readonly refusal: Refusal,
  ) {
    super(refusal.message);
  }
}

/**
 * The snapshot registry did not answer what the pass needed: nothing was changed (the pass
 * fails closed) and it is tried again.
 */
export class SnapshotRegistryFailure extends BrandedError {
  constructor(
    /** The planner's refusal: what the registry was asked for, and its error. */
    readonly refusal: Extract<Refusal, { kind: "registry-unanswered" }>,
  ) {
    super(refusal.message);
  }
}

/** The pass failure a planner's refusal is reported as. */
export function refusalFailure(refusal: Refusal): PlanRefusal | SnapshotRegistryFailure {
  return refusal.kind === "registry-unanswered"
    ? new SnapshotRegistryFailure(refusal)
    : new PlanRefusal(refusal);
}

/**
 * Whether a pass failure is only a suspend's registry silence (docs/behaviour.md §3.15): it
 * changed nothing, and a wait for the suspend retries it.
 */
export function isSuspendRegistrySilence(f: PassFailure): boolean {
  return SnapshotRegistryFailure.isInstance(f) && f.refusal.need === "suspend";
}

/** One step's action failed against the cluster; `cause` is the API error. */
export class StepFailure extends BrandedError {
  constructor(
    /** The pod the step acts on. */
    readonly pod: string,
    /** What the step was doing (`create`, `rebuild`, `generation-stamp`, …). */
    readonly decision: string,
    cause: unknown,
  ) {
    super(`${pod} (${decision}): ${errorMessage(cause)}`, { cause });
  }
}

/** A write met a newer CocoonSet (409): the pass is planned again on fresh data. */
export class StaleCocoonSet extends BrandedError {
  constructor() {
    super("the CocoonSet changed during the pass; it will be planned again");
  }
}

/**
 * Whether the pass fell short only because the CocoonSet it planned from was overtaken by
 * another write (409 on its history or status write): planning again on a fresh read is
 * all it takes.
 */
export function onlyOvertaken(result: PassResult): boolean {
  return (
    result.conflicted === true &&
    result.failures.every(
      (f) =>
        StaleCocoonSet.isInstance(f) ||
        (StepFailure.isInstance(f) && isConflict((f as Error).cause)),
    )
  );
}

/** The pass's signal stopped it before the end. */
export class PassAborted extends BrandedError {
  constructor() {
    super(PASS_ABORTED);
  }
}

/** Why a pass fell short. */
export type PassFailure =
  PlanRefusal | SnapshotRegistryFailure | StepFailure | StaleCocoonSet | PassAborted;

/** Thrown when a pass could not do everything; carries what it did. */
export class PassError extends BrandedError {
  constructor(
    message: string,
    readonly result: PassResult,
  ) {
    super(message);
  }
}

/** Requeue delay of a pass whose planned changes all met existing pods. */
const STALLED_REQUEUE_MS = 1000;

/** The label selector of a CocoonSet's pods. */
export function podSelector(name: string): string {
  return `${LABELS.name}=${name}`;
}

/** Lists the CocoonSet's pods (one request, by label). */
export async function listFleetPods(client: KubeClient, cs: CocoonSet): Promise<Pod[]> {
  const ns = namespaceOf(cs);
  const list = await client.list(paths.pods(ns), {
    labelSelector: podSelector(cs.metadata.name ?? ""),
  });
  return list.items;
}

/**
 * What a pass reads of the cluster: the CocoonSet's labelled pods, plus any pod that holds a
 * declared toolbox's name or an agent name the pass may create without the label, so that
 * the plan sees the name conflict before it creates anything. `cocoonset plan` reads through this too (preview.ts): plan and pass
 * cannot disagree on their input.
 */
async function readFleetPods(client: KubeClient, cs: CocoonSet): Promise<Pod[]> {
  return addNameHolders(client, cs, await listFleetPods(client, cs));
}

/**
 * Adds to the fleet's labelled `pods` (in place) any pod that holds a declared toolbox's
 * name or an agent name the pass may create without the label: one GET per such name, none
 * when every pod is there. With `only`, just the names it accepts are read: the controller
 * creates first and reads a name only once a create of it met another pod (409), so it asks
 * only for the names it has seen held (controller/fleet-cache.ts).
 */
export async function addNameHolders(
  client: KubeClient,
  cs: CocoonSet,
  pods: Pod[],
  only: (podName: string) => boolean = () => true,
): Promise<Pod[]> {
  const ns = namespaceOf(cs);
  const names = new Set(pods.map((p) => p.metadata?.name));
  for (const tb of cs.spec.toolboxes ?? []) {
    const podName = toolboxPodName(cs.metadata.name ?? "", tb.name);
    if (names.has(podName) || !only(podName)) continue;
    const squatter = await client.getOrUndefined<Pod>(paths.pod(ns, podName));
    if (squatter) pods.push(squatter);
  }
  // Agent names the pass may create: a pod without the fleet's label may hold one (§3.21).
  const limit = pLimit(8);
  const holders = await Promise.all(
    agentNamesToCheck(cs, pods)
      .filter(only)
      .map((podName) => limit(() => client.getOrUndefined<Pod>(paths.pod(ns, podName)))),
  );
  for (const holder of holders) if (holder) pods.push(holder);
  return pods;
}

/**
 * What the registry says of the tags a pass may need (the VMs it probes), with the new value
 * of the fleet's record of the snapshots it took when this pass adds to it. Only tags the fleet can attribute to itself count
 * (snapshot-owner.ts, docs/behaviour.md §3.19).
 */
async function readOwnSnapshotFacts(
  registry: SnapshotRegistry | undefined,
  cs: CocoonSet,
  pods: readonly Pod[],
  hibernations: readonly HibernationTarget[] = [],
): Promise<{ facts: SnapshotFacts | undefined; record?: string }> {
  if (!registry) return { facts: undefined };
  // A member the record says waits in its snapshot, whose pod is gone, restores its next
  // pod from its own tag (engine/attribution).
  const vouched = [...restoreProbes(cs, pods, hibernations), ...recordedWakeProbes(cs, pods)];
  const vms = new Set([
    ...snapshotProbes(cs, pods),
    ...vouched,
    ...wakeProbes(cs, pods, hibernations),
  ]);
  const facts = await gatherSnapshotFacts(registry, [...vms].sort());
  return {
    facts: ownSnapshotFacts(cs, pods, facts, vouched),
    record: snapshotRecordUpdate(cs, pods, facts),
  };
}

/**
 * The CocoonHibernations of the CocoonSet's namespace, as the plan reads them; only asked
 * with a registry and when a pod may be built or an unsuspend may withdraw a hibernate
 * request (a steady fleet asks nothing). A cluster without the CocoonHibernation CRD has none.
 */
async function readHibernationTargets(
  client: KubeClient,
  registry: SnapshotRegistry | undefined,
  cs: CocoonSet,
  pods: readonly Pod[],
): Promise<HibernationTarget[] | undefined> {
  if (!registry || !needsHibernationTargets(cs, pods)) return undefined;
  try {
    const list = await client.list<CocoonHibernation>(paths.cocoonHibernations(namespaceOf(cs)));
    return hibernationTargets(list.items);
  } catch (e) {
    if (isNotFound(e)) return [];
    throw e;
  }
}

/**
 * The CocoonSets a VM name of `cs` could collide with (docs/behaviour.md §2.7): every one in
 * the cluster, or, for credentials that may not list them cluster-wide, those of its own
 * namespace. Undefined when the pass creates nothing (all pods present): nothing to check.
 */
async function readFleetsForVmNames(
  client: KubeClient,
  cs: CocoonSet,
  pods?: readonly Pod[],
  reads: PassReads = apiReads(client),
): Promise<CocoonSet[] | undefined> {
  if (pods && !needsVmNameCheck(cs, pods)) return undefined;
  return reads.cocoonSetsForVmNames(cs);
}

/** Every CocoonSet the credentials may list: the cluster's, else one namespace's. */
export async function listCocoonSetsVisible(
  client: KubeClient,
  namespace: string,
): Promise<CocoonSet[]> {
  // No CocoonSet resource served yet (a preview before the CRD is installed): none exists.
  const absent = (e: unknown) => KubeApiError.isInstance(e) && e.status === 404;
  try {
    return (await client.list<CocoonSet>(paths.cocoonSets())).items;
  } catch (e) {
    if (absent(e)) return [];
    if (!(KubeApiError.isInstance(e) && e.status === 403)) throw e;
  }
  try {
    return (await client.list<CocoonSet>(paths.cocoonSets(namespace))).items;
  } catch (e) {
    if (absent(e)) return [];
    throw e;
  }
}

/** Every CocoonHibernation the credentials may list: the cluster's, else one namespace's. */
export async function listHibernationsVisible(
  client: KubeClient,
  namespace: string,
): Promise<CocoonHibernation[]> {
  const absent = (e: unknown) => KubeApiError.isInstance(e) && e.status === 404;
  try {
    return (await client.list<CocoonHibernation>(paths.cocoonHibernations())).items;
  } catch (e) {
    if (absent(e)) return [];
    if (!(KubeApiError.isInstance(e) && e.status === 403)) throw e;
  }
  try {
    return (await client.list<CocoonHibernation>(paths.cocoonHibernations(namespace))).items;
  } catch (e) {
    if (absent(e)) return [];
    throw e;
  }
}

/**
 * The VMs live CocoonHibernations recorded, when a pass may create pods (`fleets` was read)
 * with a registry: a fleet is refused a VM one of them holds (engine/attribution).
 */
async function readHibernationHolds(client: KubeClient, cs: CocoonSet): Promise<HibernationHold[]> {
  return (await listHibernationsVisible(client, namespaceOf(cs)))
    .filter((h) => !h.metadata.deletionTimestamp && (h.status?.vmName ?? "") !== "")
    .map((h) => ({
      namespace: namespaceOf(h),
      name: h.metadata.name ?? "",
      vm: h.status?.vmName ?? "",
    }));
}

/**
 * The node a migration would start towards (§3.17). Any error is kept as the answer: the
 * planner refuses a target it could not check (a controller without `get` on nodes).
 */
async function readTargetNode(client: KubeClient, name: string): Promise<TargetNodeFacts> {
  try {
    const node = await client.getOrUndefined<
      NonNullable<Extract<TargetNodeFacts, { node?: unknown }>["node"]> & KubeObject
    >(`${paths.nodes()}/${encodeURIComponent(name)}`);
    return { name, node };
  } catch (e) {
    return { name, error: errorMessage(e) };
  }
}

/**
 * The pods this process created, by CocoonSet uid then member, until the CocoonSet's status
 * records them (engine/attribution): a pass whose view of the status is older than its own
 * creates still knows them as members. One map per copy of the engine; the provider and the
 * controller each keep theirs for as long as the process lives.
 */
const CREATED = new Map<string, Map<string, VMRecord>>();

/** The pods this process created for `cs` and knows as members (see {@link CREATED}). */
export function createdRecords(cs: CocoonSet): ReadonlyMap<string, VMRecord> {
  return CREATED.get(cs.metadata.uid ?? "") ?? new Map();
}

/** Forgets what this process created for `cs` (its deletion is done). */
export function forgetCreated(cs: CocoonSet): void {
  CREATED.delete(cs.metadata.uid ?? "");
}

function rememberCreated(cs: CocoonSet, podName: string, podUID: string): void {
  const name = cs.metadata.name ?? "";
  const member = podName.slice(name.length + 1);
  if (podUID === "" || !podName.startsWith(`${name}-`) || memberRole(member) === undefined) return;
  const uid = cs.metadata.uid ?? "";
  const mine = CREATED.get(uid) ?? new Map<string, VMRecord>();
  mine.set(member, { vm: memberVm(cs, member), podUID });
  CREATED.set(uid, mine);
}

/** A plan of the live cluster, the pods and the registry facts it was planned with. */
export interface LivePlan {
  /**
   * The CocoonSet as planned: the one read, with what the engine knows of its members that
   * its status does not say yet (engine/attribution).
   */
  view: CocoonSet;
  plan: Plan;
  pods: Pod[];
  snapshots: SnapshotFacts | undefined;
  /** The fleet's snapshot record to write before the steps, when it grows. */
  record?: string;
}

/**
 * Reads what a pass reads (the fleet's pods, the fleets holding its VM names, the
 * CocoonHibernations, the registry's facts, the migration target's node) and plans, changing
 * nothing: the pass executes this plan, and `cocoonset plan` prints it (preview.ts).
 */
export async function planLive(
  client: KubeClient,
  read: CocoonSet,
  opts: PassOptions,
): Promise<LivePlan> {
  const reads = opts.reads ?? apiReads(client);
  const pods = await reads.fleetPods(read);
  // Every decision below reads the fleet's members and VMs from the engine's own record.
  const read0 = attributedView(read, pods, createdRecords(read));
  const fleets = await readFleetsForVmNames(client, read0, pods, reads);
  // A fleet refused for its VM names asks the registry nothing about them.
  const hibernationHolds =
    fleets && opts.registry ? await readHibernationHolds(client, read0) : undefined;
  const refused =
    (fleets && vmNameClash(read0, fleets)) ||
    (hibernationHolds && vmHeldByHibernation(read0, hibernationHolds));
  const registry = refused ? undefined : opts.registry;
  const hibernations = await readHibernationTargets(client, registry, read0, pods);
  const { facts: snapshots, record } = await readOwnSnapshotFacts(
    registry,
    read0,
    pods,
    hibernations,
  );
  // The record's hibernation marks follow what the registry and the node agent say now.
  const cs = withHibernationMarks(
    read0,
    pods,
    snapshots && !("error" in snapshots) ? snapshots.hibernate : undefined,
  );
  const target = registry
    ? migrationStartTarget(cs, classifyPods(cs, pods), hibernations)
    : undefined;
  const targetNode = target === undefined ? undefined : await readTargetNode(client, target);
  const bindTo = placementNodeToRead(cs, pods);
  const placementNode = bindTo === undefined ? undefined : await readTargetNode(client, bindTo);
  const plan = planPass({
    fleets,
    hibernationHolds,
    targetNode,
    placementNode,
    hibernations,
    cocoonSet: cs,
    pods,
    nowMs: (opts.now ?? Date.now)(),
    fanOut: opts.fanOut,
    createLog: opts.createLogs?.get(cs.metadata.uid ?? ""),
    snapshots,
  });
  return { view: cs, plan, pods, snapshots, record };
}

/** What the executor of one pass works with; `result.cocoonSet` is the latest CocoonSet. */
interface PassContext {
  client: KubeClient;
  plan: Plan;
  result: PassResult;
  opts: PassOptions;
  hooks: EngineHooks;
  /**
   * The CocoonSet as the pass's own record writes left it (`status.vms`). Kept apart from
   * `result.cocoonSet`, whose resourceVersion stays the one planned from: the preconditions
   * of the history and status writes must still catch a view another writer overtook.
   */
  recorded?: CocoonSet;
}

/** Runs one pass: list, plan, execute, and write status when nothing changed. */
export async function runPass(
  client: KubeClient,
  input: CocoonSet,
  opts: PassOptions = {},
): Promise<PassResult> {
  const live = await planLive(client, input, opts);
  const { pods, record } = live;
  const { plan, heldBack } = holdBackSteps(live.plan, opts.outstanding ?? new Set());
  const result: PassResult = {
    plan,
    created: [],
    deleted: [],
    failures: plan.refusals.map(refusalFailure),
    requeueAfterMs: plan.requeueAfterMs,
    statusWritten: false,
    cocoonSet: input,
  };
  if (heldBack.length > 0) result.heldBack = heldBack;
  if (opts.dryRun) return result;
  const ctx: PassContext = { client, plan, result, opts, hooks: opts.hooks ?? {} };
  if (record !== undefined && plan.refusals.length === 0) {
    // Before any step: a slot release or a migration deletes the pod that was the evidence.
    if (!(await recordOwnSnapshots(ctx, record))) return result;
  }
  // What the record lacks before the steps (a hibernation mark that moved): written first, so
  // the pass that acts on the member next reads it.
  if (opts.signal?.aborted !== true) await writeRecord(ctx, live.view);
  // An aborted pass starts nothing, so it announces nothing either.
  if (opts.signal?.aborted !== true && !(await announceCreates(ctx))) return result;
  await executeSteps(ctx);
  if (opts.createLogs) rememberCreates(opts.createLogs, plan, result.created);
  if (opts.signal?.aborted === true) {
    result.failures.push(new PassAborted());
    return result;
  }
  // A view known to be behind the pass's own writes says nothing the status may repeat.
  if (heldBack.length === 0) await writePassStatus(ctx, pods);
  await writeRecord(ctx, live.view);
  // A name found held: the next pass reads that pod and plans the slot as blocked.
  if (result.created.length > 0 || result.deleted.length > 0 || result.namesHeld)
    result.requeueAfterMs = 0;
  else if (heldBack.length > 0) {
    // The watch event that settles the expectation enqueues the fleet; this is the fallback.
    // A plan's "at once" came from the view that is behind: running it again before the
    // watch catches up would only spin.
    const wait = opts.heldBackRequeueMs ?? STALLED_REQUEUE_MS;
    const planned = result.requeueAfterMs;
    result.requeueAfterMs = planned !== undefined && planned > 0 ? Math.min(planned, wait) : wait;
  } else if (plan.mutatesPods) {
    // Every create met a pod of the same name (one still terminating, or another writer's):
    // nothing changed, so running again at once would only spin.
    result.stalled = true;
    result.requeueAfterMs = STALLED_REQUEUE_MS;
  }
  return result;
}

/**
 * Writes into `status.vms` what the engine knows of the fleet's members and its status does not
 * say yet (engine/attribution): the pods this pass created, and those of earlier passes whose
 * record did not land. A merge of the map's keys: no precondition is needed, and no other
 * writer's key is touched. A failure is noted; the process still knows them (CREATED).
 */
async function writeRecord(ctx: PassContext, view: CocoonSet): Promise<void> {
  const { client, plan, result, hooks } = ctx;
  const known = attributedView(view, [], createdRecords(view));
  const update = recordUpdate(ctx.recorded ?? result.cocoonSet, known);
  if (!update) return;
  try {
    ctx.recorded = await client.patch<CocoonSet>(
      paths.cocoonSetStatus(plan.cocoonSet.namespace, plan.cocoonSet.name),
      // A status is written whole the first time: the schema requires its counts.
      {
        status: {
          ...((ctx.recorded ?? result.cocoonSet).status ? {} : firstCounts(view)),
          vms: update,
        },
      },
      PatchType.merge,
    );
    hooks.log?.("debug", "recorded the fleet's members", {
      members: Object.keys(update).join(","),
    });
  } catch (e) {
    if (isNotFound(e)) return;
    result.failures.push(new StepFailure(plan.cocoonSet.name, "member record", e));
  }
}

/**
 * Before the pass creates pods: each create gets a random token on its pod, and the token's
 * digest goes into `status.vms` first (engine/attribution). Should the process stop after a
 * create and before the record of the pod's uid, the next pass still knows that pod as the
 * member's; no one else can make a pod carry a token only its digest was shown of. False (a
 * failure noted, nothing created) when the record cannot be written.
 */
async function announceCreates(ctx: PassContext): Promise<boolean> {
  const { client, plan, result } = ctx;
  const cs = result.cocoonSet;
  const name = plan.cocoonSet.name;
  const entries: Record<string, VMRecord> = {};
  for (const step of plan.steps)
    for (const action of step.actions) {
      if (action.kind !== "create-pod") continue;
      const member = step.podName.slice(name.length + 1);
      if (!step.podName.startsWith(`${name}-`) || memberRole(member) === undefined) continue;
      const token = randomBytes(16).toString("hex");
      action.pod.metadata.annotations = {
        ...action.pod.metadata.annotations,
        [CREATE_TOKEN_ANNOTATION]: token,
      };
      entries[member] = { vm: memberVm(cs, member), createToken: tokenDigest(token) };
    }
  if (Object.keys(entries).length === 0) return true;
  try {
    ctx.recorded = await client.patch<CocoonSet>(
      paths.cocoonSetStatus(plan.cocoonSet.namespace, name),
      { status: { ...(cs.status ? {} : firstCounts(cs)), vms: entries } },
      PatchType.merge,
    );
    return true;
  } catch (e) {
    result.failures.push(new StepFailure(name, "create announcement", e));
    return false;
  }
}

/** The counts a CocoonSet's first status must carry, as nothing is ready yet. */
function firstCounts(cs: CocoonSet): Omit<CocoonSetStatus, "vms"> {
  return {
    readyAgents: 0,
    desiredAgents: 1 + Math.max(0, cs.spec.agent?.replicas ?? 0),
    readyToolboxes: 0,
    desiredToolboxes: (cs.spec.toolboxes ?? []).length,
  };
}

/** Writes the fleet's record of its own snapshots; false (a failure noted) when it cannot. */
async function recordOwnSnapshots(ctx: PassContext, record: string): Promise<boolean> {
  const { client, plan, result, hooks } = ctx;
  try {
    result.cocoonSet = await client.patch<CocoonSet>(
      paths.cocoonSet(plan.cocoonSet.namespace, plan.cocoonSet.name),
      { metadata: { annotations: { [SNAPSHOT_OWNER_ANNOTATION]: record } } },
      PatchType.merge,
    );
    hooks.log?.("info", "recorded the fleet's own hibernation snapshots", { record });
    return true;
  } catch (e) {
    result.failures.push(new StepFailure(plan.cocoonSet.name, "snapshot record", e));
    return false;
  }
}

/**
 * After a create met a pod of the same name (409): reads who holds the name. Another's pod
 * is reported through {@link EngineHooks.nameHeld} and the pass runs again at once; this
 * CocoonSet's own pod means the caller's view was behind, so it is reported as written, for
 * the caller to expect it.
 */
async function nameHolder(ctx: PassContext, podName: string): Promise<"own" | "other" | "gone"> {
  const { client, plan, result, hooks } = ctx;
  const holder = await client.getOrUndefined<Pod>(paths.pod(plan.cocoonSet.namespace, podName));
  if (!holder) return "gone";
  // Expected like a create only when the watch can show it: a pod that names this CocoonSet
  // as its controller but lacks the labels it selects on would be waited for for ever.
  if (isFollowedMember(result.cocoonSet, holder)) {
    hooks.podWritten?.("create", { name: podName, uid: holder.metadata?.uid ?? "" });
    return "own";
  }
  hooks.nameHeld?.(podName);
  (result.namesHeld ??= []).push(podName);
  hooks.log?.("info", "a pod that is not this CocoonSet's holds the name; planning again", {
    pod: podName,
  });
  return "other";
}

/** Carries out one action of a step against the cluster (or the registry). */
async function performAction(ctx: PassContext, step: PlanStep, action: PlanAction): Promise<void> {
  const { client, plan, result, opts, hooks } = ctx;
  const ns = plan.cocoonSet.namespace;
  switch (action.kind) {
    case "create-pod": {
      try {
        const created = await client.create<Pod>(paths.pods(ns), action.pod);
        rememberCreated(result.cocoonSet, step.podName, created.metadata?.uid ?? "");
        result.created.push(step.podName);
        hooks.podWritten?.("create", { name: step.podName, uid: created.metadata?.uid ?? "" });
        hooks.log?.("info", "created pod", { pod: step.podName, decision: step.decision });
      } catch (err) {
        // The apiserver names a refusing ResourceQuota only in its Status message (no field
        // carries it): the one place the engine reads an error's text, an outside one.
        const quota = isForbidden(err) ? quotaRefusalOf(errorMessage(err)) : undefined;
        if (quota) result.quotaRefusal ??= quota;
        else if (isForbidden(err)) result.admissionRefusal ??= errorMessage(err);
        if (!isAlreadyExists(err)) throw err;
        if (hooks.nameHeld) {
          const holder = await nameHolder(ctx, step.podName);
          // Another's pod is reported; for a toolbox, who holds it is now known.
          if (holder === "other" || action.onAlreadyExists === "check-owner") return;
        }
        if (action.onAlreadyExists === "success") return;
        if (action.onAlreadyExists === "retry-later") {
          // The previous pod of this name is still terminating.
          result.requeueAfterMs = Math.min(result.requeueAfterMs ?? 5000, 5000);
          return;
        }
        const existing = await client.get<Pod>(paths.pod(ns, step.podName));
        const owner = existing.metadata?.ownerReferences?.find((r) => r.controller);
        if (owner?.uid !== plan.cocoonSet.uid) {
          // Plain Error: the step's runner reports it as the cause of a StepFailure, the
          // typed failure callers see.
          throw new Error(
            `pod ${step.podName} already exists and is not this CocoonSet's toolbox`,
            { cause: err },
          );
        }
      }
      return;
    }
    case "delete-pod": {
      if (await client.delete(paths.pod(ns, action.name), { uid: action.uid })) {
        result.deleted.push(action.name);
        hooks.podWritten?.("delete", { name: action.name, uid: action.uid });
        hooks.log?.("info", "deleted pod", {
          pod: action.name,
          decision: step.decision,
          drift: step.drift,
          nodeRefusal: step.nodeRefusal,
        });
      }
      return;
    }
    case "annotate-pod": {
      try {
        const patched = await client.patch<Pod>(
          paths.pod(ns, action.name),
          { metadata: { uid: action.uid, annotations: action.annotations } },
          PatchType.merge,
        );
        hooks.podWritten?.("patch", {
          name: action.name,
          uid: action.uid,
          resourceVersion: patched.metadata?.resourceVersion,
        });
      } catch (e) {
        if (!action.bestEffort) throw e;
        // A lost keep-snapshot flag costs the wake a registry pull, not the seat.
        hooks.log?.("warn", "could not annotate pod; going on", {
          pod: action.name,
          annotations: action.annotations,
          error: errorMessage(e),
        });
        return;
      }
      hooks.log?.("info", "annotated pod", { pod: action.name, annotations: action.annotations });
      return;
    }
    case "annotate-cocoonset": {
      result.cocoonSet = await client.patch<CocoonSet>(
        paths.cocoonSet(ns, plan.cocoonSet.name),
        { metadata: { annotations: action.annotations } },
        PatchType.merge,
      );
      hooks.log?.("info", "annotated the CocoonSet", { annotations: action.annotations });
      return;
    }
    case "delete-snapshot-tag": {
      // A programmer error: the planner plans a tag deletion only from registry facts.
      if (!opts.registry) throw new Error("no snapshot registry to delete the tag from");
      await opts.registry.deleteManifest(action.vm, action.tag);
      hooks.log?.("info", "deleted snapshot tag", { vm: action.vm, tag: action.tag });
      return;
    }
    case "write-status": {
      // Persisted before the step's next action: a phase that marks work in flight.
      result.cocoonSet = await client.patch<CocoonSet>(
        paths.cocoonSetStatus(ns, plan.cocoonSet.name),
        {
          status: {
            ...action.status,
            observedGeneration: result.cocoonSet.metadata.generation,
            ...statusClears(action.status),
          },
        },
        PatchType.merge,
      );
      result.statusWritten = true;
      return;
    }
    case "write-history": {
      // Conditional on the resourceVersion we planned from: a concurrent writer makes
      // this fail (409) and the pass is retried on fresh data, never on stale counts.
      result.cocoonSet = await client.patch<CocoonSet>(
        paths.cocoonSet(ns, plan.cocoonSet.name),
        {
          metadata: {
            resourceVersion: result.cocoonSet.metadata.resourceVersion,
            annotations: { [ANNOTATIONS.rebuildHistory]: action.value },
          },
        },
        PatchType.merge,
      );
      return;
    }
    case "event":
      hooks.event?.(result.cocoonSet, action.type, action.reason, action.message);
      return;
    case "count-metric":
      hooks.metric?.(action.metric, result.cocoonSet, action.labels);
      return;
  }
}

/**
 * The plan's generation stamps, then its steps: sequential steps in order, each run of
 * consecutive concurrent steps through one bounded pool (the fan-out). A failed action ends
 * its step, noted among the failures; the other steps go on.
 */
async function executeSteps(ctx: PassContext): Promise<void> {
  const { client, plan, result, opts, hooks } = ctx;
  const ns = plan.cocoonSet.namespace;
  const aborted = () => opts.signal?.aborted === true;
  const runStep = async (step: PlanStep): Promise<void> => {
    for (const action of step.actions) {
      if (aborted()) return;
      try {
        await performAction(ctx, step, action);
      } catch (e) {
        // No line per failed step: a quota can refuse hundreds a pass. The caller reports the
        // pass once (passFailureSummary).
        result.failures.push(new StepFailure(step.podName, step.decision, e));
        if (isConflict(e) && action.kind === "write-history") {
          result.conflicted = true;
          result.failures.push(new StaleCocoonSet());
        }
        return;
      }
    }
  };

  const limit = pLimit(Math.max(1, plan.fanOut));
  // Generation stamps first (uid precondition: a pod replaced meanwhile is left alone).
  await Promise.all(
    plan.generationStamps.map((stamp) =>
      limit(async () => {
        if (aborted()) return;
        try {
          await client.patch(
            paths.pod(ns, stamp.name),
            {
              metadata: {
                uid: stamp.uid,
                annotations: { [ANNOTATIONS.generation]: stamp.generation },
              },
            },
            PatchType.merge,
          );
        } catch (e) {
          if (isNotFound(e) || isConflict(e)) return;
          result.failures.push(new StepFailure(stamp.name, "generation stamp", e));
        }
      }),
    ),
  );

  for (let i = 0; i < plan.steps.length;) {
    const step = plan.steps[i];
    if (!step.concurrent) {
      await runStep(step);
      i++;
      continue;
    }
    const batch: PlanStep[] = [];
    while (i < plan.steps.length && plan.steps[i].concurrent) batch.push(plan.steps[i++]);
    let done = 0;
    await Promise.all(
      batch.map((s) =>
        limit(async () => {
          // Once a ResourceQuota refused a create, the creates still to start would be refused
          // alike: they are not sent (the next pass tries again).
          if (
            (result.quotaRefusal || result.admissionRefusal !== undefined) &&
            s.actions[0]?.kind === "create-pod"
          ) {
            result.unsentCreates = (result.unsentCreates ?? 0) + 1;
          } else await runStep(s);
          done++;
          hooks.progress?.(done, batch.length);
        }),
      ),
    );
  }
}

/**
 * The resourceVersion the pass's status write is conditioned on: the one it planned from,
 * or, when the pass's own record writes (`status.vms`, merged without a precondition) came
 * after it, theirs, provided that the object they returned differs from the planned one in
 * nothing but that map. Another writer's change in between moves something else (the spec's
 * generation, an annotation, the rest of the status), and then the planned version stands and
 * the write meets the conflict it must. Without this, a pass that announces creates every
 * time (creates a quota or admission refuses) would never write the status that says so.
 */
function preconditionVersion(ctx: PassContext): string | undefined {
  const planned = ctx.result.cocoonSet;
  const mine = ctx.recorded;
  const version = (o: CocoonSet) => Number(o.metadata.resourceVersion ?? "");
  if (!mine || !(version(mine) > version(planned))) return planned.metadata.resourceVersion;
  // A fleet planned with no status got its first one from the record write: the counts it
  // must carry, and the map.
  const status = (o: CocoonSet) =>
    o.status === undefined ? firstCounts(planned) : { ...o.status, vms: undefined };
  const rest = (o: CocoonSet) =>
    stableJson({
      generation: o.metadata.generation,
      annotations: o.metadata.annotations ?? {},
      labels: o.metadata.labels ?? {},
      finalizers: o.metadata.finalizers ?? [],
      deletion: o.metadata.deletionTimestamp ?? "",
      status: status(o),
    });
  return rest(mine) === rest(planned)
    ? mine.metadata.resourceVersion
    : planned.metadata.resourceVersion;
}

/**
 * The status a pass ends with: the plan's when the pass had no failure; when a quota stopped
 * it, what the pods say with a condition naming the quota (docs/behaviour.md §3.12), since
 * such a pass never gets to the quiet pass that writes status.
 */
async function writePassStatus(ctx: PassContext, pods: Pod[]): Promise<void> {
  const { client, plan, result, opts } = ctx;
  const cs = result.cocoonSet;
  const path = paths.cocoonSetStatus(plan.cocoonSet.namespace, plan.cocoonSet.name);
  let status: CocoonSetStatus | undefined;
  if (plan.status && result.failures.length === 0) {
    status = plan.status;
  } else if (result.quotaRefusal || result.admissionRefusal !== undefined) {
    const blocked = quotaBlockedStatus({
      cocoonSet: cs,
      pods,
      nowMs: (opts.now ?? Date.now)(),
      vanishingSlots: vanishingSlots(plan.createLog),
      refusal: result.quotaRefusal ?? { admission: result.admissionRefusal ?? "" },
      missing: plan.steps.filter((s) => s.actions.some((a) => a.kind === "create-pod")).length,
    });
    if (!statusEqual(cs.status, blocked)) status = blocked;
  }
  if (!status) return;
  const precondition = opts.cocoonSetFromCache === true;
  try {
    result.cocoonSet = await client.patch<CocoonSet>(
      path,
      {
        ...(precondition && { metadata: { resourceVersion: preconditionVersion(ctx) } }),
        status: { ...status, observedGeneration: cs.metadata.generation, ...statusClears(status) },
      },
      PatchType.merge,
    );
  } catch (e) {
    if (!precondition || !isConflict(e)) throw e;
    result.conflicted = true;
    result.failures.push(new StaleCocoonSet());
    return;
  }
  result.statusWritten = true;
  if (status === plan.status) return;
  // A refusal's status is written here, not planned: its Warnings are posted here too, once
  // each (while the stored status already says the same, nothing is posted).
  const hooks = ctx.hooks;
  const refusalOf = (s: CocoonSetStatus | undefined) =>
    s?.conditions?.find((c) => c.type === "ReplicaFailure" && c.reason === ADMISSION_REASON)
      ?.message;
  const refusal = refusalOf(status);
  if (refusal !== undefined && refusal !== refusalOf(cs.status))
    hooks.event?.(result.cocoonSet, "Warning", EVENT_REASONS.failedCreate, refusal);
  const stall = deadlineWarning(cs.status, status);
  if (stall !== undefined)
    hooks.event?.(
      result.cocoonSet,
      "Warning",
      EVENT_REASONS.progressDeadlineExceeded,
      `${plan.cocoonSet.namespace}/${plan.cocoonSet.name}: ${stall}`,
    );
}

/**
 * The optional status fields a merge patch must remove explicitly (null) when the new status
 * leaves them out: `lastProgressTime` is kept only while the fleet is under way.
 */
function statusClears(status: CocoonSetStatus): Record<string, null> {
  return status.lastProgressTime === undefined ? { lastProgressTime: null } : {};
}

/** Keeps the pruned create log plus a record for each create that went through. */
function rememberCreates(logs: CreateLogs, plan: Plan, created: readonly string[]): void {
  const next = new Map<number, SlotCreateRecord>(plan.createLog);
  const done = new Set(created);
  for (const step of plan.steps) {
    if (step.createRecord && step.target.role === "sub-agent" && done.has(step.podName)) {
      next.set(step.target.slot, step.createRecord);
    }
  }
  if (next.size > 0) logs.set(plan.cocoonSet.uid, next);
  else logs.delete(plan.cocoonSet.uid);
}

/** Reads a CocoonSet, or undefined when it does not exist. */
export async function readCocoonSet(
  client: KubeClient,
  namespace: string,
  name: string,
): Promise<CocoonSet | undefined> {
  return client.getOrUndefined<CocoonSet>(paths.cocoonSet(namespace, name));
}
