// Object metadata as the apiserver sends it: the part of the Kubernetes object model that
// the client itself reads (names, resource versions, owners). Types only, and the one
// definition: the planning core's model of pods and CocoonSets (engine/spec/kube-types.ts)
// builds on it, so the client depends on nothing above it.

/** A reference from an object to its owner (meta/v1 OwnerReference). */
export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

/** Object metadata (the fields of meta/v1 ObjectMeta the engine uses). */
export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  generation?: number;
  resourceVersion?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
  finalizers?: string[];
  /** RFC 3339. */
  creationTimestamp?: string;
  /** Set (RFC 3339) once the object is being deleted. */
  deletionTimestamp?: string;
}
