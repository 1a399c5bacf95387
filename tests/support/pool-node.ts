/**
 * Simulated nodes of a test's own. `poolNode` puts one in a node pool of its own: the fleet of
 * that pool has no other node to go to, and no other test's pods land there (they select their
 * own pool), so a test may set its allocatable while others run. Deleted when the test ends.
 */
import type { TestContext } from "node:test";
import { FAKE_NODE_ANNOTATION, POOL_LABEL } from "../../cluster/local-cluster.js";
import { paths, waitForObject, type KubeObject } from "../../engine/kube/index.js";
import { adminClient } from "./cluster.js";

interface NodeObject extends KubeObject {
  status?: { conditions?: { type: string; status: string }[] };
}

/** A node's allocatable (and capacity), by a status patch, as a kubelet reports it. */
export async function setAllocatable(node: string, values: Record<string, string>): Promise<void> {
  await adminClient().patch(`${paths.nodes()}/${node}/status`, {
    status: { allocatable: values, capacity: values },
  });
}

/**
 * A Ready simulated node `name` with the labels and the NoSchedule taint given (pods that do
 * not tolerate it stay off), and the allocatable given; deleted when the test ends.
 */
export async function simulatedNode(
  t: TestContext,
  name: string,
  opts: {
    labels: Record<string, string>;
    taint: { key: string; value?: string };
    allocatable: Record<string, string>;
  },
): Promise<string> {
  const client = adminClient();
  await client.create(paths.nodes(), {
    apiVersion: "v1",
    kind: "Node",
    metadata: {
      name,
      annotations: { [FAKE_NODE_ANNOTATION]: "fake", "node.alpha.kubernetes.io/ttl": "0" },
      labels: { "kubernetes.io/hostname": name, ...opts.labels },
    },
    spec: { taints: [{ ...opts.taint, effect: "NoSchedule" }] },
  });
  t.after(() => client.delete(`${paths.nodes()}/${name}`));
  await waitForObject<NodeObject>(
    client,
    paths.nodes(),
    name,
    (n) => n?.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false,
    { timeoutMs: 60_000, description: `node ${name} to be Ready` },
  );
  await setAllocatable(name, opts.allocatable);
  return name;
}

/** A Ready simulated node `pool-<pool>` in pool `pool`, with the allocatable given. */
export function poolNode(
  t: TestContext,
  pool: string,
  allocatable: Record<string, string>,
): Promise<string> {
  return simulatedNode(t, `pool-${pool}`, {
    labels: { [POOL_LABEL]: pool },
    // The engine's pods tolerate this taint; pods of other tests do not.
    taint: { key: "virtual-kubelet.io/provider", value: "cocoon" },
    allocatable,
  });
}
