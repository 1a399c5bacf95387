/**
 * Resident memory of a process that serves the slots resource (the plugin's module graph:
 * `dist/plugin/provider.js`) and talks to the apiserver through a kubeconfig whose user is
 * an exec credential plugin, as managed clusters' kubeconfigs are (`aws eks get-token`,
 * `gke-gcloud-auth-plugin`, `kubelogin`).
 *
 * The plugin here is a shell script printing an ExecCredential with a ServiceAccount token
 * (a TokenRequest). The child process loads the provider, reads `/version` and
 * `/api/v1/namespaces/<ns>/serviceaccounts/<sa>` with that kubeconfig, and reports its
 * `VmRSS` and `VmHWM`.
 *
 * Run: `npm run build && KUBECONFIG=<admin kubeconfig> node dist/bench/exec-rss.js`
 */
import { execFileSync } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KubeClient, paths } from "../engine/kube/index.js";
import { createNamespace } from "./support.js";

const admin = new KubeClient();
const ns = `exec-rss-${Date.now().toString(36)}`;
const sa = "reader";
const dir = mkdtempSync(join(tmpdir(), "exec-rss-"));
try {
  await createNamespace(admin, ns);
  await admin.create(paths.serviceAccounts(ns), {
    apiVersion: "v1",
    kind: "ServiceAccount",
    metadata: { name: sa },
  });
  await admin.create(paths.roles(ns), {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "Role",
    metadata: { name: sa },
    rules: [{ apiGroups: [""], resources: ["serviceaccounts"], verbs: ["get"] }],
  });
  await admin.create(paths.roleBindings(ns), {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "RoleBinding",
    metadata: { name: sa },
    roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: sa },
    subjects: [{ kind: "ServiceAccount", name: sa, namespace: ns }],
  });
  const tr = await admin.create<{ status: { token: string } }>(paths.serviceAccountToken(ns, sa), {
    apiVersion: "authentication.k8s.io/v1",
    kind: "TokenRequest",
    spec: { expirationSeconds: 600 },
  });
  writeFileSync(join(dir, "token"), tr.status.token);
  const plugin = join(dir, "credential-plugin");
  writeFileSync(
    plugin,
    `#!/bin/sh\nprintf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s"}}' "$(cat "$TOKEN_FILE")"\n`,
  );
  chmodSync(plugin, 0o755);
  const cluster = admin.config.getCurrentCluster()!;
  const kubeconfig = JSON.stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [
      {
        name: "c",
        cluster: { server: cluster.server, "certificate-authority-data": cluster.caData },
      },
    ],
    users: [
      {
        name: sa,
        user: {
          exec: {
            apiVersion: "client.authentication.k8s.io/v1",
            command: plugin,
            env: [{ name: "TOKEN_FILE", value: join(dir, "token") }],
            interactiveMode: "Never",
          },
        },
      },
    ],
    contexts: [{ name: "c", context: { cluster: "c", user: sa } }],
    "current-context": "c",
  });
  const child = `
    const { cocoonsetProvider } = await import(${JSON.stringify(new URL("../plugin/provider.js", import.meta.url).href)});
    const { KubeClient } = await import(${JSON.stringify(new URL("../engine/kube/index.js", import.meta.url).href)});
    cocoonsetProvider("0.0.0");
    const client = KubeClient.fromString(process.env.KC);
    await client.get("/version");
    await client.get("/api/v1/namespaces/${ns}/serviceaccounts/${sa}");
    client.close();
    const status = (await import("node:fs")).readFileSync("/proc/self/status", "utf8");
    const kib = (k) => Number(new RegExp(k + ":\\\\s+(\\\\d+)").exec(status)[1]);
    console.log(JSON.stringify({ rssMiB: +(kib("VmRSS") / 1024).toFixed(1), peakMiB: +(kib("VmHWM") / 1024).toFixed(1) }));
  `;
  const out = execFileSync(process.execPath, ["--input-type=module", "-e", child], {
    env: { ...process.env, KC: kubeconfig },
    encoding: "utf8",
  });
  process.stdout.write(out);
} finally {
  await admin.delete(`/api/v1/namespaces/${ns}`).catch(() => false);
  admin.close();
  rmSync(dir, { recursive: true, force: true });
}
