/**
 * The Operator's rollout check against the real apiserver: a Deployment whose pod reports
 * that its image cannot be pulled (the status a kubelet writes, set here through the status
 * subresource since the simulated nodes pull nothing) fails the check at once with a message
 * naming the image; a Deployment whose pod runs passes it.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, test } from "node:test";
import { awaitControllerRollout } from "../../provider/dynamic/index.js";
import { PatchType, paths, waitForList, type KubeObject } from "../../engine/kube/index.js";
import { adminClient, testKubeconfig, withNamespace } from "../support/cluster.js";

const SIMULATE = "cocoonset.cocoonstack.io/simulate";

function deployment(name: string, image: string, podAnnotations: Record<string, string> = {}) {
  const labels = { "app.kubernetes.io/name": name };
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name },
    spec: {
      replicas: 1,
      selector: { matchLabels: labels },
      template: {
        metadata: { labels, annotations: podAnnotations },
        spec: { containers: [{ name: "controller", image }] },
      },
    },
  };
}

describe("the Operator's rollout check", { timeout: 180_000 }, () => {
  test("fails at once, naming the image, when the pod cannot pull it", async (t) => {
    const ns = await withNamespace(t, "rollout-pull");
    const client = adminClient();
    const image = "registry.invalid/pulumi-cocoonset/controller:0.0.0";
    // `not-ready` keeps the simulated node from writing a running status over ours.
    await client.create(
      paths.deployments(ns),
      deployment("ctl", image, { [SIMULATE]: "not-ready" }),
    );
    const [pod] = await waitForList(
      client,
      paths.pods(ns),
      (items) =>
        items.some((p) =>
          (
            (p.status as { conditions?: { type: string; status: string }[] } | undefined)
              ?.conditions ?? []
          ).some((c) => c.type === "Ready" && c.status === "False"),
        ),
      { timeoutMs: 60_000, description: "the controller pod scheduled and not Ready" },
    );
    await client.patch(
      `${paths.pod(ns, pod.metadata.name!)}/status`,
      {
        status: {
          phase: "Pending",
          containerStatuses: [
            {
              name: "controller",
              image,
              imageID: "",
              ready: false,
              restartCount: 0,
              started: false,
              state: {
                waiting: {
                  reason: "ErrImagePull",
                  message: `failed to pull and unpack image "${image}": no such host`,
                },
              },
            },
          ],
        },
      },
      PatchType.merge,
    );
    const t0 = Date.now();
    await assert.rejects(
      awaitControllerRollout(
        {
          kubeconfig: readFileSync(testKubeconfig(), "utf8"),
          namespace: ns,
          deployment: "ctl",
          image,
          generation: 1,
          timeoutSeconds: 120,
        },
        { intervalMs: 500 },
      ),
      (e: Error) => {
        assert.match(e.message, /^\[image\] the cluster cannot pull the controller image/);
        assert.ok(e.message.includes(`"${image}"`), e.message);
        assert.ok(e.message.includes(`ErrImagePull in pod ${ns}/${pod.metadata.name}`), e.message);
        assert.match(e.message, /no such host/);
        assert.match(e.message, /cocoonset-dev image build --tag/);
        return true;
      },
    );
    assert.ok(Date.now() - t0 < 30_000, "failed at once, not after the timeout");
  });

  test("passes once the pod runs", async (t) => {
    const ns = await withNamespace(t, "rollout-ok");
    const client = adminClient();
    await client.create(
      paths.deployments(ns),
      deployment("ctl", "pulumi-cocoonset/controller:0.1.0"),
    );
    await awaitControllerRollout(
      {
        kubeconfig: readFileSync(testKubeconfig(), "utf8"),
        namespace: ns,
        deployment: "ctl",
        image: "pulumi-cocoonset/controller:0.1.0",
        generation: 1,
        timeoutSeconds: 120,
      },
      { intervalMs: 500 },
    );
    const dep = await client.get<KubeObject & { status?: { availableReplicas?: number } }>(
      paths.deployment(ns, "ctl"),
    );
    assert.equal(dep.status?.availableReplicas, 1);
  });
});
