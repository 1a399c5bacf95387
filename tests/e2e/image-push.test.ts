/**
 * `cocoonset-dev image build --push REF`: the built controller image is pushed with buildah
 * to a real registry that asks for credentials (CNCF Distribution, htpasswd over TLS with a
 * CA made for the run), with the Docker config's credentials, and the command prints
 * `REF@sha256:…`. podman pulls exactly that digest back with a Docker config as its auth
 * file, and the pulled image is the one built (same image ID); run by that reference as the
 * Operator's Deployment runs it, it converges a CocoonSet. Without credentials (a
 * `DOCKER_CONFIG` folder with no config.json) the push fails and prints no reference.
 *
 * Where podman cannot run (no podman/buildah/runc), the test is skipped with the reason.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { test } from "node:test";
import { deploymentControllerArgs } from "../../controller/image.js";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { startAuthRegistry } from "../support/auth-registry.js";
import { adminClient, suffix, testKubeconfig } from "../support/cluster.js";
import {
  containerSkipReason,
  removeImage,
  runControllerContainer,
  sharedDir,
  waitForReadyz,
  writeShared,
} from "../support/controller-container.js";
import { createCocoonSet, waitForConverged } from "../support/controller-fleet.js";
import { Cleanup, controllerNamespace, tempDir } from "../support/controller-process.js";

const DEV_CLI = fileURLToPath(new URL("../../cluster/dev-cli.js", import.meta.url));
const skip = containerSkipReason();

test(
  "image build --push REF pushes with the Docker config's credentials and prints REF@sha256:…, which podman pulls back",
  { timeout: 900_000 },
  async (t) => {
    if (skip) return t.skip(skip);
    const c = new Cleanup(t);
    const reg = await startAuthRegistry(c, "htpasswd");
    const tag = `localhost/cocoonset-test/controller:push-${suffix()}`;
    const ref = `${reg.host}/cocoonset/controller:${suffix()}`;
    c.defer("remove the local images", () => {
      removeImage(tag);
      removeImage(ref);
    });
    const login = reg.dockerConfig({ username: reg.username, password: reg.password });
    const build = (dockerConfig: string) =>
      spawnSync(
        process.execPath,
        [
          DEV_CLI,
          "image",
          "build",
          "--tag",
          tag,
          "--push",
          ref,
          "--push-ca-file",
          reg.caFile,
          "--json",
        ],
        { encoding: "utf8", env: { ...process.env, DOCKER_CONFIG: dockerConfig } },
      );

    const ok = build(login);
    assert.equal(ok.status, 0, ok.stderr);
    const out = JSON.parse(ok.stdout) as { id: string; pushed: string };
    assert.match(out.pushed, new RegExp(`^${ref.replace(/[.]/g, "\\.")}@sha256:[0-9a-f]{64}$`));

    // podman: the Docker config as auth file, the registry's CA in a cert dir.
    const certs = tempDir(c, "cocoonset-certs");
    mkdirSync(join(certs, "d"));
    copyFileSync(reg.caFile, join(certs, "d", "ca.crt"));
    const pull = spawnSync(
      "podman",
      [
        "pull",
        "--quiet",
        "--authfile",
        join(login, "config.json"),
        "--cert-dir",
        join(certs, "d"),
        out.pushed,
      ],
      { encoding: "utf8" },
    );
    assert.equal(pull.status, 0, pull.stderr);
    assert.equal(
      pull.stdout.trim().replace(/^sha256:/, ""),
      out.id.replace(/^sha256:/, ""),
      "the image built",
    );

    // The image pulled back by digest, run as the Operator's Deployment runs it (its args,
    // the cluster's kubeconfig mounted read-only): it leads and converges a CocoonSet.
    await ensureCrd(adminClient());
    const ns = await controllerNamespace(c, "img-pulled");
    const dir = sharedDir(c, "cocoonset-img-pulled");
    const kubeconfig = writeShared(dir, "kubeconfig", readFileSync(testKubeconfig()));
    const startedAt = Date.now();
    const proc = await runControllerContainer(c, {
      image: out.pushed,
      args: deploymentControllerArgs({
        leaderElect: true,
        concurrency: 4,
        fanoutConcurrency: 8,
        reapInterval: "5m",
        logLevel: "info",
        watchNamespaces: [ns],
      }),
      env: {
        COCOONSET_KUBECONFIG: "/etc/cocoonset/kubeconfig",
        POD_NAMESPACE: ns,
        POD_NAME: "controller-0",
      },
      mounts: { [kubeconfig]: "/etc/cocoonset/kubeconfig" },
      label: "pulled image",
    });
    t.diagnostic(`pulled image: /readyz 200 in ${await waitForReadyz(proc, startedAt)} ms`);
    const running = spawnSync(
      "podman",
      ["inspect", "--format", "{{.ImageName}} {{.Image}}", proc.containerName],
      { encoding: "utf8" },
    );
    const [imageName, imageId] = running.stdout.trim().split(" ");
    // podman names it repository@digest (a reference with both drops the tag).
    assert.equal(
      imageName,
      out.pushed.replace(/:[^:/@]+@/, "@"),
      "the container runs the image pulled by digest",
    );
    assert.equal(imageId.replace(/^sha256:/, ""), out.id.replace(/^sha256:/, ""));
    await createCocoonSet(ns, "pulled", { replicas: 2 });
    const { pods } = await waitForConverged(ns, "pulled", { replicas: 2 }, 120_000);
    assert.equal(pods.length, 3, "main agent and 2 sub-agents");
    const exit = await proc.stop("SIGTERM", 30_000);
    assert.deepEqual(exit, { code: 0, signal: null }, proc.tail());

    // A DOCKER_CONFIG folder with no config.json: no credentials, as Docker reads it (buildah
    // alone would refuse the folder before building).
    const refused = build(tempDir(c, "cocoonset-dockercfg-none"));
    assert.notEqual(refused.status, 0);
    assert.match(refused.stderr, /unauthorized|authentication required/i);
    assert.ok(!refused.stdout.includes("@sha256:"), "no reference printed");
    assert.ok(!refused.stderr.includes(reg.password));
  },
);
