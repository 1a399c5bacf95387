/**
 * The project's own kubeconfig loader: parses a kubeconfig (clusters, users, contexts,
 * `current-context`) or the in-cluster service account, and turns the current context into
 * TLS options and request headers for {@link KubeClient}.
 *
 * Handled: `certificate-authority(-data)`, `client-certificate(-data)`,
 * `client-key(-data)`, `token`, `token-file` (re-read on every call, like the in-cluster
 * service account token, which the kubelet rotates), `username`/`password`, `as`
 * (impersonation), `insecure-skip-tls-verify`, `tls-server-name`, `proxy-url` (an HTTP
 * CONNECT proxy, see proxy-agent.ts), exec credential plugins (exec-credential.ts) and the
 * context's `namespace`. Relative file paths (and an exec command with a slash) resolve
 * against the kubeconfig's folder. Several files (a `$KUBECONFIG` list) merge as client-go
 * merges them ({@link mergeKubeconfigFiles}).
 *
 * Not handled: `auth-provider` other than `oidc` with an `id-token` (client-go itself dropped
 * the `gcp` and `azure` providers for the exec plugins that replaced them), and SOCKS proxies.
 * Their errors say so. No Kubernetes client library is loaded.
 *
 * Errors name the field at fault (`clusters[0].cluster.server is missing`), as
 * client-go's and client-node's loaders do.
 */
import { existsSync, readFileSync } from "node:fs";
import type { RequestOptions } from "node:https";
import { isIPv6 } from "node:net";
import { createRequire } from "node:module";
import { dirname, isAbsolute, join } from "node:path";
import { InvalidValueError } from "./branded-error.js";
import { ExecCredentialPlugin, parseExecConfig, type ExecClusterInfo } from "./exec-credential.js";

type Yaml = typeof import("yaml");
let loadedYaml: Yaml | undefined;

/**
 * The YAML parser, loaded on the first kubeconfig file that needs it: the controller in its
 * image reads in-cluster credentials and never loads it. Loaded synchronously (the package
 * ships CommonJS for Node), since reading a kubeconfig is synchronous.
 */
export function loadYaml(): Yaml {
  return (loadedYaml ??= createRequire(import.meta.url)("yaml") as Yaml);
}

/** A kubeconfig's document: JSON (a YAML document too) needs no YAML parser. */
function parse(text: string): unknown {
  if (text.trimStart().startsWith("{")) {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      // A YAML flow mapping that is not JSON: the YAML parser reads it.
    }
  }
  return loadYaml().parse(text) as unknown;
}

/** A cluster entry (field names as client-node has them). */
export interface KubeconfigCluster {
  name: string;
  /** The apiserver URL, without a trailing slash. */
  server: string;
  caData?: string;
  caFile?: string;
  skipTLSVerify: boolean;
  tlsServerName?: string;
  proxyUrl?: string;
  /** The `client.authentication.k8s.io/exec` extension, handed to exec plugins. */
  execExtension?: unknown;
}

/** A user entry (field names as client-node has them, plus `tokenFile`). */
export interface KubeconfigUser {
  name: string;
  token?: string;
  tokenFile?: string;
  certData?: string;
  certFile?: string;
  keyData?: string;
  keyFile?: string;
  username?: string;
  password?: string;
  impersonateUser?: string;
  exec?: Record<string, unknown>;
  authProvider?: Record<string, unknown>;
}

/** A context entry. */
export interface KubeconfigContext {
  name: string;
  cluster: string;
  user?: string;
  namespace?: string;
}

/** Where the in-cluster service account is mounted. */
export const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

/** Request options a kubeconfig fills in (what `node:https` takes, headers as a record). */
export type KubeRequestOptions = RequestOptions & { headers?: Record<string, string> };

type Doc = Record<string, unknown>;

const str = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined);
const obj = (v: unknown): Doc | undefined =>
  v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Doc) : undefined;
const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

function absolute(base: string | undefined, file: string | undefined): string | undefined {
  if (!file || !base || isAbsolute(file)) return file;
  return join(base, file);
}

function fileOrData(file: string | undefined, data: string | undefined): Buffer | undefined {
  if (file) return readFileSync(file);
  if (data) return Buffer.from(data, "base64");
  return undefined;
}

function parseClusters(v: unknown, base?: string): KubeconfigCluster[] {
  return list(v).map((e, i) => {
    const entry = obj(e) ?? {};
    const name = str(entry.name);
    if (!name) throw new InvalidValueError(`clusters[${i}].name is missing`);
    const c = obj(entry.cluster);
    if (!c) throw new InvalidValueError(`clusters[${i}].cluster is missing`);
    const server = str(c.server);
    if (!server) throw new InvalidValueError(`clusters[${i}].cluster.server is missing`);
    return {
      name,
      server: server.replace(/\/$/, ""),
      caData: str(c["certificate-authority-data"]),
      caFile: absolute(base, str(c["certificate-authority"])),
      skipTLSVerify: c["insecure-skip-tls-verify"] === true,
      tlsServerName: str(c["tls-server-name"]),
      proxyUrl: str(c["proxy-url"]),
      execExtension: list(c.extensions)
        .map(obj)
        .find((x) => x?.name === "client.authentication.k8s.io/exec")?.extension,
    };
  });
}

function parseUsers(v: unknown, base?: string): KubeconfigUser[] {
  return list(v).map((e, i) => {
    const entry = obj(e) ?? {};
    const name = str(entry.name);
    if (!name) throw new InvalidValueError(`users[${i}].name is missing`);
    const u = obj(entry.user) ?? {};
    return {
      name,
      token: str(u.token),
      tokenFile: absolute(base, str(u["token-file"])),
      certData: str(u["client-certificate-data"]),
      certFile: absolute(base, str(u["client-certificate"])),
      keyData: str(u["client-key-data"]),
      keyFile: absolute(base, str(u["client-key"])),
      username: str(u.username),
      password: typeof u.password === "string" ? u.password : undefined,
      impersonateUser: str(u.as),
      exec: execOf(obj(u.exec), base),
      authProvider: obj(u["auth-provider"]),
    };
  });
}

/** An exec entry with a relative command path (one with a slash) made absolute, as client-go does. */
function execOf(exec: Doc | undefined, base?: string): Doc | undefined {
  const command = str(exec?.command);
  if (!exec || !command || !command.includes("/")) return exec;
  return { ...exec, command: absolute(base, command) };
}

function parseContexts(v: unknown): KubeconfigContext[] {
  return list(v).map((e, i) => {
    const entry = obj(e) ?? {};
    const name = str(entry.name);
    if (!name) throw new InvalidValueError(`contexts[${i}].name is missing`);
    const c = obj(entry.context);
    if (!c) throw new InvalidValueError(`contexts[${i}].context is missing`);
    const cluster = str(c.cluster);
    if (!cluster) throw new InvalidValueError(`contexts[${i}].context.cluster is missing`);
    return { name, cluster, user: str(c.user), namespace: str(c.namespace) };
  });
}

/** A loaded kubeconfig. */
export class KubeConfig {
  private plugin?: ExecCredentialPlugin;

  constructor(
    readonly clusters: readonly KubeconfigCluster[],
    readonly users: readonly KubeconfigUser[],
    readonly contexts: readonly KubeconfigContext[],
    readonly currentContext: string | undefined,
  ) {}

  /**
   * Parses kubeconfig YAML (or JSON). `baseDir` is where relative file paths resolve (the
   * kubeconfig's folder); without it they stay as written. Throws on YAML that does not
   * parse, and an InvalidValueError for an entry that lacks a required field (naming it).
   */
  static parse(text: string, baseDir?: string): KubeConfig {
    const doc: unknown = parse(text);
    if (doc === null || doc === undefined) return new KubeConfig([], [], [], undefined); // an empty file: no current cluster
    const root = obj(doc);
    if (!root) throw new InvalidValueError(`the document is a ${typeof doc}, not a mapping`);
    return new KubeConfig(
      parseClusters(root.clusters, baseDir),
      parseUsers(root.users, baseDir),
      parseContexts(root.contexts),
      str(root["current-context"]),
    );
  }

  /** Reads and parses a kubeconfig file; relative paths in it resolve against its folder. */
  static fromFile(file: string): KubeConfig {
    return KubeConfig.parse(readFileSync(file, "utf8"), dirname(file));
  }

  /**
   * The in-cluster service account: `$KUBERNETES_SERVICE_HOST`/`_PORT`, the mounted CA, the
   * token (re-read on every use) and the namespace file, under `dir`.
   */
  static inCluster(dir = SERVICE_ACCOUNT_DIR): KubeConfig {
    const host = process.env.KUBERNETES_SERVICE_HOST ?? "";
    const port = process.env.KUBERNETES_SERVICE_PORT ?? "443";
    const scheme = ["80", "8080", "8001"].includes(port) ? "http" : "https";
    let namespace: string | undefined;
    try {
      namespace = readFileSync(join(dir, "namespace"), "utf8").trim() || undefined;
    } catch {
      namespace = undefined;
    }
    return new KubeConfig(
      [
        {
          name: "in-cluster",
          server: `${scheme}://${isIPv6(host) ? `[${host}]` : host}:${port}`,
          caFile: join(dir, "ca.crt"),
          skipTLSVerify: false,
        },
      ],
      [{ name: "in-cluster", tokenFile: join(dir, "token") }],
      [{ name: "in-cluster", cluster: "in-cluster", user: "in-cluster", namespace }],
      "in-cluster",
    );
  }

  /** The same configuration with `context` current (kubectl's `--context`). */
  withCurrentContext(context: string): KubeConfig {
    if (!this.contexts.some((c) => c.name === context))
      throw new InvalidValueError(`the kubeconfig has no context named "${context}"`);
    return new KubeConfig(this.clusters, this.users, this.contexts, context);
  }

  getCurrentContext(): string | undefined {
    return this.currentContext;
  }

  getContextObject(name: string | undefined): KubeconfigContext | undefined {
    return this.contexts.find((c) => c.name === name);
  }

  getCurrentCluster(): KubeconfigCluster | undefined {
    const ctx = this.getContextObject(this.currentContext);
    return ctx && this.clusters.find((c) => c.name === ctx.cluster);
  }

  getCurrentUser(): KubeconfigUser | undefined {
    const ctx = this.getContextObject(this.currentContext);
    return ctx?.user === undefined ? undefined : this.users.find((u) => u.name === ctx.user);
  }

  /**
   * Fills in TLS options, credentials and headers for the current context. Reads files (CA,
   * certificates, token files) on every call, so rotated credentials are picked up; an exec
   * plugin's credential is kept until it expires. Resolves with when the credential expires
   * (milliseconds since the epoch), if it does.
   */
  async applyToHTTPSOptions(opts: KubeRequestOptions): Promise<{ expiresAt?: number }> {
    const cluster = this.getCurrentCluster();
    // Plain errors here and below: the client reports them inside a KubeConfigError naming
    // the kubeconfig (client.ts, getTransport), which is the error callers branch on.
    if (!cluster) throw new Error("the kubeconfig has no current cluster");
    if (cluster.server.startsWith("http:") && !cluster.skipTLSVerify)
      throw new Error("HTTP protocol is not allowed when skipTLSVerify is not set or false");
    if (cluster.skipTLSVerify) opts.rejectUnauthorized = false;
    if (cluster.tlsServerName) opts.servername = cluster.tlsServerName;
    const ca = fileOrData(cluster.caFile, cluster.caData);
    if (ca) opts.ca = ca;
    const user = this.getCurrentUser();
    if (!user) return {};
    const cert = fileOrData(user.certFile, user.certData);
    if (cert) opts.cert = cert;
    const key = fileOrData(user.keyFile, user.keyData);
    if (key) opts.key = key;
    const headers = (opts.headers ??= {});
    if (user.impersonateUser) headers["Impersonate-User"] = user.impersonateUser;
    let token =
      user.token ?? (user.tokenFile ? readFileSync(user.tokenFile, "utf8").trim() : undefined);
    let expiresAt: number | undefined;
    if (user.authProvider) token = authProviderToken(user.authProvider);
    if (user.exec && !token) {
      const credential = await this.execPlugin(user).credential();
      token = credential.token;
      if (credential.clientCertificateData && credential.clientKeyData) {
        opts.cert = Buffer.from(credential.clientCertificateData);
        opts.key = Buffer.from(credential.clientKeyData);
      }
      expiresAt = credential.expiresAt;
    }
    if (token) headers.Authorization = `Bearer ${token}`;
    if (user.username) opts.auth = `${user.username}:${user.password ?? ""}`;
    return { expiresAt };
  }

  /**
   * Drops an exec plugin's kept credential after the apiserver refused it (401); true when
   * there was one, so a retry runs the plugin again.
   */
  invalidateCredentials(): boolean {
    if (!this.plugin) return false;
    this.plugin.invalidate();
    return true;
  }

  private execPlugin(user: KubeconfigUser): ExecCredentialPlugin {
    if (!this.plugin) {
      const at = `users[${this.users.indexOf(user)}].user.exec`;
      this.plugin = new ExecCredentialPlugin(parseExecConfig(user.exec!, at), () =>
        this.clusterInfo(),
      );
    }
    return this.plugin;
  }

  /** The current cluster as an exec plugin is told of it (`provideClusterInfo`). */
  private clusterInfo(): ExecClusterInfo | undefined {
    const c = this.getCurrentCluster();
    if (!c) return undefined;
    const ca = fileOrData(c.caFile, c.caData);
    return {
      server: c.server,
      ...(c.tlsServerName ? { "tls-server-name": c.tlsServerName } : {}),
      ...(c.skipTLSVerify ? { "insecure-skip-tls-verify": true } : {}),
      ...(ca ? { "certificate-authority-data": ca.toString("base64") } : {}),
      ...(c.proxyUrl ? { "proxy-url": c.proxyUrl } : {}),
      ...(c.execExtension !== undefined ? { config: c.execExtension } : {}),
    };
  }
}

/** The bearer token of an `auth-provider` entry: `oidc` with an `id-token` only. */
function authProviderToken(provider: Record<string, unknown>): string {
  const name = str(provider.name) ?? "(unnamed)";
  const idToken = str(obj(provider.config)?.["id-token"]);
  if (name === "oidc" && idToken) return idToken;
  throw new Error(
    name === "oidc"
      ? "the oidc auth-provider has no id-token (refreshing one is not supported; use an exec plugin such as kubelogin)"
      : `the auth-provider "${name}" is not supported (client-go removed it too; use its exec plugin, e.g. gke-gcloud-auth-plugin or kubelogin)`,
  );
}

/** The fields of a kubeconfig entry that name files, which a merge makes absolute. */
const FILE_FIELDS: Record<string, string[]> = {
  clusters: ["certificate-authority"],
  users: ["client-certificate", "client-key", "token-file"],
};
const ENTRY_KEY: Record<string, string> = {
  clusters: "cluster",
  users: "user",
  contexts: "context",
};

/**
 * Merges kubeconfig files as client-go merges a `$KUBECONFIG` list: files that do not exist
 * are skipped; for clusters, users and contexts the first file that names an entry wins;
 * `current-context` comes from the first file that sets one. Relative paths in each file
 * resolve against its own folder (made absolute in the result). Returns the merged YAML
 * and the files read; throws when none exists.
 */
export function mergeKubeconfigFiles(files: readonly string[]): { text: string; read: string[] } {
  const read = files.filter((f) => f && existsSync(f));
  if (!read.length) throw new Error(`none of ${files.join(", ")} exists`);
  if (read.length === 1) return { text: readFileSync(read[0], "utf8"), read };
  const merged: Record<string, unknown> = { apiVersion: "v1", kind: "Config" };
  const entries: Record<string, Doc[]> = { clusters: [], users: [], contexts: [] };
  for (const file of read) {
    let doc: unknown;
    try {
      doc = parse(readFileSync(file, "utf8"));
    } catch (e) {
      throw new Error(`${file}: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
    }
    if (doc === null || doc === undefined) continue;
    const root = obj(doc);
    if (!root) throw new Error(`${file}: the document is a ${typeof doc}, not a mapping`);
    if (merged["current-context"] === undefined && str(root["current-context"]))
      merged["current-context"] = root["current-context"];
    for (const kind of Object.keys(entries)) {
      for (const e of list(root[kind])) {
        const entry = obj(e);
        if (!entry || entries[kind].some((x) => x.name === entry.name)) continue;
        entries[kind].push(absolutePaths(kind, entry, dirname(file)));
      }
    }
  }
  for (const [kind, list] of Object.entries(entries)) merged[kind] = list;
  return { text: loadYaml().stringify(merged), read };
}

function absolutePaths(kind: string, entry: Doc, base: string): Doc {
  const inner = obj(entry[ENTRY_KEY[kind]]);
  if (!inner) return entry;
  const out: Doc = { ...inner };
  for (const field of FILE_FIELDS[kind] ?? []) {
    const v = str(out[field]);
    if (v) out[field] = absolute(base, v);
  }
  if (kind === "users" && obj(out.exec)) out.exec = execOf(obj(out.exec), base);
  return { ...entry, [ENTRY_KEY[kind]]: out };
}
