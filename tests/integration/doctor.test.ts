/**
 * `cocoonset doctor` on the embedded cluster, run as a user runs it: the healthy cluster (the
 * tier's CRD, its simulated node-agent nodes, its registry) blocks nothing, and each missing
 * part is named on a line of its own with a non-zero exit: no CRD, no node in the fleet's
 * pool, a registry (Distribution with htpasswd over TLS) refusing the keychain's credentials,
 * and a caller (a ServiceAccount's token) without `pods/create`.
 *
 * In the serial group: it deletes the CocoonSet CRD for one case (and installs it again).
 */
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { cocoonset, type CliResult } from "../support/cli.js";
import { adminClient, testClusterDir, testKubeconfig, withNamespace } from "../support/cluster.js";
import { Cleanup, tempDir } from "../support/controller-process.js";
import { startAuthRegistry } from "../support/auth-registry.js";
import { serviceAccountKubeconfig } from "../support/service-account.js";
import { readState } from "../../cluster/local-cluster.js";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { removeCrd } from "../support/crd.js";
import { requiredAccess } from "../../engine/preflight/findings.js";

const cleanup = new Cleanup({ after });

/** `cocoonset doctor ARGS` against the tier's cluster (unless ARGS name a kubeconfig). */
async function doctor(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  const kubeconfig = args.includes("--kubeconfig") ? [] : ["--kubeconfig", testKubeconfig()];
  const r = await cocoonset(["doctor", ...kubeconfig, ...args], {
    // No Docker login of the machine: the keychain is the test's.
    DOCKER_CONFIG: tempDir(cleanup, "cocoonset-doctor-nodocker"),
    ...env,
  });
  // The output is the report's evidence; print it for the run's log.
  if (!args.includes("-o"))
    process.stdout.write(`$ cocoonset doctor ${args.join(" ")}\n${r.stdout}${r.stderr}\n`);
  return r;
}

const lines = (r: CliResult, severity: string) =>
  r.stdout.split("\n").filter((l) => l.startsWith(severity));

describe("cocoonset doctor", { timeout: 180_000 }, () => {
  const registry = readState(testClusterDir())?.registry;

  it("the embedded cluster: nothing blocks a deploy", async (t) => {
    assert.ok(registry, "the tier's cluster runs a registry");
    const ns = await withNamespace(t, "doctor-ok");
    const r = await doctor(["-n", ns, "--oci-registry", registry]);
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.deepEqual(lines(r, "ERROR"), []);
    assert.match(
      r.stdout,
      /^OK +apiserver +https:\/\/127\.0\.0\.1:\d+ answers: Kubernetes v1\.\d+/m,
    );
    assert.match(r.stdout, /^OK +crd +cocoonsets\.cocoonset\.cocoonstack\.io is this version's$/m);
    assert.match(r.stdout, new RegExp(`you may deploy and destroy a Fleet in namespace ${ns}`));
    assert.match(
      r.stdout,
      /^OK +pool +pool default: \d+ nodes? Ready, simulated node-agent \(kwok\): kwok-node-0 \[cpu /m,
    );
    assert.match(
      r.stdout,
      new RegExp(`${registry} \\(--oci-registry\\) lets anonymous callers read tags and push`),
    );
    assert.match(r.stdout, /nothing blocks a deploy/);

    const json = await doctor(["-n", ns, "-o", "json"]);
    const doc = JSON.parse(json.stdout) as {
      blocking: boolean;
      findings: { check: string; severity: string }[];
      facts: { access: unknown[]; apiServer: { version: string } };
    };
    assert.equal(doc.blocking, false);
    assert.equal(doc.facts.access.length, requiredAccess(ns, "cocoonset-system").length);
    assert.match(doc.facts.apiServer.version, /^v1\./);
  });

  it("no node in the fleet's pool", async (t) => {
    const ns = await withNamespace(t, "doctor-pool");
    const dir = tempDir(cleanup, "cocoonset-doctor-fleet");
    const file = join(dir, "fleet.yaml");
    writeFileSync(
      file,
      `apiVersion: cocoonset.cocoonstack.io/v1\nkind: CocoonSet\nmetadata:\n  name: coder\n  namespace: ${ns}\nspec:\n  nodePool: gpu-pool\n  agent:\n    replicas: 2\n    image: agents/coder:1\n`,
    );
    const r = await doctor(["-f", file]);
    assert.equal(r.status, 1, r.stdout + r.stderr);
    assert.deepEqual(lines(r, "ERROR"), [
      "ERROR pool        no node in pool gpu-pool (label cocoonstack.io/pool=gpu-pool): the agents' pods would stay Pending; run vk-cocoon nodes for the pool and label them: kubectl label node NODE cocoonstack.io/pool=gpu-pool",
    ]);
    // The file's namespace is the one whose rights were checked.
    assert.match(r.stdout, new RegExp(`a Fleet in namespace ${ns}`));
  });

  it("a registry refusing the keychain's credentials, and one given none", async (t) => {
    const ns = await withNamespace(t, "doctor-reg");
    const reg = await startAuthRegistry(cleanup, "htpasswd");
    const flags = ["-n", ns, "--oci-registry", reg.address, "--oci-registry-ca-file", reg.caFile];
    const wrong = reg.dockerConfig({ username: reg.username, password: `wrong-${reg.password}` });
    const refused = await doctor([...flags, "--oci-registry-docker-config", wrong]);
    assert.equal(refused.status, 1, refused.stdout + refused.stderr);
    const [line, ...more] = lines(refused, "ERROR");
    assert.deepEqual(more, []);
    assert.match(
      line,
      new RegExp(
        `^ERROR registry +${reg.address.replace(/[.]/g, "\\.")} \\(--oci-registry\\) refuses the Docker keychain's credentials to read tags .*log in again, docker login ${reg.host}`,
      ),
    );
    assert.ok(!refused.stdout.includes(reg.password), "no password in the report");

    const none = await doctor(flags);
    assert.equal(none.status, 1);
    assert.match(
      lines(none, "ERROR").join("\n"),
      /asks for credentials to read tags and the Docker keychain has none for it/,
    );

    const good = reg.dockerConfig({ username: reg.username, password: reg.password });
    const ok = await doctor([...flags, "--oci-registry-docker-config", good]);
    assert.equal(ok.status, 0, ok.stdout + ok.stderr);
    assert.match(ok.stdout, /lets the Docker keychain's credentials read tags and push/);
    // The push probe cancelled its upload: the registry holds no tag of the probe repository.
    assert.equal(
      await reg.statusOf(
        "/v2/cocoonset-doctor-probe/manifests/latest",
        `Basic ${Buffer.from(`${reg.username}:${reg.password}`).toString("base64")}`,
      ),
      404,
    );
  });

  it("a caller without pods/create", async (t) => {
    const ns = await withNamespace(t, "doctor-rbac");
    // Every namespaced right a Fleet needs but pods/create.
    const rules = requiredAccess(ns, "cocoonset-system")
      .filter((c) => c.scope === "fleet" && c.namespace)
      .filter((c) => !(c.resource === "pods" && c.verb === "create"))
      .map((c) => ({
        apiGroups: [c.group],
        resources: [c.subresource ? `${c.resource}/${c.subresource}` : c.resource],
        verbs: [c.verb],
      }));
    const kubeconfig = join(tempDir(cleanup, "cocoonset-doctor-sa"), "kubeconfig");
    writeFileSync(kubeconfig, await serviceAccountKubeconfig(ns, "deployer", rules));
    const r = await doctor(["--kubeconfig", kubeconfig, "-n", ns]);
    assert.equal(r.status, 1, r.stdout + r.stderr);
    assert.deepEqual(lines(r, "ERROR"), [
      `ERROR rbac        you cannot create pods in namespace ${ns}: pulumi up creates the agents' pods (and preview sends them as dry runs), destroy deletes them; ask for a Role (or ClusterRole) bound to you with verb create on pods`,
    ]);
    // What such a caller cannot see is a warning, not a guess.
    assert.match(r.stdout, /^WARN +pool +the nodes of pool default cannot be listed \(HTTP 403\)/m);
    assert.match(r.stdout, /^WARN +rbac +you cannot list nodes \(cluster-wide\)/m);
  });

  it("no CRD", async () => {
    await removeCrd();
    try {
      const r = await doctor(["-n", "default"]);
      assert.equal(r.status, 1, r.stdout + r.stderr);
      assert.deepEqual(lines(r, "ERROR"), [
        "ERROR crd         cocoonsets.cocoonset.cocoonstack.io is not installed (a Fleet needs the CocoonSet CRD, the controller both): deploy an Operator (its `pulumi up` installs them), or `cocoonset manifests | kubectl apply --server-side -f -`",
        "ERROR crd         cocoonhibernations.cocoonset.cocoonstack.io is not installed (a Fleet needs the CocoonSet CRD, the controller both): deploy an Operator (its `pulumi up` installs them), or `cocoonset manifests | kubectl apply --server-side -f -`",
      ]);
    } finally {
      await ensureCrd(adminClient());
    }
  });
});
