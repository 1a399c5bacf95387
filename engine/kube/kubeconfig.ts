/**
 * The project's own kubeconfig loader: parses a kubeconfig (clusters, users, contexts,
 * `current-context`) or the in-cluster service account, and turns the current context into
 * TLS options and request headers for {@link KubeClient}.
 *
 * Handled here: `certificate-authority(-data)`, `client-certificate(-data)`,
 * `client-key(-data)`, `token`, `token-file` (re-read on every call, like the in-cluster
 * service account token, which the kubelet rotates), `username`/`password`, `as`
 * (impersonation), `insecure-skip-tls-verify`, `tls-server-name` and the context's
 * `namespace`. Relative file paths resolve against the kubeconfig's folder.
 *
 * Delegated: exec credential plugins, `auth-provider` and `proxy-url` are handed to
 * `@kubernetes/client-node`, imported on first use only. That package's config module loads
 * its whole generated API (tens of MiB resident), which a process that never meets one of
 * these kubeconfigs does not pay.
 *
 * Errors name the field at fault (`clusters[0].cluster.server is missing`), as
 * client-node's loader does, so a kubeconfig gets the same message on either path.
 */
import { readFileSync } from "node:fs";
import type { RequestOptions } from "node:https";
import { isIPv6 } from "node:net";
import { dirname, isAbsolute, join } from "node:path";
import { parse } from "yaml";
import type { KubeConfig as ClientNodeConfig } from "@kubernetes/client-node";
import { InvalidValueError } from "./branded-error.js";

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
      exec: obj(u.exec),
      authProvider: obj(u["auth-provider"]),
    };
  });
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
  private delegate?: Promise<ClientNodeConfig>;

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
   * What of the current context needs `@kubernetes/client-node` (`exec`, `auth-provider`,
   * `proxy-url`), or undefined when this loader handles all of it.
   */
  delegatedFeature(): string | undefined {
    const user = this.getCurrentUser();
    if (user?.exec) return "exec";
    if (user?.authProvider) return "auth-provider";
    if (this.getCurrentCluster()?.proxyUrl) return "proxy-url";
    return undefined;
  }

  /**
   * Fills in TLS options, credentials and headers for the current context (a proxied
   * context also gets `opts.agent`, the tunnelling agent). Reads files (CA, certificates,
   * token files) on every call, so rotated credentials are picked up; exec plugins cache
   * their token until it expires.
   */
  async applyToHTTPSOptions(opts: KubeRequestOptions): Promise<void> {
    const cluster = this.getCurrentCluster();
    // Plain errors here and below: the client reports them inside a KubeConfigError naming
    // the kubeconfig (client.ts, getTransport), which is the error callers branch on.
    if (!cluster) throw new Error("the kubeconfig has no current cluster");
    if (this.delegatedFeature()) {
      await (await this.clientNode()).applyToHTTPSOptions(opts);
      return;
    }
    if (cluster.server.startsWith("http:") && !cluster.skipTLSVerify)
      throw new Error("HTTP protocol is not allowed when skipTLSVerify is not set or false");
    if (cluster.skipTLSVerify) opts.rejectUnauthorized = false;
    if (cluster.tlsServerName) opts.servername = cluster.tlsServerName;
    const ca = fileOrData(cluster.caFile, cluster.caData);
    if (ca) opts.ca = ca;
    const user = this.getCurrentUser();
    if (!user) return;
    const cert = fileOrData(user.certFile, user.certData);
    if (cert) opts.cert = cert;
    const key = fileOrData(user.keyFile, user.keyData);
    if (key) opts.key = key;
    const headers = (opts.headers ??= {});
    if (user.impersonateUser) headers["Impersonate-User"] = user.impersonateUser;
    const token =
      user.token ?? (user.tokenFile ? readFileSync(user.tokenFile, "utf8").trim() : undefined);
    if (token) headers.Authorization = `Bearer ${token}`;
    if (user.username) opts.auth = `${user.username}:${user.password ?? ""}`;
  }

  /** The same configuration as a client-node `KubeConfig` (imported now, built once). */
  private clientNode(): Promise<ClientNodeConfig> {
    this.delegate ??= import("@kubernetes/client-node").then((m) => {
      const kc = new m.KubeConfig();
      kc.loadFromOptions({
        clusters: this.clusters.map((c) => ({ ...c })),
        users: this.users.map(({ tokenFile, ...u }) => ({
          ...u,
          token: u.token ?? (tokenFile ? readFileSync(tokenFile, "utf8").trim() : undefined),
        })),
        contexts: this.contexts.map((c) => ({ ...c })),
        currentContext: this.currentContext ?? "",
      });
      return kc;
    });
    return this.delegate;
  }
}
