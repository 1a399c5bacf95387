/**
 * The project's kubeconfig loader (engine/kube/kubeconfig.ts): parsing, relative paths,
 * credentials and TLS options, token files re-read, the in-cluster service account,
 * field-named errors matching client-node's (a dev dependency, the reference here), exec
 * credential plugins, auth providers, `$KUBECONFIG` lists and precedence, and no Kubernetes
 * client library loaded for any of it.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { pathToFileURL } from "node:url";
import { after, describe, it } from "node:test";
import { KubeConfig as ClientNodeConfig } from "@kubernetes/client-node";
import { stringify } from "yaml";
import {
  KubeClient,
  KubeConfig,
  KubeConfigError,
  loadKubeConfig,
  mergeKubeconfigFiles,
  type KubeRequestOptions,
} from "../../../engine/kube/index.js";
import { ExecCredentialPlugin, parseExecConfig } from "../../../engine/kube/exec-credential.js";

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

/** Writes an executable shell script and returns its path. */
function script(name: string, body: string): string {
  const file = join(scratch, name);
  writeFileSync(file, `#!/bin/sh\n${body}\n`);
  chmodSync(file, 0o755);
  return file;
}

describe("exec credential plugins", () => {
  const v1 = "client.authentication.k8s.io/v1";
  const v1beta1 = "client.authentication.k8s.io/v1beta1";

  it("runs the plugin with its args, env and KUBERNETES_EXEC_INFO, and uses its token", async () => {
    const seen = join(scratch, "exec-info.json");
    // The plugin records what it was given and answers in the version it was asked for.
    const plugin = script(
      "record.sh",
      `printf '%s' "$KUBERNETES_EXEC_INFO" > "${seen}"\nprintf '{"apiVersion":"${v1beta1}","kind":"ExecCredential","status":{"token":"%s-%s"}}' "$1" "$GREETING"`,
    );
    const kc = KubeConfig.parse(
      stringify({
        clusters: [
          {
            name: "c",
            cluster: {
              server: "https://h:1",
              "certificate-authority-data": b64("CA"),
              "tls-server-name": "api.internal",
              extensions: [
                { name: "client.authentication.k8s.io/exec", extension: { audience: "x" } },
              ],
            },
          },
        ],
        users: [
          {
            name: "u",
            user: {
              exec: {
                apiVersion: v1beta1,
                command: plugin,
                args: ["from"],
                env: [{ name: "GREETING", value: "plugin" }],
                provideClusterInfo: true,
              },
            },
          },
        ],
        contexts: [{ name: "ctx", context: { cluster: "c", user: "u" } }],
        "current-context": "ctx",
      }),
    );
    const opts = await options(kc);
    assert.equal(opts.headers?.Authorization, "Bearer from-plugin");
    assert.equal(opts.ca?.toString(), "CA");
    const info = JSON.parse(readFileSync(seen, "utf8")) as Record<string, unknown>;
    assert.deepEqual(info, {
      apiVersion: v1beta1,
      kind: "ExecCredential",
      spec: {
        interactive: false,
        cluster: {
          server: "https://h:1",
          "tls-server-name": "api.internal",
          "certificate-authority-data": b64("CA"),
          config: { audience: "x" },
        },
      },
    });
  });

  it("keeps the credential until its expirationTimestamp, and runs the plugin again after", async () => {
    const runs = join(scratch, "runs");
    writeFileSync(runs, "");
    const plugin = script(
      "counting.sh",
      `echo run >> "${runs}"\nn=$(wc -l < "${runs}" | tr -d ' ')\nprintf '{"apiVersion":"${v1}","kind":"ExecCredential","status":{"token":"t%s","expirationTimestamp":"2030-01-01T00:00:00Z"}}' "$n"`,
    );
    let now = Date.parse("2029-12-31T23:59:00Z");
    const p = new ExecCredentialPlugin(
      parseExecConfig({ apiVersion: v1, command: plugin, interactiveMode: "Never" }, "exec"),
      () => undefined,
      () => now,
    );
    const [a, b] = await Promise.all([p.credential(), p.credential()]);
    assert.equal(a.token, "t1");
    assert.equal(b.token, "t1", "concurrent requests share one run");
    assert.equal(a.expiresAt, Date.parse("2030-01-01T00:00:00Z"));
    assert.equal((await p.credential()).token, "t1", "kept while valid");
    now = Date.parse("2030-01-01T00:00:01Z");
    assert.equal((await p.credential()).token, "t2", "expired: run again");
    p.invalidate();
    assert.equal((await p.credential()).token, "t3", "refused (401): run again");
  });

  it("says what is wrong with a plugin, never quoting its output", async () => {
    const run = (command: string, extra: Record<string, unknown> = {}) =>
      options(
        KubeConfig.parse(
          doc(
            { server: "https://h:1" },
            { exec: { apiVersion: v1, command, interactiveMode: "Never", ...extra } },
          ),
        ),
      );
    await assert.rejects(run(join(scratch, "absent-plugin"), { installHint: "install it" }), {
      message: `the exec plugin ${join(scratch, "absent-plugin")} was not found: install it`,
    });
    const failing = script("failing.sh", "exit 3");
    await assert.rejects(run(failing), {
      message: `the exec plugin ${failing} failed (exit code 3)`,
    });
    const wrongVersion = script(
      "wrong-version.sh",
      `printf '{"apiVersion":"${v1beta1}","kind":"ExecCredential","status":{"token":"secret-value"}}'`,
    );
    await assert.rejects(run(wrongVersion), (e: Error) => {
      assert.match(e.message, /printed an ExecCredential of apiVersion .*v1beta1, not .*\/v1$/);
      assert.doesNotMatch(e.message, /secret-value/);
      return true;
    });
    await assert.rejects(
      options(KubeConfig.parse(doc({ server: "https://h:1" }, { exec: { command: "x" } }))),
      { message: "users[1].user.exec.apiVersion is missing" },
    );
    await assert.rejects(run(failing, { interactiveMode: "Sometimes" }), {
      message:
        'users[1].user.exec.interactiveMode "Sometimes" is not one of Never, IfAvailable, Always',
    });
  });

  it("uses a client certificate a plugin returns", async () => {
    const plugin = script(
      "cert.sh",
      `printf '{"apiVersion":"${v1}","kind":"ExecCredential","status":{"clientCertificateData":"CERT","clientKeyData":"KEY"}}'`,
    );
    const opts = await options(
      KubeConfig.parse(
        doc(
          { server: "https://h:1" },
          { exec: { apiVersion: v1, command: plugin, interactiveMode: "Never" } },
        ),
      ),
    );
    assert.equal(String(opts.cert), "CERT");
    assert.deepEqual(opts.key, Buffer.from("KEY"));
    assert.equal(opts.headers?.Authorization, undefined);
  });
});

describe("auth providers", () => {
  it("uses an oidc id-token, and refuses the providers client-go removed", async () => {
    const oidc = { name: "oidc", config: { "id-token": "id.tok.en" } };
    const opts = await options(
      KubeConfig.parse(doc({ server: "https://h:1" }, { "auth-provider": oidc })),
    );
    assert.equal(opts.headers?.Authorization, "Bearer id.tok.en");
    await assert.rejects(
      options(
        KubeConfig.parse(doc({ server: "https://h:1" }, { "auth-provider": { name: "gcp" } })),
      ),
      /the auth-provider "gcp" is not supported .*gke-gcloud-auth-plugin/,
    );
  });
});

describe("$KUBECONFIG lists", () => {
  it("merge as client-go merges them: first file wins per entry, current-context from the first that sets one", () => {
    const dirA = join(scratch, "a");
    const dirB = join(scratch, "b");
    mkdirSync(dirA, { recursive: true });
    mkdirSync(dirB, { recursive: true });
    const a = join(dirA, "config");
    const b = join(dirB, "config");
    writeFileSync(
      a,
      stringify({
        clusters: [{ name: "shared", cluster: { server: "https://from-a:1" } }],
        users: [{ name: "ua", user: { "token-file": "token" } }],
        contexts: [{ name: "ctx-a", context: { cluster: "shared", user: "ua" } }],
      }),
    );
    writeFileSync(
      b,
      stringify({
        clusters: [
          { name: "shared", cluster: { server: "https://from-b:1" } },
          {
            name: "only-b",
            cluster: { server: "https://only-b:1", "certificate-authority": "ca.crt" },
          },
        ],
        users: [{ name: "ub", user: { token: "b" } }],
        contexts: [{ name: "ctx-b", context: { cluster: "only-b", user: "ub" } }],
        "current-context": "ctx-b",
      }),
    );
    const { text, read } = mergeKubeconfigFiles([join(scratch, "missing"), a, b]);
    assert.deepEqual(read, [a, b], "a file that does not exist is skipped");
    const kc = KubeConfig.parse(text);
    assert.equal(kc.getCurrentContext(), "ctx-b", "b is the first file with a current-context");
    assert.equal(kc.clusters.find((c) => c.name === "shared")?.server, "https://from-a:1");
    assert.equal(kc.getCurrentCluster()?.caFile, join(dirB, "ca.crt"), "relative to its own file");
    assert.equal(kc.users.find((u) => u.name === "ua")?.tokenFile, join(dirA, "token"));
    assert.equal(kc.withCurrentContext("ctx-a").getCurrentCluster()?.server, "https://from-a:1");

    const saved = process.env.KUBECONFIG;
    try {
      process.env.KUBECONFIG = [a, b].join(delimiter);
      const loaded = loadKubeConfig();
      assert.equal(loaded.source, `$KUBECONFIG ${a}${delimiter}${b}`);
      assert.equal(loaded.config.getCurrentCluster()?.server, "https://only-b:1");
      const other = loadKubeConfig(undefined, "ctx-a");
      assert.equal(other.config.getCurrentCluster()?.server, "https://from-a:1");
      assert.throws(() => loadKubeConfig(undefined, "nope"), {
        message: `the kubeconfig ${a}${delimiter}${b} ($KUBECONFIG): the kubeconfig has no context named "nope" (--context)`,
      });
    } finally {
      if (saved === undefined) delete process.env.KUBECONFIG;
      else process.env.KUBECONFIG = saved;
    }
  });

  it("names the file of the list that does not parse, in a KubeConfigError", () => {
    const good = join(scratch, "good.yaml");
    const broken = join(scratch, "broken.yaml");
    writeFileSync(good, doc({ server: "https://h:1" }, { token: "x" }));
    writeFileSync(broken, "clusters: [unclosed\n");
    const saved = process.env.KUBECONFIG;
    try {
      process.env.KUBECONFIG = [good, broken].join(delimiter);
      assert.throws(
        () => loadKubeConfig(),
        (e: unknown) =>
          KubeConfigError.isInstance(e) &&
          (e as Error).message.includes(`($KUBECONFIG) does not parse: ${broken}: `),
      );
    } finally {
      if (saved === undefined) delete process.env.KUBECONFIG;
      else process.env.KUBECONFIG = saved;
    }
  });

  it("comes before in-cluster credentials, as in controller-runtime", () => {
    const file = join(scratch, "precedence.yaml");
    writeFileSync(file, doc({ server: "https://from-env:1" }, { token: "x" }));
    const sa = join(scratch, "pod-serviceaccount");
    mkdirSync(sa, { recursive: true });
    writeFileSync(join(sa, "token"), "sa");
    const saved = { ...process.env };
    try {
      process.env.KUBERNETES_SERVICE_HOST = "10.0.0.1";
      delete process.env.KUBECONFIG;
      assert.equal(loadKubeConfig(undefined, undefined, sa).source, "in-cluster service account");
      // In a pod with $KUBECONFIG set, the kubeconfig wins; --kubeconfig wins over both.
      process.env.KUBECONFIG = file;
      assert.equal(loadKubeConfig(undefined, undefined, sa).source, `$KUBECONFIG ${file}`);
      const flag = join(scratch, "flag.yaml");
      writeFileSync(flag, doc({ server: "https://from-flag:1" }, { token: "x" }));
      assert.equal(loadKubeConfig(flag, undefined, sa).source, `--kubeconfig ${flag}`);
    } finally {
      for (const k of ["KUBECONFIG", "KUBERNETES_SERVICE_HOST"]) {
        if (saved[k] === undefined) delete process.env[k];
        else process.env[k] = saved[k];
      }
    }
  });
});

describe("no Kubernetes client library", () => {
  /** Packages a fresh process loads while it applies `kubeconfigYaml` through KubeClient's loader. */
  function packagesLoaded(kubeconfigYaml: string): string[] {
    const kube = pathToFileURL(join(import.meta.dirname, "../../../engine/kube/index.js")).href;
    const script = `
      import { registerHooks } from "node:module";
      const seen = new Set();
      registerHooks({ resolve(s, c, next) { const r = next(s, c);
        const m = /node_modules\\/((?:@[^/]+\\/)?[^/]+)/.exec(r.url); if (m) seen.add(m[1]); return r; } });
      const { KubeClient } = await import(${JSON.stringify(kube)});
      const client = KubeClient.fromString(process.env.KC);
      await client.config.applyToHTTPSOptions({ headers: {} });
      client.close();
      process.stdout.write(JSON.stringify([...seen]));`;
    const r = spawnSync(process.execPath, ["--input-type=module", "-e", script], {
      env: { ...process.env, KC: kubeconfigYaml },
      encoding: "utf8",
    });
    assert.equal(r.status, 0, r.stderr);
    return JSON.parse(r.stdout) as string[];
  }

  it("is loaded for a token, an exec plugin or a proxied kubeconfig", () => {
    const plugin = script(
      "quiet.sh",
      `printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"x"}}'`,
    );
    for (const kubeconfig of [
      doc({ server: "https://h:1" }, { token: "x" }),
      doc(
        { server: "https://h:1" },
        {
          exec: {
            apiVersion: "client.authentication.k8s.io/v1",
            command: plugin,
            interactiveMode: "Never",
          },
        },
      ),
      doc({ server: "https://h:1", "proxy-url": "http://127.0.0.1:1" }, { token: "x" }),
    ]) {
      const loaded = packagesLoaded(kubeconfig);
      assert.ok(loaded.includes("yaml"), `the probe sees packages: ${loaded.join(", ")}`);
      assert.ok(!loaded.some((p) => p.startsWith("@kubernetes/")), loaded.join(", "));
    }
  });

  it("refuses a SOCKS proxy-url, saying so", () => {
    assert.throws(
      () =>
        KubeClient.fromString(doc({ server: "https://h:1", "proxy-url": "socks5://p:1080" }, {})),
      /proxy-url with scheme socks5 is not supported \(only http:\/\/ CONNECT proxies\)/,
    );
  });
});
