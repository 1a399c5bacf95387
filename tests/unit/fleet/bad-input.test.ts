// Bad input the validator, the quantity parser and the slots resource's check must refuse
// (or survive), each failure naming the field: quantities beyond Kubernetes' bounds, blank
// images, names that break the pods' name label, values that are not plain data.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  cocoonSetNameProblem,
  formatFailure,
  hasUnsafeText,
  validateCocoonSetSpec,
} from "../../../engine/spec/index.js";
import {
  MAX_QUANTITY,
  parseQuantity,
  quantitiesEqual,
  readQuantity,
} from "../../../engine/spec/quantity.js";
import type { ValidationFailure } from "../../../engine/spec/validate.js";

const agent = { image: "ghcr.io/acme/agent:1" };

function failuresOf(spec: unknown): ValidationFailure[] {
  const result = validateCocoonSetSpec(spec);
  assert.equal(result.ok, false, "expected the spec to be rejected");
  return result.ok ? [] : result.failures;
}

function failureAt(spec: unknown, property: string): ValidationFailure {
  const found = failuresOf(spec).find((f) => f.property === property);
  assert.ok(found, `no failure at ${property}: ${JSON.stringify(failuresOf(spec))}`);
  return found;
}

describe("quantities are bounded as Kubernetes bounds them", () => {
  it("a huge exponent is out of range, not a RangeError or a giant power of ten", () => {
    for (const text of ["1e10000000", "1e300000000", "1e999999999", "1E999999999999999999999"]) {
      assert.doesNotThrow(() => readQuantity(text), text);
      assert.deepEqual(readQuantity(text), { ok: false, problem: "too-large" }, text);
      assert.equal(parseQuantity(text), undefined, text);
    }
  });

  it("values stay below 2^63-1 (the apiserver caps 8Ei at it), in every notation", () => {
    assert.deepEqual(parseQuantity("9223372036854775806"), {
      numerator: MAX_QUANTITY - 1n,
      denominator: 1n,
    });
    for (const over of [
      "9223372036854775808",
      "8Ei",
      "9.3E",
      "10E",
      "1e19",
      "9223372036854775807.5",
      "9223372036854775807",
    ]) {
      assert.deepEqual(readQuantity(over), { ok: false, problem: "too-large" }, over);
    }
    for (const under of ["7Ei", "9E", "9.2e18", "8191Pi"]) {
      assert.equal(readQuantity(under).ok, true, under);
    }
  });

  it("finer than 1n rounds up to 1n, as the apiserver stores it, without a giant denominator", () => {
    assert.equal(quantitiesEqual("1e-999999999", "1n"), true);
    assert.equal(quantitiesEqual("0.0000000001", "1n"), true);
    assert.equal(quantitiesEqual("1.0000000001", "1000000001n"), true);
    assert.equal(quantitiesEqual("0e999999999", "0"), true);
    assert.equal(quantitiesEqual("-0.0000000001", "-1n"), true);
  });

  it("numbers that are not finite are not quantities", () => {
    for (const n of [NaN, Infinity, -Infinity]) assert.equal(parseQuantity(n), undefined);
    assert.deepEqual(parseQuantity(-0), { numerator: 0n, denominator: 1n });
    assert.equal(quantitiesEqual(1e18, "1e18"), true);
    assert.equal(parseQuantity(1e21), undefined, "1e+21 is beyond 2^63-1");
  });
});

describe("the validator bounds quantities, in the schema the CRD is generated from", () => {
  const bound = `must be less than ${MAX_QUANTITY} (2^63-1)`;
  const table: [string, unknown, string][] = [
    [
      "1e300000000",
      "1e300000000",
      "must be a quantity such as 10Gi, 512Mi, 500m or 2 (an exponent has at most 3 digits)",
    ],
    ["1e300", "1e300", bound],
    ["8Ei", "8Ei", bound],
    ["9223372036854775808", "9223372036854775808", bound],
    ["a negative integer", -1, "must not be negative"],
    [
      "an integer past 2^53-1",
      2 ** 53,
      'must be at most 9007199254740991 as a number (write a larger quantity as a string, e.g. "10Gi")',
    ],
    ["NaN", NaN, "must be an integer or a string"],
    ["a 65-character string", "0".repeat(65), "must be at most 64 characters"],
  ];
  for (const [title, storage, reason] of table) {
    it(`storage ${title}: [agent.storage] ${reason}`, () => {
      const f = failureAt({ agent: { ...agent, storage } }, "agent.storage");
      assert.equal(f.reason, reason);
    });
  }

  it("refuses a bound-breaking limit and request by their map key", () => {
    const f = failuresOf({
      agent: { ...agent, resources: { limits: { memory: "8Ei" }, requests: { cpu: -2 } } },
    });
    assert.deepEqual(
      f.map((x) => [x.property, x.reason]),
      [
        ["agent.resources.limits.memory", bound],
        ["agent.resources.requests.cpu", "must not be negative"],
      ],
    );
  });

  it("accepts quantities within the bounds", () => {
    for (const storage of ["9223372036854775806", "7Ei", "1e18", "0.5", "1e-999", 2 ** 53 - 1, 0]) {
      assert.equal(
        validateCocoonSetSpec({ agent: { ...agent, storage } }).ok,
        true,
        String(storage),
      );
    }
  });
});

describe("the validator refuses images with control, format or non-ASCII characters", () => {
  const bad: [string, string][] = [
    ["an ANSI colour escape", "ghcr.io/acme/agent:1\u001b[31m"],
    ["a BEL", "ghcr.io/acme/agent:1\u0007"],
    ["a right-to-left override", "ghcr.io/acme/\u202etnega:1"],
    ["a C1 control (CSI)", "ghcr.io/acme/agent:1\u009b2J"],
    ["a zero-width space", "ghcr.io/acme/age\u200bnt:1"],
    ["a DEL", "ghcr.io/acme/agent:1\u007f"],
    ["a non-ASCII letter", "ghcr.io/acme/agënt:1"],
  ];
  for (const [name, image] of bad)
    it(`${name}: agent and toolbox image refused, naming the field; the echo is escaped`, () => {
      for (const [spec, property] of [
        [{ agent: { image } }, "agent.image"],
        [{ agent, toolboxes: [{ name: "web", image }] }, "toolboxes[0].image"],
      ] as const) {
        const f = failureAt(spec, property);
        assert.equal(
          f.reason,
          "must be an image reference: printable ASCII without whitespace, control or non-ASCII characters",
        );
        const text = formatFailure(f);
        assert.ok(text.startsWith(`[${property}] must be an image reference`), text);
        assert.equal(hasUnsafeText(text), false, JSON.stringify(text));
      }
    });

  it("every printable ASCII reference is accepted", () => {
    for (const image of [
      "ghcr.io/acme/agent:1",
      "localhost:5000/a_b/c-d.e:v1.2",
      "agent@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
      "https://images.example.com/vm.qcow2?x=1&y=~2",
    ])
      assert.equal(validateCocoonSetSpec({ agent: { image } }).ok, true, image);
  });
});

describe("the validator refuses blank images and values that are not plain data", () => {
  it("image ' ' is refused, naming the field and the value given", () => {
    const f = failureAt({ agent: { image: " " } }, "agent.image");
    assert.equal(
      f.reason,
      "must be an image reference: printable ASCII without whitespace, control or non-ASCII characters",
    );
    assert.equal(
      formatFailure(f),
      '[agent.image] must be an image reference: printable ASCII without whitespace, control or non-ASCII characters (got " ")',
    );
    assert.equal(
      failureAt({ agent, toolboxes: [{ name: "web", image: "\t" }] }, "toolboxes[0].image").reason,
      "must be an image reference: printable ASCII without whitespace, control or non-ASCII characters",
    );
  });

  it("a class instance (a Pulumi Output, say) is a failure naming the field, not a DataCloneError", () => {
    class Output {
      readonly __pulumiOutput = true;
      apply() {
        return this;
      }
    }
    const f = failureAt({ agent: { image: new Output() } }, "agent.image");
    assert.match(f.reason, /^must be plain data, not a Pulumi Output/);
    assert.match(failureAt({ agent, nodeName: () => "x" }, "nodeName").reason, /function/);
  });

  it("nesting far deeper than the schema is refused without recursing into it", () => {
    let deep: unknown = "x";
    for (let i = 0; i < 100_000; i++) deep = { a: deep };
    assert.match(failuresOf({ agent, x: deep })[0].reason, /nested more than/);
  });

  it("a getter that throws is a failure, not a throw", () => {
    const hostile = { agent };
    Object.defineProperty(hostile, "nodeName", {
      enumerable: true,
      get() {
        throw new Error("boom");
      },
    });
    assert.match(failuresOf(hostile)[0].reason, /cannot be read \(boom\)/);
  });
});

describe("CocoonSet names", () => {
  it("64 to 253 characters break the pods' name label and are refused", () => {
    assert.equal(cocoonSetNameProblem("a".repeat(63)), undefined);
    assert.match(cocoonSetNameProblem("a".repeat(64)) ?? "", /at most 63 characters/);
    assert.match(cocoonSetNameProblem("a".repeat(253)) ?? "", /at most 63 characters/);
    assert.match(cocoonSetNameProblem("Bad_Name") ?? "", /DNS-1123 subdomain/);
    assert.equal(cocoonSetNameProblem("fleet.v2"), undefined);
  });
});
