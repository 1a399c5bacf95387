/**
 * Exec credential plugins (`users[].user.exec`), as client-go runs them: the command with
 * its `args` and `env` on top of the process environment, `KUBERNETES_EXEC_INFO` holding an
 * ExecCredential whose `spec` says whether the plugin may talk to the user (`interactive`)
 * and, with `provideClusterInfo`, which cluster the credential is for. The plugin prints an
 * ExecCredential of the same `apiVersion` (`client.authentication.k8s.io/v1` or `v1beta1`)
 * whose `status` holds a bearer token or a client certificate and key.
 *
 * Guarantees: one plugin run at a time per user entry (concurrent requests share it); the
 * credential is kept until its `expirationTimestamp` (for the process's life without one),
 * and `invalidate` (after a 401) makes the next request run the plugin again. The plugin's
 * stderr goes to ours; its stdin is ours only when it runs interactively.
 *
 * Errors name the command and say why (not found, with the `installHint`; a non-zero exit;
 * output that is not an ExecCredential of the expected version) and never carry the output,
 * which may hold a credential.
 */
import { spawn } from "node:child_process";
import { InvalidValueError } from "./branded-error.js";

/** The ExecCredential versions a plugin may speak. */
const EXEC_API_VERSIONS = [
  "client.authentication.k8s.io/v1",
  "client.authentication.k8s.io/v1beta1",
] as const;

/** A user's `exec` entry, checked. */
export interface ExecConfig {
  apiVersion: string;
  command: string;
  args: string[];
  env: { name: string; value: string }[];
  /** `Never`, `IfAvailable` (when stdin is a terminal) or `Always` (fails without one). */
  interactiveMode: "Never" | "IfAvailable" | "Always";
  provideClusterInfo: boolean;
  installHint?: string;
}

/** What the plugin is told of the cluster with `provideClusterInfo` (kubeconfig field names). */
export interface ExecClusterInfo {
  server: string;
  "tls-server-name"?: string;
  "insecure-skip-tls-verify"?: boolean;
  /** Base64 of the CA bundle (the file's content when the kubeconfig names a file). */
  "certificate-authority-data"?: string;
  "proxy-url"?: string;
  /** The cluster's `client.authentication.k8s.io/exec` extension. */
  config?: unknown;
}

/** The credential a plugin returned. */
export interface ExecCredentialStatus {
  token?: string;
  clientCertificateData?: string;
  clientKeyData?: string;
  /** Milliseconds since the epoch; undefined when the credential does not expire. */
  expiresAt?: number;
}

type Doc = Record<string, unknown>;
const obj = (v: unknown): Doc | undefined =>
  v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Doc) : undefined;

/** Checks an `exec` entry; `at` names it in errors (`users[0].user.exec`). */
export function parseExecConfig(raw: Doc, at: string): ExecConfig {
  const apiVersion = raw.apiVersion;
  if (typeof apiVersion !== "string" || !apiVersion)
    throw new InvalidValueError(`${at}.apiVersion is missing`);
  if (!(EXEC_API_VERSIONS as readonly string[]).includes(apiVersion))
    throw new InvalidValueError(
      `${at}.apiVersion "${apiVersion}" is not supported (${EXEC_API_VERSIONS.join(" or ")})`,
    );
  const command = raw.command;
  if (typeof command !== "string" || !command)
    throw new InvalidValueError(`${at}.command is missing`);
  const args = raw.args ?? [];
  if (!Array.isArray(args) || args.some((a) => typeof a !== "string"))
    throw new InvalidValueError(`${at}.args must be a list of strings`);
  const envList = raw.env ?? [];
  if (!Array.isArray(envList)) throw new InvalidValueError(`${at}.env must be a list`);
  const env = envList.map((e, i) => {
    const entry = obj(e);
    if (typeof entry?.name !== "string" || !entry.name)
      throw new InvalidValueError(`${at}.env[${i}].name is missing`);
    return { name: entry.name, value: typeof entry.value === "string" ? entry.value : "" };
  });
  const mode = raw.interactiveMode ?? "IfAvailable";
  if (mode !== "Never" && mode !== "IfAvailable" && mode !== "Always")
    throw new InvalidValueError(
      `${at}.interactiveMode ${JSON.stringify(mode)} is not one of Never, IfAvailable, Always`,
    );
  return {
    apiVersion,
    command,
    args: args as string[],
    env,
    interactiveMode: mode,
    provideClusterInfo: raw.provideClusterInfo === true,
    installHint: typeof raw.installHint === "string" ? raw.installHint : undefined,
  };
}

/** Runs one user's plugin and keeps its credential. */
export class ExecCredentialPlugin {
  private cached?: ExecCredentialStatus;
  private running?: Promise<ExecCredentialStatus>;

  constructor(
    readonly config: ExecConfig,
    private readonly cluster: () => ExecClusterInfo | undefined,
    private readonly now: () => number = Date.now,
  ) {}

  /** The credential: the kept one while it has not expired, else a fresh plugin run. */
  credential(): Promise<ExecCredentialStatus> {
    const c = this.cached;
    if (c && (c.expiresAt === undefined || this.now() < c.expiresAt)) return Promise.resolve(c);
    this.running ??= this.run().then(
      (status) => {
        this.cached = status;
        this.running = undefined;
        return status;
      },
      (e: unknown) => {
        this.running = undefined;
        throw e;
      },
    );
    return this.running;
  }

  /** Drops the kept credential (the apiserver refused it): the next request runs the plugin. */
  invalidate(): void {
    this.cached = undefined;
  }

  private interactive(): boolean {
    const tty = process.stdin.isTTY === true;
    if (this.config.interactiveMode === "Always" && !tty)
      throw new Error(
        `the exec plugin ${this.config.command} needs a terminal (interactiveMode: Always) and stdin is not one`,
      );
    return this.config.interactiveMode !== "Never" && tty;
  }

  private async run(): Promise<ExecCredentialStatus> {
    const { command, args, apiVersion } = this.config;
    const interactive = this.interactive();
    const cluster = this.config.provideClusterInfo ? this.cluster() : undefined;
    const info = {
      apiVersion,
      kind: "ExecCredential",
      spec: { interactive, ...(cluster ? { cluster } : {}) },
    };
    const env: NodeJS.ProcessEnv = { ...process.env };
    for (const e of this.config.env) env[e.name] = e.value;
    env.KUBERNETES_EXEC_INFO = JSON.stringify(info);
    const stdout = await new Promise<string>((resolve, reject) => {
      const child = spawn(command, args, {
        env,
        stdio: [interactive ? "inherit" : "ignore", "pipe", "inherit"],
      });
      let out = "";
      child.stdout.setEncoding("utf8");
      child.stdout.on("data", (d: string) => (out += d));
      child.on("error", (e: NodeJS.ErrnoException) =>
        reject(
          new Error(
            e.code === "ENOENT"
              ? `the exec plugin ${command} was not found${this.config.installHint ? `: ${this.config.installHint.trim()}` : ""}`
              : `the exec plugin ${command} could not run: ${e.message}`,
          ),
        ),
      );
      child.on("close", (code, signal) => {
        if (code === 0) resolve(out);
        else
          reject(
            new Error(
              `the exec plugin ${command} failed (${signal ? `signal ${signal}` : `exit code ${code}`})`,
            ),
          );
      });
    });
    return parseExecOutput(stdout, apiVersion, command);
  }
}

/** Checks a plugin's output; errors never quote it (it may hold a credential). */
function parseExecOutput(
  stdout: string,
  apiVersion: string,
  command: string,
): ExecCredentialStatus {
  let doc: Doc | undefined;
  try {
    doc = obj(JSON.parse(stdout));
  } catch {
    doc = undefined;
  }
  const bad = (why: string) => new Error(`the exec plugin ${command} printed ${why}`);
  if (!doc || doc.kind !== "ExecCredential") throw bad("no ExecCredential");
  if (doc.apiVersion !== apiVersion)
    throw bad(`an ExecCredential of apiVersion ${String(doc.apiVersion)}, not ${apiVersion}`);
  const status = obj(doc.status);
  if (!status) throw bad("an ExecCredential without a status");
  const str = (v: unknown) => (typeof v === "string" && v !== "" ? v : undefined);
  const token = str(status.token);
  const cert = str(status.clientCertificateData);
  const key = str(status.clientKeyData);
  if (!token && !(cert && key))
    throw bad("an ExecCredential with neither a token nor a client certificate and key");
  if (!!cert !== !!key) throw bad("a client certificate without its key, or the reverse");
  let expiresAt: number | undefined;
  if (status.expirationTimestamp !== undefined) {
    const at = status.expirationTimestamp;
    expiresAt = typeof at === "string" ? Date.parse(at) : NaN;
    if (Number.isNaN(expiresAt)) throw bad("an expirationTimestamp that is not a time");
  }
  return { token, clientCertificateData: cert, clientKeyData: key, expiresAt };
}
