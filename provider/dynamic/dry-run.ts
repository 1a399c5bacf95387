/**
 * The server-side dry run `pulumi preview` makes for the slots resource: every pod the deploy
 * would create is sent to the apiserver as a create with `dryRun=All`, so what admission would
 * refuse during `up` (admission webhooks, ValidatingAdmissionPolicies, LimitRanges,
 * ResourceQuotas, RBAC) is refused at preview, naming the slot, before `up` creates part of
 * a fleet.
 *
 * - The pods are the engine's own: its planner (and pod builder) is run pass after pass on a
 *   simulated copy of the fleet's live pods (engine/execute/preview-creates.ts), so a new fleet's sub-agents,
 *   a scale-up's added slots and an image change's rebuilt pods are all sent.
 * - One dry run per pod shape: pods that differ only by their slot (name, slot label, VM
 *   name) share the answer of the first; at most `fanOut` dry runs are in flight.
 * - Dry runs do not add up (each is checked against the quota's current usage), so the pods'
 *   usage, as admission returned them, is also summed against the namespace's ResourceQuotas.
 * - Room on the nodes, which no dry run sees (sub-agents are bound to their main agent's node,
 *   the scheduler bypassed): the capacity forecast (engine/capacity) of the same creates
 *   against the cluster's nodes and the pods bound to them, one refusal per node that would
 *   refuse slots, as the Fleet's `capacityCheck` says: check failures (`refuse`), warnings
 *   (`warn`), or not made at all (`off`: no node or pod is listed).
 * - A cluster that cannot be asked (unreachable, credentials refused, the namespace or the
 *   CRD created later in the same deploy) is no reason to fail the preview: `up` reports it.
 */
import { capacityReasons } from "../../engine/capacity/index.js";
import {
  forecastOn,
  groupByShape,
  listCocoonSetsVisible,
  listFleetPods,
  listNodesAndPods,
  type NodesAndPods,
  plannedCocoonSet,
  previewCreates,
  readCocoonSet,
  sendOnePerShape,
  type PreviewCreates,
  type ShapeGroup,
} from "../../engine/execute/index.js";
import {
  podQuotaUsage,
  quotaOverflows,
  type QuotaOverflow,
  type ResourceQuotaObject,
} from "../../engine/pods/index.js";
import { vmNameClash, vmNameClashMessage } from "../../engine/snapshots/index.js";
import {
  DEFAULT_FANOUT,
  type CocoonSet,
  type CocoonSetSpec,
  type Pod,
  type PodManifest,
} from "../../engine/spec/index.js";
import {
  isAlreadyExists,
  KubeApiError,
  KubeClient,
  paths,
  type KubeList,
} from "../../engine/kube/index.js";
import { errorMessage } from "../../engine/kube/branded-error.js";

/** The inputs the dry run needs (a subset of the slots resource's inputs). */
export interface DryRunInputs {
  kubeconfig: string;
  namespace: string;
  name: string;
  /** uid of the Fleet's CocoonSet; undefined when not known yet (it is created by the deploy). */
  uid?: string;
  spec: CocoonSetSpec;
  fanOut?: number;
  /** What the capacity forecast's refusals are. @default "refuse" */
  capacityCheck?: CapacityCheck;
}

/** What `pulumi preview` does with the slots the nodes would refuse (the Fleet's `capacityCheck`). */
export type CapacityCheck = "refuse" | "warn" | "off";

/** The values of `capacityCheck`. */
export const CAPACITY_CHECKS: readonly CapacityCheck[] = ["refuse", "warn", "off"];

/** The Fleet's default `capacityCheck` (docs/behaviour.md §7.3 says why). */
export const DEFAULT_CAPACITY_CHECK: CapacityCheck = "refuse";

/** What the preview's cluster checks found. */
export interface PreviewFindings {
  /** Check failures, each naming its slot. */
  refusals: string[];
  /** Said and not failed on (`capacityCheck: "warn"`, a forecast that could not be made). */
  warnings: string[];
}

/** The apiserver's answer to one dry-run create. */
type DryRunAnswer =
  /** Admitted: the pod as admission left it (defaults, mutations). */
  | { kind: "admitted"; pod: Pod }
  /** Refused, with the apiserver's message. */
  | { kind: "refused"; message: string }
  /** Not answered in a way that says anything (namespace not there yet, name still taken). */
  | { kind: "skipped" };

/** The apiserver's own message of an error, without the request line the client adds. */
function apiMessage(e: KubeApiError): string {
  return /^\S+ \S+: HTTP \d+(?: [A-Za-z]+)?: ([\s\S]*)$/.exec(e.message)?.[1] ?? e.message;
}

/** Sends one pod as a `dryRun=All` create. Errors that do not come from admission are thrown. */
async function dryRunCreate(client: KubeClient, pod: PodManifest): Promise<DryRunAnswer> {
  try {
    const admitted = await client.create<Pod>(
      `${paths.pods(pod.metadata.namespace)}?dryRun=All`,
      pod,
    );
    return { kind: "admitted", pod: admitted };
  } catch (e) {
    if (!KubeApiError.isInstance(e)) throw e;
    // 404: the namespace does not exist yet (a Namespace resource of the same deploy creates
    // it). 409: a pod of that name is still terminating; the engine waits for it.
    if (e.status === 404 || isAlreadyExists(e)) return { kind: "skipped" };
    // 401: the credentials are refused; `up` says so itself. 429 and 5xx were retried already.
    if (e.status === 401 || e.status === 429 || e.status < 400 || e.status >= 500) throw e;
    return { kind: "refused", message: apiMessage(e) };
  }
}

const list = (slots: readonly string[]): string => slots.join(", ");

/** The check failure of a shape the apiserver refused, naming the slot sent and the others. */
function refusalReason(group: ShapeGroup, message: string): string {
  const [first, ...others] = group.creates;
  const alike =
    others.length === 0
      ? ""
      : `; ${others.length === 1 ? "slot" : "slots"} ${list(others.map((c) => c.slot))} would be refused alike (the same pod but for its slot)`;
  return `[slots.${first.slot}] the cluster refuses the pod of this slot (server-side dry run of creating pod ${first.pod.metadata.name}): ${message}${alike}`;
}

/** The check failure of a quota the new pods do not fit in, naming the slots refused. */
function quotaReason(namespace: string, o: QuotaOverflow): string {
  return `[slots.${o.refused[0]}] ResourceQuota ${o.quota} in namespace ${namespace} has ${o.resource} used ${o.used} of ${o.hard}, and the pods this deploy creates add ${o.added} (${o.slots.length === 1 ? "slot" : "slots"} ${list(o.slots)}): the apiserver would refuse the ${o.refused.length === 1 ? "create of slot" : "creates of slots"} ${list(o.refused)} (each pod's own dry run fits; together they do not)`;
}

async function quotasOf(client: KubeClient, namespace: string): Promise<ResourceQuotaObject[]> {
  try {
    const found = await client.list<ResourceQuotaObject>(
      `/api/v1/namespaces/${encodeURIComponent(namespace)}/resourcequotas`,
    );
    return found.items;
  } catch (e) {
    // Not allowed to read quotas: the dry runs still checked each pod against them.
    if (KubeApiError.isInstance(e) && (e.status === 403 || e.status === 404)) return [];
    throw e;
  }
}

/** Whether the cluster serves CocoonSets (the CRD may be installed later in the same deploy). */
async function cocoonSetsServed(client: KubeClient, namespace: string): Promise<boolean> {
  try {
    await client.get<KubeList>(`${paths.cocoonSets(namespace)}?limit=1`);
    return true;
  } catch (e) {
    if (KubeApiError.isInstance(e) && e.status === 404) return false;
    throw e;
  }
}

/** The warning of a forecast that could not be made (said once per check). */
function forecastUnavailableWarning(why: string): string {
  return `the capacity forecast was not made: the kubeconfig cannot list the cluster's nodes and the pods bound to them (${why}); \`pulumi up\` may create pods the nodes refuse. Grant list on nodes and pods cluster-wide, or set the Fleet's capacityCheck: "off"`;
}

/**
 * The capacity forecast's findings for `preview` (the fleet's live pods `pods`) on `cluster`:
 * its refusals as check failures (`refuse`) or warnings (`warn`).
 */
function capacityFindings(
  cluster: NodesAndPods,
  preview: PreviewCreates,
  pods: readonly Pod[],
  mode: "refuse" | "warn",
): PreviewFindings {
  const live = forecastOn(cluster, preview, pods);
  if ("unavailable" in live)
    return { refusals: [], warnings: [forecastUnavailableWarning(live.unavailable)] };
  const reasons = capacityReasons(live.forecast);
  return mode === "refuse"
    ? { refusals: reasons, warnings: [] }
    : { refusals: [], warnings: reasons };
}

const NOTHING: PreviewFindings = { refusals: [], warnings: [] };

/**
 * The refusals of a deploy of `inputs`, one reason per refused pod shape, per quota the new
 * pods overflow and (by `capacityCheck`) per node that would refuse slots; empty when the
 * cluster admits everything or cannot be asked.
 */
export async function dryRunRefusals(inputs: DryRunInputs): Promise<PreviewFindings> {
  let client: KubeClient;
  try {
    client = KubeClient.fromString(inputs.kubeconfig, { requestTimeoutMs: 15_000 });
  } catch {
    return NOTHING;
  }
  try {
    const { namespace, name } = inputs;
    // The forecast's two LISTs go out first: the apiserver answers them while the reads below
    // and the planner run (a preview that returns early drops them).
    const mode = inputs.capacityCheck ?? DEFAULT_CAPACITY_CHECK;
    const cluster = mode === "off" ? undefined : listNodesAndPods(client);
    const live = await readCocoonSet(client, namespace, name);
    // Another CocoonSet than the Fleet's, or the Fleet's gone: `up` refuses that itself.
    if (live && inputs.uid && live.metadata.uid !== inputs.uid) return NOTHING;
    if (!live && inputs.uid) return NOTHING;
    if (!live && !(await cocoonSetsServed(client, namespace))) return NOTHING;
    const cs: CocoonSet = plannedCocoonSet(namespace, name, inputs.spec, live);
    // A VM name another live fleet holds refuses the whole fleet, as `up` would.
    const clash = vmNameClash(cs, await listCocoonSetsVisible(client, namespace));
    if (clash) return { refusals: [vmNameClashMessage(cs, clash)], warnings: [] };
    const pods = live ? await listFleetPods(client, cs) : [];
    const preview = previewCreates({
      cocoonSet: cs,
      pods,
      nowMs: Date.now(),
      fanOut: inputs.fanOut,
    });
    if (preview.creates.length === 0) return NOTHING;
    const admission = await admissionRefusals(client, namespace, preview, inputs.fanOut);
    const room =
      cluster && mode !== "off" ? capacityFindings(await cluster, preview, pods, mode) : NOTHING;
    return { refusals: [...admission, ...room.refusals], warnings: room.warnings };
  } catch (e) {
    process.stderr.write(
      `cocoonset: could not dry-run the pods of ${inputs.namespace}/${inputs.name} (${errorMessage(e)}); preview goes on without\n`,
    );
    return NOTHING;
  } finally {
    client.close();
  }
}

/** The dry runs' refusals and the quota overflows of the pods `preview` creates. */
async function admissionRefusals(
  client: KubeClient,
  namespace: string,
  preview: PreviewCreates,
  fanOut?: number,
): Promise<string[]> {
  const groups = groupByShape(preview.creates);
  const answers = await sendOnePerShape(groups, fanOut ?? DEFAULT_FANOUT, (c) =>
    dryRunCreate(client, c.pod),
  );
  const reasons = answers.flatMap(({ group, answer }) =>
    answer.kind === "refused" ? [refusalReason(group, answer.message)] : [],
  );
  if (answers.some((a) => a.answer.kind === "skipped")) return reasons;
  // Pods already refused above are not counted again.
  const counted = answers.flatMap(({ group, answer }) =>
    answer.kind === "admitted"
      ? group.creates.map((c) => ({ slot: c.slot, usage: podQuotaUsage(answer.pod) }))
      : [],
  );
  const order = new Map(preview.creates.map((c, i) => [c.slot, i]));
  counted.sort((a, b) => (order.get(a.slot) ?? 0) - (order.get(b.slot) ?? 0));
  const overflows = quotaOverflows(
    await quotasOf(client, namespace),
    counted,
    preview.removed.map(podQuotaUsage),
  );
  return [...reasons, ...overflows.map((o) => quotaReason(namespace, o))];
}
