/**
 * Shared plumbing of the benchmarks: a private embedded cluster torn down on every exit
 * path (SIGINT included), child processes stopped by pid, free loopback ports, the machine
 * record and the results file. Nothing here measures anything.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { arch, cpus, platform, tmpdir, totalmem } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { clusterDown, clusterUp, type ClusterState } from "../cluster/index.js";

/** A progress line on stderr (stdout carries the table). */
export const note = (line: string): void => {
  process.stderr.write(`bench: ${line}\n`);
};

/** The repository root (benchmarks run from dist/bench). */
export const repoRoot = fileURLToPath(new URL("../../", import.meta.url));

/** Median of a non-empty list. */
export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

/** Milliseconds elapsed since `t0` (a `performance.now()` value), rounded. */
export const since = (t0: number): number => Math.round(performance.now() - t0);

/** What the figures were measured on. */
export function machine(): Record<string, unknown> {
  const cpu = cpus();
  return {
    cores: cpu.length,
    cpuModel: cpu[0]?.model ?? "unknown",
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    platform: `${platform()}/${arch()}`,
  };
}

/** Writes bench/results/<name>.json and returns its repository-relative path. */
export function writeResults(name: string, record: unknown): string {
  const dir = join(repoRoot, "bench", "results");
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, `${name}.json`), JSON.stringify(record, null, 2) + "\n");
  return `bench/results/${name}.json`;
}

/** A fixed-width text table: the first row is the header. */
export function table(rows: string[][]): string {
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => (r[c] ?? "").length)));
  return rows
    .map((r) => r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]) : cell.padStart(widths[c]))))
    .map((r) => r.join("  "))
    .join("\n");
}

/** A free TCP port on 127.0.0.1 (closed again before it is returned). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      const port = typeof addr === "object" && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

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

/** Spawns a process with its output kept in a small ring buffer; stopped on SIGINT too. */
export function startChild(
  command: string,
  args: string[],
  env: Record<string, string | undefined>,
): Child {
  const proc = spawn(command, args, { env, stdio: ["ignore", "pipe", "pipe"] });
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
