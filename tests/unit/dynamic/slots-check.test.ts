// The slots resource's `check` (what `pulumi preview` runs): every failure names its field,
// top-level inputs under their own key (the engine prints the value given), spec fields in
// the reason with the value (a dotted key would print `value {<nil>}`). And its `diff` on the
// inputs alone: which changes are an update.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { UNKNOWN, check, diff, type DiffResult } from "../../../provider/dynamic/slots.js";
import { hasUnsafeText } from "../../../engine/spec/index.js";

const good = {
  kubeconfig: "apiVersion: v1\nkind: Config\n",
  namespace: "agents",
  name: "coder",
  uid: UNKNOWN,
  spec: { agent: { image: "agents/coder:1" } },
  slots: {},
  providerVersion: "test",
};

async function failures(change: Record<string, unknown>) {
  return (await check({}, { ...good, ...change })).failures;
}

describe("slots check", () => {
  it("passes good inputs", async () => {
    assert.deepEqual(await failures({}), []);
  });

  it("a spec that is not an object is [spec], not [spec.spec]", async () => {
    const [f] = await failures({ spec: "agents/coder:1" });
    assert.equal(f.reason, '[spec] must be an object (got "agents/coder:1")');
  });

  it("a spec field failure carries the field and the value given, with no dotted key", async () => {
    const [f] = await failures({ spec: { agent: { image: " " } } });
    assert.deepEqual(f, {
      property: "",
      reason:
        '[spec.agent.image] must be an image reference: printable ASCII without whitespace, control or non-ASCII characters (got " ")',
    });
  });

  it("an image with an ANSI escape or a right-to-left override is refused by the same validator, the echo escaped", async () => {
    for (const image of ["agents/coder:1\u001b[31m", "agents/\u202eredoc:1"]) {
      const [f] = await failures({ spec: { agent: { image } } });
      assert.match(f.reason, /^\[spec\.agent\.image\] must be an image reference: printable ASCII/);
      assert.ok(!hasUnsafeText(f.reason), JSON.stringify(f.reason));
    }
  });

  it("a hook URL the controller may not call names [spec.hooks.url], without its credentials", async () => {
    const [f] = await failures({
      spec: { ...good.spec, hooks: { url: "http://bob:pw-S3CRET@hooks.example/cocoon?t=QS3CRET" } },
    });
    assert.deepEqual(f, {
      property: "",
      reason:
        "[spec.hooks.url] must use https (plain http only to a loopback host such as 127.0.0.1) (got http://hooks.example/cocoon)",
    });
    assert.deepEqual(
      await failures({ spec: { ...good.spec, hooks: { url: "https://hooks.example/cocoon" } } }),
      [],
    );
  });

  it("refuses CocoonSet names of 64 to 253 characters", async () => {
    for (const name of ["a".repeat(64), "a".repeat(253)]) {
      const [f] = await failures({ name });
      assert.equal(f.property, "name");
      assert.match(f.reason, /^\[name\] must be at most 63 characters/);
    }
  });

  it("refuses a namespace that is not a DNS label", async () => {
    const [f] = await failures({ namespace: "Bad_NS" });
    assert.equal(f.property, "namespace");
    assert.match(f.reason, /^\[namespace\] must be a DNS-1123 label/);
  });

  it("refuses a fanOut p-limit cannot take, and timeouts the timers cannot", async () => {
    for (const fanOut of [2.5, NaN, 0, -1, Infinity, "8"]) {
      const [f] = await failures({ fanOut });
      assert.equal(f?.property, "fanOut", String(fanOut));
      assert.match(f.reason, /^\[fanOut\] must be an integer between 1 and 10000 \(got /);
    }
    const [t] = await failures({ timeoutSeconds: 1e9 });
    assert.match(t.reason, /^\[timeoutSeconds\] must be a number of seconds between 1 and 86400/);
  });

  it("refuses a capacityCheck that is not refuse, warn or off, naming the field", async () => {
    for (const capacityCheck of ["Refuse", "", 1, true]) {
      const [f] = await failures({ capacityCheck });
      assert.equal(f?.property, "capacityCheck", String(capacityCheck));
      assert.match(f.reason, /^\[capacityCheck\] must be one of "refuse", "warn", "off" \(got /);
    }
    for (const capacityCheck of ["refuse", "warn", "off", UNKNOWN])
      assert.deepEqual(await failures({ capacityCheck }), [], String(capacityCheck));
  });

  it("refuses a registry that is not host[:port][/prefix], and a suspend timeout out of range", async () => {
    const table: [unknown, RegExp][] = [
      ["reg istry:5000", /^\[registry\] must be host\[:port\]\[\/prefix\]/],
      [
        "127.0.0.1:70000",
        /^\[registry\] must have a port between 1 and 65535 \(got "127\.0\.0\.1:70000"\)/,
      ],
      ["reg:5000/UPPER", /the prefix is lower-case letters/],
      [5000, /^\[registry\] must be a string host\[:port\]\[\/prefix\] \(got 5000\)/],
      [
        "http://reg.example.com/snap/shots",
        /^\[registry\] asks for plain http to a host that is not loopback: give registryInsecure: true too \(or use https\)/,
      ],
    ];
    for (const [registry, message] of table) {
      const [f] = await failures({ registry });
      assert.equal(f?.property, "registry", String(registry));
      assert.match(f.reason, message);
    }
    for (const registry of ["127.0.0.1:5000", "https://reg.example.com/snap/shots", UNKNOWN])
      assert.deepEqual(await failures({ registry }), [], String(registry));
    assert.deepEqual(
      await failures({ registry: "http://reg.example.com/snap/shots", registryInsecure: true }),
      [],
      "plain http with registryInsecure",
    );
    const [ca] = await failures({ registry: "reg.example.com", registryCa: "not pem" });
    assert.equal(ca?.property, "registryCa");
    assert.match(ca.reason, /^\[registryCa\] must be PEM text holding at least one CERTIFICATE/);
    const [ins] = await failures({ registry: "reg.example.com", registryInsecure: "yes" });
    assert.equal(ins?.property, "registryInsecure");
    const [t] = await failures({ suspendTimeoutSeconds: 0 });
    assert.equal(t.property, "suspendTimeoutSeconds");
    assert.match(t.reason, /^\[suspendTimeoutSeconds\] must be a number of seconds between 1/);
    const [skip] = await failures({ skipAwait: "no" });
    assert.equal(skip?.property, "skipAwait");
    assert.equal(skip.reason, '[skipAwait] must be true or false (got "no")');
    assert.deepEqual(await failures({ skipAwait: true }), []);
  });

  it("skips what preview does not know yet", async () => {
    assert.deepEqual(
      await failures({ namespace: UNKNOWN, name: UNKNOWN, spec: { agent: { image: UNKNOWN } } }),
      [],
    );
  });
});

describe("slots diff", () => {
  // The kubeconfig unknown (and unchanged), as in a preview whose provider is created by the
  // same deploy: the diff then decides from the inputs alone, without a look at the live pods.
  const olds = {
    ...good,
    uid: "uid-1",
    timeoutSeconds: 300,
    kubeconfig: UNKNOWN,
    pods: {},
    mainVmName: "",
  };
  const news = { ...good, uid: "uid-1", timeoutSeconds: 300, kubeconfig: UNKNOWN };
  const table: [string, Record<string, unknown>, Record<string, unknown>, DiffResult][] = [
    ["nothing changed", {}, {}, { changes: false }],
    ["skipAwait set alone changes no slot", {}, { skipAwait: true }, { changes: false }],
    ["skipAwait dropped alone changes no slot", { skipAwait: true }, {}, { changes: false }],
    [
      "a timeout changed is an update (the engine prints its own input diff)",
      {},
      { timeoutSeconds: 30 },
      {},
    ],
  ];
  for (const [title, old, change, want] of table) {
    it(title, async () => {
      assert.deepEqual(
        await diff(
          "agents/coder",
          { ...olds, ...old },
          {
            ...news,
            ...change,
          },
        ),
        want,
      );
    });
  }
});
