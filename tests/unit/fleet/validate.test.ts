import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { MAX_REPLICAS } from "../../../engine/spec/constants.js";
import {
  formatFailure,
  validateCocoonSetSpec,
  withSpecDefaults,
  type CocoonSetSpec,
} from "../../../engine/spec/index.js";
import type { ValidationFailure } from "../../../engine/spec/validate.js";

function failures(spec: unknown, previous?: CocoonSetSpec): ValidationFailure[] {
  const result = validateCocoonSetSpec(spec, previous);
  assert.equal(result.ok, false, `expected ${JSON.stringify(spec)} to be rejected`);
  // The value given is checked on its own below; these tables compare the field and the rule.
  return result.ok ? [] : result.failures.map(({ property, reason }) => ({ property, reason }));
}

const agent = { image: "ghcr.io/acme/agent:1" };

describe("validateCocoonSetSpec rejects bad input, naming the field and the rule", () => {
  const table: [string, unknown, string, string][] = [
    ["negative replicas", { agent: { ...agent, replicas: -1 } }, "agent.replicas", "must be >= 0"],
    [
      "a progress deadline of 0",
      { agent, progressDeadlineSeconds: 0 },
      "progressDeadlineSeconds",
      "must be >= 1",
    ],
    [
      "a fractional progress deadline",
      { agent, progressDeadlineSeconds: 1.5 },
      "progressDeadlineSeconds",
      "must be an integer",
    ],
    [
      "absurd replicas",
      { agent: { ...agent, replicas: 1_000_000 } },
      "agent.replicas",
      `must be <= ${MAX_REPLICAS}`,
    ],
    [
      "fractional replicas",
      { agent: { ...agent, replicas: 1.5 } },
      "agent.replicas",
      "must be an integer",
    ],
    ["empty image", { agent: { image: "" } }, "agent.image", "must not be empty"],
    ["missing image", { agent: {} }, "agent.image", "is required"],
    ["missing agent", {}, "agent", "is required"],
    [
      "numeric toolbox name",
      { agent, toolboxes: [{ name: "42" }] },
      "toolboxes[0].name",
      "must not be an integer (it would collide with sub-agent slots)",
    ],
    [
      "duplicate toolbox name",
      { agent, toolboxes: [{ name: "web" }, { name: "db" }, { name: "web" }] },
      "toolboxes[2].name",
      'duplicate toolbox name "web"',
    ],
    [
      "toolbox name that is not a DNS label",
      { agent, toolboxes: [{ name: "Web_1" }] },
      "toolboxes[0].name",
      "must be a DNS-1123 label (lowercase letters, digits and '-')",
    ],
    [
      "empty toolbox name",
      { agent, toolboxes: [{ name: "" }] },
      "toolboxes[0].name",
      "must not be empty",
    ],
    [
      "probe port above range",
      { agent: { ...agent, probePort: 65536 } },
      "agent.probePort",
      "must be between 0 and 65535",
    ],
    [
      "negative VNC port",
      { agent, toolboxes: [{ name: "vnc", vncPort: -1 }] },
      "toolboxes[0].vncPort",
      "must be between 0 and 65535",
    ],
    [
      "unknown OS",
      { agent: { ...agent, os: "beos" } },
      "agent.os",
      "must be one of: linux, windows, android, macos",
    ],
    [
      "unknown snapshot policy",
      { agent, snapshotPolicy: "sometimes" },
      "snapshotPolicy",
      "must be one of: always, main-only, never",
    ],
    [
      "unknown toolbox mode",
      { agent, toolboxes: [{ name: "x", mode: "fork" }] },
      "toolboxes[0].mode",
      "must be one of: run, clone, static",
    ],
    [
      "storage that is not a quantity",
      { agent: { ...agent, storage: "10 GB" } },
      "agent.storage",
      "must be a quantity such as 10Gi, 512Mi, 500m or 2 (an exponent has at most 3 digits)",
    ],
    [
      "resource limit of the wrong type",
      { agent: { ...agent, resources: { limits: { cpu: true } } } },
      "agent.resources.limits.cpu",
      "must be an integer or a string",
    ],
    [
      "snapshot class that is not a label value",
      { agent, snapshotCompatibilityClass: "has space" },
      "snapshotCompatibilityClass",
      "must be a label value (letters, digits, '-', '_' or '.', starting and ending with a letter or digit)",
    ],
    [
      "snapshot class longer than 63",
      { agent, snapshotCompatibilityClass: "a".repeat(64) },
      "snapshotCompatibilityClass",
      "must be at most 63 characters",
    ],
    ["unknown field", { agent: { ...agent, replica: 3 } }, "agent.replica", "is not a known field"],
    ["wrong type", { agent, suspend: "yes" }, "suspend", "must be a boolean"],
    [
      "release with sub-agents",
      { agent: { ...agent, replicas: 2 }, hibernatePolicy: "release" },
      "agent.replicas",
      "must be 0 when hibernatePolicy is release",
    ],
    [
      "release with toolboxes",
      { agent, hibernatePolicy: "release", toolboxes: [{ name: "web" }] },
      "toolboxes",
      "must be empty when hibernatePolicy is release",
    ],
    ["a spec that is not an object", null, "spec", "must be an object"],
  ];
  for (const [title, spec, property, reason] of table) {
    it(`${title}: [${property}] ${reason}`, () => {
      assert.deepEqual(
        failures(spec).find((f) => f.property === property),
        { property, reason },
        JSON.stringify(failures(spec)),
      );
    });
  }

  it("reports schema and cross-field failures together in one pass", () => {
    const found = failures({
      agent: { ...agent, replicas: -1 },
      toolboxes: [{ name: "7" }, { name: "web", vncPort: 70000 }, { name: "web" }],
    });
    assert.deepEqual(found.map((f) => f.property).sort(), [
      "agent.replicas",
      "toolboxes[0].name",
      "toolboxes[1].vncPort",
      "toolboxes[2].name",
    ]);
  });

  it("keeps snapshotCompatibilityClass immutable once set", () => {
    const previous: CocoonSetSpec = { agent, snapshotCompatibilityClass: "n2-v1" };
    assert.deepEqual(failures({ agent, snapshotCompatibilityClass: "n3-v1" }, previous), [
      { property: "snapshotCompatibilityClass", reason: 'is immutable once set (it is "n2-v1")' },
    ]);
    assert.equal(failures({ agent }, previous)[0].property, "snapshotCompatibilityClass");
    assert.equal(
      validateCocoonSetSpec({ agent, snapshotCompatibilityClass: "n2-v1" }, previous).ok,
      true,
    );
    assert.equal(
      validateCocoonSetSpec({ agent, snapshotCompatibilityClass: "x" }, { agent }).ok,
      true,
    );
  });
});

describe("validateCocoonSetSpec accepts good input", () => {
  it("returns the spec with every schema default applied", () => {
    const result = validateCocoonSetSpec({ agent, toolboxes: [{ name: "web" }] });
    assert.deepEqual(result, {
      ok: true,
      spec: {
        nodePool: "default",
        snapshotPolicy: "always",
        hibernatePolicy: "retain",
        agent: { ...agent, replicas: 0, mode: "clone", os: "linux", backend: "cloud-hypervisor" },
        toolboxes: [{ name: "web", mode: "run", os: "linux", backend: "cloud-hypervisor" }],
      },
    });
  });

  it("applies the same defaults as withSpecDefaults", () => {
    const spec: CocoonSetSpec = {
      agent: { ...agent, replicas: 2, storage: "10Gi", resources: { limits: { cpu: 2 } } },
      toolboxes: [{ name: "db", mode: "static", staticVMID: "vm-1" }],
    };
    const result = validateCocoonSetSpec(spec);
    assert.ok(result.ok);
    assert.deepEqual(result.spec, withSpecDefaults(spec));
  });

  it("does not modify its input", () => {
    const spec = { agent: { ...agent } };
    validateCocoonSetSpec(spec);
    assert.deepEqual(spec, { agent });
  });

  it("accepts quantities as numbers and strings, ports at the range ends, release with no members", () => {
    const spec = {
      hibernatePolicy: "release",
      agent: { ...agent, probePort: 65535, storage: 10, resources: { requests: { cpu: "500m" } } },
    };
    assert.equal(validateCocoonSetSpec(spec).ok, true);
  });
});

describe("formatFailure", () => {
  it("puts the field in brackets before the rule", () => {
    assert.equal(
      formatFailure({ property: "agent.replicas", reason: "must be >= 0" }),
      "[agent.replicas] must be >= 0",
    );
  });
});
