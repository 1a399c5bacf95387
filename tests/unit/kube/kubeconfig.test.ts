/**
 * The project's kubeconfig loader (engine/kube/kubeconfig.ts): parsing, relative paths,
 * credentials and TLS options, token files re-read, the in-cluster service account,
 * field-named errors matching client-node's, and client-node loaded only for what is
 * delegated to it (exec plugins, auth providers, proxies).
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { after, describe, it } from "node:test";
import { KubeConfig as ClientNodeConfig } from "@kubernetes/client-node";
import { stringify } from "yaml";
import {
  KubeClient,
  KubeConfig,
  KubeConfigError,
  loadKubeConfig,
  type KubeRequestOptions,
} from "../../../engine/kube/index.js";

const scratch = mkdtempSync(join(tmpdir(), "cocoonset-kubeconfig-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

const b64 = (s: string) => Buffer.from(s).toString("base64");

function doc(
  cluster: Record<string, unknown>,
  user: Record<string, unknown> = {},
  context: Record<string, unknown> = {},
): string {
  return stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [
      { name: "other", cluster: { server: "https://other.invalid" } },
      { name: "c", cluster },
    ],
    users: [
      { name: "nobody", user: { token: "wrong" } },
      { name: "u", user },
    ],
    contexts: [
      { name: "other", context: { cluster: "other", user: "nobody" } },
      { name: "ctx", context: { cluster: "c", user: "u", ...context } },
    ],
    "current-context": "ctx",
  });
}

async function options(kc: KubeConfig): Promise<KubeRequestOptions> {
  const opts: KubeRequestOptions = { headers: {} };
  await kc.applyToHTTPSOptions(opts);
  return opts;
}

describe("KubeConfig.parse", () => {
  it("picks the current context's cluster, user and namespace", async () => {
    const kc = KubeConfig.parse(
      doc(
        {
          server: "https://127.0.0.1:6443/",
          "certificate-authority-data": b64("CA"),
          "tls-server-name": "kubernetes.default",
        },
        { token: "t0ken", as: "someone" },
        { namespace: "team-a" },
      ),
    );
    assert.equal(kc.getCurrentContext(), "ctx");
    assert.equal(kc.getCurrentCluster()?.server, "https://127.0.0.1:6443", "no trailing slash");
    assert.equal(kc.getCurrentCluster()?.caData, b64("CA"));
    assert.equal(kc.getCurrentUser()?.token, "t0ken");
    assert.equal(kc.getContextObject("ctx")?.namespace, "team-a");
    assert.equal(kc.delegatedFeature(), undefined);
    const opts = await options(kc);
    assert.equal(opts.ca?.toString(), "CA");
    assert.equal(opts.servername, "kubernetes.default");
    assert.equal(opts.rejectUnauthorized, undefined);
    assert.equal(opts.headers?.Authorization, "Bearer t0ken");
    assert.equal(opts.headers?.["Impersonate-User"], "someone");
  });

  it("reads client certificates from data and from files relative to the kubeconfig", async () => {
    const dir = join(scratch, "files");
    mkdirSync(join(dir, "pki"), { recursive: true });
    writeFileSync(join(dir, "pki", "ca.crt"), "CA-FILE");
    writeFileSync(join(dir, "pki", "client.crt"), "CERT-FILE");
    writeFileSync(join(dir, "pki", "client.key"), "KEY-FILE");
    const file = join(dir, "config");
    writeFileSync(
      file,
      doc(
        { server: "https://h:1", "certificate-authority": "pki/ca.crt" },
        { "client-certificate": "pki/client.crt", "client-key": "pki/client.key" },
      ),
    );
    const fromFiles = await options(KubeConfig.fromFile(file));
    assert.equal(fromFiles.ca?.toString(), "CA-FILE");
    assert.equal(fromFiles.cert?.toString(), "CERT-FILE");
    assert.equal(String(fromFiles.key as Buffer), "KEY-FILE");
    assert.equal(fromFiles.headers?.Authorization, undefined, "no token, no header");

    const fromData = await options(
      KubeConfig.parse(
        doc(
          { server: "https://h:1" },
          { "client-certificate-data": b64("CERT"), "client-key-data": b64("KEY") },
        ),
      ),
    );
    assert.equal(fromData.cert?.toString(), "CERT");
    assert.equal(String(fromData.key as Buffer), "KEY");
  });

  it("re-reads a token file on every use, and takes basic auth and skip-verify", async () => {
    const dir = join(scratch, "token");
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "token"), "first\n");
    const file = join(dir, "config");
    writeFileSync(file, doc({ server: "https://h:1" }, { "token-file": "token" }));
    const kc = KubeConfig.fromFile(file);
    assert.equal((await options(kc)).headers?.Authorization, "Bearer first");
    writeFileSync(join(dir, "token"), "second");
    assert.equal((await options(kc)).headers?.Authorization, "Bearer second");

    const basic = await options(
      KubeConfig.parse(
        doc(
          { server: "http://127.0.0.1:8080", "insecure-skip-tls-verify": true },
          { username: "admin", password: "s3cret" },
        ),
      ),
    );
    assert.equal(basic.auth, "admin:s3cret");
    assert.equal(basic.rejectUnauthorized, false);
  });

  it("refuses plain HTTP unless TLS verification is skipped", async () => {
    await assert.rejects(
      options(KubeConfig.parse(doc({ server: "http://127.0.0.1:8080" }, { token: "x" }))),
      /HTTP protocol is not allowed when skipTLSVerify is not set or false/,
    );
  });

  it("names the missing field exactly as client-node does", () => {
    const broken: [string, unknown][] = [
      ["clusters[0].name is missing", { clusters: [{ cluster: { server: "https://h" } }] }],
      ["clusters[0].cluster is missing", { clusters: [{ name: "c" }] }],
      ["clusters[0].cluster.server is missing", { clusters: [{ name: "c", cluster: {} }] }],
      ["users[0].name is missing", { users: [{ user: { token: "x" } }] }],
      ["contexts[0].name is missing", { contexts: [{ context: { cluster: "c" } }] }],
      ["contexts[0].context is missing", { contexts: [{ name: "x" }] }],
      ["contexts[0].context.cluster is missing", { contexts: [{ name: "x", context: {} }] }],
    ];
    for (const [message, d] of broken) {
      const text = stringify(d);
      assert.throws(() => KubeConfig.parse(text), { message });
      const reference = new ClientNodeConfig();
      assert.throws(() => reference.loadFromString(text), { message }, "client-node agrees");
    }
  });

  it("wraps what does not parse, and a kubeconfig with no current cluster, in KubeConfigError", () => {
    const bad = join(scratch, "bad.yaml");
    writeFileSync(bad, "clusters: [unclosed\n");
    assert.throws(
      () => loadKubeConfig(bad),
      (e: unknown) =>
        KubeConfigError.isInstance(e) &&
        (e as Error).message.startsWith(`the kubeconfig ${bad} (--kubeconfig) does not parse: `),
    );
    assert.throws(
      () => KubeClient.fromString(stringify({ clusters: [], "current-context": "none" })),
      { message: "the kubeconfig input has no current cluster" },
    );
    assert.throws(() => KubeClient.fromString("just a string"), {
      message: "the kubeconfig input does not parse: the document is a string, not a mapping",
    });
    const client = KubeClient.fromString(doc({ server: "https://h:1" }, {}, { namespace: " ns " }));
    assert.equal(client.contextNamespace, "ns");
    assert.equal(client.server, "https://h:1");
    client.close();
  });
});

describe("KubeConfig.inCluster", () => {
  it("uses the service account's CA, namespace and token, re-reading the token", async () => {
    const dir = join(scratch, "serviceaccount");
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "ca.crt"), "SA-CA");
    writeFileSync(join(dir, "namespace"), "cocoon-system\n");
    writeFileSync(join(dir, "token"), "sa-1");
    const saved = { ...process.env };
    try {
      process.env.KUBERNETES_SERVICE_HOST = "fd00::1";
      process.env.KUBERNETES_SERVICE_PORT = "443";
      const kc = KubeConfig.inCluster(dir);
      assert.equal(kc.getCurrentCluster()?.server, "https://[fd00::1]:443");
      assert.equal(kc.getContextObject(kc.getCurrentContext())?.namespace, "cocoon-system");
      const first = await options(kc);
      assert.equal(first.ca?.toString(), "SA-CA");
      assert.equal(first.headers?.Authorization, "Bearer sa-1");
      writeFileSync(join(dir, "token"), "sa-2");
      assert.equal((await options(kc)).headers?.Authorization, "Bearer sa-2");
      process.env.KUBERNETES_SERVICE_HOST = "10.0.0.1";
      process.env.KUBERNETES_SERVICE_PORT = "8080";
      assert.equal(KubeConfig.inCluster(dir).getCurrentCluster()?.server, "http://10.0.0.1:8080");
    } finally {
      process.env.KUBERNETES_SERVICE_HOST = saved.KUBERNETES_SERVICE_HOST;
      process.env.KUBERNETES_SERVICE_PORT = saved.KUBERNETES_SERVICE_PORT;
      if (saved.KUBERNETES_SERVICE_HOST === undefined) delete process.env.KUBERNETES_SERVICE_HOST;
      if (saved.KUBERNETES_SERVICE_PORT === undefined) delete process.env.KUBERNETES_SERVICE_PORT;
    }
  });
});

describe("delegation to client-node", () => {
  it("runs an exec credential plugin through client-node", async () => {
    const plugin = join(scratch, "plugin.sh");
    const credential = {
      apiVersion: "client.authentication.k8s.io/v1",
      kind: "ExecCredential",
      status: { token: "from-plugin" },
    };
    writeFileSync(plugin, `#!/bin/sh\nprintf '%s' '${JSON.stringify(credential)}'\n`);
    chmodSync(plugin, 0o755);
    const kc = KubeConfig.parse(
      doc(
        { server: "https://h:1", "certificate-authority-data": b64("CA") },
        {
          exec: {
            apiVersion: "client.authentication.k8s.io/v1",
            command: plugin,
            interactiveMode: "Never",
          },
        },
      ),
    );
    assert.equal(kc.delegatedFeature(), "exec");
    const opts = await options(kc);
    assert.equal(opts.headers?.Authorization, "Bearer from-plugin");
    assert.equal(opts.ca?.toString(), "CA");
    assert.equal(
      KubeConfig.parse(
        doc({ server: "https://h:1", "proxy-url": "http://p:3128" }, {}),
      ).delegatedFeature(),
      "proxy-url",
    );
    assert.equal(
      KubeConfig.parse(
        doc({ server: "https://h:1" }, { "auth-provider": { name: "oidc", config: {} } }),
      ).delegatedFeature(),
      "auth-provider",
    );
  });

  /** Packages a fresh process loads while it applies `kubeconfigYaml` through KubeClient's loader. */
  function packagesLoaded(kubeconfigYaml: string): string[] {
    const kube = pathToFileURL(join(import.meta.dirname, "../../../engine/kube/index.js")).href;
    const script = `
      import { registerHooks } from "node:module";
      const seen = new Set();
      registerHooks({ resolve(s, c, next) { const r = next(s, c);
        const m = /node_modules\\/((?:@[^/]+\\/)?[^/]+)/.exec(r.url); if (m) seen.add(m[1]); return r; } });
      const { KubeConfig } = await import(${JSON.stringify(kube)});
      await KubeConfig.parse(process.env.KC).applyToHTTPSOptions({ headers: {} });
      process.stdout.write(JSON.stringify([...seen]));`;
    const r = spawnSync(process.execPath, ["--input-type=module", "-e", script], {
      env: { ...process.env, KC: kubeconfigYaml },
      encoding: "utf8",
    });
    assert.equal(r.status, 0, r.stderr);
    return JSON.parse(r.stdout) as string[];
  }

  it("does not load client-node for a token kubeconfig, and does for a proxied one", () => {
    const plain = packagesLoaded(doc({ server: "https://h:1" }, { token: "x" }));
    assert.ok(plain.includes("yaml"), `the probe sees packages: ${plain.join(", ")}`);
    assert.ok(!plain.includes("@kubernetes/client-node"), plain.join(", "));
    const proxied = packagesLoaded(
      doc({ server: "https://h:1", "proxy-url": "http://127.0.0.1:1" }, { token: "x" }),
    );
    assert.ok(proxied.includes("@kubernetes/client-node"), proxied.join(", "));
  });
});
