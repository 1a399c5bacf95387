/**
 * The controller's pod cache holds pods trimmed to what the engine reads (`trimPodForCache`):
 * every decision the engine makes from a pod (drift, classification, readiness, the VM's
 * state, the member's phase, the requests the capacity counts) is the same on the trimmed pod
 * as on the pod as the apiserver sent it, and what the apiserver and kubelet add is gone.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { trimPodForCache } from "../../../controller/informer.js";
import { podRequests } from "../../../engine/capacity/requests.js";
import { memberPhase, memberReady } from "../../../engine/plan/status.js";
import {
  agentDrift,
  classifyPods,
  isReady,
  isTerminal,
  toolboxDrift,
  vmLive,
} from "../../../engine/pods/index.js";
import type { KubeObject } from "../../../engine/kube/index.js";
import type { CocoonSet, Pod } from "../../../engine/spec/index.js";
import live from "../fleet/fixtures/apiserver-defaulted.json" with { type: "json" };

const cs = live.cocoonSet as unknown as CocoonSet;

/** The fixture's pods with what a kubelet reports and server-side apply records added. */
function reported(phase: string, ready: boolean): Pod[] {
  return (structuredClone(live.pods) as unknown as Pod[]).map((pod) => {
    const full = pod as Pod & Record<string, unknown>;
    (full.metadata as Record<string, unknown>).managedFields = [
      { manager: "kube-controller-manager", operation: "Update", fieldsV1: { "f:spec": {} } },
    ];
    const spec = full.spec as unknown as Record<string, unknown>;
    spec.volumes = [
      { name: "kube-api-access", projected: { sources: [{ serviceAccountToken: {} }] } },
    ];
    spec.initContainers = [
      {
        name: "sidecar",
        image: "s",
        restartPolicy: "Always",
        resources: { requests: { cpu: "100m" } },
      },
    ];
    spec.overhead = { cpu: "50m" };
    for (const c of spec.containers as Record<string, unknown>[]) {
      c.terminationMessagePath = "/dev/termination-log";
      c.imagePullPolicy = "IfNotPresent";
      c.ports = [{ containerPort: 22 }];
      c.readinessProbe = { tcpSocket: { port: 22 }, periodSeconds: 10 };
    }
    full.status = {
      phase,
      reason: phase === "Failed" ? "OutOfcpu" : undefined,
      podIP: "10.0.0.7",
      startTime: "2026-12-01T00:00:00Z",
      conditions: [
        { type: "Ready", status: ready ? "True" : "False", reason: ready ? undefined : "NotReady" },
        { type: "PodScheduled", status: "True" },
      ],
      containerStatuses: [
        {
          name: "agent",
          state: ready
            ? { running: { startedAt: "2026-12-01T00:00:01Z" } }
            : { waiting: { reason: "X" } },
          ready,
          restartCount: 0,
          image: "i",
          imageID: "sha256:0",
          containerID: "containerd://0",
        },
      ],
      qosClass: "Burstable",
      hostIP: "172.18.0.2",
    } as unknown as Pod["status"];
    return full;
  });
}

const trimmed = (pods: Pod[]): Pod[] =>
  pods.map((p) => trimPodForCache(structuredClone(p) as KubeObject) as Pod);

/** A classification with each pod replaced by its name. */
function names(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(names);
  if (value && typeof value === "object") {
    const meta = (value as Pod).metadata;
    if (meta?.name !== undefined && (value as Pod).spec !== undefined) return meta.name;
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, names(v)]));
  }
  return value;
}

describe("the controller's pods trimmed for the cache", () => {
  for (const [phase, ready] of [
    ["Running", true],
    ["Pending", false],
    ["Failed", false],
  ] as const) {
    it(`decide as the apiserver's pods do (${phase}${ready ? ", Ready" : ""})`, () => {
      const full = reported(phase, ready);
      const cut = trimmed(full);
      const [main, sub, web] = full;
      const [cMain, cSub, cWeb] = cut;
      assert.deepEqual(agentDrift(cs, 0, cMain), agentDrift(cs, 0, main));
      assert.deepEqual(agentDrift(cs, 1, cSub), agentDrift(cs, 1, sub));
      assert.deepEqual(
        toolboxDrift(cs, cs.spec.toolboxes![0], cWeb),
        toolboxDrift(cs, cs.spec.toolboxes![0], web),
      );
      // A changed spec drifts alike on both.
      const changed = structuredClone(cs);
      changed.spec.agent.image = "example.com/other:2";
      changed.spec.agent.serviceAccountName = "other";
      assert.deepEqual(agentDrift(changed, 1, cSub), agentDrift(changed, 1, sub));
      assert.notDeepEqual(agentDrift(changed, 1, cSub), []);
      // Each pod classified alike (by name: the objects differ).
      assert.deepEqual(names(classifyPods(cs, cut)), names(classifyPods(cs, full)));
      for (const [i, pod] of full.entries()) {
        const c = cut[i];
        assert.equal(isReady(c), isReady(pod));
        assert.equal(isTerminal(c), isTerminal(pod));
        assert.equal(vmLive(c), vmLive(pod));
        assert.equal(memberReady(c), memberReady(pod));
        assert.equal(memberPhase(c), memberPhase(pod));
        assert.deepEqual(podRequests(c), podRequests(pod));
      }
    });
  }

  it("keep the metadata whole and drop what the engine never reads", () => {
    const [, pod] = trimmed(reported("Running", true));
    const [, full] = reported("Running", true);
    delete (full.metadata as Record<string, unknown>).managedFields;
    assert.deepEqual(pod.metadata, full.metadata);
    assert.deepEqual(Object.keys(pod.spec!).sort(), [
      "containers",
      "initContainers",
      "nodeName",
      "nodeSelector",
      "overhead",
      "serviceAccountName",
      "terminationGracePeriodSeconds",
      "tolerations",
    ]);
    assert.deepEqual(Object.keys(pod.spec!.containers[0]).sort(), [
      "envFrom",
      "image",
      "name",
      "resources",
    ]);
    assert.deepEqual(Object.keys(pod.status!).sort(), [
      "conditions",
      "containerStatuses",
      "phase",
      "podIP",
      "startTime",
    ]);
    assert.deepEqual(pod.status!.containerStatuses, [{ name: "agent", state: { running: {} } }]);
  });
});
