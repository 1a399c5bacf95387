/**
 * How the Fleet's and the Operator's `ignoreChanges` map onto their children, and which
 * options the children get. Pure: no engine, no cluster.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
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
