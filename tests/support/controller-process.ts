/**
 * Test support for the controller's acceptance tests: runs `cocoonset controller` as a real
 * child process (the built CLI), follows its JSON log lines, reads its metrics and probes,
 * and stops it at the end of the test. Also a per-test cleanup stack, a namespace whose
 * CocoonSets cannot outlive the test, and kubeconfig files for tests.
 */
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { get } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { entryFor } from "../../cli/launch.js";
import { PatchType, paths, type KubeClient } from "../../engine/kube/index.js";
import { adminClient, suffix } from "./cluster.js";

/** The built CLI entry point. */
export const CLI_MAIN = fileURLToPath(new URL("../../cli/main.js", import.meta.url));

/**
 * What `cocoonset controller` runs (cli/launch.ts): the controller's bundle, which the test
 * command builds, or the CLI when the bundle is missing or older than the compiled controller.
 */
export const CONTROLLER_MAIN = join(
  fileURLToPath(new URL("../../..", import.meta.url)),
  entryFor(fileURLToPath(new URL("../../..", import.meta.url)), ["controller"]),
);

/**
 * Cleanups of one test, run last-in first-out after it (node:test runs `t.after` hooks in
 * registration order, which would delete a namespace before its controller stopped).
 */
export class Cleanup {
  private readonly stack: { what: string; fn: () => Promise<void> | void }[] = [];

  /** `t` is a test's context, or `{ after }` (node:test's) for a suite's cleanups. */
  constructor(private readonly t: { after(fn: () => Promise<void>): unknown; error?: unknown }) {
    t.after(() => this.run());
  }

  /** Whether the test has failed (known once it ended, in the cleanup steps; a suite: never). */
  get failed(): boolean {
    return this.t.error !== undefined && this.t.error !== null;
  }

  /** Registers a cleanup step; `what` names it in the failure message. */
  defer(what: string, fn: () => Promise<void> | void): void {
    this.stack.push({ what, fn });
  }

  private async run(): Promise<void> {
    const failures: string[] = [];
    for (const step of this.stack.splice(0).reverse()) {
      try {
        await step.fn();
      } catch (e) {
        failures.push(`${step.what}: ${(e as Error).message}`);
      }
    }
    assert.deepEqual(failures, [], "every cleanup step succeeds");
  }
}

/**
 * Creates a namespace for one test. Its cleanup (which runs after the test's controllers
 * stopped) strips the finalizers of the CocoonSets left in it, so the namespace controller
 * can finish without a controller, then deletes the namespace without waiting.
 */
export async function controllerNamespace(
  cleanup: Cleanup,
  prefix: string,
  client: KubeClient = adminClient(),
): Promise<string> {
  return namespaceNamed(cleanup, `${prefix}-${suffix()}`.slice(0, 63), client);
}

/** {@link controllerNamespace} of an exact name (a test that needs names to collide). */
export async function namespaceNamed(
  cleanup: Cleanup,
  name: string,
  client: KubeClient = adminClient(),
): Promise<string> {
  await client.create(paths.namespaces(), {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name },
  });
  cleanup.defer(`delete namespace ${name}`, async () => {
    if (process.env.COCOONSET_KEEP_NAMESPACES) return;
    const left = await client.list(paths.cocoonSets(name));
    for (const cs of left.items) {
      if (!cs.metadata.finalizers?.length) continue;
      await client.patch(
        paths.cocoonSet(name, cs.metadata.name ?? ""),
        { metadata: { finalizers: null } },
        PatchType.merge,
      );
    }
    await client.delete(paths.namespace(name));
  });
  return name;
}

export { freePort } from "../../cluster/ports.js";

/** A temporary directory removed by the cleanup. */
export function tempDir(cleanup: Cleanup, prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), `${prefix}-`));
  cleanup.defer(`remove ${dir}`, () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Writes a kubeconfig file that reaches `server` with a bearer token (or no credentials). */
export function writeTokenKubeconfig(
  dir: string,
  file: string,
  server: string,
  caData: string | undefined,
  token?: string,
): string {
  const path = join(dir, file);
  writeFileSync(
    path,
    JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: "c", cluster: { server, "certificate-authority-data": caData } }],
      users: [{ name: "u", user: token ? { token } : {} }],
      contexts: [{ name: "c", context: { cluster: "c", user: "u" } }],
      "current-context": "c",
    }),
  );
  return path;
}

/** One JSON log line of the controller. */
export interface LogLine {
  level: string;
  msg: string;
  [field: string]: unknown;
}

/** How a child process ended. */
export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** Options of {@link startController}. */
export interface StartOptions {
  kubeconfig: string;
  /** `--namespace` values. */
  namespaces: string[];
  /** @default false */
  leaderElect?: boolean;
  /** `--leader-election-namespace` (with leaderElect). */
  leaderElectionNamespace?: string;
  /** Further flags, e.g. `["--fanout-concurrency", "2"]`. */
  extraArgs?: string[];
  /** A name for messages (e.g. "leader-a"). @default "controller" */
  label?: string;
}

interface Waiter {
  match: (l: LogLine) => boolean;
  resolve: (l: LogLine) => void;
}

/** Text of a GET on loopback. */
function httpGet(port: number, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = get({ host: "127.0.0.1", port, path, timeout: 10_000 }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new Error(`GET ${path} on port ${port} timed out`)));
    req.on("error", reject);
  });
}

/**
 * Sum of the samples of `name` whose labels include `labels` in a Prometheus exposition
 * text; 0 when there is none.
 */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}) {
  let sum = 0;
  for (const line of text.split("\n")) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have: Record<string, string> = {};
    for (const l of (m[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      have[l[1]] = l[2];
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) sum += Number(m[3]);
  }
  return sum;
}

/** A controller's JSON log lines, metrics and probes, whether it runs as a process or not. */
export class ControllerLog {
  /** Parsed stdout lines, in order. */
  readonly lines: LogLine[] = [];
  /** The same lines as written, unparsed (JSON.parse would hide a duplicated key). */
  readonly rawLines: string[] = [];
  /** Everything written on stderr. */
  stderr = "";
  /** Resolves when the controller has stopped. */
  readonly exited: Promise<Exit>;
  protected exit?: Exit;
  private waiters: Waiter[] = [];
  private partial = "";

  constructor(
    readonly label: string,
    exited: Promise<Exit>,
  ) {
    this.exited = exited.then((e) => {
      this.exit = e;
      return e;
    });
  }

  /** Takes the next chunk of the log's text. */
  feed(chunk: string): void {
    const text = this.partial + chunk;
    const parts = text.split("\n");
    this.partial = parts.pop() ?? "";
    for (const raw of parts) {
      if (!raw.trim()) continue;
      this.rawLines.push(raw);
      let line: LogLine;
      try {
        line = JSON.parse(raw) as LogLine;
      } catch {
        line = { level: "raw", msg: raw };
      }
      this.lines.push(line);
      for (const w of this.waiters.filter((w) => w.match(line))) {
        this.waiters.splice(this.waiters.indexOf(w), 1);
        w.resolve(line);
      }
    }
  }

  /** True while the process runs. */
  get running(): boolean {
    return this.exit === undefined;
  }

  /** Log lines matching `match`. */
  logs(match: (l: LogLine) => boolean): LogLine[] {
    return this.lines.filter(match);
  }

  /** The last log lines and stderr, for assertion messages. */
  tail(n = 15): string {
    const logs = this.lines.slice(-n).map((l) => JSON.stringify(l));
    return `${this.label} log tail:\n${logs.join("\n")}\nstderr:\n${this.stderr.slice(-2000)}`;
  }

  /**
   * Resolves with the first log line from index `from` on that matches; fails when the
   * process exits first or after `timeoutMs`.
   */
  waitForLog(
    description: string,
    match: (l: LogLine) => boolean,
    opts: { timeoutMs?: number; from?: number } = {},
  ): Promise<LogLine> {
    const seen = this.lines.slice(opts.from ?? 0).find(match);
    if (seen) return Promise.resolve(seen);
    const timeoutMs = opts.timeoutMs ?? 60_000;
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        match,
        resolve: (l) => {
          clearTimeout(timer);
          resolve(l);
        },
      };
      const fail = (why: string) => {
        const i = this.waiters.indexOf(waiter);
        if (i >= 0) this.waiters.splice(i, 1);
        clearTimeout(timer);
        reject(new Error(`${this.label}: ${why} waiting for log "${description}"\n${this.tail()}`));
      };
      const timer = setTimeout(() => fail(`timed out after ${timeoutMs} ms`), timeoutMs);
      this.waiters.push(waiter);
      void this.exited.then((e) => {
        if (this.waiters.includes(waiter)) fail(`exited (${e.code ?? e.signal})`);
      });
    });
  }

  /**
   * Waits for a "created pod" line naming each of `pods`, then returns every "created pod"
   * line seen. A pod shows in the cluster before the line that logged its create reaches the
   * test through the pipe, so a count read right after the cluster converged can fall short.
   */
  async createdPods(pods: readonly string[], timeoutMs?: number): Promise<LogLine[]> {
    const created = (l: LogLine) => l.msg === "created pod";
    for (const pod of pods)
      await this.waitForLog(`created pod ${pod}`, (l) => created(l) && l.pod === pod, {
        timeoutMs,
      });
    return this.logs(created);
  }

  /** Waits until the informers synced and the workers run (the leader's session started). */
  synced(timeoutMs?: number): Promise<LogLine> {
    return this.waitForLog("caches synced", (l) => l.msg === "caches synced; starting workers", {
      timeoutMs,
    });
  }

  /**
   * Resolves once a reconcile of the CocoonSet `ns/name` finished that started after `sinceMs` (start =
   * log time minus its duration), so a test knows a full pass saw the cluster as it was at
   * `sinceMs`. Needs the debug level, which {@link startController} sets.
   */
  reconciledSince(ns: string, name: string, sinceMs: number): Promise<LogLine> {
    return this.waitForLog(`a reconcile of ${ns}/${name} started after ${sinceMs}`, (l) => {
      if (l.namespace !== ns || l.name !== name || l.controller !== "cocoonset") return false;
      if (l.msg !== "reconciled" && l.msg !== "reconciled; requeue") return false;
      const end = Date.parse(String(l.time));
      return end - Number(l.seconds ?? 0) * 1000 > sinceMs;
    });
  }

  /**
   * The ports its metrics and probe servers bound (it is started with `:0` ports, so no two
   * controllers started at once can be handed the same one), from its log.
   */
  async ports(): Promise<{ metrics: number; probes: number }> {
    const l = await this.waitForLog(
      "serving metrics and probes",
      (l) => l.msg === "serving metrics and probes",
    );
    const port = (a: unknown) => Number(String(a).slice(String(a).lastIndexOf(":") + 1));
    return { metrics: port(l.metricsAddress), probes: port(l.healthProbeAddress) };
  }

  /** The `/metrics` exposition text. */
  async metricsText(): Promise<string> {
    const r = await httpGet((await this.ports()).metrics, "/metrics");
    assert.equal(r.status, 200, `GET /metrics of ${this.label}`);
    return r.body;
  }

  /** One metric's value (sum over matching label sets; 0 when absent). */
  async metric(name: string, labels: Record<string, string> = {}): Promise<number> {
    return metricValue(await this.metricsText(), name, labels);
  }

  /** GET a probe endpoint. */
  async probe(
    path: "/healthz" | "/readyz" | `/readyz/${string}`,
  ): Promise<{ status: number; body: string }> {
    return httpGet((await this.ports()).probes, path);
  }
}

/** A running `cocoonset controller` child process. */
export class ControllerProcess extends ControllerLog {
  constructor(
    label: string,
    readonly child: ChildProcess,
  ) {
    super(
      label,
      new Promise((resolve) => {
        child.once("exit", (code, signal) => resolve({ code, signal }));
      }),
    );
    child.stdout!.setEncoding("utf8");
    child.stderr!.setEncoding("utf8");
    child.stdout!.on("data", (chunk: string) => this.feed(chunk));
    child.stderr!.on("data", (chunk: string) => (this.stderr += chunk));
  }

  /** Sends `signal` and resolves with how the process ended (SIGKILL after `graceMs`). */
  async stop(signal: NodeJS.Signals = "SIGTERM", graceMs = 45_000): Promise<Exit> {
    if (this.exit) return this.exit;
    this.child.kill(signal);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<"late">((resolve) => {
      timer = setTimeout(() => resolve("late"), graceMs);
    });
    const r = await Promise.race([this.exited, late]);
    clearTimeout(timer);
    if (r === "late") {
      this.child.kill("SIGKILL");
      await this.exited;
      throw new Error(
        `${this.label} did not exit within ${graceMs} ms of ${signal}\n${this.tail()}`,
      );
    }
    return r;
  }
}

/**
 * Starts `cocoonset controller` scoped to the given namespaces, on free loopback ports for
 * metrics and probes, with debug logs (one "reconciled" line per reconcile, which tests
 * count instead of sleeping). At cleanup a still-running controller gets SIGTERM and must
 * exit 0.
 */
export async function startController(
  cleanup: Cleanup,
  opts: StartOptions,
): Promise<ControllerProcess> {
  const args = [
    CONTROLLER_MAIN,
    "controller",
    "--kubeconfig",
    opts.kubeconfig,
    `--leader-elect=${opts.leaderElect ? "true" : "false"}`,
    "--metrics-bind-address=127.0.0.1:0",
    "--health-probe-bind-address=127.0.0.1:0",
    "--log-level=debug",
    ...opts.namespaces.flatMap((ns) => ["--namespace", ns]),
    ...(opts.leaderElectionNamespace
      ? ["--leader-election-namespace", opts.leaderElectionNamespace]
      : []),
    ...(opts.extraArgs ?? []),
  ];
  const env = { ...process.env };
  // Only the flags configure the controller under test.
  for (const k of Object.keys(env))
    if (k.startsWith("COCOONSET_") || k === "KUBECONFIG" || k === "OCI_REGISTRY") delete env[k];
  const child = spawn(process.execPath, args, { env, stdio: ["ignore", "pipe", "pipe"] });
  const proc = new ControllerProcess(opts.label ?? "controller", child);
  cleanup.defer(`stop ${proc.label}`, async () => {
    // A failed test shows what its controller was doing (its reasons, at debug level).
    if (cleanup.failed) console.error(proc.tail(30));
    if (!proc.running) return;
    const exit = await proc.stop("SIGTERM");
    assert.deepEqual(
      exit,
      { code: 0, signal: null },
      `${proc.label} exits 0 on SIGTERM\n${proc.tail()}`,
    );
  });
  return proc;
}

/** Runs the controller CLI with `args` until it exits by itself (bad input cases). */
export async function runControllerToExit(
  args: string[],
  timeoutMs = 60_000,
): Promise<Exit & { stdout: string; stderr: string }> {
  const env = { ...process.env };
  for (const k of Object.keys(env))
    if (k.startsWith("COCOONSET_") || k === "KUBECONFIG" || k === "OCI_REGISTRY") delete env[k];
  const child = spawn(process.execPath, [CONTROLLER_MAIN, "controller", ...args], {
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (c: string) => (stdout += c));
  child.stderr.setEncoding("utf8").on("data", (c: string) => (stderr += c));
  const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
  const exit = await new Promise<Exit>((resolve) =>
    child.once("close", (code, signal) => resolve({ code, signal })),
  );
  clearTimeout(timer);
  return { ...exit, stdout, stderr };
}
