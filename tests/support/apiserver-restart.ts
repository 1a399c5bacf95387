/**
 * Restarts the kube-apiserver of an embedded test cluster in place: stops the recorded
 * process, starts the same binary with the same arguments and environment (detached,
 * appending to its log), records the new pid and start ticks in `state.json` so
 * `cluster down` still stops it, and waits until `/readyz` answers 200.
 */
import { spawn } from "node:child_process";
import {
  chmodSync,
  closeSync,
  copyFileSync,
  existsSync,
  openSync,
  readFileSync,
  renameSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { rawRequest } from "../../cluster/http.js";
import type { ClusterState } from "../../cluster/local-cluster.js";

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

function startTicks(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields are counted after the command name's closing paren; field 22 is the start time.
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
  } catch {
    return undefined;
  }
}

function nulList(path: string): string[] {
  return readFileSync(path, "utf8")
    .split("\0")
    .filter((s) => s.length > 0);
}

/** Polls a condition: process exits and port readiness have no event to wait on. */
async function until(what: string, timeoutMs: number, check: () => Promise<boolean>) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (await check()) return;
    } catch {
      // not there yet
    }
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await pause(100);
  }
}

/** What a restart did. */
export interface RestartResult {
  oldPid: number;
  newPid: number;
  /** Milliseconds from stopping the old process to the new one answering /readyz. */
  downtimeMs: number;
}

/**
 * Restarts the apiserver of the cluster whose state lives in `stateDir`.
 * @param onDown called while the apiserver is stopped (before the new one starts)
 */
export async function restartApiserver(
  stateDir: string,
  onDown?: () => Promise<void> | void,
): Promise<RestartResult> {
  const statePath = join(stateDir, "state.json");
  const state = JSON.parse(readFileSync(statePath, "utf8")) as ClusterState;
  const rec = state.components.find((c) => c.name === "kube-apiserver");
  if (!rec) throw new Error(`no kube-apiserver in ${statePath}`);
  if (startTicks(rec.pid) !== rec.startTicks)
    throw new Error(`kube-apiserver pid ${rec.pid} is not the recorded process`);
  const [, ...args] = nulList(`/proc/${rec.pid}/cmdline`);
  const env: Record<string, string> = {};
  for (const kv of nulList(`/proc/${rec.pid}/environ`)) {
    const i = kv.indexOf("=");
    if (i > 0) env[kv.slice(0, i)] = kv.slice(i + 1);
  }

  // The toolchain directory may have been replaced since the cluster started (a new pin):
  // the running binary is still readable through /proc, so keep a copy to restart from.
  let binary = rec.binary;
  if (!existsSync(binary)) {
    binary = join(stateDir, "kube-apiserver.restart");
    copyFileSync(`/proc/${rec.pid}/exe`, binary);
    chmodSync(binary, 0o755);
  }

  const oldPid = rec.pid;
  const stoppedAt = Date.now();
  // A graceful stop waits for long-running watches to drain; after 5 s, force it.
  process.kill(rec.pid, "SIGTERM");
  try {
    await until(
      "the old kube-apiserver to exit",
      5_000,
      async () => !existsSync(`/proc/${rec.pid}`) || startTicks(rec.pid) !== rec.startTicks,
    );
  } catch {
    process.kill(rec.pid, "SIGKILL");
    await until(
      "the old kube-apiserver to die",
      10_000,
      async () => !existsSync(`/proc/${rec.pid}`),
    );
  }
  await onDown?.();

  const fd = openSync(rec.log, "a");
  let pid: number;
  try {
    const child = spawn(binary, args, {
      detached: true,
      stdio: ["ignore", fd, fd],
      env,
      cwd: stateDir,
    });
    child.unref();
    if (child.pid === undefined) throw new Error(`kube-apiserver did not start (${binary})`);
    pid = child.pid;
  } finally {
    closeSync(fd);
  }
  rec.pid = pid;
  rec.binary = binary;
  rec.startTicks = startTicks(pid) ?? "";
  writeFileSync(`${statePath}.tmp`, JSON.stringify(state, null, 2));
  renameSync(`${statePath}.tmp`, statePath);

  const ca = readFileSync(join(stateDir, "pki", "apiserver.crt"), "utf8");
  await until("kube-apiserver /readyz", 60_000, async () => {
    const r = await rawRequest(`${state.server}/readyz`, {
      token: state.token,
      ca,
      timeoutMs: 2000,
    });
    return r.status === 200;
  });
  return { oldPid, newPid: pid, downtimeMs: Date.now() - stoppedAt };
}
