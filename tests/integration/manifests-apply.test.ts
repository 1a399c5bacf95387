/**
 * `cocoonset manifests` for GitOps: its output, applied with `kubectl apply --server-side`
 * (the toolchain's kubectl) on a cluster without the CocoonSet CRD, installs a working
 * operator. The controller then runs as a process (the image needs a kubelet, which the
 * embedded cluster has not) with the Deployment's own arguments and as its ServiceAccount
 * (so under the manifests' RBAC), and converges a CocoonSet. It removes the CRD, so
 * `scripts/test.mjs` runs this file alone.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { describe, test } from "node:test";
import { requireBinary } from "../../cluster/toolchain-pins.js";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { CRD_NAME, HIBERNATION_CRD_NAME } from "../../engine/spec/index.js";
import { isNotFound, paths, waitForObject, type KubeObject } from "../../engine/kube/index.js";
import { adminClient, suffix, testKubeconfig } from "../support/cluster.js";
import {
  Cleanup,
  CLI_MAIN,
  controllerNamespace,
  startController,
  tempDir,
  writeTokenKubeconfig,
} from "../support/controller-process.js";
import { createCocoonSet, waitForConverged } from "../support/controller-fleet.js";
import { removeCrd } from "../support/crd.js";

interface Deployment extends KubeObject {
  spec: { template: { spec: { serviceAccountName: string; containers: { args: string[] }[] } } };
}

const established = (o: KubeObject | undefined) =>
  (
    (o as { status?: { conditions?: { type: string; status: string }[] } } | undefined)?.status
      ?.conditions ?? []
  ).some((c) => c.type === "Established" && c.status === "True");

describe("cocoonset manifests | kubectl apply --server-side", { timeout: 300_000 }, () => {
  test("installs the CRDs, namespace, RBAC, Deployment, metrics Service and PodDisruptionBudget; the controller with the Deployment's arguments and ServiceAccount converges a CocoonSet", async (t) => {
    const c = new Cleanup(t);
    const admin = adminClient();
    await removeCrd();
    c.defer("install the test CRD again", async () => {
      await removeCrd();
      await ensureCrd(admin);
    });
    const app = await controllerNamespace(c, "mf-app");
    const name = `mf${suffix()}`.slice(0, 20);
    const sys = `${name}-system`;
    c.defer(`delete namespace ${sys}`, async () => {
      await admin.delete(paths.namespace(sys)).catch((e: unknown) => {
        if (!isNotFound(e)) throw e;
      });
    });

    const yaml = execFileSync(
      process.execPath,
      [
        ...[CLI_MAIN, "manifests", "--name", name, "-n", sys, "--watch-namespace", app],
        ...["--replicas", "2", "--metrics-service"],
      ],
      { encoding: "utf8" },
    );
    const kubectl = requireBinary("kubectl");
    const applied = execFileSync(
      kubectl,
      [
        "--kubeconfig",
        testKubeconfig(),
        "apply",
        "--server-side",
        "--field-manager=gitops",
        "-f",
        "-",
      ],
      { input: yaml, encoding: "utf8" },
    );
    assert.deepEqual(
      applied.trim().split("\n").sort(),
      [
        `customresourcedefinition.apiextensions.k8s.io/${CRD_NAME} serverside-applied`,
        `customresourcedefinition.apiextensions.k8s.io/${HIBERNATION_CRD_NAME} serverside-applied`,
        `deployment.apps/${name}-controller serverside-applied`,
        `namespace/${sys} serverside-applied`,
        `role.rbac.authorization.k8s.io/${name}-cocoonset-controller serverside-applied`,
        `role.rbac.authorization.k8s.io/${name}-cocoonset-controller serverside-applied`,
        `rolebinding.rbac.authorization.k8s.io/${name}-cocoonset-controller serverside-applied`,
        `rolebinding.rbac.authorization.k8s.io/${name}-cocoonset-controller serverside-applied`,
        `serviceaccount/${name}-controller serverside-applied`,
        `service/${name}-controller-metrics serverside-applied`,
        `poddisruptionbudget.policy/${name}-controller serverside-applied`,
      ].sort(),
    );
    for (const crd of [CRD_NAME, HIBERNATION_CRD_NAME]) {
      await waitForObject(admin, paths.crds(), crd, established, {
        timeoutMs: 60_000,
        description: `CRD ${crd} Established`,
      });
    }

    // The controller as the Deployment would run it: its arguments, its ServiceAccount.
    const deployment = await admin.get<Deployment>(paths.deployment(sys, `${name}-controller`));
    const pod = deployment.spec.template.spec;
    const [command, ...args] = pod.containers[0].args;
    assert.equal(command, "controller");
    assert.ok(args.includes(`--namespace=${app}`) && args.includes("--leader-elect=true"));
    const token = await admin.create<{ status: { token: string } }>(
      paths.serviceAccountToken(sys, pod.serviceAccountName),
      {
        apiVersion: "authentication.k8s.io/v1",
        kind: "TokenRequest",
        spec: { expirationSeconds: 600 },
      },
    );
    const cluster = admin.config.getCurrentCluster()!;
    const kubeconfig = writeTokenKubeconfig(
      tempDir(c, "mf-kubeconfig"),
      "sa.kubeconfig",
      cluster.server,
      cluster.caData,
      token.status.token,
    );
    const proc = await startController(c, {
      kubeconfig,
      namespaces: [],
      label: "from-manifests",
      // The pod's ports are not free on a shared machine: loopback with any port instead.
      extraArgs: args.filter((a) => !a.startsWith("--metrics-bind") && !a.startsWith("--health")),
    });
    // It elects itself in the manifests' namespace, where only their Lease Role allows it.
    await proc.waitForLog("became leader", (l) => l.msg === "became leader");
    await proc.synced();

    await createCocoonSet(app, "gitops", { replicas: 1 });
    await waitForConverged(app, "gitops", { replicas: 1 }, 120_000);
  });
});
