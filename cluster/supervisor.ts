/**
 * The embedded cluster's supervisor: a small process `cluster up` starts last, which starts
 * again, with the flags and ports recorded in the state file, any component that dies (a
 * `kill -9`, a crash). etcd restarts on its data, so nothing in the cluster is lost; the OCI
 * registry keeps its contents in memory, so what was pushed to it is gone.
 *
 * Guarantees: one restart at a time per component, after a delay that doubles while it
 * keeps dying (none for the first, then 1 s … 30 s; a component that ran a minute is
 * healthy again); the state file is rewritten after each restart, so `down` and `status`
 * see the new pid. It stops by itself when the state file is gone or names another
 * supervisor (`down`, or an `up` that restarted the cluster).
 */
import {
  isAlive,
  readState,
  restartComponent,
  SUPERVISOR,
  writeState,
  type ComponentRecord,
} from "./local-cluster.js";
import { errorMessage } from "../engine/kube/branded-error.js";

/** Longest wait before restarting a component that keeps dying. */
const MAX_RESTART_DELAY_MS = 30_000;
/** A component that ran this long counts as healthy: its next death restarts it at once. */
const HEALTHY_AFTER_MS = 60_000;

/** The wait before the restart that follows `deaths` quick deaths in a row (1 = the first). */
export function restartDelayMs(deaths: number): number {
  if (deaths <= 1) return 0;
  return Math.min(1000 * 2 ** (deaths - 2), MAX_RESTART_DELAY_MS);
}

/** What the supervisor remembers of one component. */
export interface Memory {
  /** Quick deaths in a row. */
  deaths: number;
  /** When it was last started (ms). */
  startedAt: number;
  /** When it was first seen dead since (ms), or undefined while it runs. */
  deadSince?: number;
}

/**
 * One look at the cluster: restarts the components that are dead and whose delay is over.
 * @returns false when this supervisor should stop (no state, or another supervisor recorded)
 */
export function superviseOnce(
  stateDir: string,
  me: number,
  memory: Map<string, Memory>,
  now: number,
  say: (line: string) => void,
): boolean {
  const st = readState(stateDir);
  if (!st) return false;
  const recorded = st.components.find((c) => c.name === SUPERVISOR);
  if (recorded && recorded.pid !== me) return false;
  let changed = false;
  const components: ComponentRecord[] = [...st.components];
  for (let i = 0; i < components.length; i++) {
    const c = components[i];
    if (c.name === SUPERVISOR || !c.args) continue;
    const m = memory.get(c.name) ?? { deaths: 0, startedAt: now };
    memory.set(c.name, m);
    if (isAlive(c)) {
      if (now - m.startedAt >= HEALTHY_AFTER_MS) m.deaths = 0;
      m.deadSince = undefined;
      continue;
    }
    if (m.deadSince === undefined) {
      m.deadSince = now;
      m.deaths++;
      say(`${c.name} (pid ${c.pid}) is not running (death ${m.deaths} in a row)`);
    }
    const delay = restartDelayMs(m.deaths);
    if (now - m.deadSince < delay) continue;
    try {
      components[i] = restartComponent(stateDir, c);
      say(`restarted ${c.name}: pid ${components[i].pid}`);
      m.startedAt = now;
      m.deadSince = undefined;
      changed = true;
    } catch (e) {
      say(`could not restart ${c.name}: ${errorMessage(e)}`);
    }
  }
  if (changed) writeState(stateDir, { ...st, components });
  return true;
}
