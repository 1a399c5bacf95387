/**
 * The lock that keeps two `toolchain ensure` runs from building the same group at once: a
 * file holding the builder's pid and start time; the lock of a dead process is taken over.
 */
import { randomBytes } from "node:crypto";
import { linkSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";

/** Start time of a process (field 22 of /proc/<pid>/stat), to tell a reused pid apart. */
function procStartTicks(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
  } catch {
    return undefined;
  }
}

/** The text of a lock this process holds: its pid and, where /proc has it, its start time. */
function lockText(): string {
  return `${process.pid} ${procStartTicks(process.pid) ?? "-"} ${randomBytes(4).toString("hex")}\n`;
}

/** The pid in a lock's text, and whether that process still runs (same start time). */
export function lockOwner(text: string): { pid: number; alive: boolean } | undefined {
  const [pidText, ticks] = text.trim().split(/\s+/);
  const pid = Number(pidText);
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  let alive: boolean;
  try {
    process.kill(pid, 0);
    alive = true;
  } catch (e) {
    alive = (e as NodeJS.ErrnoException).code === "EPERM";
  }
  if (alive && ticks && ticks !== "-") {
    const now = procStartTicks(pid);
    if (now !== undefined && now !== ticks) alive = false;
  }
  return { pid, alive };
}

export function readText(p: string): string | undefined {
  try {
    return readFileSync(p, "utf8");
  } catch {
    return undefined;
  }
}

/** Outcome of one {@link tryLock}. */
export type LockAttempt =
  | { acquired: true; release: () => void; tookOverFrom?: number }
  | { acquired: false; holder: number };

/**
 * One attempt at the lock file `path`: created holding this process's pid when absent;
 * taken over when it names a process that no longer runs; else the live holder's pid.
 */
export function tryLock(path: string): LockAttempt {
  mkdirSync(dirname(path), { recursive: true });
  let tookOverFrom: number | undefined;
  for (let round = 0; round < 10; round++) {
    const mine = lockText();
    const tmp = `${path}.new-${process.pid}-${randomBytes(4).toString("hex")}`;
    writeFileSync(tmp, mine);
    try {
      // link() fails when the lock exists, so the lock appears whole, with its pid.
      linkSync(tmp, path);
      rmSync(tmp, { force: true });
      const release = () => {
        if (readText(path) === mine) rmSync(path, { force: true });
      };
      return { acquired: true, release, tookOverFrom };
    } catch (e) {
      rmSync(tmp, { force: true });
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
    }
    const text = readText(path);
    if (text === undefined) continue; // released meanwhile: try again
    const owner = lockOwner(text);
    if (owner?.alive) return { acquired: false, holder: owner.pid };
    // Stale (or unreadable): move it aside. Only one process can move a given file; if
    // what was moved is not the stale lock seen above, it is a live one: put it back.
    const aside = `${path}.stale-${process.pid}-${randomBytes(4).toString("hex")}`;
    try {
      renameSync(path, aside);
    } catch {
      continue;
    }
    if (readText(aside) === text) tookOverFrom = owner?.pid;
    else {
      try {
        linkSync(aside, path);
      } catch {
        // another process holds a newer lock; it wins
      }
    }
    rmSync(aside, { force: true });
  }
  const text = readText(path);
  return { acquired: false, holder: (text && lockOwner(text)?.pid) || 0 };
}

/**
 * Waits for the lock file `path` (see {@link tryLock}); `onWait` is told the holder's pid
 * once per holder. Returns the function that releases it.
 */
export async function acquireLock(
  path: string,
  onWait: (holder: number) => void = () => {},
  pollMs = 1000,
): Promise<{ release: () => void; tookOverFrom?: number }> {
  let told: number | undefined;
  for (;;) {
    const a = tryLock(path);
    if (a.acquired) return a;
    if (a.holder !== told) {
      told = a.holder;
      onWait(a.holder);
    }
    await new Promise((r) => setTimeout(r, pollMs));
  }
}

/** Progress callback: a line of text for the terminal. */
