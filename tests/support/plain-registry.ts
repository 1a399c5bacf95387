/**
 * A registry of the test's own, run as the embedded cluster runs its one: the toolchain's
 * `registry` (go-containerregistry's, in memory, plain http, no auth) on a free loopback
 * port. The test can freeze it (SIGSTOP: connections are accepted by the kernel and never
 * answered, as a hung registry) and thaw it (SIGCONT).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { request } from "node:http";
import { requireBinary } from "../../cluster/toolchain-pins.js";
import { type Cleanup, freePort } from "./controller-process.js";

/** A started registry. */
export interface PlainRegistry {
  /** `127.0.0.1:<port>`, as `--oci-registry` takes it. */
  address: string;
  proc: ChildProcess;
  /** SIGSTOP: the registry stops answering; the kernel still accepts connections. */
  freeze(): void;
  /** SIGCONT: it answers again, the requests that waited included. */
  thaw(): void;
  /** Whether the process is stopped now (state `T` in `/proc/<pid>/stat`). */
  frozen(): boolean;
}

/** `GET /v2/`'s status, or 0 without an answer within 2 s. */
function v2Status(port: number): Promise<number> {
  return new Promise((resolve) => {
    const req = request({ host: "127.0.0.1", port, path: "/v2/", timeout: 2000 }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on("error", () => resolve(0));
    req.on("timeout", () => req.destroy());
    req.end();
  });
}

/** Starts the registry, stopped (thawed first) by the cleanup; resolves once `/v2/` answers. */
export async function startPlainRegistry(c: Cleanup): Promise<PlainRegistry> {
  const port = await freePort();
  const address = `127.0.0.1:${port}`;
  const proc = spawn(requireBinary("registry"), [`--port=${port}`], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  proc.stderr?.setEncoding("utf8");
  proc.stderr?.on("data", (d: string) => (stderr = (stderr + d).slice(-4000)));
  c.defer("stop the registry", async () => {
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    const gone = new Promise((r) => proc.once("exit", r));
    proc.kill("SIGCONT");
    proc.kill("SIGTERM");
    await gone;
  });
  const deadline = Date.now() + 30_000;
  for (;;) {
    const status = await v2Status(port);
    if (status === 200) break;
    if (proc.exitCode !== null || Date.now() > deadline)
      throw new Error(`the registry did not start (last status ${status}): ${stderr}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    address,
    proc,
    freeze: () => proc.kill("SIGSTOP"),
    thaw: () => proc.kill("SIGCONT"),
    frozen: () => {
      // The state follows the command's name, which is in parentheses.
      const stat = readFileSync(`/proc/${proc.pid}/stat`, "utf8");
      return stat.slice(stat.lastIndexOf(")") + 2).startsWith("T");
    },
  };
}
