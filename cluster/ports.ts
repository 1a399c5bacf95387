/**
 * Free loopback ports for processes this tooling starts that bind them themselves (the embedded
 * cluster's etcd and apiserver, a test's registry or controller, a benchmark's controllers).
 */
import { randomInt } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";

/**
 * A free TCP port on 127.0.0.1, taken at random from below the kernel's ephemeral range: a port
 * the kernel hands out (`listen(0)`) could be taken as the source port of one of the machine's
 * many outgoing connections between this check and the other process's bind (seen once: a
 * registry failing with "address already in use"), and two callers picking at random meet
 * only by chance. Falls back to a port the kernel hands out when that range is too low.
 */
export async function freePort(): Promise<number> {
  const low = ephemeralLow();
  for (let tries = 0; low > 11_024 && tries < 100; tries++) {
    const port = randomInt(low - 10_000, low);
    if (await portFree(port)) return port;
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
