/**
 * The package schema's spec and status types against the CRD they are made from: every field
 * of the CRD is in the schema, typed, with its description, and each object has a name of its
 * own choosing.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { cocoonSetCrd } from "../../../engine/spec/index.js";
import { packageSchema } from "../../../plugin/schema.js";
import {
  TYPE_NAMES,
  cocoonSetTypes,
  typeToken,
  type SchemaObjectType,
  type SchemaProperty,
} from "../../../plugin/schema-types.js";

interface Node {
  type?: string;
  description?: string;
  properties?: Record<string, Node>;
  items?: Node;
  additionalProperties?: Node | boolean;
  "x-kubernetes-int-or-string"?: boolean;
}

const root = (cocoonSetCrd.spec.versions as { schema: { openAPIV3Schema: Node } }[])[0].schema
  .openAPIV3Schema;
const schema = packageSchema("0.0.0");
const types = schema.types;

/** The object type a property refers to. */
function deref(p: SchemaProperty): SchemaObjectType {
  const token = p.$ref?.replace("#/types/", "") ?? "";
  const t = types[token];
  assert.ok(t, `a type ${token}`);
  return t;
}

/** Walks the CRD node and the schema property side by side, calling `visit` on each pair. */
function walk(
  node: Node,
  prop: SchemaProperty,
  path: string,
  visit: (n: Node, p: SchemaProperty, path: string) => void,
) {
  visit(node, prop, path);
  if (node.type === "array" && node.items) {
    assert.ok(prop.items, `${path}: an array's items`);
    walk(node.items, prop.items, `${path}[]`, visit);
  } else if (node.type === "object" && node.properties) {
    const t = deref(prop);
    for (const [key, child] of Object.entries(node.properties)) {
      assert.ok(t.properties[key], `${path}.${key} is in the schema`);
      walk(child, t.properties[key], `${path}.${key}`, visit);
    }
    assert.deepEqual(Object.keys(t.properties).sort(), Object.keys(node.properties).sort());
  } else if (node.type === "object" && typeof node.additionalProperties === "object") {
    assert.ok(prop.additionalProperties, `${path}: a map's values`);
    walk(node.additionalProperties, prop.additionalProperties, `${path}{}`, visit);
  }
}

describe("the package schema's spec and status types", () => {
  const fleet = schema.resources["cocoonset:index:Fleet"];
  const pairs: [string, Node, SchemaProperty][] = [
    ["spec", root.properties!.spec, fleet.inputProperties.spec],
    ["status", root.properties!.status, fleet.properties.status],
  ];

  it("hold every field of the CRD with its description, and nothing else", () => {
    let fields = 0;
    for (const [path, node, prop] of pairs) {
      walk(node, prop, path, (n, p, at) => {
        fields++;
        if (at === "spec" || at === "status") return; // the Fleet's own words
        if (n.description) assert.equal(p.description, n.description, `${at}'s description`);
      });
    }
    assert.ok(fields > 80, `the CRD's fields were walked (${fields})`);
  });

  it("type each scalar as the CRD does: integers, booleans, strings, and int-or-string as a union", () => {
    for (const [path, node, prop] of pairs) {
      walk(node, prop, path, (n, p, at) => {
        if (n["x-kubernetes-int-or-string"]) {
          assert.deepEqual(p.oneOf, [{ type: "integer" }, { type: "string" }], at);
        } else if (n.type === "integer" || n.type === "boolean" || n.type === "string") {
          assert.equal(p.type, n.type, at);
        } else if (n.type === "object" && n.properties) {
          assert.match(p.$ref ?? "", /^#\/types\/cocoonset:index:/, at);
        }
      });
    }
    const agent = types[typeToken("AgentSpec")];
    assert.equal(agent.properties.replicas.type, "integer");
    assert.deepEqual(agent.required, ["image"]);
    assert.deepEqual(types[typeToken("CocoonSetSpec")].required, ["agent"]);
  });

  it("name every object of the spec and the status in TYPE_NAMES, one shape per name", () => {
    const seen = new Map<string, string>();
    for (const [path, node, prop] of pairs) {
      walk(node, prop, path, (n, p, at) => {
        if (n.type !== "object" || !n.properties) return;
        assert.ok(TYPE_NAMES[at], `${at} has a name in TYPE_NAMES`);
        const shape = JSON.stringify(n);
        const earlier = seen.get(TYPE_NAMES[at]);
        if (earlier)
          assert.equal(shape, earlier, `${TYPE_NAMES[at]} is one shape wherever it is used`);
        seen.set(TYPE_NAMES[at], shape);
      });
    }
    for (const [path, name] of Object.entries(TYPE_NAMES)) {
      assert.ok(types[typeToken(name)], `${path}'s type ${name} is declared`);
    }
  });

  it("are the ones the Fleet's spec input and status output refer to", () => {
    const made = cocoonSetTypes();
    assert.deepEqual(made.types, schema.types);
    assert.equal(fleet.inputProperties.spec.$ref, made.spec.$ref);
    assert.equal(fleet.properties.status.$ref, made.status.$ref);
  });

  it("type the Fleet's idle, expiry and hooks arguments as the spec's own fields, so every language gets them typed", () => {
    const spec = deref(fleet.inputProperties.spec);
    for (const field of ["idle", "expiry", "hooks"] as const) {
      const arg = (fleet.inputProperties as Record<string, SchemaProperty>)[field];
      assert.ok(arg, `the Fleet takes ${field}`);
      assert.equal(arg.$ref, spec.properties[field].$ref, `${field} is the spec's type`);
      assert.ok(!arg.secret, `${field} is not a secret by itself (a URL with credentials is)`);
    }
    assert.deepEqual(deref(fleet.inputProperties.hooks).properties.url, {
      type: "string",
      description: deref(spec.properties.hooks).properties.url.description,
    });
  });
});
