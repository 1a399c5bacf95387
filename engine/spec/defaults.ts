// Kubernetes-style defaulting driven by the schema source: a missing property that declares a
// `default` gets it, at every depth, so the engine sees what the apiserver would store.
import type { CocoonSet, CocoonSetSpec } from "./generated/types.js";
import { cocoonSetSpecSchema, type SchemaNode } from "./schema-source.js";

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * Returns a deep copy of `value` with the defaults of `schema` filled in where a property is
 * absent (`undefined`); present values, `null` included, are kept as they are.
 */
function applySchemaDefaults(value: unknown, schema: SchemaNode): unknown {
  if (Array.isArray(value)) {
    const items = schema.items;
    return value.map((v: unknown) => (items ? applySchemaDefaults(v, items) : structuredClone(v)));
  }
  if (!isPlainObject(value)) return structuredClone(value);
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    const child = schema.properties?.[key] ?? schema.additionalProperties;
    out[key] = child ? applySchemaDefaults(v, child) : structuredClone(v);
  }
  for (const [key, child] of Object.entries(schema.properties ?? {})) {
    if (out[key] === undefined && child.default !== undefined) {
      out[key] = applySchemaDefaults(structuredClone(child.default), child);
    }
  }
  return out;
}

/** A copy of `spec` with the schema defaults applied. */
export function withSpecDefaults(spec: CocoonSetSpec): CocoonSetSpec {
  return applySchemaDefaults(spec, cocoonSetSpecSchema) as CocoonSetSpec;
}

/** A copy of the CocoonSet whose spec has the schema defaults applied. */
export function withDefaults(cs: CocoonSet): CocoonSet {
  return { ...structuredClone(cs), spec: withSpecDefaults(cs.spec) };
}
