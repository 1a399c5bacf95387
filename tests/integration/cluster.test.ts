/**
 * The ground everything else stands on: the embedded cluster schedules and runs pods on
 * simulated nodes, its garbage collector and namespace controller work, kwok can drive a
 * pod to Failed, and RBAC is really enforced.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  isForbidden,
  KubeClient,
  paths,
  waitForList,
  waitForObject,
  type KubeObject,
} from "../../engine/kube/index.js";
import {
  adminClient,
  isReady,
  suffix,
  waitForPodPhase,
  withNamespace,
} from "../support/cluster.js";

const labels = (app: string) => ({ app });

function deployment(name: string, replicas: number): KubeObject {
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name },
    spec: {
      replicas,
      selector: { matchLabels: labels(name) },
      template: {
        metadata: { labels: labels(name) },
        spec: { containers: [{ name: "main", image: "registry.invalid/never-pulled" }] },
      },
    },
  };
}

describe("embedded cluster", () => {
  test("a Deployment's pods are scheduled to simulated nodes and become Ready", async (t) => {
    const ns = await withNamespace(t, "ground");
    const client = adminClient();
    await client.create(paths.deployments(ns), deployment("web", 3));
    const pods = await waitForList(
      client,
      paths.pods(ns),
      (items) => items.length === 3 && items.every(isReady),
      { labelSelector: "app=web", description: "3 Ready pods of deployment web" },
    );
    for (const p of pods) {
      const nodeName = (p.spec as { nodeName?: string }).nodeName;
      assert.match(nodeName ?? "", /^kwok-node-/, "pod is bound to a simulated node");
    }
    const dep = await waitForObject(
      client,
      paths.deployments(ns),
      "web",
      (d) => (d?.status as { availableReplicas?: number } | undefined)?.availableReplicas === 3,
    );
    assert.equal((dep?.status as { readyReplicas: number }).readyReplicas, 3);
  });

  test("a Job's pod runs to completion and the Job reports Complete", async (t) => {
    const ns = await withNamespace(t, "ground");
    const client = adminClient();
    await client.create(paths.jobs(ns), {
      apiVersion: "batch/v1",
      kind: "Job",
      metadata: { name: "once" },
      spec: {
        backoffLimit: 0,
        template: {
          spec: {
            restartPolicy: "Never",
            containers: [{ name: "main", image: "registry.invalid/never-pulled" }],
          },
        },
      },
    });
    const job = await waitForObject(client, paths.jobs(ns), "once", (j) =>
      ((j?.status as { conditions?: { type: string; status: string }[] })?.conditions ?? []).some(
        (c) => c.type === "Complete" && c.status === "True",
      ),
    );
    assert.equal((job?.status as { succeeded?: number }).succeeded, 1);
  });

  test("deleting a Deployment cascades to its ReplicaSet and pods (garbage collector)", async (t) => {
    const ns = await withNamespace(t, "ground");
    const client = adminClient();
    await client.create(paths.deployments(ns), deployment("gc", 2));
    await waitForList(
      client,
      paths.pods(ns),
      (items) => items.length === 2 && items.every(isReady),
      {
        labelSelector: "app=gc",
      },
    );
    await client.delete(paths.deployment(ns, "gc"), { propagationPolicy: "Background" });
    await waitForList(client, paths.replicaSets(ns), (items) => items.length === 0, {
      labelSelector: "app=gc",
      description: "the ReplicaSet to be collected",
    });
    await waitForList(client, paths.pods(ns), (items) => items.length === 0, {
      labelSelector: "app=gc",
      description: "the pods to be collected",
    });
    const left = await client.list(paths.pods(ns), { labelSelector: "app=gc" });
    assert.equal(left.items.length, 0);
  });

  test("a pod annotated simulate=failed is driven to phase Failed with the given reason", async (t) => {
    const ns = await withNamespace(t, "ground");
    const client = adminClient();
    const pod = (name: string, annotations?: Record<string, string>) => ({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name, annotations },
      spec: { containers: [{ name: "main", image: "registry.invalid/never-pulled" }] },
    });
    await client.create(
      paths.pods(ns),
      pod("born-failing", { "cocoonset.cocoonstack.io/simulate": "failed" }),
    );
    await client.create(paths.pods(ns), pod("fails-later"));
    await waitForObject(client, paths.pods(ns), "fails-later", isReady);
    await client.patch(paths.pod(ns, "fails-later"), {
      metadata: {
        annotations: {
          "cocoonset.cocoonstack.io/simulate": "failed",
          "cocoonset.cocoonstack.io/simulate-reason": "DeadlineExceeded",
        },
      },
    });
    const a = await waitForPodPhase(ns, "born-failing", "Failed");
    const b = await waitForPodPhase(ns, "fails-later", "Failed");
    assert.equal((a.status as { reason: string }).reason, "Error");
    assert.equal((b.status as { reason: string }).reason, "DeadlineExceeded");
    assert.equal(isReady(b), false);
  });

  test("a namespace with pods in it finishes deleting", async () => {
    const client = adminClient();
    const name = `doomed-${suffix()}`;
    await client.create(paths.namespaces(), {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name },
    });
    await client.create(paths.pods(name), {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "p" },
      spec: { containers: [{ name: "main", image: "registry.invalid/never-pulled" }] },
    });
    await waitForObject(client, paths.pods(name), "p", isReady);
    await client.delete(paths.namespace(name));
    await waitForObject(client, paths.namespaces(), name, (n) => n === undefined, {
      timeoutMs: 120_000,
      description: `namespace ${name} to be gone`,
    });
    assert.equal(await client.getOrUndefined(paths.namespace(name)), undefined);
  });

  test("RBAC is enforced: a service account bound to a narrow Role is refused outside it", async (t) => {
    const ns = await withNamespace(t, "rbac");
    const client = adminClient();
    await client.create(paths.serviceAccounts(ns), {
      apiVersion: "v1",
      kind: "ServiceAccount",
      metadata: { name: "reader" },
    });
    await client.create(paths.roles(ns), {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "Role",
      metadata: { name: "read-configmaps" },
      rules: [{ apiGroups: [""], resources: ["configmaps"], verbs: ["get", "list"] }],
    });
    await client.create(paths.roleBindings(ns), {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: { name: "reader" },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "read-configmaps" },
      subjects: [{ kind: "ServiceAccount", name: "reader", namespace: ns }],
    });
    const tr = await client.create<{ status: { token: string } }>(
      paths.serviceAccountToken(ns, "reader"),
      {
        apiVersion: "authentication.k8s.io/v1",
        kind: "TokenRequest",
        spec: { expirationSeconds: 600 },
      },
    );
    const kc = adminClient().config;
    const cluster = kc.getCurrentCluster()!;
    const reader = KubeClient.fromString(
      JSON.stringify({
        apiVersion: "v1",
        kind: "Config",
        clusters: [
          {
            name: "c",
            cluster: { server: cluster.server, "certificate-authority-data": cluster.caData },
          },
        ],
        users: [{ name: "reader", user: { token: tr.status.token } }],
        contexts: [{ name: "c", context: { cluster: "c", user: "reader" } }],
        "current-context": "c",
      }),
    );
    try {
      const cms = await reader.list(paths.configMaps(ns));
      assert.ok(Array.isArray(cms.items), "the grant works");
      await assert.rejects(
        reader.list(paths.pods(ns)),
        (e) => isForbidden(e),
        "pods are outside the grant",
      );
      await assert.rejects(
        reader.create(paths.configMaps(ns), {
          apiVersion: "v1",
          kind: "ConfigMap",
          metadata: { name: "x" },
        }),
        (e) => isForbidden(e),
        "create is outside the grant",
      );
      assert.equal(await client.getOrUndefined(paths.configMap(ns, "x")), undefined);
    } finally {
      reader.close();
    }
  });
});
