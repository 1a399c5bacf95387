import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { buildAgentPod, buildToolboxPod } from "../../../engine/pods/index.js";
import { PLACEHOLDER_IMAGE } from "../../../engine/spec/constants.js";
import type { PodManifest } from "../../../engine/spec/index.js";
import { cocoonSet, toolbox } from "./fixtures.js";

const owner = {
  apiVersion: "cocoonset.cocoonstack.io/v1",
  kind: "CocoonSet",
  name: "demo",
  uid: "uid-demo",
  controller: true,
  blockOwnerDeletion: true,
};

const tolerations = [
  { key: "virtual-kubelet.io/provider", operator: "Exists" },
  { key: "node.kubernetes.io/not-ready", operator: "Exists", effect: "NoExecute" },
  { key: "node.kubernetes.io/unreachable", operator: "Exists", effect: "NoExecute" },
];

describe("buildAgentPod", () => {
  it("builds the main agent pod with exactly the SPEC section 2 shape", () => {
    const cs = cocoonSet(
      { nodePool: "gpu", snapshotCompatibilityClass: "n2-v1", nodeName: "node-7" },
      {
        replicas: 2,
        mode: "run",
        os: "windows",
        backend: "firecracker",
        connType: "rdp",
        network: "lan",
        forcePull: true,
        noDirectIO: true,
        probePort: 3389,
        storage: "20Gi",
        resources: { limits: { cpu: 2, memory: "4Gi" }, requests: { cpu: "500m" } },
        envFrom: [{ secretRef: { name: "tokens" } }],
        serviceAccountName: "agents",
      },
    );
    const expected: PodManifest = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: {
        name: "demo-0",
        namespace: "team",
        labels: {
          "cocoonset.cocoonstack.io/name": "demo",
          "cocoonset.cocoonstack.io/role": "main",
          "cocoonset.cocoonstack.io/slot": "0",
          "app.kubernetes.io/name": "demo",
          "app.kubernetes.io/managed-by": "cocoonset",
          // The fleet's shard bucket: team/demo's, stable across releases.
          "cocoonset.cocoonstack.io/shard-bucket": "175",
        },
        annotations: {
          "vm.cocoonstack.io/name": "vk-team-demo-0",
          "cocoonset.cocoonstack.io/image": "ghcr.io/acme/agent:1",
          "cocoonset.cocoonstack.io/mode": "run",
          "cocoonset.cocoonstack.io/os": "windows",
          "cocoonset.cocoonstack.io/storage": "20Gi",
          "cocoonset.cocoonstack.io/network": "lan",
          "cocoonset.cocoonstack.io/snapshot-policy": "always",
          "cocoonset.cocoonstack.io/managed": "true",
          "cocoonset.cocoonstack.io/force-pull": "true",
          "cocoonset.cocoonstack.io/generation": "3",
          "vm.cocoonstack.io/conn-type": "rdp",
          "vm.cocoonstack.io/backend": "firecracker",
          "vm.cocoonstack.io/no-direct-io": "true",
          "vm.cocoonstack.io/probe-port": "3389",
        },
        ownerReferences: [owner],
      },
      spec: {
        containers: [
          {
            name: "agent",
            image: PLACEHOLDER_IMAGE,
            resources: {
              limits: { cpu: "2", memory: "4Gi", "ephemeral-storage": "20Gi" },
              requests: { cpu: "500m", "ephemeral-storage": "20Gi" },
            },
            envFrom: [{ secretRef: { name: "tokens" } }],
          },
        ],
        terminationGracePeriodSeconds: 1,
        tolerations,
        nodeSelector: {
          "cocoonstack.io/pool": "gpu",
          "cocoonstack.io/snapshot-cpu-class": "n2-v1",
        },
        serviceAccountName: "agents",
        affinity: {
          nodeAffinity: {
            requiredDuringSchedulingIgnoredDuringExecution: {
              nodeSelectorTerms: [
                {
                  matchExpressions: [
                    { key: "kubernetes.io/hostname", operator: "In", values: ["node-7"] },
                  ],
                },
              ],
            },
          },
        },
      },
    };
    assert.deepEqual(buildAgentPod(cs, 0), expected);
  });

  it("omits empty values, false flags and a zero probe port; writes the defaults", () => {
    const pod = buildAgentPod(cocoonSet({}, { probePort: 0, forcePull: false, network: "" }), 0);
    assert.deepEqual(pod.metadata.annotations, {
      "vm.cocoonstack.io/name": "vk-team-demo-0",
      "cocoonset.cocoonstack.io/image": "ghcr.io/acme/agent:1",
      "cocoonset.cocoonstack.io/mode": "clone",
      "cocoonset.cocoonstack.io/os": "linux",
      "cocoonset.cocoonstack.io/snapshot-policy": "always",
      "cocoonset.cocoonstack.io/managed": "true",
      "cocoonset.cocoonstack.io/generation": "3",
      "vm.cocoonstack.io/backend": "cloud-hypervisor",
    });
    assert.deepEqual(pod.spec.nodeSelector, { "cocoonstack.io/pool": "default" });
    assert.deepEqual(pod.spec.containers, [{ name: "agent", image: PLACEHOLDER_IMAGE }]);
    assert.equal(pod.spec.serviceAccountName, undefined);
    assert.equal(pod.spec.affinity, undefined);
    assert.equal(pod.spec.nodeName, undefined);
  });

  it("forks a sub-agent from the main VM and binds it to the main agent's node", () => {
    const cs = cocoonSet({ nodeName: "node-7" }, { replicas: 3 });
    const pod = buildAgentPod(cs, 3, { mainVMName: "vk-team-demo-0", mainNodeName: "node-a" });
    assert.equal(pod.metadata.name, "demo-3");
    assert.equal(pod.metadata.labels["cocoonset.cocoonstack.io/role"], "sub-agent");
    assert.equal(pod.metadata.labels["cocoonset.cocoonstack.io/slot"], "3");
    assert.equal(pod.metadata.annotations["vm.cocoonstack.io/name"], "vk-team-demo-3");
    assert.equal(pod.metadata.annotations["vm.cocoonstack.io/fork-from"], "vk-team-demo-0");
    assert.equal(pod.spec.nodeName, "node-a");
    assert.equal(pod.spec.affinity, undefined, "the hard bind replaces the main agent's affinity");
  });

  it("forks from the conventional main VM name when the main agent's is not given", () => {
    const pod = buildAgentPod(cocoonSet({}, { replicas: 1 }), 1);
    assert.equal(pod.metadata.annotations["vm.cocoonstack.io/fork-from"], "vk-team-demo-0");
    assert.equal(pod.spec.nodeName, undefined);
  });

  it("omits the generation annotation when the CocoonSet has no generation yet", () => {
    const cs = cocoonSet();
    delete cs.metadata.generation;
    assert.equal(
      buildAgentPod(cs, 0).metadata.annotations["cocoonset.cocoonstack.io/generation"],
      undefined,
    );
  });
});

describe("buildToolboxPod", () => {
  it("builds a managed toolbox pod without the agent-only fields", () => {
    const cs = cocoonSet(
      { snapshotPolicy: "main-only" },
      { envFrom: [{ configMapRef: { name: "env" } }], serviceAccountName: "agents" },
    );
    const pod = buildToolboxPod(cs, toolbox("web", { connType: "vnc", storage: "5Gi" }));
    assert.deepEqual(pod.metadata.labels, {
      "cocoonset.cocoonstack.io/name": "demo",
      "cocoonset.cocoonstack.io/role": "toolbox",
      "cocoonset.cocoonstack.io/slot": "web",
      "app.kubernetes.io/name": "demo",
      "app.kubernetes.io/managed-by": "cocoonset",
      "cocoonset.cocoonstack.io/shard-bucket": "175",
    });
    assert.deepEqual(pod.metadata.annotations, {
      "vm.cocoonstack.io/name": "vk-team-demo-web",
      "cocoonset.cocoonstack.io/image": "ghcr.io/acme/web:1",
      "cocoonset.cocoonstack.io/mode": "run",
      "cocoonset.cocoonstack.io/os": "linux",
      "cocoonset.cocoonstack.io/storage": "5Gi",
      "cocoonset.cocoonstack.io/snapshot-policy": "main-only",
      "cocoonset.cocoonstack.io/managed": "true",
      "cocoonset.cocoonstack.io/generation": "3",
      "vm.cocoonstack.io/conn-type": "vnc",
      "vm.cocoonstack.io/backend": "cloud-hypervisor",
    });
    assert.equal(pod.metadata.name, "demo-web");
    assert.deepEqual(pod.metadata.ownerReferences, [owner]);
    assert.deepEqual(pod.spec.containers, [
      {
        name: "agent",
        image: PLACEHOLDER_IMAGE,
        resources: {
          limits: { "ephemeral-storage": "5Gi" },
          requests: { "ephemeral-storage": "5Gi" },
        },
      },
    ]);
    assert.equal(pod.spec.serviceAccountName, undefined);
    assert.deepEqual(pod.spec.tolerations, tolerations);
    assert.equal(pod.spec.terminationGracePeriodSeconds, 1);
  });

  it("gives a static toolbox its VM id, IP and VNC port, and does not mark it managed", () => {
    const spec = toolbox("desk", {
      mode: "static",
      staticVMID: "vm-9",
      staticIP: "10.0.0.9",
      vncPort: 5901,
    });
    const annotations = buildToolboxPod(cocoonSet(), spec).metadata.annotations;
    assert.equal(annotations["cocoonset.cocoonstack.io/managed"], undefined);
    assert.equal(annotations["cocoonset.cocoonstack.io/mode"], "static");
    assert.equal(annotations["vm.cocoonstack.io/id"], "vm-9");
    assert.equal(annotations["vm.cocoonstack.io/ip"], "10.0.0.9");
    assert.equal(annotations["vm.cocoonstack.io/vnc-port"], "5901");
  });

  it("does not write the static annotations for a managed toolbox", () => {
    const spec = toolbox("web", { staticVMID: "vm-9", vncPort: 5901 });
    const annotations = buildToolboxPod(cocoonSet(), spec).metadata.annotations;
    assert.equal(annotations["vm.cocoonstack.io/id"], undefined);
    assert.equal(annotations["vm.cocoonstack.io/vnc-port"], undefined);
  });
});
