/**
 * Test support for the differential tier: runs the Go peer `cocoon-operator` (built by
 * bench/peer.ts) as a child process against the shared embedded cluster, waits for its
 * readiness probe, reads its metrics, and stops it by its own pid.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { get } from "node:http";
import { freePort } from "./controller-process.js";

function httpGet(port: number, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve) => {
    const req = get({ host: "127.0.0.1", port, path, timeout: 5000 }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      res.on("error", () => resolve({ status: 0, body: "" }));
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve({ status: 0, body: "" }));
  });
}

/** A running peer process. */
export class PeerProcess {
  private readonly lines: string[] = [];
  private exitText?: string;
  readonly exited: Promise<string>;

  constructor(
    private readonly child: ChildProcess,
    private readonly metricsPort: number,
    private readonly probePort: number,
  ) {
    const keep = (chunk: Buffer) => {
      this.lines.push(...chunk.toString("utf8").split("\n").filter(Boolean));
    };
    child.stdout?.on("data", keep);
    child.stderr?.on("data", keep);
    this.exited = new Promise((resolve) => {
      child.once("exit", (code, signal) => resolve((this.exitText = signal ?? String(code))));
      child.once("error", (e) => resolve((this.exitText = `spawn error: ${e.message}`)));
    });
  }

  /** The last lines of its output. */
  tail(n = 60): string {
    return this.lines.slice(-n).join("\n");
  }

  /** Every line of its output so far that contains `text`. */
  linesWith(text: string): string[] {
    return this.lines.filter((l) => l.includes(text));
  }

  /** Resolves once `/readyz` answers 200; rejects when the process exits first. */
  async ready(timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (let delay = 20; ; delay = Math.min(delay * 2, 500)) {
      if (this.exitText !== undefined)
        throw new Error(`the peer exited (${this.exitText}) before it was ready:\n${this.tail()}`);
      if ((await httpGet(this.probePort, "/readyz")).status === 200) return;
      if (Date.now() > deadline)
        throw new Error(`the peer was not ready within ${timeoutMs} ms:\n${this.tail()}`);
      // Process start-up has nothing to watch: the probe is retried with a doubling pause.
      await new Promise((r) => setTimeout(r, delay));
    }
  }

  /** Its `/metrics` exposition text. */
  async metricsText(): Promise<string> {
    const r = await httpGet(this.metricsPort, "/metrics");
    if (r.status !== 200) throw new Error(`GET /metrics of the peer answered ${r.status}`);
    return r.body;
  }

  /** SIGTERM, then SIGKILL after `graceMs`; resolves when it has exited. */
  async stop(graceMs = 20_000): Promise<string> {
    if (this.exitText !== undefined) return this.exitText;
    this.child.kill("SIGTERM");
    const timer = setTimeout(() => this.child.kill("SIGKILL"), graceMs);
    const how = await this.exited;
    clearTimeout(timer);
    return how;
  }
}

/**
 * Starts the peer binary on the given kubeconfig: no leader election, metrics and probes on
 * free loopback ports, and `registry` as its (required) OCI registry; without one a closed
 * loopback port, which the create, scale, rebuild and delete paths never need to reach.
 * `env` adds to its environment (e.g. `DOCKER_CONFIG` for its Docker keychain).
 */
export async function startPeer(
  binary: string,
  kubeconfig: string,
  registry = "127.0.0.1:1",
  env: Record<string, string> = {},
): Promise<PeerProcess> {
  const [metrics, probe] = [await freePort(), await freePort()];
  const child = spawn(
    binary,
    [
      "--leader-elect=false",
      `--metrics-bind-address=127.0.0.1:${metrics}`,
      `--health-probe-bind-address=127.0.0.1:${probe}`,
    ],
    {
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        KUBECONFIG: kubeconfig,
        LEADER_ELECT: "false",
        OCI_REGISTRY: registry,
        ...env,
      },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  const peer = new PeerProcess(child, metrics, probe);
  await peer.ready();
  return peer;
}
