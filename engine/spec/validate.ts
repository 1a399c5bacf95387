// Validates a CocoonSet spec with the CRD's own schema (compiled ahead of time by
// scripts/generate-schema.ts into generated/spec-validator.ts) plus JS twins of its CEL rules. Failures name the field (`toolboxes[1].name`) and state the rule.
// Behaviour: docs/behaviour.md §10.
import type { CocoonSetSpec, ToolboxSpec } from "./generated/types.js";
import { validate as validateSpecSchema } from "./generated/spec-validator.js";
import { MAX_QUANTITY } from "./quantity.js";
export { cocoonSetNameProblem, namespaceNameProblem, objectNameProblem } from "./names.js";
import {
  DNS_LABEL_PATTERN,
  INTEGER_NAME_PATTERN,
  LABEL_VALUE_PATTERN,
  DNS_SUBDOMAIN_PATTERN,
  NO_WHITESPACE_PATTERN,
  IMAGE_PATTERN,
  OPTIONAL_DNS_SUBDOMAIN_PATTERN,
  QUANTITY_PATTERN,
  cocoonSetSpecSchema,
  type SchemaNode,
} from "./schema-source.js";
import { errorMessage } from "../kube/branded-error.js";
import { policyDurations } from "./policy-durations.js";
import { redactUserinfo, safeText } from "./safe-text.js";

/** One rejected field: a dotted path relative to the spec, and the rule it breaks. */
export interface ValidationFailure {
  /** Field path, e.g. `agent.replicas` or `toolboxes[1].name`. */
  property: string;
  /** The rule, e.g. `must be >= 0`. */
  reason: string;
  /** The value given, when there is one (a missing field has none). */
  value?: unknown;
}

/** Result of {@link validateCocoonSetSpec}. */
export type SpecValidation =
  { ok: true; spec: CocoonSetSpec } | { ok: false; failures: ValidationFailure[] };

const PATTERN_RULES: Record<string, string> = {
  [DNS_LABEL_PATTERN]: "must be a DNS-1123 label (lowercase letters, digits and '-')",
  [LABEL_VALUE_PATTERN]:
    "must be a label value (letters, digits, '-', '_' or '.', starting and ending with a letter or digit)",
  [QUANTITY_PATTERN]:
    "must be a quantity such as 10Gi, 512Mi, 500m or 2 (an exponent has at most 3 digits)",
  [NO_WHITESPACE_PATTERN]: "must not contain whitespace",
  [IMAGE_PATTERN]:
    "must be an image reference: printable ASCII without whitespace, control or non-ASCII characters",
  [DNS_SUBDOMAIN_PATTERN]:
    "must be a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', starting and ending with a letter or digit)",
  [OPTIONAL_DNS_SUBDOMAIN_PATTERN]:
    "must be a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', starting and ending with a letter or digit)",
};

// The keyword the generated validator reports a quantity-bound failure under (it runs the JS
// twin of QUANTITY_BOUND_RULE wherever the schema carries that CEL rule).
const QUANTITY_BOUND_KEYWORD = "cocoonsetQuantityBound";
const QUANTITY_BOUND_REASON = `must be less than ${MAX_QUANTITY} (2^63-1)`;

// Ports read better as a range; counts read better as one bound at a time.
const PORT_FIELDS = new Set(["probePort", "vncPort"]);

/** One error of the generated validator (it keeps each error's data and schema). */
interface ErrorObject {
  keyword: string;
  instancePath: string;
  schemaPath: string;
  params: Record<string, unknown>;
  message?: string;
  parentSchema?: unknown;
  data?: unknown;
}

/** The generated validator: fills in defaults, and leaves its errors on itself. */
const specValidator = validateSpecSchema as unknown as ((data: unknown) => boolean) & {
  errors?: ErrorObject[] | null;
};

function dottedPath(instancePath: string, child?: string): string {
  const parts = instancePath.split("/").slice(1);
  if (child !== undefined) parts.push(child);
  let out = "";
  for (const raw of parts) {
    const part = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    if (/^\d+$/.test(part)) out += `[${part}]`;
    else out += out ? `.${part}` : part;
  }
  return out || "spec";
}

function typeRule(expected: unknown): string {
  const article = expected === "integer" || expected === "object" || expected === "array";
  return `must be ${article ? "an" : "a"} ${String(expected)}`;
}

function describe(error: ErrorObject): ValidationFailure {
  const params = error.params;
  const property = dottedPath(error.instancePath);
  const field = property.split(/[.[]/).pop() ?? "";
  const schema = (error.parentSchema ?? {}) as SchemaNode;
  switch (error.keyword) {
    case "required":
      return {
        property: dottedPath(error.instancePath, String(params.missingProperty)),
        reason: "is required",
      };
    case "additionalProperties":
      return {
        property: dottedPath(error.instancePath, String(params.additionalProperty)),
        reason: "is not a known field",
      };
    case "type":
      return { property, reason: typeRule(params.type) };
    case "anyOf":
      return { property, reason: "must be an integer or a string" };
    case "enum":
      return { property, reason: `must be one of: ${(schema.enum ?? []).join(", ")}` };
    case QUANTITY_BOUND_KEYWORD:
      return { property, reason: QUANTITY_BOUND_REASON };
    case "minimum":
    case "maximum":
      if (schema["x-kubernetes-int-or-string"]) {
        return {
          property,
          reason:
            error.keyword === "minimum"
              ? "must not be negative"
              : `must be at most ${schema.maximum} as a number (write a larger quantity as a string, e.g. "10Gi")`,
        };
      }
      if (PORT_FIELDS.has(field)) {
        return { property, reason: `must be between ${schema.minimum} and ${schema.maximum}` };
      }
      return {
        property,
        reason:
          error.keyword === "minimum"
            ? `must be >= ${schema.minimum}`
            : `must be <= ${schema.maximum}`,
      };
    case "minLength":
      return {
        property,
        reason:
          params.limit === 1
            ? "must not be empty"
            : `must be at least ${String(params.limit)} characters`,
      };
    case "maxLength":
      return { property, reason: `must be at most ${String(params.limit)} characters` };
    case "maxItems":
      return { property, reason: `must have at most ${String(params.limit)} items` };
    case "maxProperties":
      return { property, reason: `must have at most ${String(params.limit)} entries` };
    case "pattern":
      return {
        property,
        reason: PATTERN_RULES[String(params.pattern)] ?? `must match ${String(params.pattern)}`,
      };
    default:
      return { property, reason: error.message ?? "is invalid" };
  }
}

function schemaFailures(errors: readonly ErrorObject[]): ValidationFailure[] {
  const out: ValidationFailure[] = [];
  const seen = new Set<string>();
  for (const error of errors) {
    // The branches of an int-or-string anyOf only restate the anyOf failure itself.
    if (error.schemaPath.includes("/anyOf/")) continue;
    const failure = describe(error);
    if (error.keyword !== "required" && error.keyword !== "additionalProperties") {
      failure.value = error.data;
    }
    // One rule per field keeps messages short: the first (type before range, etc.) wins.
    if (seen.has(failure.property)) continue;
    seen.add(failure.property);
    out.push(failure);
  }
  return out;
}

/**
 * The CEL rules of the CRD, in JS; `previous` (the stored spec) enables the transition rule.
 * They run even when the schema check failed, on whatever parts are well-formed, so one
 * round trip reports every problem.
 */
function celFailures(input: unknown, previous?: CocoonSetSpec): ValidationFailure[] {
  const out: ValidationFailure[] = [];
  if (typeof input !== "object" || input === null) return out;
  const spec = input as Partial<CocoonSetSpec>;
  const toolboxes = Array.isArray(spec.toolboxes) ? spec.toolboxes : [];
  const firstIndex = new Map<string, number>();
  toolboxes.forEach((tb: Partial<ToolboxSpec> | null, i) => {
    if (typeof tb?.name !== "string") return;
    if (new RegExp(INTEGER_NAME_PATTERN).test(tb.name)) {
      out.push({
        property: `toolboxes[${i}].name`,
        reason: "must not be an integer (it would collide with sub-agent slots)",
      });
    }
    if (firstIndex.has(tb.name)) {
      out.push({ property: `toolboxes[${i}].name`, reason: `duplicate toolbox name "${tb.name}"` });
    } else {
      firstIndex.set(tb.name, i);
    }
  });
  if (spec.hibernatePolicy === "release") {
    if ((spec.agent?.replicas ?? 0) !== 0) {
      out.push({ property: "agent.replicas", reason: "must be 0 when hibernatePolicy is release" });
    }
    if (toolboxes.length > 0) {
      out.push({ property: "toolboxes", reason: "must be empty when hibernatePolicy is release" });
    }
  }
  const was = previous?.snapshotCompatibilityClass;
  if (was && spec.snapshotCompatibilityClass !== was) {
    out.push({
      property: "snapshotCompatibilityClass",
      reason: `is immutable once set (it is "${was}")`,
    });
  }
  return out;
}

// Deeper than any field of the schema; deeper input is refused before anything recurses on it.
const MAX_DEPTH = 32;

function longestString(node: SchemaNode): number {
  const children = [
    ...Object.values(node.properties ?? {}),
    ...(node.items ? [node.items] : []),
    ...(node.additionalProperties ? [node.additionalProperties] : []),
  ];
  const own = node.enum ? Math.max(...node.enum.map((e) => e.length)) : (node.maxLength ?? 0);
  return Math.max(own, ...children.map(longestString));
}

/**
 * Every string field of the spec has a maxLength (or an enum); a longer string is refused
 * before any pattern runs over it, so a megabyte of text costs no more than a short one.
 */
const MAX_STRING_LENGTH = longestString(cocoonSetSpecSchema);

function childPath(path: string, key: string | number): string {
  if (typeof key === "number") return `${path}[${key}]`;
  return path ? `${path}.${key}` : key;
}

/**
 * A copy of the input made of plain data only (what JSON and YAML can hold), or failures naming
 * each value that is not: a Pulumi Output, a function, a class instance, nesting deeper than any
 * field. The validator never throws on what a program or a file hands it.
 */
function plainCopy(
  value: unknown,
  path: string,
  depth: number,
  failures: ValidationFailure[],
): unknown {
  const property = path || "spec";
  if (typeof value === "string" && value.length > MAX_STRING_LENGTH) {
    failures.push({
      property,
      reason: `must be at most ${MAX_STRING_LENGTH} characters (no field takes more; got ${value.length})`,
    });
    return undefined;
  }
  if (value === null || ["string", "number", "boolean", "undefined"].includes(typeof value)) {
    return value;
  }
  if (typeof value !== "object") {
    failures.push({ property, reason: `must be plain data, not a ${typeof value}` });
    return undefined;
  }
  if (depth >= MAX_DEPTH) {
    failures.push({ property, reason: `is nested more than ${MAX_DEPTH} levels deep` });
    return undefined;
  }
  try {
    if (Array.isArray(value)) {
      return value.map((v, i) => plainCopy(v, childPath(path, i), depth + 1, failures));
    }
    const proto: unknown = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null) {
      const what = (value as { __pulumiOutput?: unknown }).__pulumiOutput
        ? "a Pulumi Output (resolve it first: pulumi.output(spec).apply(...))"
        : `a ${value.constructor?.name ?? "non-plain"} object`;
      failures.push({ property, reason: `must be plain data, not ${what}` });
      return undefined;
    }
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(value)) {
      out[key] = plainCopy(
        (value as Record<string, unknown>)[key],
        childPath(path, key),
        depth + 1,
        failures,
      );
    }
    return out;
  } catch (e) {
    failures.push({ property, reason: `cannot be read (${errorMessage(e)})` });
    return undefined;
  }
}

/** A value as a short, printable text for an error message. */
export function describeValue(value: unknown): string {
  // What an error echoes of a value is printable and carries no address's credentials
  // (redacted before any cut, so a cut cannot leave half a password).
  if (typeof value === "string" && value.length > 60) {
    return `${safeText(JSON.stringify(redactUserinfo(value).slice(0, 60)))}... (${value.length} characters)`;
  }
  let text: string;
  try {
    text =
      typeof value === "number" || typeof value === "bigint" || value === undefined
        ? String(value)
        : (JSON.stringify(value) ?? typeof value);
  } catch {
    text = Object.prototype.toString.call(value);
  }
  text = safeText(text);
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

/**
 * Validates a CocoonSet spec against the CRD schema and its cross-field rules.
 * @param spec the candidate spec (not modified)
 * @param previous the spec currently stored, when this is an update (immutability rules)
 * @returns the spec with defaults applied, or every failure found
 */
export function validateCocoonSetSpec(spec: unknown, previous?: CocoonSetSpec): SpecValidation {
  const copyFailures: ValidationFailure[] = [];
  const candidate: unknown = plainCopy(spec, "", 0, copyFailures);
  if (copyFailures.length > 0) return { ok: false, failures: copyFailures };
  const valid = specValidator(candidate);
  const failures = [...(valid ? [] : schemaFailures(specValidator.errors ?? []))];
  // The policies' durations: the schema's pattern says they parse, not that they are long enough.
  const durations = valid ? policyDurations(candidate as CocoonSetSpec).failures : [];
  for (const failure of [...celFailures(candidate, previous), ...durations]) {
    if (!failures.some((f) => f.property === failure.property)) failures.push(failure);
  }
  return failures.length > 0
    ? { ok: false, failures }
    : { ok: true, spec: candidate as CocoonSetSpec };
}

/**
 * A failure's field as seen from an object that holds the spec under `prefix` (`spec`): the
 * whole spec is `spec`, a field in it `spec.agent.image`.
 */
export function prefixedProperty(prefix: string, property: string): string {
  return property === "spec" ? prefix : `${prefix}.${property}`;
}

/** Formats a failure as `[field] rule`, and `(got value)` when a value was given. */
export function formatFailure(failure: ValidationFailure): string {
  const got = "value" in failure ? ` (got ${describeValue(failure.value)})` : "";
  return `[${failure.property}] ${failure.reason}${got}`;
}
