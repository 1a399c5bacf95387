/**
 * How the Fleet's and the Operator's `ignoreChanges` map onto their children, and which
 * options (aliases included) the children get. Pure: no engine (the SDK's mocks give the
 * aliases a project and a stack), no cluster.
 */
import * as pulumi from "@pulumi/pulumi";
import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import {
  childAliases,
  childOptions,
  componentOptions,
  fleetIgnoreChanges,
  operatorIgnoreChanges,
} from "../../../sdk/resource-options.js";

void describe("fleetIgnoreChanges", () => {
  const table: [string[], { cocoonSet: string[]; slots: string[]; guard: string[] }][] = [
    [[], { cocoonSet: [], slots: [], guard: [] }],
    [["spec"], { cocoonSet: ["spec"], slots: ["spec"], guard: ["spec"] }],
    [
      ["idle", "hooks.url"],
      {
        cocoonSet: ["spec.idle", "spec.hooks.url"],
        slots: ["spec.idle", "spec.hooks.url"],
        guard: ["spec.idle", "spec.hooks.url"],
      },
    ],
    [
      ["spec.agent.image", "spec.toolboxes[0].image"],
      {
        cocoonSet: ["spec.agent.image", "spec.toolboxes[0].image"],
        slots: ["spec.agent.image", "spec.toolboxes[0].image"],
        guard: ["spec.agent.image", "spec.toolboxes[0].image"],
      },
    ],
    [
      ["namespace"],
      { cocoonSet: ["metadata.namespace"], slots: ["namespace"], guard: ["namespace"] },
    ],
    [
      ["fanOut", "kubeconfig"],
      { cocoonSet: [], slots: ["fanOut", "kubeconfig"], guard: ["fanOut"] },
    ],
    [["registryCredentials"], { cocoonSet: [], slots: ["registryCredentials"], guard: [] }],
    [["timeoutSeconds"], { cocoonSet: [], slots: ["timeoutSeconds"], guard: [] }],
    [["skipAwait"], { cocoonSet: [], slots: ["skipAwait"], guard: [] }],
    [["capacityCheck"], { cocoonSet: [], slots: ["capacityCheck"], guard: ["capacityCheck"] }],
    [
      ["*"],
      {
        cocoonSet: ["*"],
        slots: ["*"],
        guard: ["spec", "namespace", "fanOut", "capacityCheck"],
      },
    ],
  ];
  for (const [paths, want] of table) {
    it(`maps ${JSON.stringify(paths)}`, () => {
      assert.deepEqual(fleetIgnoreChanges("f", paths), want);
    });
  }
  it("maps nothing when the option is absent", () => {
    assert.deepEqual(fleetIgnoreChanges("f", undefined), { cocoonSet: [], slots: [], guard: [] });
  });
  for (const bad of [
    "metadata.labels",
    "operator",
    "specs",
    "fanOut.x",
    "registryCredentials.password",
    "name",
    "",
  ]) {
    it(`refuses ${JSON.stringify(bad)}, naming the option and the path`, () => {
      assert.throws(
        () => fleetIgnoreChanges("coder", [bad]),
        (e: Error) =>
          e.message.startsWith("Fleet coder: [ignoreChanges] ") &&
          e.message.includes(JSON.stringify(bad)),
      );
    });
  }
});

void describe("operatorIgnoreChanges", () => {
  it("maps image to the container and the rollout check, replicas and resources to the Deployment", () => {
    assert.deepEqual(operatorIgnoreChanges("op", ["image", "replicas", "resources.limits"]), {
      deployment: [
        "spec.template.spec.containers[0].image",
        "spec.replicas",
        "spec.template.spec.containers[0].resources.limits",
      ],
      rollout: ["image"],
    });
  });
  for (const bad of ["namespace", "image.tag", "*", "concurrency"]) {
    it(`refuses ${JSON.stringify(bad)}, naming the option and the path`, () => {
      assert.throws(
        () => operatorIgnoreChanges("op", [bad]),
        (e: Error) =>
          e.message.startsWith("Operator op: [ignoreChanges] ") &&
          e.message.includes(JSON.stringify(bad)),
      );
    });
  }
});

void describe("child and component options", () => {
  it("passes retainOnDelete on, whether true or false, and nothing when absent", () => {
    assert.deepEqual(childOptions({ retainOnDelete: true, protect: true }), {
      retainOnDelete: true,
    });
    assert.deepEqual(childOptions({ retainOnDelete: false }), { retainOnDelete: false });
    assert.deepEqual(childOptions({}), {});
  });
  it("keeps every option of the component but ignoreChanges", () => {
    const opts = { protect: true, ignoreChanges: ["spec"], retainOnDelete: true };
    assert.deepEqual(componentOptions(opts), { protect: true, retainOnDelete: true });
    assert.deepEqual(opts.ignoreChanges, ["spec"], "the caller's options are left alone");
  });
});

void describe("childAliases", () => {
  before(async () => {
    await pulumi.runtime.setMocks(
      {
        newResource: (a) => ({ id: `${a.name}-id`, state: a.inputs as Record<string, unknown> }),
        call: () => ({}),
      },
      "proj",
      "dev",
    );
  });
  const FLEET = "cocoonset:index:Fleet";
  /** The child aliases of component `name` with `opts`, for the child `child`, resolved. */
  const resolved = (name: string, opts: pulumi.ComponentResourceOptions, child: string) =>
    Promise.all(
      (childAliases(name, FLEET, opts)(child).aliases ?? []).map(
        (a) =>
          new Promise<pulumi.Unwrap<pulumi.Alias>>((done) =>
            pulumi.output(a as pulumi.Alias).apply(done),
          ),
      ),
    );
  const urn = (rest: string) => `urn:pulumi:dev::proj::${rest}`;

  it("gives a component without aliases' children none", () => {
    assert.deepEqual(childAliases("fa", FLEET, {})("fa-guard"), {});
    assert.deepEqual(childAliases("fa", FLEET, { aliases: [] })("fa-guard"), {});
  });
  it("renames a child's prefix with the component (an aliased rename)", async () => {
    assert.deepEqual(await resolved("fa2", { aliases: [{ name: "fa" }] }, "fa2-slots"), [
      { name: "fa-slots", parent: urn(`${FLEET}::fa`), project: "proj", stack: "dev" },
    ]);
  });
  it("puts a child under the component's old parent (a parent move), the stack for none", async () => {
    const group = new pulumi.ComponentResource("e2e:index:Group", "grp");
    assert.deepEqual(
      await resolved(
        "fa",
        { parent: group, aliases: [{ parent: pulumi.rootStackResource }] },
        "fa-guard",
      ),
      [{ name: "fa-guard", parent: urn(`${FLEET}::fa`), project: "proj", stack: "dev" }],
    );
    assert.deepEqual(await resolved("fa", { aliases: [{ parent: group }] }, "fa-cocoonset"), [
      {
        name: "fa-cocoonset",
        parent: urn(`e2e:index:Group$${FLEET}::fa`),
        project: "proj",
        stack: "dev",
      },
    ]);
    assert.deepEqual(
      await resolved("fa", { aliases: [{ parent: urn("e2e:index:Group::grp") }] }, "fa-guard"),
      [
        {
          name: "fa-guard",
          parent: urn(`e2e:index:Group$${FLEET}::fa`),
          project: "proj",
          stack: "dev",
        },
      ],
    );
  });
  it("takes the old stack and project from an alias given as a URN, and keeps a name without the prefix", async () => {
    const old = `urn:pulumi:old-stack::old-proj::e2e:index:Group$${FLEET}::coder`;
    assert.deepEqual(await resolved("fa", { aliases: [old] }, "fa-guard"), [
      { name: "coder-guard", parent: old, project: "old-proj", stack: "old-stack" },
    ]);
    assert.deepEqual(await resolved("fa", { aliases: [pulumi.output(old)] }, "shared"), [
      { name: "shared", parent: old, project: "old-proj", stack: "old-stack" },
    ]);
  });
  it("gives one alias per alias of the component", async () => {
    const got = await resolved(
      "c",
      { aliases: [{ name: "b" }, { name: "a", stack: "s0" }] },
      "c-x",
    );
    assert.deepEqual(
      got.map((a) => [a.name, a.stack]),
      [
        ["b-x", "dev"],
        ["a-x", "s0"],
      ],
    );
  });
});
