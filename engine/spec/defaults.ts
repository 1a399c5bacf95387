// Kubernetes-style defaulting driven by the schema source: a missing property that declares a
// `default` gets it, at every depth, so the engine sees what the apiserver would store.
import { frozen } from "./frozen.js";
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

/**
 * The CocoonSet with its spec's schema defaults applied: the spec is a copy, frozen (what a
 * pass derives from it may be kept by its content, engine/spec/frozen.ts); the rest (the
 * metadata, the status with a record of every member) is the input's own, read, never
 * written (a copy of a 1,001-member status on every pass cost more than the plan).
 */
export function withDefaults(cs: CocoonSet): CocoonSet {
  return { ...cs, spec: frozen(withSpecDefaults(cs.spec)) };
}

/**
 * Whether the fleet is to be suspended: `spec.suspend`, or the idle policy (or an expiry)
 * holding it suspended in `status.idleSuspendedSince` (the controller never writes the spec,
 * which its author owns).
 */
export function effectiveSuspend(cs: CocoonSet): boolean {
  return cs.spec?.suspend === true || Boolean(cs.status?.idleSuspendedSince);
}

/**
 * The CocoonSet as the planners read it: `spec.suspend` is the effective suspend, so every
 * rule of a suspend and a wake (main agent first) serves the idle policy's too. Only a view:
 * nothing writes its spec back.
 */
export function suspendView(cs: CocoonSet): CocoonSet {
  if (cs.spec?.suspend === true || !cs.status?.idleSuspendedSince) return cs;
  return { ...cs, spec: { ...cs.spec, suspend: true } };
}
