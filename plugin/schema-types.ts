/**
 * The package schema's object types of the CocoonSet spec and status, made from the CRD's
 * OpenAPI schema (the one schema source that also makes the CRD, the TypeScript types and the
 * validator), so that Python, Go and YAML programs get typed arguments with each field's
 * description (`CocoonSetSpecArgs`, `AgentSpecArgs`, ...) instead of a bare map, and a field
 * added to the CRD reaches every language with no second list to keep.
 */
import { cocoonSetCrd } from "../engine/spec/index.js";

/** The part of an OpenAPI v3 schema node the conversion reads. */
interface OpenApiNode {
  type?: string;
  description?: string;
  properties?: Record<string, OpenApiNode>;
  items?: OpenApiNode;
  additionalProperties?: OpenApiNode | boolean;
  required?: string[];
  "x-kubernetes-int-or-string"?: boolean;
}

/** A property (or an array's items, or a map's values) of the package schema. */
export interface SchemaProperty {
  type?: string;
  $ref?: string;
  oneOf?: SchemaProperty[];
  items?: SchemaProperty;
  additionalProperties?: SchemaProperty;
  description?: string;
  secret?: boolean;
}

/** An object type of the package schema. */
export interface SchemaObjectType {
  type: "object";
  description?: string;
  properties: Record<string, SchemaProperty>;
  required?: string[];
}

/**
 * The name of the type of each object of the CRD's spec and status, by its path (`[]` for an
 * array's items). Where two paths hold the same Kubernetes type they share the name. An object
 * whose path is not here gets a name made from its path (`StatusFooBar`); the unit test asks
 * for an entry, so the generated SDKs keep readable names.
 */
export const TYPE_NAMES: Readonly<Record<string, string>> = {
  spec: "CocoonSetSpec",
  "spec.agent": "AgentSpec",
  "spec.agent.envFrom[]": "EnvFromSource",
  "spec.agent.envFrom[].configMapRef": "ConfigMapEnvSource",
  "spec.agent.envFrom[].secretRef": "SecretEnvSource",
  "spec.agent.resources": "ResourceRequirements",
  "spec.agent.resources.claims[]": "ResourceClaim",
  "spec.idle": "IdleSpec",
  "spec.expiry": "ExpirySpec",
  "spec.hooks": "HooksSpec",
  "spec.toolboxes[]": "ToolboxSpec",
  "spec.toolboxes[].resources": "ResourceRequirements",
  "spec.toolboxes[].resources.claims[]": "ResourceClaim",
  status: "CocoonSetStatus",
  "status.agents[]": "AgentStatus",
  "status.agents[].nodeRefusal": "NodeRefusal",
  "status.toolboxes[]": "ToolboxStatus",
  "status.conditions[]": "Condition",
  "status.vms{}": "VMRecord",
};

/** The package's token of a type name. */
export const typeToken = (name: string) => `cocoonset:index:${name}`;

/** A reference to a type of the package. */
export const typeRef = (name: string): SchemaProperty => ({ $ref: `#/types/${typeToken(name)}` });

const pascal = (path: string) =>
  path
    .split(/[.[\]]+/)
    .filter(Boolean)
    .map((p) => p[0].toUpperCase() + p.slice(1))
    .join("");

/** The type name of the object at `path`. */
function typeNameAt(path: string): string {
  return TYPE_NAMES[path] ?? pascal(path);
}

/**
 * Converts the node at `path` into a property, adding the object types it needs to `types`.
 * The same name reached twice must denote the same shape (checked by the unit test through
 * `objectTypes`, which would otherwise keep the first).
 */
function property(
  node: OpenApiNode,
  path: string,
  types: Map<string, SchemaObjectType>,
): SchemaProperty {
  const described = (p: SchemaProperty): SchemaProperty =>
    node.description ? { ...p, description: node.description } : p;
  if (node["x-kubernetes-int-or-string"]) {
    return described({ oneOf: [{ type: "integer" }, { type: "string" }] });
  }
  if (node.type === "array" && node.items) {
    return described({ type: "array", items: property(node.items, `${path}[]`, types) });
  }
  if (node.type === "object" && node.properties) {
    const name = typeNameAt(path);
    if (!types.has(name)) types.set(name, objectType(node, path, types));
    return described(typeRef(name));
  }
  if (node.type === "object" && typeof node.additionalProperties === "object") {
    return described({
      type: "object",
      additionalProperties: property(node.additionalProperties, `${path}{}`, types),
    });
  }
  if (node.type === "string" || node.type === "integer" || node.type === "boolean") {
    return described({ type: node.type });
  }
  if (node.type === "number") return described({ type: "number" });
  return described({ $ref: "pulumi.json#/Any" });
}

function objectType(
  node: OpenApiNode,
  path: string,
  types: Map<string, SchemaObjectType>,
): SchemaObjectType {
  const properties: Record<string, SchemaProperty> = {};
  // Reserve the name before the fields, so a type that contains itself ends.
  const out: SchemaObjectType = { type: "object", properties };
  types.set(typeNameAt(path), out);
  if (node.description) out.description = node.description;
  for (const [key, child] of Object.entries(node.properties ?? {})) {
    properties[key] = property(child, `${path}.${key}`, types);
  }
  if (node.required?.length) out.required = [...node.required];
  return out;
}

/** The CocoonSet CRD's OpenAPI schema of the served version. */
function crdSchema(): OpenApiNode {
  const versions = cocoonSetCrd.spec.versions as { schema: { openAPIV3Schema: OpenApiNode } }[];
  return versions[0].schema.openAPIV3Schema;
}

/**
 * The package's object types of the spec and the status (keyed by token), and the properties
 * that refer to them.
 */
export function cocoonSetTypes(): {
  types: Record<string, SchemaObjectType>;
  spec: SchemaProperty;
  status: SchemaProperty;
} {
  const root = crdSchema();
  const types = new Map<string, SchemaObjectType>();
  const spec = property(root.properties?.spec ?? {}, "spec", types);
  const status = property(root.properties?.status ?? {}, "status", types);
  return {
    types: Object.fromEntries([...types].map(([name, t]) => [typeToken(name), t])),
    spec,
    status,
  };
}
