/**
 * The embedded cluster's simulated nodes refuse a pod bound over their allocatable as a
 * kubelet does (cluster/node-admission.ts), on the real apiserver: the pod turns Failed with
 * `OutOf<resource>` and the kubelet's message, never runs first, and a Warning event names the
 * reason; the node's allocatable is whatever its status says now (a status patch, or
 * `cluster up --node-allocatable`); finished pods free their room, init containers count as
 * the scheduler counts them.
 *
 * Each test has a simulated node of its own (tainted, outside the engine's pool, so nothing
 * else lands there) and follows its pods with a watch started before they exist.
 */
import assert from "node:assert/strict";
import { describe, test, type TestContext } from "node:test";
import { clusterUp, readState } from "../../cluster/local-cluster.js";
import { paths, type KubeObject } from "../../engine/kube/index.js";
import {
  adminClient,
  suffix,
  testClusterDir,
  waitForPodPhase,
  withNamespace,
} from "../support/cluster.js";
import { ObjectHistory } from "../support/object-history.js";
import { setAllocatable, simulatedNode } from "../support/pool-node.js";

const client = adminClient();

interface NodeObject extends KubeObject {
  status?: {
    allocatable?: Record<string, string>;
    conditions?: { type: string; status: string }[];
  };
}

interface PodObject extends KubeObject {
  status?: { phase?: string; reason?: string; message?: string; startTime?: string };
}

/** A simulated node of the test's own, Ready, with the allocatable given (set by a status patch). */
function ownNode(t: TestContext, allocatable: Record<string, string>): Promise<string> {
  return simulatedNode(t, `capacity-${suffix()}`, {
    labels: {},
    taint: { key: "test.cocoonset.cocoonstack.io/capacity" },
    allocatable,
  });
}

function pod(
  name: string,
  node: string,
  requests: Record<string, string>,
  initRequests?: Record<string, string>,
): KubeObject {
  // The apiserver wants an extended resource's limit equal to its request.
  const limits = Object.fromEntries(Object.entries(requests).filter(([k]) => k.includes("/")));
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name },
    spec: {
      nodeName: node,
      containers: [
        { name: "c", image: "registry.invalid/never-pulled", resources: { requests, limits } },
      ],
      ...(initRequests && {
        initContainers: [
          {
            name: "i",
            image: "registry.invalid/never-pulled",
            resources: { requests: initRequests },
          },
        ],
      }),
    },
  };
}

/** Creates the pod and returns every version of it the apiserver delivers. */
async function create(
  t: TestContext,
  ns: string,
  p: KubeObject,
): Promise<ObjectHistory<PodObject>> {
  const h = await ObjectHistory.start<PodObject>(t, client, paths.pods(ns), p.metadata.name ?? "");
  await client.create(paths.pods(ns), p);
  return h;
}

/** Waits for the pod to be refused; asserts it never ran and returns its status. */
async function refused(h: ObjectHistory<PodObject>): Promise<PodObject["status"]> {
  const p = await h.until((o) => o.status?.phase === "Failed", `${h.name} Failed`, {
    timeoutMs: 60_000,
    show: (o) => o.status?.phase ?? "",
  });
  assert.ok(
    h.seen.every((o) => o.status?.phase !== "Running"),
    `${h.name} never ran: ${h.seen.map((o) => o.status?.phase).join(",")}`,
  );
  return p.status;
}

const running = (h: ObjectHistory<PodObject>) =>
  h.until((o) => o.status?.phase === "Running", `${h.name} Running`, {
    timeoutMs: 60_000,
    show: (o) => `${o.status?.phase}/${o.status?.reason ?? ""}`,
  });

describe("simulated nodes admit pods as a kubelet does", { timeout: 240_000 }, () => {
  test("a pod over the node's cpu is refused with OutOfcpu, the kubelet's message and an event; init containers count as the scheduler counts them", async (t) => {
    const ns = await withNamespace(t, "capacity");
    const node = await ownNode(t, { cpu: "2", memory: "4Gi", pods: "10" });
    // Containers 1500m, init container 1800m: the pod takes 1800m.
    await running(await create(t, ns, pod("first", node, { cpu: "1500m" }, { cpu: "1800m" })));
    const status = await refused(await create(t, ns, pod("second", node, { cpu: "250m" })));
    assert.equal(status?.reason, "OutOfcpu");
    assert.equal(
      status?.message,
      "Pod was rejected: Node didn't have enough resource: cpu, requested: 250, used: 1800, capacity: 2000",
    );
    // The room left (200m) still takes a pod that fits.
    await running(await create(t, ns, pod("third", node, { cpu: "200m" })));
    const events = await client.list<
      KubeObject & { reason?: string; note?: string; regarding?: { name?: string } }
    >(`/apis/events.k8s.io/v1/namespaces/${ns}/events`);
    const ev = events.items.find((e) => e.regarding?.name === "second");
    assert.equal(ev?.reason, "OutOfcpu");
    assert.match(
      ev?.note ?? "",
      /^Node didn't have enough resource: cpu, requested: 250, used: 1800/,
    );
  });

  test("memory and the pods count are checked; a finished pod frees its room; a patched allocatable applies to the next pod", async (t) => {
    const ns = await withNamespace(t, "capacity");
    const node = await ownNode(t, { cpu: "4", memory: "1Gi", pods: "2" });
    const big = await refused(await create(t, ns, pod("big", node, { memory: "2Gi" })));
    assert.equal(big?.reason, "OutOfmemory");
    assert.equal(
      big?.message,
      "Pod was rejected: Node didn't have enough resource: memory, requested: 2147483648, used: 0, capacity: 1073741824",
    );
    await running(await create(t, ns, pod("a", node, { cpu: "1" })));
    await running(await create(t, ns, pod("b", node, { cpu: "1" })));
    const third = await refused(await create(t, ns, pod("c", node, { cpu: "1" })));
    assert.equal(third?.reason, "OutOfpods");
    assert.equal(
      third?.message,
      "Pod was rejected: Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2",
    );
    // A pod that finished takes nothing: fail one and the next pod fits.
    await client.patch(paths.podStatus(ns, "a"), { status: { phase: "Failed", reason: "Test" } });
    await waitForPodPhase(ns, "a", "Failed");
    await running(await create(t, ns, pod("d", node, { cpu: "1" })));
    // Room is read from the node's status at each decision.
    await setAllocatable(node, { pods: "3", cpu: "4" });
    await running(await create(t, ns, pod("e", node, { cpu: "2" })));
    const over = await refused(await create(t, ns, pod("f", node, { cpu: "1" })));
    assert.equal(over?.reason, "OutOfpods");
  });

  test("an extended resource the node lists is checked; one it does not list is left to the cluster, as the kubelet does", async (t) => {
    const ns = await withNamespace(t, "capacity");
    const node = await ownNode(t, { cpu: "4", memory: "4Gi", pods: "10", "example.com/gpu": "1" });
    await running(await create(t, ns, pod("one", node, { "example.com/gpu": "1" })));
    const two = await refused(await create(t, ns, pod("two", node, { "example.com/gpu": "1" })));
    assert.equal(two?.reason, "OutOfexample.com/gpu");
    assert.equal(
      two?.message,
      "Pod was rejected: Node didn't have enough resource: example.com/gpu, requested: 1, used: 1, capacity: 1",
    );
    await running(await create(t, ns, pod("other", node, { "example.com/fpga": "1" })));
  });

  test("`cluster up --node-allocatable` sets a running cluster's nodes", async () => {
    const st = readState(testClusterDir());
    assert.ok(st, "the test cluster has a state file");
    const node = st.nodes[st.nodes.length - 1];
    const resource = `test.cocoonset.cocoonstack.io/r-${suffix()}`;
    const up = await clusterUp({
      stateDir: testClusterDir(),
      nodeAllocatable: { [node]: { [resource]: "7" } },
      progress: () => undefined,
    });
    assert.equal(up.reused, true);
    const n = await client.get<NodeObject>(`${paths.nodes()}/${node}`);
    assert.equal(n.status?.allocatable?.[resource], "7");
    // The rest of the node's allocatable is kept.
    assert.ok(n.status?.allocatable?.cpu, "cpu is still listed");
  });
});
