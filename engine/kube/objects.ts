// Object metadata as the apiserver sends it: the part of the Kubernetes object model that
// the client itself reads (names, resource versions, owners), and the three ways every layer
// reads or writes it (an object's namespace, its key, a timestamp). The one
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
  /** The grace period a delete gave the object; 0 once its removal is final. */
  deletionGracePeriodSeconds?: number;
}

/** An object's namespace; "default" where its metadata names none (as the apiserver reads it). */
export function namespaceOf(obj: { metadata?: { namespace?: string } }): string {
  return obj.metadata?.namespace ?? "default";
}

/**
 * The key of an object: `namespace/name`, or `name` alone for a cluster-scoped object. The
 * one format of the caches, the work queues and the messages that name a fleet.
 */
export function keyOf(namespace: string | undefined, name: string): string {
  return namespace ? `${namespace}/${name}` : name;
}

/** A time as the apiserver writes one (RFC 3339, whole seconds: metav1.Time). */
export function rfc3339Seconds(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
}

/** Formats a time as a Kubernetes MicroTime (`2006-01-02T15:04:05.000000Z`). */
export function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
}
