/**
 * The per-slot view the Pulumi slots resource keeps in its inputs: a map keyed by slot
 * number ("0" is the main agent) or toolbox name, each value the VM description its pod
 * carries. `pulumi preview --diff` prints one line per added, removed or changed key.
 */
import { API_VERSION } from "../../engine/kube/api-names.js";
import {
  isReady,
  agentDrift,
  toolboxDrift,
  VM_FIELDS,
  buildAgentPod,
  buildToolboxPod,
  classifyPods,
} from "../../engine/pods/index.js";
import {
  ANNOTATIONS,
  KIND,
  LABELS,
  NODE_LABELS,
  withDefaults,
  type CocoonSet,
  type CocoonSetSpec,
  type Pod,
  type PodManifest,
} from "../../engine/spec/index.js";

/** What one slot's pod is: role, names and the VM description compared for drift. */
export interface SlotView {
  role: string;
  pod: string;
  vm: string;
  image?: string;
  mode?: string;
  os?: string;
  backend?: string;
  connType?: string;
  network?: string;
  storage?: string;
  snapshotPolicy?: string;
  forcePull?: string;
  noDirectIO?: string;
  probePort?: string;
  pool?: string;
  serviceAccountName?: string;
  resources?: { limits?: Record<string, string>; requests?: Record<string, string> };
}

/** Slot key → view. */
export type SlotMap = Record<string, SlotView>;

// The view shows the VM fields drift compares, except the two the engine derives itself
// (`managed`, and `forkFrom`, which is the main VM's name), plus the VM name.
const VIEW_ANNOTATIONS: [string, string][] = [
  ["vm", ANNOTATIONS.vmName],
  ...VM_FIELDS.filter(([field]) => field !== "managed" && field !== "forkFrom").map(
    ([field, annotation]): [string, string] => [field, annotation],
  ),
];

function compactQuantities(
  m: Record<string, unknown> | undefined,
): Record<string, string> | undefined {
  if (!m) return undefined;
  const out: Record<string, string> = {};
  for (const k of Object.keys(m).sort()) if (k !== "ephemeral-storage") out[k] = String(m[k]);
  return Object.keys(out).length ? out : undefined;
}

/** The view of a pod (built or live). Plain JSON with no undefined values. */
export function slotView(pod: Pod | PodManifest): SlotView {
  const annotations = pod.metadata?.annotations ?? {};
  const view: SlotView & Record<string, unknown> = {
    role: pod.metadata?.labels?.[LABELS.role] ?? "",
    pod: pod.metadata?.name ?? "",
    vm: "",
  };
  for (const [field, key] of VIEW_ANNOTATIONS)
    if (annotations[key] !== undefined) view[field] = annotations[key];
  const pool = pod.spec?.nodeSelector?.[NODE_LABELS.pool];
  if (pool) view.pool = pool;
  if (pod.spec?.serviceAccountName) view.serviceAccountName = pod.spec.serviceAccountName;
  const res = pod.spec?.containers?.[0]?.resources;
  const limits = compactQuantities(res?.limits);
  const requests = compactQuantities(res?.requests);
  if (limits || requests)
    view.resources = { ...(limits ? { limits } : {}), ...(requests ? { requests } : {}) };
  return view;
}

/** A CocoonSet object for planning from the slots resource's inputs. */
export function cocoonSetFrom(
  namespace: string,
  name: string,
  spec: CocoonSetSpec,
  uid = "",
): CocoonSet {
  return withDefaults({
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: { name, namespace, uid },
    spec,
  });
}

/** The desired slots of a spec: "0".."replicas" and one key per toolbox name. */
export function desiredSlots(namespace: string, name: string, spec: CocoonSetSpec): SlotMap {
  const cs = cocoonSetFrom(namespace, name, spec);
  const slots: SlotMap = {};
  const replicas = cs.spec.agent.replicas ?? 0;
  for (let slot = 0; slot <= replicas; slot++)
    slots[String(slot)] = slotView(buildAgentPod(cs, slot));
  for (const tb of cs.spec.toolboxes ?? []) slots[tb.name] = slotView(buildToolboxPod(cs, tb));
  return slots;
}

/** Live state of one slot, as the provider reports it. */
export interface SlotStatus {
  pod: string;
  uid: string;
  phase: string;
  ready: boolean;
}

/**
 * The live slots: a key per desired slot whose pod exists; a drifted pod shows its live
 * view (so a refresh reveals what changed), an up-to-date one the desired view.
 */
export function liveSlots(
  cs: CocoonSet,
  pods: readonly Pod[],
  desired: SlotMap,
): { slots: SlotMap; status: Record<string, SlotStatus> } {
  const classified = classifyPods(cs, pods);
  const slots: SlotMap = {};
  const status: Record<string, SlotStatus> = {};
  const record = (key: string, pod: Pod, drifted: boolean) => {
    slots[key] = drifted ? slotView(pod) : desired[key];
    const ready = isReady(pod);
    status[key] = {
      pod: pod.metadata?.name ?? "",
      uid: pod.metadata?.uid ?? "",
      phase: pod.status?.phase ?? "Unknown",
      ready,
    };
  };
  for (const key of Object.keys(desired)) {
    if (/^\d+$/.test(key)) {
      const slot = Number(key);
      const pod = slot === 0 ? classified.main : classified.subAgents.get(slot);
      if (pod) record(key, pod, agentDrift(cs, slot, pod).length > 0);
    } else {
      const pod = classified.toolboxes.get(key);
      const spec = cs.spec.toolboxes?.find((t) => t.name === key);
      if (pod && spec) record(key, pod, toolboxDrift(cs, spec, pod).length > 0);
    }
  }
  return { slots, status };
}
