/**
 * The controller image, built with `cocoonset-dev image build` (buildah) and run with podman
 * (runc, host network, read-only root, UID 65532) against the embedded cluster, with the
 * arguments and environment the Operator's Deployment gives it:
 * - built twice from the same commit it has the same image ID and digest;
 * - with the cluster's kubeconfig mounted read-only: /readyz turns 200, a CocoonSet of 5
 *   sub-agents converges, a Failed sub-agent is rebuilt, and SIGTERM makes it release its
 *   Lease and exit 0 within the Deployment's 30 s grace period;
 * - with only in-cluster credentials (a service-account token, the CA and the namespace
 *   mounted where a kubelet puts them, KUBERNETES_SERVICE_HOST/PORT set), under the
 *   namespaced RBAC the Operator grants: it leads, converges a CocoonSet and exits 0.
 *
 * Where podman cannot run (no podman/buildah/runc), the tests are skipped with the reason.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { after, before, describe, test } from "node:test";
import { deploymentControllerArgs } from "../../controller/image.js";
import {
  DEFAULT_LEASE_NAME,
  leaderElectionRules,
  namespacedRules,
} from "../../controller/index.js";
import type { BuildResult } from "../../cluster/image.js";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { paths, waitForObject, type KubeObject } from "../../engine/kube/index.js";
import { adminClient, isReady, testKubeconfig } from "../support/cluster.js";
import {
  buildTestImage,
  containerSkipReason,
  removeImage,
  runControllerContainer,
  sharedDir,
  waitForReadyz,
  writeShared,
} from "../support/controller-container.js";
import { createCocoonSet, failPod, waitForConverged } from "../support/controller-fleet.js";
import { Cleanup, controllerNamespace } from "../support/controller-process.js";
import { readFileSync } from "node:fs";

const skip = containerSkipReason();
if (skip) process.stdout.write(`# controller image tests skipped: ${skip}\n`);

interface Lease extends KubeObject {
  spec?: { holderIdentity?: string | null; leaseDurationSeconds?: number };
}

/** The Operator's Deployment args for a controller watching `ns`, at debug level. */
function operatorArgs(ns: string): string[] {
  return deploymentControllerArgs({
    leaderElect: true,
    concurrency: 4,
    fanoutConcurrency: 8,
    reapInterval: "5m",
    logLevel: "debug",
    watchNamespaces: [ns],
  });
}

let image: BuildResult | undefined;
const tags: string[] = [];

before(async () => {
  if (skip) return;
  await ensureCrd(adminClient());
  image = buildTestImage();
  tags.push(image.tag);
});

after(() => {
  for (const t of tags) removeImage(t);
});

describe("the controller image", { timeout: 600_000 }, () => {
  test("built twice from the same tree, it has the same ID and digest; it is small, non-root and labelled", (t) => {
    if (skip) return t.skip(skip);
    const first = image!;
    const second = buildTestImage();
    tags.push(second.tag);
    assert.equal(second.id, first.id, "image ID (config digest) of two builds");
    assert.equal(second.digest, first.digest, "manifest digest of two builds");
    const cfg = JSON.parse(
      spawnSync("podman", ["image", "inspect", first.tag], { encoding: "utf8" }).stdout,
    ) as { Config: { User: string; Entrypoint: string[]; Cmd: string[] } }[];
    assert.equal(cfg[0].Config.User, "65532:65532");
    assert.deepEqual(cfg[0].Config.Entrypoint, [
      "/nodejs/bin/node",
      "--max-semi-space-size=2",
      "--lite-mode",
      "/app/dist/controller/main.bundle.js",
    ]);
    assert.deepEqual(cfg[0].Config.Cmd, ["controller"]);
    for (const l of ["version", "revision", "source", "licenses"])
      assert.ok(first.labels[`org.opencontainers.image.${l}`], `label ${l}`);
    const pkg = JSON.parse(
      readFileSync(new URL("../../../package.json", import.meta.url), "utf8"),
    ) as {
      version: string;
    };
    assert.equal(first.labels["org.opencontainers.image.version"], pkg.version);

    // No shell, no package manager, no Pulumi SDK, no TypeScript in the file tree.
    const files = spawnSync(
      "sh",
      [
        "-c",
        `podman image mount ${first.tag} >/dev/null && cd "$(podman image mount ${first.tag})" && find . | sort; podman image unmount ${first.tag} >/dev/null`,
      ],
      { encoding: "utf8" },
    ).stdout.split("\n");
    assert.ok(files.includes("./nodejs/bin/node"), "Node is in the image");
    assert.ok(
      files.includes("./app/dist/controller/main.bundle.js"),
      "the entry point (the bundle) is in the image",
    );
    assert.ok(!files.includes("./app/dist/controller/main.js"), "the bundled modules are not");
    assert.ok(files.includes("./app/node_modules/yaml/package.json"), "yaml, loaded lazily");
    const unwanted = files.filter((f) =>
      /^\.\/(bin|usr\/bin)\/|\/(sh|bash|npm|npx)$|node_modules\/(@pulumi|typescript|@types)\/|\.d\.ts$|^\.\/app\/dist\/(sdk|cluster|tests|bench|examples)\//.test(
        f,
      ),
    );
    assert.deepEqual(unwanted, []);
  });

  test("with the cluster's kubeconfig: ready, converges 5 sub-agents, rebuilds a Failed one, releases its Lease on SIGTERM", async (t) => {
    if (skip) return t.skip(skip);
    const c = new Cleanup(t);
    const ns = await controllerNamespace(c, "img-kc");
    const client = adminClient();
    const dir = sharedDir(c, "cocoonset-img-kc");
    const kubeconfig = writeShared(dir, "kubeconfig", readFileSync(testKubeconfig()));
    const startedAt = Date.now();
    const proc = await runControllerContainer(c, {
      image: image!.tag,
      args: operatorArgs(ns),
      env: {
        COCOONSET_KUBECONFIG: "/etc/cocoonset/kubeconfig",
        POD_NAMESPACE: ns,
        POD_NAME: "controller-0",
      },
      mounts: { [kubeconfig]: "/etc/cocoonset/kubeconfig" },
      label: "image (kubeconfig)",
    });
    const readyMs = await waitForReadyz(proc, startedAt);
    t.diagnostic(`container start → /readyz 200 in ${readyMs} ms`);
    const lease = await waitForObject<Lease>(
      client,
      paths.leases(ns),
      DEFAULT_LEASE_NAME,
      (l) => !!l?.spec?.holderIdentity,
      { timeoutMs: 60_000, description: `Lease ${ns}/${DEFAULT_LEASE_NAME} held` },
    );
    assert.ok(lease?.spec?.holderIdentity, "the container holds the Lease");

    await createCocoonSet(ns, "img", { replicas: 5 });
    const { pods } = await waitForConverged(ns, "img", { replicas: 5 }, 120_000);
    assert.equal(pods.length, 6, "main agent and 5 sub-agents");

    const old = pods.find((p) => p.metadata?.name === "img-3")!;
    await failPod(ns, "img-3", old.metadata!.uid!);
    const rebuilt = await waitForObject(
      client,
      paths.pods(ns),
      "img-3",
      (p) => !!p && p.metadata.uid !== old.metadata?.uid && isReady(p),
      { timeoutMs: 120_000, description: "a new Ready pod img-3" },
    );
    assert.notEqual(rebuilt?.metadata?.uid, old.metadata?.uid);
    await waitForConverged(ns, "img", { replicas: 5 }, 120_000);

    const stopAt = Date.now();
    const exit = await proc.stop("SIGTERM", 30_000);
    assert.deepEqual(exit, { code: 0, signal: null }, proc.tail());
    t.diagnostic(`SIGTERM → exit 0 in ${Date.now() - stopAt} ms`);
    assert.ok(proc.logs((l) => l.msg === "released the lease").length === 1, proc.tail());
    const released = await client.get<Lease>(paths.lease(ns, DEFAULT_LEASE_NAME));
    assert.ok(
      !released.spec?.holderIdentity,
      `Lease released, holder ${released.spec?.holderIdentity}`,
    );
  });

  test("with in-cluster service-account credentials and the Operator's namespaced RBAC: leads, converges and exits 0", async (t) => {
    if (skip) return t.skip(skip);
    const c = new Cleanup(t);
    const ns = await controllerNamespace(c, "img-sa");
    const client = adminClient();
    const sa = "cocoonset-controller";
    await client.create(paths.serviceAccounts(ns), {
      apiVersion: "v1",
      kind: "ServiceAccount",
      metadata: { name: sa },
    });
    await client.create(paths.roles(ns), {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "Role",
      metadata: { name: sa },
      rules: [...namespacedRules(), ...leaderElectionRules()],
    });
    await client.create(paths.roleBindings(ns), {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: { name: sa },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: sa },
      subjects: [{ kind: "ServiceAccount", name: sa, namespace: ns }],
    });
    const tr = await client.create<KubeObject & { status: { token: string } }>(
      paths.serviceAccountToken(ns, sa),
      {
        apiVersion: "authentication.k8s.io/v1",
        kind: "TokenRequest",
        spec: { expirationSeconds: 3600 },
      },
    );
    const cluster = client.config.getCurrentCluster()!;
    const server = new URL(cluster.server);
    const dir = sharedDir(c, "cocoonset-img-sa");
    writeShared(dir, "token", tr.status.token);
    writeShared(dir, "ca.crt", Buffer.from(cluster.caData ?? "", "base64"));
    writeShared(dir, "namespace", ns);

    const startedAt = Date.now();
    const proc = await runControllerContainer(c, {
      image: image!.tag,
      args: operatorArgs(ns),
      env: {
        KUBERNETES_SERVICE_HOST: server.hostname,
        KUBERNETES_SERVICE_PORT: server.port,
        POD_NAMESPACE: ns,
        POD_NAME: "controller-0",
      },
      mounts: { [dir]: "/var/run/secrets/kubernetes.io/serviceaccount" },
      label: "image (service account)",
    });
    await waitForReadyz(proc, startedAt);
    const lease = await waitForObject<Lease>(
      client,
      paths.leases(ns),
      DEFAULT_LEASE_NAME,
      (l) => !!l?.spec?.holderIdentity,
      { timeoutMs: 60_000, description: `Lease ${ns}/${DEFAULT_LEASE_NAME} held` },
    );
    assert.ok(lease?.spec?.holderIdentity);

    await createCocoonSet(ns, "sa", { replicas: 2 });
    await waitForConverged(ns, "sa", { replicas: 2 }, 120_000);
    // The container has no other credentials: no kubeconfig, no $KUBECONFIG, no ~/.kube.

    const exit = await proc.stop("SIGTERM", 30_000);
    assert.deepEqual(exit, { code: 0, signal: null }, proc.tail());
    const released = await client.get<Lease>(paths.lease(ns, DEFAULT_LEASE_NAME));
    assert.ok(!released.spec?.holderIdentity);
  });
});
