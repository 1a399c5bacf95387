/**
 * Kubeconfigs as users have them, against the embedded cluster: an exec credential plugin,
 * a client certificate (from the cluster's client CA, for a user bound by RBAC),
 * `tls-server-name`, a `proxy-url` (a loopback CONNECT proxy) and a current context that
 * names a namespace. Each works for the CLI, the slots resource and the controller, which
 * all load kubeconfigs through the one client in engine/kube.
 */
import assert from "node:assert/strict";
import { chmodSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { connect, type AddressInfo } from "node:net";
import { join } from "node:path";
import { test, type TestContext } from "node:test";
import { stringify } from "yaml";
import { clientCa, readState } from "../../cluster/local-cluster.js";
import { issueClientCertificate } from "../../cluster/pki.js";
import { read, type SlotsOutputs } from "../../provider/dynamic/index.js";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { KubeClient, paths } from "../../engine/kube/index.js";
import {
  EXPIRES_AT_ANNOTATION,
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
} from "../../engine/release/index.js";
import { cocoonset } from "../support/cli.js";
import { adminClient, suffix, testClusterDir } from "../support/cluster.js";
import {
  Cleanup,
  controllerNamespace,
  startController,
  tempDir,
} from "../support/controller-process.js";

interface Variant {
  cluster: Record<string, unknown>;
  user: Record<string, unknown>;
  namespace?: string;
}

function kubeconfigText(v: Variant): string {
  return stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "c", cluster: v.cluster }],
    users: [{ name: "u", user: v.user }],
    contexts: [
      {
        name: "c",
        context: { cluster: "c", user: "u", ...(v.namespace ? { namespace: v.namespace } : {}) },
      },
    ],
    "current-context": "c",
  });
}

function cluster(): { server: string; caData: string; token: string } {
  const st = readState(testClusterDir());
  assert.ok(st, "the test cluster's state");
  const caData = adminClient().config.getCurrentCluster()!.caData!;
  return { server: st.server, caData, token: st.token };
}

/** A loopback HTTP CONNECT proxy that counts the tunnels it opened. */
async function connectProxy(t: TestContext): Promise<{ url: string; tunnels: () => number }> {
  let tunnels = 0;
  const server: Server = createServer((_req, res) => res.writeHead(405).end());
  server.on("connect", (req, socket, head) => {
    const [host, port] = (req.url ?? "").split(":");
    const upstream = connect(Number(port), host, () => {
      tunnels++;
      socket.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      upstream.write(head);
      upstream.pipe(socket);
      socket.pipe(upstream);
    });
    upstream.on("error", () => socket.destroy());
    socket.on("error", () => upstream.destroy());
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    tunnels: () => tunnels,
  };
}

/** Puts an expired ephemeral pod in `ns`: `reap` then has exactly one thing to delete. */
async function expiredPod(ns: string): Promise<void> {
  await adminClient().create(paths.pods(ns), {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: `expired-${suffix()}`,
      labels: { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE },
      annotations: { [EXPIRES_AT_ANNOTATION]: String(Math.floor(Date.now() / 1000) - 60) },
    },
    spec: { containers: [{ name: "c", image: "agents/worker:1" }] },
  });
}

/** The CLI, the slots resource and the controller each do real work with `text`. */
async function worksEverywhere(
  cleanup: Cleanup,
  dir: string,
  label: string,
  text: string,
  ns: string,
  nsFlag = true,
) {
  const file = join(dir, `${label}.yaml`);
  writeFileSync(file, text, { mode: 0o600 });

  await expiredPod(ns);
  const cli = await cocoonset([
    "reap",
    ...(nsFlag ? ["--namespace", ns] : []),
    "--json",
    "--kubeconfig",
    file,
  ]);
  assert.equal(cli.status, 0, `${label}: cocoonset reap\n${cli.stderr}`);
  assert.deepEqual(JSON.parse(cli.stdout), { jobs: 0, pods: 1, configMaps: 0 }, `${label}: reap`);

  const props = {
    kubeconfig: text,
    namespace: ns,
    name: "absent",
    uid: "",
    spec: { agent: { replicas: 1, image: "agents/coder:1" } },
    slots: {},
    providerVersion: "test",
    pods: {},
    mainVmName: "",
  } as unknown as SlotsOutputs;
  const r = await read(`${ns}/absent`, props);
  assert.deepEqual(r.props.pods, {}, `${label}: the slots resource read the (empty) fleet`);

  const ctl = await startController(cleanup, {
    kubeconfig: file,
    namespaces: [ns],
    label: `controller (${label})`,
  });
  await ctl.synced();
  assert.deepEqual(await ctl.stop(), { code: 0, signal: null }, ctl.tail());
}

test("exec plugin, client certificate, tls-server-name, proxy-url and a context namespace all work", async (t) => {
  const cleanup = new Cleanup(t);
  await ensureCrd(adminClient());
  const dir = tempDir(cleanup, "kubeconfigs");
  const ns = await controllerNamespace(cleanup, "kubeconfigs");
  const c = cluster();
  const base = { server: c.server, "certificate-authority-data": c.caData };

  // An exec credential plugin, as EKS/GKE kubeconfigs use: prints an ExecCredential.
  const plugin = join(dir, "credential-plugin.sh");
  writeFileSync(
    plugin,
    `#!/bin/sh\nprintf '%s' '${JSON.stringify({ apiVersion: "client.authentication.k8s.io/v1", kind: "ExecCredential", status: { token: c.token } })}'\n`,
  );
  chmodSync(plugin, 0o755);
  await worksEverywhere(
    cleanup,
    dir,
    "exec",
    kubeconfigText({
      cluster: base,
      user: {
        exec: {
          apiVersion: "client.authentication.k8s.io/v1",
          command: plugin,
          interactiveMode: "Never",
        },
      },
    }),
    ns,
  );

  // A client certificate for a user bound to cluster-admin by RBAC (no token at all).
  const user = `cert-user-${suffix()}`;
  const cert = issueClientCertificate(clientCa(testClusterDir()), user, ["cocoonset-test"]);
  const binding = `kubeconfigs-${user}`;
  await adminClient().create(paths.clusterRoleBindings(), {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "ClusterRoleBinding",
    metadata: { name: binding },
    roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "cluster-admin" },
    subjects: [{ apiGroup: "rbac.authorization.k8s.io", kind: "User", name: user }],
  });
  cleanup.defer(`delete ${binding}`, async () => {
    await adminClient().delete(paths.clusterRoleBinding(binding));
  });
  const certText = kubeconfigText({
    cluster: base,
    user: {
      "client-certificate-data": Buffer.from(cert.certPem).toString("base64"),
      "client-key-data": Buffer.from(cert.keyPem).toString("base64"),
    },
  });
  await worksEverywhere(cleanup, dir, "client-cert", certText, ns);
  // The apiserver authenticated the certificate's user, not an admin token.
  const certClient = KubeClient.fromString(certText);
  try {
    const review = await certClient.create<{
      status: { userInfo: { username: string; groups: string[] } };
    }>("/apis/authentication.k8s.io/v1/selfsubjectreviews", {
      apiVersion: "authentication.k8s.io/v1",
      kind: "SelfSubjectReview",
    });
    assert.equal(review.status.userInfo.username, user);
    assert.ok(review.status.userInfo.groups.includes("cocoonset-test"));
  } finally {
    certClient.close();
  }

  // tls-server-name: the name checked against the serving certificate instead of the host.
  const token = { token: c.token };
  await worksEverywhere(
    cleanup,
    dir,
    "tls-server-name",
    kubeconfigText({
      cluster: { ...base, "tls-server-name": "kubernetes.default.svc" },
      user: token,
    }),
    ns,
  );
  const wrongName = join(dir, "wrong-name.yaml");
  writeFileSync(
    wrongName,
    kubeconfigText({
      cluster: { ...base, "tls-server-name": "not-the-apiserver.example" },
      user: token,
    }),
  );
  const refused = await cocoonset(["reap", "--namespace", ns, "--kubeconfig", wrongName]);
  assert.equal(refused.status, 1, "a tls-server-name the certificate does not carry is refused");
  assert.match(refused.stderr, /not-the-apiserver\.example|altnames|ERR_TLS_CERT_ALTNAME_INVALID/);

  // proxy-url: every connection goes through the proxy's tunnels.
  const proxy = await connectProxy(t);
  await worksEverywhere(
    cleanup,
    dir,
    "proxy-url",
    kubeconfigText({
      cluster: { ...base, "proxy-url": proxy.url },
      user: token,
    }),
    ns,
  );
  assert.ok(
    proxy.tunnels() >= 3,
    `the CLI, the slots resource and the controller tunnelled (${proxy.tunnels()})`,
  );

  // A current context naming a namespace: the CLI uses it when --namespace is not given.
  await worksEverywhere(
    cleanup,
    dir,
    "context-namespace",
    kubeconfigText({ cluster: base, user: token, namespace: ns }),
    ns,
    false,
  );
});
