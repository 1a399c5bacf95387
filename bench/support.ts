/**
 * Shared plumbing of the benchmarks: a private embedded cluster torn down on every exit
 * path (SIGINT included), child processes stopped by pid, free loopback ports, the record of
 * how and where a run was made (provenance) and the results file with its chart. Nothing
 * here measures anything.
 */
import { get as httpGet } from "node:http";
import { execFileSync, spawn, spawnSync, type ChildProcess } from "node:child_process";
import {
  createWriteStream,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { arch, cpus, loadavg, platform, release, tmpdir, totalmem } from "node:os";
import { basename, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs, type ParseArgsOptionsConfig } from "node:util";
import {
  clusterDown,
  clusterUp,
  loadPins,
  locate,
  type BinaryName,
  type ClusterState,
} from "../cluster/index.js";
import type { KubeClient, ObjectLike } from "../engine/kube/client.js";
import { paths } from "../engine/kube/paths.js";
import { renderSvg, type ChartSpec } from "./chart.js";

/** A progress line on stderr (stdout carries the table). */
export const note = (line: string): void => {
  process.stderr.write(`bench: ${line}\n`);
};

/** The repository root (benchmarks run from dist/bench). */
export const repoRoot = fileURLToPath(new URL("../../", import.meta.url));

/**
 * The script's flags (`options`, as node:util's parseArgs takes them), parsed strictly: an
 * unknown flag or a stray argument is refused, naming it, with the usage. `--help` (`-h`)
 * prints `usage` and exits 0. bench/README.md documents the same flags in full.
 */
export function benchFlags<T extends ParseArgsOptionsConfig>(usage: string, options: T) {
  const args = process.argv.slice(2);
  const text = `${usage.trim()}\n`;
  if (args.includes("--help") || args.includes("-h")) {
    process.stdout.write(text);
    process.exit(0);
  }
  try {
    return parseArgs({ args, options, strict: true, allowPositionals: false }).values;
  } catch (e) {
    process.stderr.write(`${e instanceof Error ? e.message : String(e)}\n\n${text}`);
    process.exit(2);
  }
}

/** The first file `$KUBECONFIG` names that exists: a cluster to run against instead of a private one. */
export function existingKubeconfig(): string | undefined {
  return process.env.KUBECONFIG?.split(":").find((f) => f && existsSync(f));
}

/** Median of a non-empty list. */
export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

/** Milliseconds elapsed since `t0` (a `performance.now()` value), rounded. */
export const since = (t0: number): number => Math.round(performance.now() - t0);

/** What the figures were measured on: cores, CPU model, total memory, OS, Node. */
export function machine(): {
  cores: number;
  cpuModel: string;
  memoryGiB: number;
  node: string;
  platform: string;
  kernel: string;
} {
  const cpu = cpus();
  return {
    cores: cpu.length,
    cpuModel: cpu[0]?.model ?? "unknown",
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    platform: `${platform()}/${arch()}`,
    kernel: release(),
  };
}

/** The 1, 5 and 15 minute load averages, two decimals. */
export const loadAverage = (): number[] => loadavg().map((l) => Math.round(l * 100) / 100);

/** A path or argument with the repository root taken off (no machine path is recorded). */
const repoRelative = (a: string): string =>
  a.startsWith(repoRoot) ? relative(repoRoot, a) || "." : a;

/**
 * The command that started this process, as typed from the repository root: `node` for the
 * Node binary and repository-relative paths.
 */
export function commandLine(argv: string[] = process.argv): string {
  const [exe, ...rest] = argv;
  const runner = basename(exe ?? "node").startsWith("node") ? "node" : repoRelative(exe);
  return [runner, ...rest.map(repoRelative)].join(" ");
}

function git(args: string[]): string | undefined {
  const r = spawnSync("git", args, { cwd: repoRoot, encoding: "utf8", timeout: 10_000 });
  return r.status === 0 ? r.stdout.trimEnd() : undefined;
}

/**
 * The git commit of the repository and whether its tree had uncommitted changes to tracked
 * files (bench/results/ aside: one benchmark after another rewrites it).
 */
export function gitState(): { commit: string; dirty: boolean | null; dirtyFiles: string[] } {
  const commit = git(["rev-parse", "HEAD"]) ?? "unknown (not a git checkout)";
  const status = git(["status", "--porcelain", "--untracked-files=no"]);
  if (status === undefined) return { commit, dirty: null, dirtyFiles: [] };
  const dirtyFiles = status
    .split("\n")
    .filter(Boolean)
    .map((l) => l.slice(3))
    .filter((f) => !f.startsWith("bench/results/"));
  return { commit, dirty: dirtyFiles.length > 0, dirtyFiles: dirtyFiles.slice(0, 20) };
}

/**
 * The pinned toolchain (cluster/toolchain.json: Go, and module@version of each group), where
 * each binary was found (cache, configured folder, PATH; "missing" when not built) and the
 * Go on PATH.
 */
export function toolchainVersions(): {
  goPinned: string;
  goOnPath: string;
  groups: Record<string, { module: string; version: string; binaries: Record<string, string> }>;
} {
  const pins = loadPins();
  const groups: Record<
    string,
    { module: string; version: string; binaries: Record<string, string> }
  > = {};
  for (const [name, g] of Object.entries(pins.groups)) {
    const binaries: Record<string, string> = {};
    for (const bin of Object.keys(g.binaries)) {
      try {
        binaries[bin] = locate(bin as BinaryName, pins).source ?? "missing";
      } catch {
        binaries[bin] = "unknown";
      }
    }
    groups[name] = { module: g.module, version: g.stamp ?? g.version, binaries };
  }
  const go = spawnSync("go", ["env", "GOVERSION"], { encoding: "utf8", timeout: 20_000 });
  return {
    goPinned: pins.go,
    goOnPath: go.status === 0 ? go.stdout.trim() : "not found",
    groups,
  };
}

/** The provenance block at the top of every bench/results/*.json. */
export interface Provenance {
  /** The command as typed from the repository root. */
  command: string;
  /** The npm script that ran it, if one did. */
  npmScript?: string;
  /** Environment variables that steer the benchmarks (`COCOONSET_*`, machine paths left out). */
  env: Record<string, string>;
  git: { commit: string; dirty: boolean | null; dirtyFiles: string[] };
  toolchain: ReturnType<typeof toolchainVersions>;
  node: string;
  machine: ReturnType<typeof machine>;
  startedAt: string;
  finishedAt: string;
  seconds: number;
  /** 1/5/15 min load averages at the start and at the end: the machine may be shared. */
  loadAverage: { start: number[]; end: number[] };
}

/** One benchmark run: started when created, recorded by {@link BenchRun.write}. */
export class BenchRun {
  private readonly started = new Date();
  private readonly loadAtStart = loadAverage();
  private readonly command = commandLine();
  private readonly gitAtStart = gitState();

  constructor(readonly name: string) {
    note(`${name}: \`${this.command}\`, load average ${this.loadAtStart.join(" ")}`);
  }

  /** The provenance as of now (the end of the run). */
  provenance(): Provenance {
    const end = new Date();
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) {
      if (!k.startsWith("COCOONSET_") || v === undefined) continue;
      const value = repoRelative(v);
      env[k] = /^\/(tmp|root|work|home)\b/.test(value) ? "(a local path)" : value;
    }
    const npmScript = process.env.npm_lifecycle_event;
    return {
      command: this.command,
      ...(npmScript ? { npmScript: `npm run ${npmScript}` } : {}),
      env,
      git: this.gitAtStart,
      toolchain: toolchainVersions(),
      node: process.version,
      machine: machine(),
      startedAt: this.started.toISOString(),
      finishedAt: end.toISOString(),
      seconds: Math.round((end.getTime() - this.started.getTime()) / 1000),
      loadAverage: { start: this.loadAtStart, end: loadAverage() },
    };
  }

  /**
   * Writes bench/results/<name>.json (`provenance` first, then the record) and, given a
   * chart, bench/results/<name>.svg next to it. Returns the repository-relative paths.
   */
  async write(record: object, chart?: ChartSpec): Promise<string[]> {
    const dir = join(repoRoot, "bench", "results");
    mkdirSync(dir, { recursive: true });
    const provenance = this.provenance();
    const written = [`bench/results/${this.name}.json`];
    writeFileSync(
      join(dir, `${this.name}.json`),
      JSON.stringify({ provenance, ...record }, null, 2) + "\n",
    );
    if (chart) {
      // A chart that cannot be drawn must not lose the measured figures written above.
      try {
        writeFileSync(join(dir, `${this.name}.svg`), await renderSvg(chart));
        written.push(`bench/results/${this.name}.svg`);
      } catch (e) {
        note(`${this.name}: the chart could not be drawn: ${(e as Error).message}`);
      }
    }
    note(`${this.name}: load average at the end ${provenance.loadAverage.end.join(" ")}`);
    return written;
  }
}

/** Starts the record of a benchmark run (command, commit and load average as of now). */
export const startRun = (name: string): BenchRun => new BenchRun(name);

/** A fixed-width text table: the first row is the header. */
export function table(rows: string[][]): string {
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => (r[c] ?? "").length)));
  return rows
    .map((r) => r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]) : cell.padStart(widths[c]))))
    .map((r) => r.join("  "))
    .join("\n");
}

export { freePort } from "../cluster/ports.js";

/** Resident set size of a process in KiB (`VmRSS`), or undefined once it has exited. */
export function rssKiB(pid: number, field: "VmRSS" | "VmHWM" = "VmRSS"): number | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status);
    return m ? parseInt(m[1], 10) : undefined;
  } catch {
    return undefined;
  }
}

/** Clock ticks per second of `/proc/<pid>/stat` (`getconf CLK_TCK`; 100 on Linux). */
let clockTicks: number | undefined;
function ticksPerSecond(): number {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

/**
 * CPU seconds a process has used so far, user plus system (`utime` + `stime` of
 * `/proc/<pid>/stat`); undefined when it cannot be read (gone, not Linux).
 */
export function cpuSeconds(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The fields after the command name (which may hold spaces), from field 3 on.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond();
  } catch {
    return undefined;
  }
}

/**
 * The machine's busy and total CPU seconds so far, every core summed (`/proc/stat`'s first
 * line: busy is everything but idle and iowait); undefined where unread.
 */
export function machineCpuSeconds(): { busy: number; total: number } | undefined {
  try {
    const line = readFileSync("/proc/stat", "utf8").split("\n")[0];
    const ticks = line.trim().split(/\s+/).slice(1, 9).map(Number);
    const total = ticks.reduce((a, b) => a + b, 0);
    const idle = ticks[3] + ticks[4];
    return { busy: (total - idle) / ticksPerSecond(), total: total / ticksPerSecond() };
  } catch {
    return undefined;
  }
}

const cleanups: (() => Promise<void> | void)[] = [];
let interrupted = false;

function onSignal(signal: NodeJS.Signals): void {
  if (interrupted) return;
  interrupted = true;
  note(`${signal}: stopping what the benchmark started`);
  void (async () => {
    for (const fn of cleanups.splice(0).reverse()) {
      try {
        await fn();
      } catch (e) {
        note(`cleanup failed: ${(e as Error).message}`);
      }
    }
    process.exit(130);
  })();
}

/** Registers a cleanup run on SIGINT/SIGTERM (newest first); returns its remover. */
export function onInterrupt(fn: () => Promise<void> | void): () => void {
  if (cleanups.length === 0 && process.listenerCount("SIGINT") === 0) {
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);
  }
  cleanups.push(fn);
  return () => {
    const i = cleanups.indexOf(fn);
    if (i >= 0) cleanups.splice(i, 1);
  };
}

/**
 * Runs `fn` against a private embedded cluster in a fresh state folder, and stops the
 * cluster afterwards: on success, on error and on SIGINT/SIGTERM.
 */
export async function withCluster<T>(
  prefix: string,
  nodes: number,
  fn: (cluster: ClusterState) => Promise<T>,
): Promise<T> {
  const stateDir = mkdtempSync(join(tmpdir(), `${prefix}-`));
  const down = async () => {
    await clusterDown(stateDir);
    rmSync(stateDir, { recursive: true, force: true });
  };
  const remove = onInterrupt(down);
  try {
    note(`starting a private embedded cluster with ${nodes} simulated nodes`);
    const cluster = await clusterUp({ stateDir, nodes, progress: (l) => note(l) });
    return await fn(cluster);
  } finally {
    remove();
    note("stopping the embedded cluster");
    await down();
  }
}

/** Creates the namespace `name` for a benchmark's objects, with `labels` when given. */
export async function createNamespace(
  client: KubeClient,
  name: string,
  labels?: Record<string, string>,
): Promise<void> {
  await client.create(paths.namespaces(), {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: labels ? { name, labels } : { name },
  });
}

/** A child process started by a benchmark, stopped by its own pid. */
export interface Child {
  proc: ChildProcess;
  pid: number;
  /** The last lines of its stdout and stderr, for error messages. */
  tail(): string;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves when it has exited. */
  stop(graceMs?: number): Promise<void>;
  /** Resolves with the exit code (or signal) when the process exits. */
  exited: Promise<string>;
}

/**
 * Where a controller's whole log goes when asked (`COCOONSET_BENCH_CONTROLLER_LOG=FILE`): the
 * benchmarks keep only a process's last lines, and a figure that looks wrong is read line by
 * line. Every controller of the run appends to the one file, after a line naming it.
 */
export const CONTROLLER_LOG = process.env.COCOONSET_BENCH_CONTROLLER_LOG || undefined;

/**
 * Spawns a process with its output kept in a small ring buffer (and all of it appended to
 * `logTo`, when given); stopped on SIGINT too.
 */
export function startChild(
  command: string,
  args: string[],
  env: Record<string, string | undefined>,
  logTo?: string,
): Child {
  const proc = spawn(command, args, { env, stdio: ["ignore", "pipe", "pipe"] });
  if (logTo) {
    const out = createWriteStream(logTo, { flags: "a" });
    out.write(
      `== ${new Date().toISOString()} pid ${proc.pid}: ${basename(command)} ${args.join(" ")}\n`,
    );
    proc.stdout?.on("data", (c: Buffer) => out.write(c));
    proc.stderr?.on("data", (c: Buffer) => out.write(c));
    proc.once("exit", () => out.end());
  }
  const lines: string[] = [];
  const keep = (chunk: Buffer) => {
    lines.push(...chunk.toString("utf8").split("\n").filter(Boolean));
    if (lines.length > 40) lines.splice(0, lines.length - 40);
  };
  proc.stdout?.on("data", keep);
  proc.stderr?.on("data", keep);
  const exited = new Promise<string>((resolve) => {
    proc.once("exit", (code, signal) => resolve(signal ?? String(code)));
    proc.once("error", (e) => resolve(`spawn error: ${e.message}`));
  });
  let done = false;
  void exited.then(() => (done = true));
  const stop = async (graceMs = 10_000) => {
    if (done) return;
    proc.kill("SIGTERM");
    const timer = setTimeout(() => proc.kill("SIGKILL"), graceMs);
    await exited;
    clearTimeout(timer);
  };
  const remove = onInterrupt(() => stop(2000));
  void exited.then(remove);
  return { proc, pid: proc.pid ?? -1, tail: () => lines.join("\n"), stop, exited };
}

/** Follows a collection by watch and calls `check` on every change until it returns true. */
export async function watchUntil<T extends ObjectLike>(
  client: KubeClient,
  path: string,
  query: { labelSelector?: string; fieldSelector?: string },
  check: (items: T[]) => boolean,
  timeoutMs: number,
  description: string,
): Promise<void> {
  const items = new Map<string, T>();
  const list = await client.list<T>(path, query);
  for (const o of list.items) items.set(o.metadata?.uid ?? "", o);
  if (check([...items.values()])) return;
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), timeoutMs);
  let rv = list.metadata.resourceVersion;
  let done = false;
  try {
    while (!done && !ac.signal.aborted) {
      try {
        rv = await client.watch<T>(
          path,
          { ...query, resourceVersion: rv, timeoutSeconds: 60 },
          (ev) => {
            const uid = ev.object.metadata?.uid ?? "";
            if (ev.type === "DELETED") items.delete(uid);
            else if (ev.type === "ADDED" || ev.type === "MODIFIED") items.set(uid, ev.object);
            else return false;
            done = check([...items.values()]);
            return done;
          },
          ac.signal,
        );
      } catch (e) {
        if (ac.signal.aborted) break;
        throw e;
      }
    }
  } finally {
    clearTimeout(timer);
  }
  if (!done) throw new Error(`timed out after ${timeoutMs} ms waiting for ${description}`);
}

/** The text of an HTTP page (a metrics page), or null when it did not answer 200 in `timeoutMs`. */
export function scrape(url: string, timeoutMs = 5000): Promise<string | null> {
  return new Promise((resolve) => {
    const req = httpGet(url, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => (body += d));
      res.on("end", () => resolve(res.statusCode === 200 ? body : null));
    });
    req.on("error", () => resolve(null));
    req.setTimeout(timeoutMs, () => req.destroy());
  });
}
