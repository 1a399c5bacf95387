/**
 * The controller's HTTP endpoints: Prometheus metrics on `--metrics-bind-address`
 * (`GET /metrics`) and probes on `--health-probe-bind-address` (`GET /healthz`,
 * `GET /readyz`). A failing probe answers 503 with the reason in the body.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Registry } from "prom-client";
import { errorMessage, InvalidValueError } from "../engine/kube/branded-error.js";

/** A parsed bind address; `host` undefined means every interface. */
export interface BindAddress {
  host?: string;
  port: number;
}

/**
 * Parses `:8080`, `127.0.0.1:8080`, `[::1]:8080` or `localhost:8080`. `0` disables the
 * server (returns undefined); `:0` binds a free port.
 * @throws Error with the rule when the text is not an address
 */
export function parseBindAddress(text: string): BindAddress | undefined {
  const t = text.trim();
  if (t === "0") return undefined;
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]\s]*)):(\d{1,5})$/.exec(t);
  const port = m ? parseInt(m[3], 10) : NaN;
  if (!m || port > 65535) {
    throw new InvalidValueError(
      `"${text}" is not a bind address (use ":8080", "127.0.0.1:8080", or "0" to disable)`,
    );
  }
  const host = m[1] ?? (m[2] || undefined);
  return { host, port };
}

/** The outcome of one probe check. */
export interface CheckResult {
  ok: boolean;
  /** Why it is (not) ok; served as the body. */
  reason: string;
}

/** A running HTTP server. */
export interface RunningServer {
  /** The port actually bound (useful with `:0`). */
  port: number;
  /** The address actually bound, e.g. `127.0.0.1:43121` or `[::]:8080`. */
  address: string;
  /** Stops accepting connections and closes idle ones. */
  close(): Promise<void>;
}

type Route = (req: IncomingMessage, res: ServerResponse) => Promise<void> | void;

async function listen(bind: BindAddress, routes: Record<string, Route>): Promise<RunningServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    const route = req.method === "GET" || req.method === "HEAD" ? routes[path] : undefined;
    if (!route) {
      res.writeHead(404, { "content-type": "text/plain" }).end("not found\n");
      return;
    }
    Promise.resolve(route(req, res)).catch((e: unknown) => {
      if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain" });
      res.end(`${errorMessage(e)}\n`);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(bind.port, bind.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const bound = server.address() as AddressInfo;
  return {
    port: bound.port,
    address: `${bound.family === "IPv6" ? `[${bound.address}]` : bound.address}:${bound.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
  };
}

/** Serves `GET /metrics` from a prom-client registry. */
export function startMetricsServer(bind: BindAddress, registry: Registry): Promise<RunningServer> {
  return listen(bind, {
    "/metrics": async (_req, res) => {
      const body = await registry.metrics();
      res.writeHead(200, { "content-type": registry.contentType }).end(body);
    },
  });
}

/** The checks behind the probe endpoints. */
export interface ProbeChecks {
  /** Liveness: the process works and its informers are supervised. */
  healthz: () => CheckResult;
  /** Readiness: caches synced and the CRD present. */
  readyz: () => CheckResult;
  /** Informational checks, each served at `/readyz/<name>`. */
  named?: Record<string, () => CheckResult>;
}

/** Serves `GET /healthz` and `GET /readyz`: 200 "ok" or 503 with the reason. */
export function startProbeServer(bind: BindAddress, checks: ProbeChecks): Promise<RunningServer> {
  const probe =
    (check: () => CheckResult): Route =>
    (_req, res) => {
      const r = check();
      res
        .writeHead(r.ok ? 200 : 503, { "content-type": "text/plain; charset=utf-8" })
        .end(`${r.reason}\n`);
    };
  const named = Object.fromEntries(
    Object.entries(checks.named ?? {}).map(([n, check]) => [`/readyz/${n}`, probe(check)]),
  );
  return listen(bind, {
    ...named,
    "/healthz": probe(checks.healthz),
    "/readyz": probe(checks.readyz),
  });
}
