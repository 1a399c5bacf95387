// Builds the pods of a CocoonSet. A pod only carries a VM description: the
// virtual kubelet reads the annotations and runs the VM; the container image is a placeholder.
// Behaviour: docs/behaviour.md §2.
import {
  AGENT_CONTAINER,
  ANNOTATIONS,
  ANNOTATION_TRUE,
  API_VERSION,
  KIND,
  LABELS,
  MANAGED_BY,
  NODE_LABELS,
  PLACEHOLDER_IMAGE,
  ROLES,
  VIRTUAL_KUBELET_TAINT,
  type Role,
} from "../spec/constants.js";
import type { CocoonSet, ToolboxSpec, VMOptions } from "../spec/generated/types.js";
import type {
  Affinity,
  Container,
  ContainerResources,
  OwnerReference,
  PodManifest,
  PodSpec,
  Toleration,
} from "../spec/kube-types.js";
import { isZeroQuantity } from "../spec/quantity.js";
import { shardBucketOf } from "../spec/shard-bucket.js";
import {
  DEFAULT_AGENT_MODE,
  DEFAULT_BACKEND,
  DEFAULT_NODE_POOL,
  DEFAULT_OS,
  DEFAULT_SNAPSHOT_POLICY,
  DEFAULT_TOOLBOX_MODE,
} from "../spec/schema-source.js";

/** Placement of a sub-agent, taken from the live main agent. */
export interface AgentPodOptions {
  /** VM name of the main agent (fork source); @default `vk-<ns>-<cs>-0` */
  mainVMName?: string;
  /** Node of the main agent; sub-agents are bound to it. */
  mainNodeName?: string;
}

/** Pod name of an agent slot: `<cs>-<slot>`. */
export function agentPodName(cocoonSet: string, slot: number): string {
  return `${cocoonSet}-${slot}`;
}

/** Pod name of a toolbox: `<cs>-<toolbox>`. */
export function toolboxPodName(cocoonSet: string, toolbox: string): string {
  return `${cocoonSet}-${toolbox}`;
}

/** VM name of a slot or toolbox: `vk-<namespace>-<cs>-<slot|toolbox>` (engine/attribution). */
export { vmNameFor } from "../attribution/attribution.js";
import { vmNameFor } from "../attribution/attribution.js";
import { namespaceOf } from "../kube/objects.js";

/** The node pool the pods select, `default` when empty. */
export function nodePoolOf(cs: CocoonSet): string {
  return cs.spec.nodePool || DEFAULT_NODE_POOL;
}

/** The storage quantity as annotation text, or undefined when unset or zero. */
function storageOf(options: VMOptions): string | undefined {
  const storage = options.storage;
  if (storage === undefined || storage === "" || isZeroQuantity(storage)) return undefined;
  return String(storage);
}

/** Inputs of {@link vmAnnotations}. */
export interface VMDescription {
  vmName: string;
  image?: string;
  mode: string;
  options: VMOptions;
  snapshotPolicy: string;
  forkFrom?: string;
  managed: boolean;
}

function setIf(target: Record<string, string>, key: string, value: string | undefined): void {
  if (value) target[key] = value;
}

/** The VM annotations the virtual kubelet reads; empty values and false flags are omitted. */
export function vmAnnotations(vm: VMDescription): Record<string, string> {
  const o = vm.options;
  const out: Record<string, string> = {};
  setIf(out, ANNOTATIONS.vmName, vm.vmName);
  setIf(out, ANNOTATIONS.image, vm.image);
  setIf(out, ANNOTATIONS.mode, vm.mode);
  setIf(out, ANNOTATIONS.os, o.os ?? DEFAULT_OS);
  setIf(out, ANNOTATIONS.storage, storageOf(o));
  setIf(out, ANNOTATIONS.network, o.network);
  setIf(out, ANNOTATIONS.snapshotPolicy, vm.snapshotPolicy);
  setIf(out, ANNOTATIONS.forkFrom, vm.forkFrom);
  setIf(out, ANNOTATIONS.connType, o.connType);
  setIf(out, ANNOTATIONS.backend, o.backend ?? DEFAULT_BACKEND);
  if (vm.managed) out[ANNOTATIONS.managed] = ANNOTATION_TRUE;
  if (o.forcePull) out[ANNOTATIONS.forcePull] = ANNOTATION_TRUE;
  if (o.noDirectIO) out[ANNOTATIONS.noDirectIO] = ANNOTATION_TRUE;
  if (o.probePort) out[ANNOTATIONS.probePort] = String(o.probePort);
  return out;
}

/** The VM description of an agent slot. */
export function agentVM(cs: CocoonSet, vmName: string, forkFrom?: string): VMDescription {
  const agent = cs.spec.agent;
  return {
    vmName,
    image: agent.image,
    mode: agent.mode ?? DEFAULT_AGENT_MODE,
    options: agent,
    snapshotPolicy: cs.spec.snapshotPolicy ?? DEFAULT_SNAPSHOT_POLICY,
    forkFrom,
    managed: true,
  };
}

/** The VM description of a toolbox; static toolboxes adopt a VM, so they are not managed. */
export function toolboxVM(cs: CocoonSet, toolbox: ToolboxSpec, vmName: string): VMDescription {
  const mode = toolbox.mode ?? DEFAULT_TOOLBOX_MODE;
  return {
    vmName,
    image: toolbox.image,
    mode,
    options: toolbox,
    snapshotPolicy: cs.spec.snapshotPolicy ?? DEFAULT_SNAPSHOT_POLICY,
    managed: mode !== "static",
  };
}

/** The runtime annotations a static toolbox pre-assigns (VM id, IP, VNC port). */
export function staticToolboxAnnotations(toolbox: ToolboxSpec): Record<string, string> {
  const out: Record<string, string> = {};
  setIf(out, ANNOTATIONS.vmID, toolbox.staticVMID);
  setIf(out, ANNOTATIONS.vmIP, toolbox.staticIP);
  if (toolbox.vncPort) out[ANNOTATIONS.vncPort] = String(toolbox.vncPort);
  return out;
}

function quantityMap(values: Record<string, number | string> | undefined): Record<string, string> {
  return Object.fromEntries(Object.entries(values ?? {}).map(([k, v]) => [k, String(v)]));
}

/** Container resources from the spec, with storage also as ephemeral-storage request and limit. */
function containerResources(options: VMOptions): ContainerResources | undefined {
  const limits = quantityMap(options.resources?.limits);
  const requests = quantityMap(options.resources?.requests);
  const storage = storageOf(options);
  if (storage) {
    // Both sides, so Guaranteed-QoS defaulting cannot rewrite the request.
    limits["ephemeral-storage"] = storage;
    requests["ephemeral-storage"] = storage;
  }
  const out: ContainerResources = {};
  if (Object.keys(limits).length > 0) out.limits = limits;
  if (Object.keys(requests).length > 0) out.requests = requests;
  return out.limits || out.requests ? out : undefined;
}

/** The controller ownerReference every engine pod carries. */
function ownerReferenceTo(cs: CocoonSet): OwnerReference {
  return {
    apiVersion: API_VERSION,
    kind: KIND,
    name: cs.metadata.name ?? "",
    uid: cs.metadata.uid ?? "",
    controller: true,
    blockOwnerDeletion: true,
  };
}

const TOLERATIONS: readonly Toleration[] = [
  { key: VIRTUAL_KUBELET_TAINT, operator: "Exists" },
  // No tolerationSeconds: a VM must not be evicted because its node blinked.
  { key: "node.kubernetes.io/not-ready", operator: "Exists", effect: "NoExecute" },
  { key: "node.kubernetes.io/unreachable", operator: "Exists", effect: "NoExecute" },
];

function hostnameAffinity(nodeName: string): Affinity {
  return {
    nodeAffinity: {
      requiredDuringSchedulingIgnoredDuringExecution: {
        nodeSelectorTerms: [
          { matchExpressions: [{ key: NODE_LABELS.hostname, operator: "In", values: [nodeName] }] },
        ],
      },
    },
  };
}

function basePod(
  cs: CocoonSet,
  podName: string,
  role: Role,
  slotLabel: string,
  annotations: Record<string, string>,
  options: VMOptions,
): PodManifest {
  const name = cs.metadata.name ?? "";
  const container: Container = { name: AGENT_CONTAINER, image: PLACEHOLDER_IMAGE };
  const resources = containerResources(options);
  if (resources) container.resources = resources;
  const nodeSelector: Record<string, string> = { [NODE_LABELS.pool]: nodePoolOf(cs) };
  if (cs.spec.snapshotCompatibilityClass) {
    nodeSelector[NODE_LABELS.snapshotClass] = cs.spec.snapshotCompatibilityClass;
  }
  const spec: PodSpec = {
    containers: [container],
    terminationGracePeriodSeconds: 1,
    tolerations: TOLERATIONS.map((t) => ({ ...t })),
    nodeSelector,
  };
  const generation = cs.metadata.generation;
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: podName,
      namespace: namespaceOf(cs),
      labels: {
        [LABELS.name]: name,
        [LABELS.role]: role,
        [LABELS.slot]: slotLabel,
        [LABELS.appName]: name,
        [LABELS.managedBy]: MANAGED_BY,
        [LABELS.shardBucket]: String(shardBucketOf(namespaceOf(cs), name)),
      },
      annotations: {
        ...annotations,
        ...(generation !== undefined ? { [ANNOTATIONS.generation]: String(generation) } : {}),
      },
      ownerReferences: [ownerReferenceTo(cs)],
    },
    spec,
  };
}

/**
 * Builds the pod of agent `slot` (0 is the main agent, 1..replicas are sub-agents).
 * Sub-agents fork from the main VM and are bound to the main agent's node; a main agent gets
 * required node affinity when the CocoonSet names a node.
 */
export function buildAgentPod(
  cs: CocoonSet,
  slot: number,
  options: AgentPodOptions = {},
): PodManifest {
  const namespace = namespaceOf(cs);
  const name = cs.metadata.name ?? "";
  const isMain = slot === 0;
  const forkFrom = isMain ? undefined : (options.mainVMName ?? vmNameFor(namespace, name, 0));
  const vm = agentVM(cs, vmNameFor(namespace, name, slot), forkFrom);
  const pod = basePod(
    cs,
    agentPodName(name, slot),
    isMain ? ROLES.main : ROLES.subAgent,
    String(slot),
    vmAnnotations(vm),
    cs.spec.agent,
  );
  const agent = cs.spec.agent;
  if (agent.envFrom && agent.envFrom.length > 0) {
    pod.spec.containers[0].envFrom = structuredClone(agent.envFrom);
  }
  if (agent.serviceAccountName) pod.spec.serviceAccountName = agent.serviceAccountName;
  if (!isMain && options.mainNodeName) {
    pod.spec.nodeName = options.mainNodeName;
  } else if (isMain && cs.spec.nodeName) {
    pod.spec.affinity = hostnameAffinity(cs.spec.nodeName);
  }
  return pod;
}

/** Builds the pod of a toolbox; a static toolbox also carries its pre-assigned VM id/IP/VNC port. */
export function buildToolboxPod(cs: CocoonSet, toolbox: ToolboxSpec): PodManifest {
  const namespace = namespaceOf(cs);
  const name = cs.metadata.name ?? "";
  const vm = toolboxVM(cs, toolbox, vmNameFor(namespace, name, toolbox.name));
  const annotations = vmAnnotations(vm);
  if (!vm.managed) Object.assign(annotations, staticToolboxAnnotations(toolbox));
  return basePod(
    cs,
    toolboxPodName(name, toolbox.name),
    ROLES.toolbox,
    toolbox.name,
    annotations,
    toolbox,
  );
}
