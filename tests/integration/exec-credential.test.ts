/**
 * kubectl's conventions against the embedded apiserver: an exec credential plugin (a real
 * script printing an ExecCredential with the token of a ServiceAccount the test creates),
 * its credential kept until `expirationTimestamp` and the plugin run again after it, and on
 * a 401 once the token is revoked; a two-file `$KUBECONFIG` merged as kubectl merges it, with
 * `--context`, `-n` and `-o yaml` of the CLI.
 */
import assert from "node:assert/strict";
import { chmodSync, readFileSync, writeFileSync } from "node:fs";
import { delimiter, join } from "node:path";
import { test, type TestContext } from "node:test";
import { parse, stringify } from "yaml";
import { KubeClient, paths } from "../../engine/kube/index.js";
import { cocoonset } from "../support/cli.js";
import { adminClient, withNamespace } from "../support/cluster.js";
import { Cleanup, tempDir } from "../support/controller-process.js";

const EXEC_V1 = "client.authentication.k8s.io/v1";

interface Plugin {
  /** The script. */
  command: string;
  /** The token it prints (rewritten by the tests). */
  tokenFile: string;
  /** How many times it ran. */
  runs(): number;
  /** The KUBERNETES_EXEC_INFO of its last run. */
  lastInfo(): { apiVersion: string; spec: { interactive: boolean; cluster?: { server: string } } };
}

/** An exec credential plugin: prints an ExecCredential with the token in its token file. */
function execPlugin(dir: string): Plugin {
  const command = join(dir, "credential-plugin");
  const tokenFile = join(dir, "token");
  const runsFile = join(dir, "runs");
  const infoFile = join(dir, "exec-info.json");
  writeFileSync(runsFile, "");
  writeFileSync(
    command,
    `#!${process.execPath}
const fs = require("node:fs");
fs.appendFileSync(${JSON.stringify(runsFile)}, "run\\n");
fs.writeFileSync(${JSON.stringify(infoFile)}, process.env.KUBERNETES_EXEC_INFO);
const info = JSON.parse(process.env.KUBERNETES_EXEC_INFO);
const status = { token: fs.readFileSync(${JSON.stringify(tokenFile)}, "utf8").trim() };
if (process.env.EXPIRES_IN)
  status.expirationTimestamp = new Date(Date.now() + 1000 * Number(process.env.EXPIRES_IN))
    .toISOString().replace(/\\.\\d+Z$/, "Z");
process.stdout.write(JSON.stringify({ apiVersion: info.apiVersion, kind: "ExecCredential", status }));
`,
  );
  chmodSync(command, 0o755);
  return {
    command,
    tokenFile,
    runs: () => readFileSync(runsFile, "utf8").split("\n").filter(Boolean).length,
    lastInfo: () => JSON.parse(readFileSync(infoFile, "utf8")) as ReturnType<Plugin["lastInfo"]>,
  };
}

/**
 * ServiceAccount `name` in `ns`, allowed to read and delete pods, Jobs and ConfigMaps there
 * (what `reap` needs); returns a token for it, bound to a Secret when `boundTo` is given (so
 * deleting the Secret revokes the token).
 */
async function serviceAccount(
  ns: string,
  name: string,
  boundTo?: { name: string; uid: string },
): Promise<string> {
  const admin = adminClient();
  if (!(await admin.getOrUndefined(`${paths.serviceAccounts(ns)}/${name}`))) {
    await admin.create(paths.serviceAccounts(ns), {
      apiVersion: "v1",
      kind: "ServiceAccount",
      metadata: { name },
    });
    await admin.create(paths.roles(ns), {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "Role",
      metadata: { name },
      rules: [
        {
          apiGroups: ["", "batch"],
          resources: ["pods", "configmaps", "jobs"],
          verbs: ["get", "list", "watch", "delete"],
        },
      ],
    });
    await admin.create(paths.roleBindings(ns), {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: { name },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name },
      subjects: [{ kind: "ServiceAccount", name, namespace: ns }],
    });
  }
  const tr = await admin.create<{ status: { token: string } }>(
    paths.serviceAccountToken(ns, name),
    {
      apiVersion: "authentication.k8s.io/v1",
      kind: "TokenRequest",
      spec: {
        expirationSeconds: 600,
        ...(boundTo ? { boundObjectRef: { apiVersion: "v1", kind: "Secret", ...boundTo } } : {}),
      },
    },
  );
  return tr.status.token;
}

/** A kubeconfig document with one cluster (the test cluster's), one user and one context. */
function kubeconfigDoc(user: Record<string, unknown>, namespace?: string) {
  const cluster = adminClient().config.getCurrentCluster()!;
  return {
    apiVersion: "v1",
    kind: "Config",
    clusters: [
      {
        name: "embedded",
        cluster: { server: cluster.server, "certificate-authority-data": cluster.caData },
      },
    ],
    users: [{ name: "plugin-user", user }],
    contexts: [
      {
        name: "plugin",
        context: { cluster: "embedded", user: "plugin-user", ...(namespace ? { namespace } : {}) },
      },
    ],
    "current-context": "plugin",
  };
}

const execUser = (plugin: Plugin, env: Record<string, string> = {}) => ({
  exec: {
    apiVersion: EXEC_V1,
    command: plugin.command,
    interactiveMode: "Never",
    provideClusterInfo: true,
    env: Object.entries(env).map(([name, value]) => ({ name, value })),
  },
});

/** Who the apiserver says `client` is. */
async function whoami(client: KubeClient): Promise<string> {
  const review = await client.create<{ status: { userInfo: { username: string } } }>(
    "/apis/authentication.k8s.io/v1/selfsubjectreviews",
    { apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview" },
  );
  return review.status.userInfo.username;
}

function closing(t: TestContext, client: KubeClient): KubeClient {
  t.after(() => client.close());
  return client;
}

test("an exec plugin's credential is kept until its expirationTimestamp, then the plugin runs again", async (t) => {
  const cleanup = new Cleanup(t);
  const ns = await withNamespace(t, "exec-expiry");
  const plugin = execPlugin(tempDir(cleanup, "exec-expiry"));
  writeFileSync(plugin.tokenFile, await serviceAccount(ns, "agent-reader"));
  const expiresIn = 5;
  const client = closing(
    t,
    KubeClient.fromString(
      stringify(kubeconfigDoc(execUser(plugin, { EXPIRES_IN: String(expiresIn) }))),
    ),
  );

  const firstRun = Date.now();
  assert.equal(await whoami(client), `system:serviceaccount:${ns}:agent-reader`);
  await client.list(paths.pods(ns));
  await client.list(paths.configMaps(ns));
  assert.equal(plugin.runs(), 1, "one run serves every request while the credential is valid");
  const info = plugin.lastInfo();
  assert.equal(info.apiVersion, EXEC_V1);
  assert.equal(info.spec.interactive, false);
  assert.equal(info.spec.cluster?.server, client.server, "provideClusterInfo");

  // Requests go on; the plugin runs again only once the credential has expired.
  while (plugin.runs() < 2) {
    await client.list(paths.pods(ns));
    assert.ok(Date.now() - firstRun < 60_000, "the plugin ran again within a minute");
  }
  // The timestamp is cut to the second: it expired at most a second before the 5 s.
  assert.ok(
    Date.now() - firstRun >= (expiresIn - 1) * 1000,
    `ran again after ${Date.now() - firstRun} ms, not before the credential expired`,
  );
  assert.equal(await whoami(client), `system:serviceaccount:${ns}:agent-reader`);
});

test("a revoked exec credential (401) runs the plugin again, and the request succeeds", async (t) => {
  const cleanup = new Cleanup(t);
  const ns = await withNamespace(t, "exec-401");
  const plugin = execPlugin(tempDir(cleanup, "exec-401"));
  const admin = adminClient();
  const binding = await admin.create<{ metadata: { name: string; uid: string } }>(
    `/api/v1/namespaces/${ns}/secrets`,
    { apiVersion: "v1", kind: "Secret", metadata: { name: "token-binding" } },
  );
  const bound = { name: binding.metadata.name, uid: binding.metadata.uid };
  writeFileSync(plugin.tokenFile, await serviceAccount(ns, "rotating", bound));
  // No expirationTimestamp: the credential is kept for the client's life unless refused.
  const client = closing(t, KubeClient.fromString(stringify(kubeconfigDoc(execUser(plugin)))));
  assert.equal(await whoami(client), `system:serviceaccount:${ns}:rotating`);
  assert.equal(plugin.runs(), 1);

  // Revoke the token (its bound Secret goes) and hand the plugin a fresh one.
  const probe = closing(
    t,
    KubeClient.fromString(
      stringify(kubeconfigDoc({ token: readFileSync(plugin.tokenFile, "utf8") })),
    ),
  );
  await admin.delete(`/api/v1/namespaces/${ns}/secrets/token-binding`);
  writeFileSync(plugin.tokenFile, await serviceAccount(ns, "rotating"));
  // The apiserver may accept the old token from its cache for a few seconds: wait until it
  // refuses it (a client with the old token as a static one sees the 401 itself).
  for (;;) {
    const refused = await probe.list(paths.pods(ns)).then(
      () => false,
      (e: { status?: number }) => e.status === 401,
    );
    if (refused) break;
  }
  await client.list(paths.pods(ns));
  assert.equal(plugin.runs(), 2, "the 401 ran the plugin once more");
  assert.equal(await whoami(client), `system:serviceaccount:${ns}:rotating`);
});

test("a two-file $KUBECONFIG merges as kubectl merges it; --context, -n and -o yaml", async (t) => {
  const cleanup = new Cleanup(t);
  const ns = await withNamespace(t, "kubeconfig-list");
  const dir = tempDir(cleanup, "kubeconfig-list");
  const plugin = execPlugin(dir);
  writeFileSync(plugin.tokenFile, await serviceAccount(ns, "reaper"));
  const cluster = adminClient().config.getCurrentCluster()!;

  // The first file: the exec user and its context (naming the namespace), current.
  const first = kubeconfigDoc(execUser(plugin), ns);
  // The second: the same names pointing elsewhere (they lose to the first file's), an admin
  // context of its own, and another current-context (which loses too).
  const admin = adminClient().config.getCurrentUser()!;
  const second = {
    apiVersion: "v1",
    kind: "Config",
    clusters: [
      { name: "embedded", cluster: { server: "https://127.0.0.1:1" } },
      {
        name: "admin-cluster",
        cluster: { server: cluster.server, "certificate-authority-data": cluster.caData },
      },
    ],
    users: [
      { name: "plugin-user", user: { token: "not-a-valid-token" } },
      {
        name: "admin",
        user: admin.token
          ? { token: admin.token }
          : {
              "client-certificate-data": admin.certData,
              "client-key-data": admin.keyData,
            },
      },
    ],
    contexts: [
      { name: "plugin", context: { cluster: "embedded", user: "plugin-user" } },
      { name: "admin", context: { cluster: "admin-cluster", user: "admin" } },
    ],
    "current-context": "admin",
  };
  const a = join(dir, "first.yaml");
  const b = join(dir, "second.yaml");
  writeFileSync(a, stringify(first));
  writeFileSync(b, stringify(second));
  const env = { KUBECONFIG: [a, join(dir, "absent.yaml"), b].join(delimiter) };

  // The current context is the first file's: the plugin's user, and its namespace.
  const reaped = await cocoonset(["reap", "-o", "yaml"], env);
  assert.equal(reaped.status, 0, reaped.stderr);
  assert.deepEqual(parse(reaped.stdout), { jobs: 0, pods: 0, configMaps: 0 });
  assert.equal(plugin.runs(), 1, "the first file's exec user was used");

  // --context picks the second file's admin context; -n names the namespace.
  const asAdmin = await cocoonset(["reap", "--context", "admin", "-n", ns, "--json"], env);
  assert.equal(asAdmin.status, 0, asAdmin.stderr);
  assert.deepEqual(JSON.parse(asAdmin.stdout), { jobs: 0, pods: 0, configMaps: 0 });
  assert.equal(plugin.runs(), 1, "the admin context does not run the plugin");
  // Without a namespace the admin context names none: the error says where it looked.
  const noNs = await cocoonset(["reap", "--context", "admin"], env);
  assert.equal(noNs.status, 1);
  assert.match(noNs.stderr, /missing --namespace: .*\$KUBECONFIG .*first\.yaml.*second\.yaml/);

  const unknown = await cocoonset(["reap", "--context", "nope", "-n", ns], env);
  assert.equal(unknown.status, 1);
  assert.match(unknown.stderr, /has no context named "nope" \(--context\)/);

  // --kubeconfig wins over $KUBECONFIG: the second file alone, whose "plugin" context is
  // its own (an unreachable server).
  const flag = await cocoonset(["reap", "--kubeconfig", b, "--context", "plugin", "-n", ns], env);
  assert.equal(flag.status, 1);
  assert.match(flag.stderr, /127\.0\.0\.1:1/);
});
