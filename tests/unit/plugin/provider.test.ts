/**
 * The `cocoonset` package provider without an engine: its schema, the secrets it carries
 * across the wire, which provider objects its custom resources run, and the resources the
 * components create once it has switched them (under `pulumi.runtime.setMocks`).
 */
import * as pulumi from "@pulumi/pulumi";
import assert from "node:assert/strict";
import { before, describe, it } from "node:test";

/** Pulumi's wire form of a secret. */
const secret = (value: unknown) => ({
  "4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270",
  value,
});

const registered: { type: string; name: string; inputs: Record<string, unknown> }[] = [];
let plugin: typeof import("../../../plugin/provider.js");
let schema: typeof import("../../../plugin/schema.js");
let sdk: typeof import("../../../sdk/index.js");
let operatorResources: typeof import("../../../sdk/operator-resources.js");
let fleetGuard: typeof import("../../../sdk/fleet-guard.js");

before(async () => {
  await pulumi.runtime.setMocks(
    {
      newResource(args) {
        registered.push({
          type: args.type,
          name: args.name,
          inputs: args.inputs as Record<string, unknown>,
        });
        const state: Record<string, unknown> = { ...(args.inputs as object) };
        if (args.type.startsWith("kubernetes:cocoonset.cocoonstack.io/")) {
          state.metadata = { ...(state.metadata as object), uid: `uid-of-${args.name}` };
        }
        return { id: `${args.name}-id`, state };
      },
      call: (args) => args.inputs as Record<string, unknown>,
    },
    "project",
    "stack",
    false,
  );
  plugin = await import("../../../plugin/provider.js");
  schema = await import("../../../plugin/schema.js");
  sdk = await import("../../../sdk/index.js");
  operatorResources = await import("../../../sdk/operator-resources.js");
  fleetGuard = await import("../../../sdk/fleet-guard.js");
});

function settle<T>(o: pulumi.Output<T>): Promise<T> {
  return new Promise((resolve) => o.apply(resolve));
}

describe("the package schema", () => {
  it("declares the Operator and the Fleet as components and the engine's resources as custom resources", () => {
    const s = schema.packageSchema("1.2.3");
    assert.equal(s.name, "cocoonset");
    assert.equal(s.version, "1.2.3");
    const kinds = Object.entries(s.resources).map(
      ([type, r]) => `${type} ${"isComponent" in r ? "component" : "custom"}`,
    );
    assert.deepEqual(kinds.sort(), [
      "cocoonset:index:ArgumentsRefusal custom",
      "cocoonset:index:ControllerRollout custom",
      "cocoonset:index:CrdGuard custom",
      "cocoonset:index:Fleet component",
      "cocoonset:index:FleetGuard custom",
      "cocoonset:index:Operator component",
      "cocoonset:index:OperatorGuard custom",
      "cocoonset:index:Slots custom",
    ]);
    const fleet = s.resources["cocoonset:index:Fleet"];
    assert.deepEqual(fleet.requiredInputs, ["namespace", "spec"]);
    assert.equal(fleet.inputProperties.operator.$ref, "#/resources/cocoonset:index:Operator");
    for (const [type, r] of Object.entries(s.resources)) {
      if (type === "cocoonset:index:ArgumentsRefusal") continue; // it talks to no cluster
      assert.equal(r.inputProperties.kubeconfig?.secret, true, `${type}: kubeconfig is secret`);
    }
  });

  it("is what the provider serves", () => {
    const p = plugin.cocoonsetProvider("1.2.3");
    assert.deepEqual(JSON.parse(p.schema!), schema.packageSchema("1.2.3"));
    assert.equal(p.version, "1.2.3");
  });
});

describe("the package's custom resources", () => {
  it("run the same provider objects as the TypeScript SDK's dynamic resources", () => {
    assert.equal(plugin.engines["cocoonset:index:Slots"], sdk.slotsProvider);
    assert.equal(plugin.engines["cocoonset:index:CrdGuard"], operatorResources.crdGuardProvider);
    assert.equal(plugin.engines["cocoonset:index:FleetGuard"], fleetGuard.fleetGuardProvider);
    assert.equal(
      plugin.engines["cocoonset:index:OperatorGuard"],
      operatorResources.operatorGuardProvider,
    );
    assert.equal(
      plugin.engines["cocoonset:index:ControllerRollout"],
      operatorResources.controllerRolloutProvider,
    );
  });

  it("keeps the kubeconfig secret: unwrapped for the provider object, wrapped again in what it returns", async () => {
    const p = plugin.cocoonsetProvider("1.2.3");
    const urn = "urn:pulumi:s::p::cocoonset:index:Operator$cocoonset:index:CrdGuard::ops-crd-guard";
    const inputs = { kubeconfig: secret("kc"), owner: "p/s/ops", retain: "", providerVersion: "1" };
    const checked = await p.check!(urn, {}, inputs);
    assert.deepEqual(checked.inputs, inputs);
    const created = await p.create!(urn, inputs);
    assert.equal(created.id, "p/s/ops");
    assert.deepEqual(created.outs, inputs, "the stored kubeconfig is a secret");
    // The provider object compares plain values: the same secret is no change, another is.
    assert.deepEqual(await p.diff!(created.id, urn, created.outs, inputs), { changes: false });
    const other = { ...inputs, kubeconfig: secret("other") };
    assert.deepEqual(await p.diff!(created.id, urn, created.outs, other), { changes: true });
    const updated = await p.update!(created.id, urn, created.outs, other);
    assert.deepEqual(updated.outs, other);
  });

  it("refuses a type it does not know, naming it", async () => {
    const p = plugin.cocoonsetProvider("1.2.3");
    await assert.rejects(
      p.create!("urn:pulumi:s::p::cocoonset:index:Nothing::x", {}),
      /unknown resource type cocoonset:index:Nothing/,
    );
  });

  it("names the Operator's children a Fleet orders itself after, from the Operator's URN", async () => {
    const op = plugin.operatorChildren(
      "urn:pulumi:s::p::my:index:Parent$cocoonset:index:Operator::ops",
    );
    const urns = await Promise.all([op.crd, op.deployment, op.crdGuard].map((r) => settle(r.urn)));
    assert.deepEqual(urns, [
      "urn:pulumi:s::p::my:index:Parent$cocoonset:index:Operator$kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition::ops-crd",
      "urn:pulumi:s::p::my:index:Parent$cocoonset:index:Operator$kubernetes:apps/v1:Deployment::ops-controller",
      "urn:pulumi:s::p::my:index:Parent$cocoonset:index:Operator$cocoonset:index:CrdGuard::ops-crd-guard",
    ]);
  });
});

describe("components built by the package provider", () => {
  it("create the package's custom resources instead of dynamic ones", async () => {
    plugin.cocoonsetProvider("1.2.3"); // switches the components' resource factory
    const kubeconfig = "apiVersion: v1\nkind: Config\n";
    const op = new sdk.Operator("ops", { kubeconfig });
    const fleet = new sdk.Fleet("coder", {
      namespace: "agents",
      kubeconfig,
      operator: op,
      spec: { agent: { replicas: 2, image: "agents/coder:1" } },
    });
    await settle(fleet.podNames);
    await settle(op.crdGuard.urn);
    await settle(op.rollout!.urn);
    const engineBacked = registered
      .filter((r) => !r.type.startsWith("kubernetes:"))
      .map((r) => `${r.type} ${r.name}`)
      .sort();
    assert.deepEqual(engineBacked, [
      "cocoonset:index:ControllerRollout ops-rollout",
      "cocoonset:index:CrdGuard ops-crd-guard",
      "cocoonset:index:Fleet coder",
      "cocoonset:index:FleetGuard coder-guard",
      "cocoonset:index:Operator ops",
      "cocoonset:index:OperatorGuard ops-guard",
      "cocoonset:index:Slots coder-slots",
    ]);
    const slots = registered.find((r) => r.type === "cocoonset:index:Slots")!;
    assert.deepEqual(Object.keys(slots.inputs.slots as object).sort(), ["0", "1", "2"]);
    assert.deepEqual(slots.inputs.kubeconfig, secret(kubeconfig), "registered as a secret");
  });
});

describe("a component's bad arguments from another language", () => {
  it("reach the engine as failures of a resource's check, one per property, not as a failed construct", async () => {
    const p = plugin.cocoonsetProvider("1.2.3");
    const built = await p.construct!(
      "bad",
      "cocoonset:index:Fleet",
      {
        namespace: "agents",
        kubeconfig: "apiVersion: v1\nkind: Config\n",
        spec: { agent: { replicas: -1, image: "" } },
      },
      {},
    );
    assert.deepEqual(built.state, {}, "the component stands, empty");
    const refusal = registered.find((r) => r.type === "cocoonset:index:ArgumentsRefusal");
    assert.ok(refusal, "a refusal resource is registered");
    assert.equal(refusal.name, "bad-arguments");
    assert.equal(
      registered.filter((r) => r.type.startsWith("kubernetes:") && r.name.startsWith("bad")).length,
      0,
      "nothing of the fleet is declared",
    );
    const urn =
      "urn:pulumi:s::p::cocoonset:index:Fleet$cocoonset:index:ArgumentsRefusal::bad-arguments";
    const checked = await p.check!(urn, {}, refusal.inputs);
    const failures = (checked.failures ?? []).map((f) => f.property).sort();
    assert.deepEqual(failures, ["spec.agent.image", "spec.agent.replicas"]);
    const replicas = checked.failures?.find((f) => f.property === "spec.agent.replicas");
    assert.match(replicas?.reason ?? "", /must be >= 0 \(got -1\)/);
  });

  it("keep a problem without a path as the resource's own", () => {
    const e = new sdk.ArgumentsError("Operator ops", ["[replicas] must be >= 1", "no path here"]);
    assert.deepEqual(e.problems, [
      { propertyPath: "replicas", reason: "must be >= 1" },
      { propertyPath: "", reason: "no path here" },
    ]);
    assert.ok(
      pulumi.RunError.isInstance(e),
      "still printed without a stack in a TypeScript program",
    );
    assert.ok(sdk.ArgumentsError.isInstance({ ...e, __cocoonsetArgumentsError: true }));
  });
});

describe("the Fleet's policy arguments from another language", () => {
  it("join the spec the CocoonSet and the slots get; one given twice is refused by its name", async () => {
    const p = plugin.cocoonsetProvider("1.2.3");
    const kubeconfig = "apiVersion: v1\nkind: Config\n";
    const idler = await p.construct!(
      "idler",
      "cocoonset:index:Fleet",
      {
        namespace: "agents",
        kubeconfig,
        spec: { agent: { replicas: 1, image: "agents/coder:1" } },
        idle: { after: "30m" },
        expiry: { after: "24h", since: "idle" },
        hooks: { url: "https://hooks.example.com/c", failurePolicy: "Ignore" },
      },
      {},
    );
    await settle((idler.state as { podNames: pulumi.Output<unknown> }).podNames);
    const want = {
      agent: { replicas: 1, image: "agents/coder:1" },
      idle: { after: "30m" },
      expiry: { after: "24h", since: "idle" },
      hooks: { url: "https://hooks.example.com/c", failurePolicy: "Ignore" },
    };
    const slots = registered.find(
      (r) => r.type === "cocoonset:index:Slots" && r.name === "idler-slots",
    );
    assert.deepEqual(slots?.inputs.spec, want);
    const cr = registered.find(
      (r) => r.type.startsWith("kubernetes:") && r.name === "idler-cocoonset",
    );
    assert.deepEqual((cr?.inputs as { spec?: unknown } | undefined)?.spec, want);

    const built = await p.construct!(
      "twice",
      "cocoonset:index:Fleet",
      {
        namespace: "agents",
        kubeconfig,
        spec: { agent: { image: "agents/coder:1" }, idle: { after: "1h" } },
        idle: { after: "30m" },
      },
      {},
    );
    assert.deepEqual(built.state, {});
    const refusal = registered.find(
      (r) => r.type === "cocoonset:index:ArgumentsRefusal" && r.name === "twice-arguments",
    );
    assert.deepEqual(refusal?.inputs.problems, [
      {
        propertyPath: "idle",
        reason: "is given twice, as the Fleet's `idle` and as `spec.idle`; keep one of them",
      },
    ]);
  });
});
