// A registry address with userinfo (`https://robot:ghp_…@host`) is refused everywhere one is
// read, and no message echoes the credential; what errors, logs and events print of outside
// text is escaped (control and format characters) and redacted (an address's userinfo).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  parseRegistryAddress,
  redactRegistryAddress,
  userinfoOf,
} from "../../../engine/registry/address.js";
import { OciRegistry, RegistryError } from "../../../engine/registry/oci.js";
import {
  describeValue,
  escapeUnsafeText,
  hasUnsafeText,
  redactUserinfo,
} from "../../../engine/spec/index.js";
import { OptionsError, resolveControllerOptions } from "../../../controller/options.js";
import { registryProblem } from "../../../provider/dynamic/slots.js";
import { boundLogValue } from "../../../controller/logger.js";

const TOKEN = "ghp_0123456789abcdefSECRET";
const ADDRESSES = [
  `https://robot:${TOKEN}@ghcr.io/team`,
  `robot:${TOKEN}@ghcr.io`,
  `http://robot:${TOKEN}@127.0.0.1:5000`,
  `https://${TOKEN}@registry.example.com:443/snapshots`,
  `https://robot:p@ss${TOKEN}@ghcr.io`,
  `${TOKEN}@ghcr.io/x`,
];

describe("a registry address with credentials", () => {
  for (const a of ADDRESSES) {
    it(`${redactRegistryAddress(a)}: refused, the credential not echoed`, () => {
      assert.ok(userinfoOf(a) !== undefined);
      assert.ok(!redactRegistryAddress(a).includes(TOKEN));
      assert.throws(
        () => parseRegistryAddress(a),
        (e: Error) => {
          assert.match(e.message, /must not carry credentials .* Docker config/);
          assert.ok(!e.message.includes(TOKEN) && !e.message.includes("robot"), e.message);
          return true;
        },
      );
      // The flag: named, Docker config said, no credential.
      assert.throws(
        () => resolveControllerOptions({ ociRegistry: a }, {}),
        (e: Error) => {
          assert.ok(OptionsError.isInstance(e));
          assert.match(e.message, /^\[--oci-registry\] must not carry credentials/);
          assert.match(e.message, /Docker config/);
          assert.ok(!e.message.includes(TOKEN), e.message);
          return true;
        },
      );
      // The same from OCI_REGISTRY.
      assert.throws(
        () => resolveControllerOptions({}, { OCI_REGISTRY: a }),
        (e: Error) => !e.message.includes(TOKEN) && /\(from OCI_REGISTRY\)/.test(e.message),
      );
      // The Fleet's `registry` (the provider's check).
      const problem = registryProblem(a);
      assert.ok(problem?.startsWith("[registry] must not carry credentials"), problem);
      assert.ok(!problem?.includes(TOKEN), problem);
      // The client itself, constructed directly.
      assert.throws(
        () => new OciRegistry(a),
        (e: Error) => RegistryError.isInstance(e) && !e.message.includes(TOKEN),
      );
    });
  }

  it("an address without userinfo is kept as it is", () => {
    for (const a of ["ghcr.io/team", "https://127.0.0.1:5000", "registry.example.com:443/a/b"]) {
      assert.equal(userinfoOf(a), undefined);
      assert.equal(redactRegistryAddress(a), a);
      assert.equal(parseRegistryAddress(a), a);
    }
  });
});

describe("redactUserinfo", () => {
  const table: [string, string][] = [
    [`https://robot:${TOKEN}@ghcr.io/x`, "https://[redacted]@ghcr.io/x"],
    [`GET robot:${TOKEN}@ghcr.io failed`, "GET [redacted]@ghcr.io failed"],
    [`"https://a:b@c@host:5000"`, `"https://[redacted]@host:5000"`],
    ["ghcr.io/team/agent:1", "ghcr.io/team/agent:1"],
    // A digest is not an address.
    [
      "agent@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
      "agent@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    ],
    ["file:///srv/app/y.js:10", "file:///srv/app/y.js:10"],
    ["no address here", "no address here"],
    // A scheme after digits or signs, or after other text, is still a scheme.
    ["1https://u:p@host", "1https://[redacted]@host"],
    ["x-y+z://u:p@host", "x-y+z://[redacted]@host"],
    ["see_https://u:p@host", "see_https://[redacted]@host"],
  ];
  for (const [input, want] of table)
    it(JSON.stringify(input), () => assert.equal(redactUserinfo(input), want));

  it("redacts texts of 200,000 characters the same way (a scheme is tried only from a run's start)", () => {
    // Tried from every letter of a run, these took about 2 minutes (the time grew with the
    // square of the length); the unit tier's time shows such a regression.
    const run = "e".repeat(200_000);
    assert.equal(redactUserinfo(run), run);
    assert.equal(redactUserinfo(`${run}@host`), `[redacted]@host`);
    assert.equal(redactUserinfo(`x://${run}@host`), "x://[redacted]@host");
    assert.equal(redactUserinfo(`${run}://u:p@host`), `${run}://[redacted]@host`);
  });
});

describe("escapeUnsafeText", () => {
  const table: [string, string, string][] = [
    ["ANSI colour", "img\u001b[31mred", "img\\u001b[31mred"],
    ["BEL", "img\u0007", "img\\u0007"],
    ["carriage return", "a\rb", "a\\u000db"],
    ["right-to-left override", "a\u202eb", "a\\u202eb"],
    ["C1 CSI", "a\u009b2J", "a\\u009b2J"],
    ["zero-width space", "a\u200bb", "a\\u200bb"],
    ["byte-order mark", "\ufeffa", "\\ufeffa"],
    ["DEL", "a\u007f", "a\\u007f"],
    ["plain ASCII and other scripts stay", "ghcr.io/x:1 名字 😀", "ghcr.io/x:1 名字 😀"],
  ];
  for (const [name, input, want] of table)
    it(name, () => {
      assert.equal(escapeUnsafeText(input), want);
      assert.equal(hasUnsafeText(input), input !== want);
      assert.equal(hasUnsafeText(escapeUnsafeText(input)), false);
    });

  it("json mode leaves the C0 controls to the JSON encoder", () => {
    assert.equal(escapeUnsafeText("a\nb\u202e", { json: true }), "a\nb\\u202e");
  });

  it("what an error echoes of a value is escaped and redacted", () => {
    const d = describeValue(`agents/x:1\u001b[2J\u202e https://u:${TOKEN}@h`);
    assert.equal(hasUnsafeText(d), false, d);
    assert.ok(!d.includes(TOKEN), d);
    // Redacted before the cut: a long value cannot leave half a token.
    const long = describeValue(`https://robot:${TOKEN.repeat(4)}@ghcr.io/${"x".repeat(80)}`);
    assert.ok(!long.includes("ghp_"), long);
  });

  it("a log value is escaped and redacted; JSON takes care of the C0 controls", () => {
    const v = boundLogValue({
      image: "x\u202ey\u001b[0m",
      err: `HEAD https://robot:${TOKEN}@ghcr.io/v2/: no answer`,
    }) as Record<string, string>;
    assert.equal(v.image, "x\\u202ey\u001b[0m");
    assert.ok(JSON.stringify(v).includes("\\u001b"), "JSON escapes ESC");
    assert.ok(!v.err.includes(TOKEN), v.err);
  });
});
