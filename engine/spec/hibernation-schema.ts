// The one schema of the CocoonHibernation resource (per-pod hibernate and wake). The CRD
// (YAML and JSON) and the TypeScript types are derived from the objects below, as the
// CocoonSet's are from schema-source.ts. Same group and version as the CocoonSet, as
// cocoon-operator serves both under one group. Behaviour: docs/behaviour.md §3.18.
import { GROUP, VERSION } from "./constants.js";
import {
  conditionSchema,
  MAX_OBJECT_NAME_LENGTH,
  objectMetaSchema,
  type NamedSchema,
  type SchemaNode,
} from "./schema-source.js";

/** Kind of the per-pod hibernation resource. */
export const HIBERNATION_KIND = "CocoonHibernation";
/** Its list kind. */
export const HIBERNATION_LIST_KIND = "CocoonHibernationList";
/** Its plural resource name (API paths). */
export const HIBERNATION_PLURAL = "cocoonhibernations";
/** Its singular name. */
export const HIBERNATION_SINGULAR = "cocoonhibernation";
/** Short names, as cocoon-operator declares them. */
export const HIBERNATION_SHORT_NAMES: readonly string[] = ["ch"];
/** Name of its CustomResourceDefinition. */
export const HIBERNATION_CRD_NAME = `${HIBERNATION_PLURAL}.${GROUP}`;
/** `apiVersion` of a CocoonHibernation. */
export const HIBERNATION_API_VERSION = `${GROUP}/${VERSION}`;
/** Finalizer that lets the controller drop the VM's `:hibernate` tag before the CR goes. */
export const HIBERNATION_FINALIZER = "cocoonhibernation.cocoonset.cocoonstack.io/finalizer";

/** What the user asks of the pod. */
const hibernationDesireSchema: SchemaNode = {
  type: "string",
  description: "Hibernate: snapshot the VM and stop it. Wake: boot it again from the snapshot.",
  enum: ["Hibernate", "Wake"],
};

/** Where the transition stands. */
const hibernationPhaseSchema: SchemaNode = {
  type: "string",
  description: "Phase of the hibernate or wake transition.",
  enum: ["Pending", "Hibernating", "Hibernated", "Waking", "Active", "Failed"],
};

/** The pod a CocoonHibernation targets (same namespace). */
const hibernationPodRefSchema: SchemaNode = {
  type: "object",
  description: "The target pod, in the CocoonHibernation's namespace.",
  required: ["name"],
  properties: {
    name: {
      type: "string",
      description: "Name of the pod.",
      minLength: 1,
      maxLength: MAX_OBJECT_NAME_LENGTH,
    },
  },
  "x-kubernetes-validations": [{ rule: "self == oldSelf", message: "spec.podRef is immutable" }],
};

/** The spec. */
const hibernationSpecSchema: SchemaNode = {
  type: "object",
  description: "What to do with which pod.",
  required: ["podRef", "desire"],
  properties: {
    podRef: hibernationPodRefSchema,
    desire: hibernationDesireSchema,
  },
};

/** The status. */
const hibernationStatusSchema: SchemaNode = {
  type: "object",
  description: "What the controller observed.",
  properties: {
    observedGeneration: {
      type: "integer",
      description: "The generation the status was written for.",
      minimum: 0,
    },
    phase: hibernationPhaseSchema,
    vmName: { type: "string", description: "The VM whose snapshot this CR tracks." },
    conditions: {
      type: "array",
      description: "The Ready condition.",
      items: conditionSchema,
      "x-kubernetes-list-type": "map",
      "x-kubernetes-list-map-keys": ["type"],
    },
  },
};

/** The whole CocoonHibernation object (the CRD's openAPIV3Schema). */
export const cocoonHibernationSchema: SchemaNode = {
  type: "object",
  description: "Hibernates or wakes the VM of one pod.",
  required: ["spec"],
  properties: {
    apiVersion: { type: "string", description: "API version of the object." },
    kind: { type: "string", description: "Kind of the object." },
    metadata: objectMetaSchema,
    spec: hibernationSpecSchema,
    status: hibernationStatusSchema,
  },
};

/** Every CocoonHibernation schema node with a TypeScript name. */
export const hibernationNamedSchemas: readonly NamedSchema[] = [
  { name: "CocoonHibernation", schema: cocoonHibernationSchema },
  { name: "CocoonHibernationSpec", schema: hibernationSpecSchema },
  { name: "HibernationPodRef", schema: hibernationPodRefSchema },
  { name: "CocoonHibernationStatus", schema: hibernationStatusSchema },
  { name: "HibernationDesire", schema: hibernationDesireSchema },
  { name: "CocoonHibernationPhase", schema: hibernationPhaseSchema },
  { name: "Condition", schema: conditionSchema },
];
