import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { agentDrift, toolboxDrift } from "../../../engine/pods/index.js";
import type { AgentSpec } from "../../../engine/spec/generated/types.js";
import type { CocoonSet, CocoonSetSpec, Pod } from "../../../engine/spec/index.js";
import live from "./fixtures/apiserver-defaulted.json" with { type: "json" };
import {
  cocoonSet,
  failed,
  mainPod,
  subPod,
  toolbox,
  toolboxPod,
  withAnnotations,
} from "./fixtures.js";

const base: Partial<AgentSpec> = {
  replicas: 2,
  storage: "10Gi",
  network: "lan",
  connType: "ssh",
  probePort: 22,
  resources: { limits: { cpu: "2", memory: "4Gi" }, requests: { cpu: "1", memory: "2Gi" } },
  envFrom: [{ configMapRef: { name: "env" } }],
  serviceAccountName: "agents",
};

const original = cocoonSet({ nodePool: "default" }, base);

/** Drift of slot 1 when the spec changes to `spec`/`agent` after the pod was built. */
function driftAfter(spec: Partial<CocoonSetSpec>, agent: Partial<AgentSpec>): string[] {
  const changed: CocoonSet = cocoonSet({ nodePool: "default", ...spec }, { ...base, ...agent });
  return [...agentDrift(changed, 1, subPod(original, 1))];
}

describe("agentDrift compares every VM and pod field SPEC section 3 lists", () => {
  const compared: [string, Partial<CocoonSetSpec>, Partial<AgentSpec>, string[]][] = [
    ["image", {}, { image: "ghcr.io/acme/agent:2" }, ["image"]],
    ["mode", {}, { mode: "run" }, ["mode"]],
    ["os", {}, { os: "android" }, ["os"]],
    ["backend", {}, { backend: "firecracker" }, ["backend"]],
    ["connType", {}, { connType: "adb" }, ["connType"]],
    ["network", {}, { network: "wan" }, ["network"]],
    ["storage", {}, { storage: "20Gi" }, ["storage"]],
    ["forcePull", {}, { forcePull: true }, ["forcePull"]],
    ["noDirectIO", {}, { noDirectIO: true }, ["noDirectIO"]],
    ["probePort", {}, { probePort: 8080 }, ["probePort"]],
    ["snapshotPolicy", { snapshotPolicy: "never" }, {}, ["snapshotPolicy"]],
    [
      "cpu limit",
      {},
      { resources: { limits: { cpu: "4", memory: "4Gi" }, requests: { cpu: "1", memory: "2Gi" } } },
      ["resources.limits.cpu"],
    ],
    [
      "memory request",
      {},
      { resources: { limits: { cpu: "2", memory: "4Gi" }, requests: { cpu: "1", memory: "3Gi" } } },
      ["resources.requests.memory"],
    ],
    ["serviceAccountName", {}, { serviceAccountName: "other" }, ["serviceAccountName"]],
    ["envFrom", {}, { envFrom: [{ secretRef: { name: "env" } }] }, ["envFrom"]],
    ["node pool", { nodePool: "gpu" }, {}, ["nodePool"]],
  ];
  for (const [title, spec, agent, expected] of compared) {
    it(`a changed ${title} is drift`, () => assert.deepEqual(driftAfter(spec, agent), expected));
  }

  it("reports several drifted fields at once", () => {
    assert.deepEqual(driftAfter({}, { image: "x", os: "macos" }), ["image", "os"]);
  });
});

describe("agentDrift ignores what SPEC section 3 says is not compared", () => {
  const pod = subPod(original, 1);
  const cases: [string, Pod, CocoonSet][] = [
    ["a different node", { ...pod, spec: { ...pod.spec!, nodeName: "node-z" } }, original],
    ["an affinity", { ...pod, spec: { ...pod.spec!, affinity: { nodeAffinity: {} } } }, original],
    ["other tolerations", { ...pod, spec: { ...pod.spec!, tolerations: [] } }, original],
    ["other labels", { ...pod, metadata: { ...pod.metadata, labels: { extra: "yes" } } }, original],
    ["a changed replica count", pod, cocoonSet({ nodePool: "default" }, { ...base, replicas: 9 })],
    ["a changed nodeName in the spec", pod, cocoonSet({ nodeName: "node-9" }, base)],
    [
      "a sub-agent's own fork-from",
      withAnnotations(pod, { "vm.cocoonstack.io/fork-from": "vk-old-0" }),
      original,
    ],
    [
      "the pod's own VM name",
      withAnnotations(pod, { "vm.cocoonstack.io/name": "vk-legacy" }),
      original,
    ],
    [
      "a changed generation",
      withAnnotations(pod, { "cocoonset.cocoonstack.io/generation": "1" }),
      original,
    ],
    [
      "runtime annotations",
      withAnnotations(pod, { "vm.cocoonstack.io/id": "vm-1", "vm.cocoonstack.io/ip": "10.0.0.1" }),
      original,
    ],
  ];
  for (const [title, livePod, cs] of cases) {
    it(`${title} is not drift`, () => assert.deepEqual(agentDrift(cs, 1, livePod), []));
  }

  it("a fork-from on the main agent is drift (it must not fork)", () => {
    const main = withAnnotations(mainPod(original), { "vm.cocoonstack.io/fork-from": "vk-x-0" });
    assert.deepEqual(agentDrift(original, 0, main), ["forkFrom"]);
  });
});

describe("agentDrift normalises what the apiserver rewrites", () => {
  it("finds no drift in pods the apiserver stored and defaulted", () => {
    const cs = live.cocoonSet as unknown as CocoonSet;
    const [main, sub, web] = live.pods as unknown as Pod[];
    assert.deepEqual(agentDrift(cs, 0, main), []);
    assert.deepEqual(agentDrift(cs, 1, sub), []);
    assert.deepEqual(toolboxDrift(cs, cs.spec.toolboxes![0], web), []);
  });

  it("compares quantities by value: 1Gi equals 1024Mi and 1 equals 1000m", () => {
    const pod = subPod(original, 1);
    pod.spec!.containers[0].resources = {
      limits: { cpu: "2000m", memory: "4096Mi", "ephemeral-storage": "99Gi" },
      requests: { cpu: "1000m", memory: "2048Mi" },
    };
    const renamed = withAnnotations(pod, { "cocoonset.cocoonstack.io/storage": "10240Mi" });
    assert.deepEqual(agentDrift(original, 1, renamed), []);
  });

  it("compares requests with the spec limits when the spec has no requests", () => {
    const cs = cocoonSet({}, { resources: { limits: { cpu: "2", memory: "1Gi" } } });
    const pod = mainPod(cs);
    assert.deepEqual(agentDrift(cs, 0, pod), [], "as built: requests absent");
    pod.spec!.containers[0].resources = {
      limits: { cpu: "2", memory: "1Gi" },
      requests: { cpu: "2", memory: "1Gi" },
    };
    assert.deepEqual(agentDrift(cs, 0, pod), [], "as defaulted: requests copied from limits");
    pod.spec!.containers[0].resources.requests = { cpu: "1", memory: "1Gi" };
    assert.deepEqual(agentDrift(cs, 0, pod), ["resources.requests.cpu"]);
  });

  it("falls back to the limit per resource when only some requests are set", () => {
    const cs = cocoonSet({}, { resources: { limits: { cpu: "2" }, requests: { memory: "1Gi" } } });
    const pod = mainPod(cs);
    pod.spec!.containers[0].resources = {
      limits: { cpu: "2" },
      requests: { cpu: "2", memory: "1Gi" },
    };
    assert.deepEqual(agentDrift(cs, 0, pod), []);
  });

  it("ignores ephemeral-storage in resources", () => {
    const pod = subPod(original, 1);
    pod.spec!.containers[0].resources!.limits!["ephemeral-storage"] = "1Ti";
    assert.deepEqual(agentDrift(original, 1, pod), []);
  });

  it("treats an empty service account as default", () => {
    const cs = cocoonSet({}, {});
    const pod = mainPod(cs);
    pod.spec!.serviceAccountName = "default";
    assert.deepEqual(agentDrift(cs, 0, pod), []);
    assert.deepEqual(
      agentDrift(cocoonSet({}, { serviceAccountName: "default" }), 0, mainPod(cs)),
      [],
    );
  });

  it("treats a missing envFrom as an empty one", () => {
    const cs = cocoonSet({}, { envFrom: [] });
    const pod = mainPod(cocoonSet());
    assert.deepEqual(agentDrift(cs, 0, pod), []);
    pod.spec!.containers[0].envFrom = [];
    assert.deepEqual(agentDrift(cocoonSet(), 0, pod), []);
  });

  it("treats a missing boolean annotation as false", () => {
    const pod = withAnnotations(subPod(original, 1), {
      "cocoonset.cocoonstack.io/force-pull": "false",
    });
    assert.deepEqual(agentDrift(original, 1, pod), []);
  });
});

describe("snapshot class drift", () => {
  const classed = cocoonSet({ snapshotCompatibilityClass: "n2-v1" });

  it("adopts a healthy pod that has no class selector", () => {
    assert.deepEqual(agentDrift(classed, 0, mainPod(cocoonSet())), []);
  });

  it("replaces a terminal pod that has no class selector", () => {
    assert.deepEqual(agentDrift(classed, 0, failed(mainPod(cocoonSet()))), [
      "snapshotCompatibilityClass",
    ]);
  });

  it("replaces a pod selecting another class", () => {
    const other = mainPod(cocoonSet({ snapshotCompatibilityClass: "n1-v1" }));
    assert.deepEqual(agentDrift(classed, 0, other), ["snapshotCompatibilityClass"]);
  });

  it("replaces a pod with a class selector when the spec has none", () => {
    assert.deepEqual(agentDrift(cocoonSet(), 0, mainPod(classed)), ["snapshotCompatibilityClass"]);
  });
});

describe("toolboxDrift", () => {
  const web = toolbox("web", { connType: "vnc" });
  const cs = cocoonSet({ toolboxes: [web] });

  it("finds no drift in a freshly built toolbox", () => {
    assert.deepEqual(toolboxDrift(cs, web, toolboxPod(cs, web)), []);
  });

  it("compares the VM fields, resources and pool like agents", () => {
    const pod = toolboxPod(cs, web);
    assert.deepEqual(toolboxDrift(cs, { ...web, image: "ghcr.io/acme/web:2" }, pod), ["image"]);
    assert.deepEqual(toolboxDrift(cs, { ...web, mode: "clone" }, pod), ["mode"]);
    assert.deepEqual(toolboxDrift(cs, { ...web, resources: { limits: { cpu: 1 } } }, pod), [
      "resources.limits.cpu",
      "resources.requests.cpu",
    ]);
    assert.deepEqual(toolboxDrift(cocoonSet({ nodePool: "b" }), web, pod), ["nodePool"]);
  });

  it("does not compare agent-only fields", () => {
    const pod = toolboxPod(cs, web);
    pod.spec!.serviceAccountName = "other";
    assert.deepEqual(toolboxDrift(cs, web, pod), []);
  });

  it("compares a static toolbox's VM id, IP and VNC port annotations", () => {
    const desk = toolbox("desk", {
      mode: "static",
      staticVMID: "vm-1",
      staticIP: "10.0.0.5",
      vncPort: 5900,
    });
    const pod = toolboxPod(cs, desk);
    assert.deepEqual(toolboxDrift(cs, desk, pod), []);
    assert.deepEqual(toolboxDrift(cs, { ...desk, staticVMID: "vm-2" }, pod), ["staticVMID"]);
    assert.deepEqual(toolboxDrift(cs, { ...desk, staticIP: "10.0.0.6" }, pod), ["staticIP"]);
    assert.deepEqual(toolboxDrift(cs, { ...desk, vncPort: 5901 }, pod), ["vncPort"]);
  });

  it("flags the managed marker when a toolbox switches to or from static", () => {
    const pod = toolboxPod(cs, web);
    assert.deepEqual(toolboxDrift(cs, { ...web, mode: "static" }, pod), ["mode", "managed"]);
  });
});
