/**
 * Free loopback ports for processes this tooling starts that bind them themselves (the embedded
 * cluster's etcd and apiserver, a test's registry or controller, a benchmark's controllers).
 */
import { randomInt } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** Where the ports this tooling handed out are claimed, one file per port, machine-wide. */
export const PORT_CLAIMS_DIR = join(tmpdir(), "cocoonset-port-claims");
/** How long a claim holds: the longest a caller may take from the pick to its process's bind. */
export const PORT_CLAIM_MS = 10 * 60_000;

/**
 * A free TCP port on 127.0.0.1, taken at random from below the kernel's ephemeral range: a port
 * the kernel hands out (`listen(0)`) could be taken as the source port of one of the machine's
 * many outgoing connections between this check and the other process's bind (seen once: a
 * registry failing with "address already in use"). A free port is not a reserved one: between
 * the pick and the bind another caller could pick it too (seen once: three clusters starting
 * at once, one apiserver finding its port taken). So each port is also claimed in
 * {@link PORT_CLAIMS_DIR}, and no caller of this tooling on the machine is handed a port another
 * claimed in the last {@link PORT_CLAIM_MS}. Falls back to a port the kernel hands out when the
 * range below the ephemeral one is too small.
 */
export async function freePort(): Promise<number> {
  const low = ephemeralLow();
  for (let tries = 0; low > 11_024 && tries < 100; tries++) {
    const port = randomInt(low - 10_000, low);
    if ((await portFree(port)) && claimPort(port)) return port;
  }
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

/** The first port of the kernel's ephemeral range (32768 where it cannot be read). */
function ephemeralLow(): number {
  try {
    const low = Number(
      readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").split(/\s+/)[0],
    );
    return Number.isInteger(low) && low > 0 ? low : 32_768;
  } catch {
    return 32_768;
  }
}

/** True when nothing listens on 127.0.0.1:`port` (bound and released at once). */
export function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.once("error", () => resolve(false));
    srv.listen(port, "127.0.0.1", () => srv.close(() => resolve(true)));
  });
}

let pruned = false;

/**
 * Claims `port` in `dir` for this caller: true unless another claim of it is younger than
 * {@link PORT_CLAIM_MS}. The claim is a file created exclusively, so of two callers claiming at
 * once one wins; an older claim is taken over. Where `dir` cannot be written, claims nothing and
 * says true (a port is then only checked free, as before claims).
 */
export function claimPort(port: number, dir = PORT_CLAIMS_DIR, nowMs = Date.now()): boolean {
  const file = join(dir, String(port));
  try {
    mkdirSync(dir, { recursive: true });
    if (!pruned) pruneClaims(dir, nowMs);
  } catch {
    return true; // no folder to claim in
  }
  try {
    writeFileSync(file, `${process.pid}\n`, { flag: "wx" });
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EEXIST") return true;
  }
  try {
    if (nowMs - statSync(file).mtimeMs < PORT_CLAIM_MS) return false;
    writeFileSync(file, `${process.pid}\n`);
    return true;
  } catch {
    return false;
  }
}

/** Drops the claims older than {@link PORT_CLAIM_MS} in `dir`, once per process. */
function pruneClaims(dir: string, nowMs: number): void {
  pruned = true;
  for (const name of readdirSync(dir)) {
    const file = join(dir, name);
    try {
      if (nowMs - statSync(file).mtimeMs >= PORT_CLAIM_MS) rmSync(file, { force: true });
    } catch {
      // gone already, or not ours to remove: a later claim of that port takes it over
    }
  }
}
