// A pod's requests as the scheduler counts them, and the kubelet's fit check of one pod on a
// node (engine/capacity/requests.ts): tables with hand-computed figures.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  type CapacityPod,
  kubeletFitErrors,
  outOfReason,
  podRequests,
  rejectionMessage,
} from "../../../engine/capacity/index.js";
import { formatQuantity } from "../../../engine/pods/quota-room.js";

type R = Record<string, string>;
const c = (requests: R, restartPolicy?: string) => ({
  resources: { requests },
  ...(restartPolicy && { restartPolicy }),
});

function pod(
  containers: R[],
  opts: {
    init?: { requests: R; sidecar?: boolean }[];
    overhead?: R;
    podLevel?: R;
    phase?: string;
  } = {},
): CapacityPod {
  return {
    spec: {
      containers: containers.map((r) => c(r)),
      initContainers: opts.init?.map((i) => c(i.requests, i.sidecar ? "Always" : undefined)),
      overhead: opts.overhead,
      resources: opts.podLevel && { requests: opts.podLevel },
    },
    status: opts.phase ? { phase: opts.phase } : undefined,
  };
}

const shown = (p: CapacityPod) =>
  Object.fromEntries(Object.entries(podRequests(p)).map(([k, q]) => [k, formatQuantity(q)]));

describe("podRequests", () => {
  const cases: { name: string; pod: CapacityPod; want: R }[] = [
    { name: "no requests", pod: pod([{}]), want: {} },
    {
      name: "containers are summed",
      pod: pod([
        { cpu: "500m", memory: "1Gi" },
        { cpu: "1", memory: "512Mi" },
      ]),
      want: { cpu: "1500m", memory: String(1.5 * 2 ** 30) },
    },
    {
      name: "an init container larger than the containers' sum wins",
      pod: pod([{ cpu: "1" }, { cpu: "1" }], { init: [{ requests: { cpu: "3", memory: "1Ki" } }] }),
      want: { cpu: "3", memory: "1024" },
    },
    {
      name: "init containers count one at a time, not summed",
      pod: pod([{ cpu: "1" }], { init: [{ requests: { cpu: "2" } }, { requests: { cpu: "2" } }] }),
      want: { cpu: "2" },
    },
    {
      name: "a sidecar adds to the containers and to every init container after it",
      pod: pod([{ cpu: "1" }], {
        init: [{ requests: { cpu: "500m" }, sidecar: true }, { requests: { cpu: "2" } }],
      }),
      want: { cpu: "2500m" },
    },
    {
      name: "overhead is added",
      pod: pod([{ cpu: "1" }], { overhead: { cpu: "250m", memory: "64Mi" } }),
      want: { cpu: "1250m", memory: String(64 * 2 ** 20) },
    },
    {
      name: "pod-level cpu and memory replace the containers' sum",
      pod: pod([{ cpu: "1", "example.com/gpu": "1" }], { podLevel: { cpu: "3" } }),
      want: { cpu: "3", "example.com/gpu": "1" },
    },
  ];
  for (const k of cases) it(k.name, () => assert.deepEqual(shown(k.pod), k.want));
});

describe("kubeletFitErrors", () => {
  const node = { cpu: "2", memory: "1Gi", pods: "3", "example.com/gpu": "1" };
  it("fits when there is room", () => {
    assert.deepEqual(kubeletFitErrors(pod([{ cpu: "1" }]), node, [pod([{ cpu: "1" }])]), []);
  });
  it("names cpu in thousandths, with the used and the capacity", () => {
    const [e] = kubeletFitErrors(pod([{ cpu: "250m" }]), node, [pod([{ cpu: "1800m" }])]);
    assert.equal(outOfReason(e), "OutOfcpu");
    assert.equal(
      rejectionMessage(e),
      "Pod was rejected: Node didn't have enough resource: cpu, requested: 250, used: 1800, capacity: 2000",
    );
  });
  it("rounds a fraction of a unit up, per pod", () => {
    const [e] = kubeletFitErrors(pod([{ cpu: "0.0001" }]), { cpu: "1m", pods: "9" }, [
      pod([{ cpu: "0.0001" }]),
    ]);
    assert.deepEqual([e.requested, e.used, e.capacity], [1n, 1n, 1n]);
  });
  it("checks the pods count first, then cpu, memory, ephemeral storage and the rest by name", () => {
    const full = [pod([{}]), pod([{}]), pod([{}])];
    const errs = kubeletFitErrors(
      pod([{ "example.com/gpu": "2", memory: "2Gi", cpu: "3", "ephemeral-storage": "1" }]),
      node,
      full,
    );
    assert.deepEqual(
      errs.map((e) => e.resource),
      ["pods", "cpu", "memory", "ephemeral-storage", "example.com/gpu"],
    );
    assert.deepEqual([errs[0].requested, errs[0].used, errs[0].capacity], [1n, 3n, 3n]);
  });
  it("skips an extended resource the node does not list, but not a native one", () => {
    assert.deepEqual(kubeletFitErrors(pod([{ "example.com/fpga": "4" }]), node, []), []);
    assert.deepEqual(
      kubeletFitErrors(pod([{ "hugepages-2Mi": "2Mi" }]), node, []).map(outOfReason),
      ["OutOfhugepages-2Mi"],
    );
  });
  it("never calls a resource the pod does not request short, even on an overcommitted node", () => {
    assert.deepEqual(kubeletFitErrors(pod([{ memory: "1" }]), node, [pod([{ cpu: "5" }])]), []);
  });
});
