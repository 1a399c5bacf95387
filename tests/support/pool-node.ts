/**
 * A simulated node of a test's own, in a node pool of its own: the fleet of that pool has no
 * other node to go to, and no other test's pods land there (they select their own pool), so a
 * test may set its allocatable while others run. Deleted when the test ends.
 */
import type { TestContext } from "node:test";
import { FAKE_NODE_ANNOTATION, POOL_LABEL } from "../../cluster/local-cluster.js";
import { paths, waitForObject, type KubeObject } from "../../engine/kube/index.js";
import { adminClient } from "./cluster.js";

interface NodeObject extends KubeObject {
  status?: { conditions?: { type: string; status: string }[] };
}

/** A Ready simulated node `pool-<pool>` in pool `pool`, with the allocatable given. */
export async function poolNode(
  t: TestContext,
  pool: string,
  allocatable: Record<string, string>,
): Promise<string> {
  const client = adminClient();
  const name = `pool-${pool}`;
  await client.create(paths.nodes(), {
    apiVersion: "v1",
    kind: "Node",
    metadata: {
      name,
      annotations: { [FAKE_NODE_ANNOTATION]: "fake", "node.alpha.kubernetes.io/ttl": "0" },
      labels: { "kubernetes.io/hostname": name, [POOL_LABEL]: pool },
    },
    // The engine's pods tolerate this taint; pods of other tests do not.
    spec: {
      taints: [{ key: "virtual-kubelet.io/provider", value: "cocoon", effect: "NoSchedule" }],
    },
  });
  t.after(() => client.delete(`${paths.nodes()}/${name}`));
  await waitForObject<NodeObject>(
    client,
    paths.nodes(),
    name,
    (n) => n?.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false,
    { timeoutMs: 60_000, description: `node ${name} to be Ready` },
  );
  await client.patch(`${paths.nodes()}/${name}/status`, {
    status: { allocatable, capacity: allocatable },
  });
  return name;
}
