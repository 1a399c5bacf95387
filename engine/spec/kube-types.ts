// The project's one model of the Kubernetes objects it reads and builds: the pure core plans
// with these. They are the JSON the apiserver sends, so timestamps are RFC 3339 strings.
// Subsets of the API's own types, so the pure core depends on no client library. Object
// metadata, which the client needs too, is defined below it (engine/kube/objects.ts).
import type { ObjectMeta, OwnerReference } from "../kube/objects.js";
import type { EnvFromSource } from "./generated/types.js";

export type { ObjectMeta, OwnerReference };

/** A pod toleration (core/v1 Toleration). */
export interface Toleration {
  key?: string;
  operator?: string;
  value?: string;
  effect?: string;
  tolerationSeconds?: number;
}

/** One requirement of a node selector term. */
export interface NodeSelectorRequirement {
  key: string;
  operator: string;
  values?: string[];
}

/** A node selector term: all its requirements must hold. */
export interface NodeSelectorTerm {
  matchExpressions?: NodeSelectorRequirement[];
}

/** Pod affinity (only the node-affinity part the engine sets). */
export interface Affinity {
  nodeAffinity?: {
    requiredDuringSchedulingIgnoredDuringExecution?: { nodeSelectorTerms: NodeSelectorTerm[] };
    /** A slot-release wake's soft preference for the node the VM hibernated on. */
    preferredDuringSchedulingIgnoredDuringExecution?: {
      weight: number;
      preference: NodeSelectorTerm;
    }[];
  };
}

/** Container resources as the apiserver returns them (quantities are strings). */
export interface ContainerResources {
  limits?: Record<string, string>;
  requests?: Record<string, string>;
}

/** A pod container (the fields the engine uses). */
export interface Container {
  name: string;
  image?: string;
  resources?: ContainerResources;
  envFrom?: EnvFromSource[];
}

/** A pod spec (the fields the engine uses). */
export interface PodSpec {
  containers: Container[];
  nodeName?: string;
  nodeSelector?: Record<string, string>;
  serviceAccountName?: string;
  terminationGracePeriodSeconds?: number;
  tolerations?: Toleration[];
  affinity?: Affinity;
}

/** A pod condition. */
export interface PodCondition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
}

/** One container's status (the part the engine reads: whether it runs). */
export interface ContainerStatus {
  name: string;
  state?: { running?: object; waiting?: object; terminated?: object };
}

/** Pod status (the fields the engine reads). */
export interface PodStatus {
  phase?: string;
  /** Why the pod is in its phase (`OutOfcpu` for a pod its node's kubelet refused). */
  reason?: string;
  /** Human-readable detail of `reason`. */
  message?: string;
  podIP?: string;
  conditions?: PodCondition[];
  containerStatuses?: ContainerStatus[];
}

/** A pod as listed from the cluster. */
export interface Pod {
  apiVersion?: string;
  kind?: string;
  metadata?: ObjectMeta;
  spec?: PodSpec;
  status?: PodStatus;
}

/** Metadata of a pod the engine builds. */
export interface PodManifestMeta {
  name: string;
  namespace: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  ownerReferences: OwnerReference[];
}

/** A pod the engine builds, ready to be created. */
export interface PodManifest {
  apiVersion: "v1";
  kind: "Pod";
  metadata: PodManifestMeta;
  spec: PodSpec;
}
