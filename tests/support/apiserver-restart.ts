/**
 * Restarts the kube-apiserver of an embedded test cluster in place: stops the recorded
 * process and lets the cluster's supervisor start it again (as it would after a crash), then
 * waits until the state file names the new process and `/readyz` answers 200. (Starting it
 * from here as well raced the supervisor for the port: the loser's pid could end up
 * recorded, and the supervisor then restarted a dead apiserver every 30 s.)
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { rawRequest } from "../../cluster/http.js";
import {
  isAlive,
  readState,
  SUPERVISOR,
  type ClusterState,
  type ComponentRecord,
} from "../../cluster/local-cluster.js";

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

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

function apiserverOf(state: ClusterState | undefined): ComponentRecord | undefined {
  return state?.components.find((c) => c.name === "kube-apiserver");
}

/**
 * Restarts the apiserver of the cluster whose state lives in `stateDir`.
 * @param onDown called once the old apiserver has exited (the supervisor may already be
 *   starting the new one)
 */
export async function restartApiserver(
  stateDir: string,
  onDown?: () => Promise<void> | void,
): Promise<RestartResult> {
  const state = readState(stateDir);
  const rec = apiserverOf(state);
  if (!state || !rec) throw new Error(`no kube-apiserver in the state of ${stateDir}`);
  if (!isAlive(rec)) throw new Error(`kube-apiserver pid ${rec.pid} is not the recorded process`);
  const supervisor = state.components.find((c) => c.name === SUPERVISOR);
  if (!supervisor || !isAlive(supervisor))
    throw new Error(`the cluster in ${stateDir} has no running supervisor to restart it`);

  const oldPid = rec.pid;
  const stoppedAt = Date.now();
  // A graceful stop waits for long-running watches to drain; after 5 s, force it.
  process.kill(rec.pid, "SIGTERM");
  try {
    await until("the old kube-apiserver to exit", 5_000, async () => !isAlive(rec));
  } catch {
    process.kill(rec.pid, "SIGKILL");
    await until(
      "the old kube-apiserver to die",
      10_000,
      async () => !existsSync(`/proc/${rec.pid}`),
    );
  }
  await onDown?.();

  let newPid = 0;
  await until("the supervisor to record a new kube-apiserver", 60_000, async () => {
    const now = apiserverOf(readState(stateDir));
    if (!now || now.pid === oldPid || !isAlive(now)) return false;
    newPid = now.pid;
    return true;
  });
  const ca = readFileSync(join(stateDir, "pki", "apiserver.crt"), "utf8");
  await until("kube-apiserver /readyz", 60_000, async () => {
    const r = await rawRequest(`${state.server}/readyz`, {
      token: state.token,
      ca,
      timeoutMs: 2000,
    });
    return r.status === 200;
  });
  return { oldPid, newPid, downtimeMs: Date.now() - stoppedAt };
}
