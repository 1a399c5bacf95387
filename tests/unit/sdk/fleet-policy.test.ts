/**
 * The Fleet's `idle`, `expiry` and `hooks` arguments under `pulumi.runtime.setMocks`: they join
 * the spec every child is given, one given twice is refused naming it, a hook URL with
 * credentials makes the spec a secret while the slots map stays readable. No engine, no cluster.
 */
import * as pulumi from "@pulumi/pulumi";
import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import { hooksUrlHasCredentials, policyProblems } from "../../../sdk/fleet-policy.js";

interface Registered {
  type: string;
  name: string;
  inputs: Record<string, unknown>;
}

const registered: Registered[] = [];
let sdk: typeof import("../../../sdk/index.js");

const KUBECONFIG = "apiVersion: v1\nkind: Config\n";
const SLOTS = "pulumi-nodejs:dynamic/cocoonset:Slots";
const CR = "kubernetes:cocoonset.cocoonstack.io/v1:CocoonSet";
const SECRET_SIG = "4dabf18193072939515e22adb298388d";

before(async () => {
  await pulumi.runtime.setMocks(
    {
      newResource(args) {
        const inputs = args.inputs as Record<string, unknown>;
        registered.push({ type: args.type, name: args.name, inputs });
        const state: Record<string, unknown> = { ...inputs };
        if (args.type.endsWith("Guard")) state.ownerToken = "0123456789abcdef".repeat(2);
        if (args.type.startsWith("kubernetes:cocoonset.cocoonstack.io/"))
          state.metadata = { ...(inputs.metadata as object), uid: `uid-of-${args.name}` };
        return { id: `${args.name}-id`, state };
      },
      call: (args) => args.inputs as Record<string, unknown>,
    },
    "project",
    "stack",
    false,
  );
  sdk = await import("../../../sdk/index.js");
});

function one(type: string, name: string): Registered {
  const found = registered.filter((r) => r.type === type && r.name === name);
  assert.equal(found.length, 1, `${type} ${name} registered once`);
  return found[0];
}

function settle<T>(o: pulumi.Output<T>): Promise<T> {
  return new Promise((resolve) => o.apply(resolve));
}

const isSecret = (v: unknown) => typeof v === "object" && v !== null && SECRET_SIG in v;
const unwrap = (v: unknown): unknown =>
  isSecret(v) ? (v as unknown as { value: unknown }).value : v;

describe("the Fleet's policy arguments", () => {
  it("join the spec the CocoonSet, the guard and the slots resource get, Outputs included; the slots are those of the spec alone", async () => {
    const fleet = new sdk.Fleet("idler", {
      namespace: "agents",
      kubeconfig: KUBECONFIG,
      spec: { agent: { image: "agents/coder:1", replicas: 2 } },
      idle: { after: pulumi.output("30m") },
      expiry: { after: "24h", since: "idle", action: "delete" },
    });
    await settle(fleet.podNames);
    const expected = {
      agent: { image: "agents/coder:1", replicas: 2 },
      idle: { after: "30m" },
      expiry: { after: "24h", since: "idle", action: "delete" },
    };
    assert.deepEqual((one(CR, "idler-cocoonset").inputs as { spec: unknown }).spec, expected);
    assert.deepEqual(one(SLOTS, "idler-slots").inputs.spec, expected);
    assert.deepEqual(
      one("pulumi-nodejs:dynamic/cocoonset:FleetGuard", "idler-guard").inputs.spec,
      expected,
    );
    assert.deepEqual(Object.keys(one(SLOTS, "idler-slots").inputs.slots as object).sort(), [
      "0",
      "1",
      "2",
    ]);
    assert.deepEqual(await settle(fleet.spec), expected);
  });

  it("refuse a field given both as an argument and in the spec, naming it, before anything is registered", () => {
    const before = registered.length;
    assert.throws(
      () =>
        new sdk.Fleet("twice", {
          namespace: "agents",
          kubeconfig: KUBECONFIG,
          spec: { agent: { image: "agents/coder:1" }, idle: { after: "1h" } },
          idle: { after: "30m" },
        }),
      /\[idle\] is given twice, as the Fleet's `idle` and as `spec\.idle`/,
    );
    assert.equal(registered.length, before);
  });

  it("are validated with the spec, naming the spec's field", () => {
    assert.throws(
      () =>
        new sdk.Fleet("badpolicy", {
          namespace: "agents",
          kubeconfig: KUBECONFIG,
          spec: { agent: { image: "agents/coder:1" } },
          expiry: { after: "24h", action: "explode" as never },
        }),
      /\[spec\.expiry\.action\]/,
    );
  });

  it("a hook URL with credentials makes the spec a secret everywhere it is kept, and leaves the slots map readable", async () => {
    const url = "https://robot:s3cret@hooks.example.com/cocoon";
    const fleet = new sdk.Fleet("hooked", {
      namespace: "agents",
      kubeconfig: KUBECONFIG,
      spec: { agent: { image: "agents/coder:1", replicas: 1 } },
      hooks: { url, failurePolicy: "Ignore" },
    });
    await settle(fleet.podNames);
    const slots = one(SLOTS, "hooked-slots").inputs;
    assert.ok(isSecret(slots.spec), "the slots resource's spec is a secret");
    assert.equal((unwrap(slots.spec) as { hooks: { url: string } }).hooks.url, url);
    const cr = one(CR, "hooked-cocoonset").inputs as { spec: unknown };
    assert.ok(isSecret(cr.spec), "the CocoonSet's spec is a secret");
    assert.ok(!isSecret(slots.slots), "the slots map is not");
    assert.deepEqual(Object.keys(slots.slots as object).sort(), ["0", "1"]);
  });

  it("a hook URL given as a secret keeps the spec secret and the slots map readable", async () => {
    const fleet = new sdk.Fleet("hookedsecret", {
      namespace: "agents",
      kubeconfig: KUBECONFIG,
      spec: { agent: { image: "agents/coder:1" } },
      hooks: { url: pulumi.secret("https://hooks.example.com/cocoon?token=t") },
    });
    await settle(fleet.podNames);
    const slots = one(SLOTS, "hookedsecret-slots").inputs;
    assert.ok(isSecret(slots.spec), "the spec is a secret");
    assert.ok(!isSecret(slots.slots), "the slots map is not");
    assert.deepEqual(Object.keys(slots.slots as object), ["0"]);
  });

  it("a hook URL without credentials leaves the spec readable", async () => {
    const fleet = new sdk.Fleet("hookedplain", {
      namespace: "agents",
      kubeconfig: KUBECONFIG,
      spec: { agent: { image: "agents/coder:1" } },
      hooks: { url: "https://hooks.example.com/cocoon" },
    });
    await settle(fleet.podNames);
    assert.ok(!isSecret(one(SLOTS, "hookedplain-slots").inputs.spec));
  });
});

describe("policy helpers", () => {
  const cases: [string, string | undefined, boolean][] = [
    ["user and password", "https://u:p@h.example/x", true],
    ["user alone", "https://token@h.example/x", true],
    ["none", "https://h.example/x?next=a@b", false],
    ["an @ in the path only", "https://h.example/a@b", false],
    ["unparsable, with userinfo", "https://u:p@[bad/x", true],
    ["no hooks", undefined, false],
  ];
  for (const [title, url, expected] of cases) {
    it(`hooksUrlHasCredentials: ${title}`, () => {
      const spec = url === undefined ? {} : { hooks: { url } };
      assert.equal(hooksUrlHasCredentials(spec), expected);
    });
  }

  it("policyProblems names each field given twice and nothing else", () => {
    assert.deepEqual(
      policyProblems(
        { agent: { image: "i" }, idle: { after: "1h" }, hooks: { url: "https://h" } },
        { idle: { after: "2h" }, expiry: { after: "1h" } },
      ).map((p) => p.slice(0, 8)),
      ["[idle] i"],
    );
  });
});
