/**
 * A counting loopback proxy in front of the apiserver. The process under test gets a
 * kubeconfig pointing at the proxy (plain HTTP on 127.0.0.1, no credentials), so every
 * request it makes is counted by verb and resource — whatever language the client is
 * written in. Writes are keyed by their HTTP method (`POST`, `PUT`, `PATCH`, `DELETE`), reads
 * by the Kubernetes verb a GET stands for: `GET` (one object), `LIST` (a collection) or
 * `WATCH` (`?watch=true`, or the old `/watch/` paths); a GET of a path that names no resource
 * (discovery, `/version`, probes) stays `GET` under its path. The proxy sends each request on over TLS with the bearer token of the
 * original kubeconfig, for every client alike: a Go client talking plain HTTP may not send a
 * token at all, and would then be refused as an anonymous user. The embedded cluster runs with priority-and-fairness off and every component
 * shares one admin identity, so the apiserver's own metrics cannot tell clients apart.
 *
 * Caveats: adds one loopback hop to each request of the process under test (the same for
 * every process measured); watches are streamed through untouched.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { Agent, request } from "node:https";
import { parse } from "yaml";

/** Write verbs, as HTTP methods. */
export const WRITE_METHODS = ["POST", "PUT", "PATCH", "DELETE"] as const;

/** Read verbs, as counted. */
export const READ_VERBS = ["GET", "LIST", "WATCH"] as const;
export type ReadVerb = (typeof READ_VERBS)[number];

/** Requests seen, keyed `"<VERB> <resource>[/<subresource>]"` (see the header). */
export type Counts = Record<string, number>;

/** The resource (and subresource) an API path addresses, e.g. `pods` or `cocoonsets/status`. */
export function resourceOf(url: string): string {
  const parts = url.split("?")[0].split("/").filter(Boolean);
  // /api/v1/... or /apis/<group>/<version>/...
  let rest = parts[0] === "api" ? parts.slice(2) : parts[0] === "apis" ? parts.slice(3) : parts;
  // The old watch paths: /api/v1/watch/namespaces/<ns>/pods.
  if (rest[0] === "watch" && parts[0] !== rest[0]) rest = rest.slice(1);
  if (rest[0] === "namespaces" && rest.length >= 3) rest = rest.slice(2);
  if (rest.length === 0) return parts.join("/") || "/";
  return rest.length >= 3 ? `${rest[0]}/${rest[2]}` : rest[0];
}

/** The key a request is counted under: `"<VERB> <resource>"` (see the header). */
export function requestKey(method: string, url: string): string {
  const resource = resourceOf(url);
  if (method !== "GET") return `${method} ${resource}`;
  const [path, query = ""] = url.split("?");
  let parts = path.split("/").filter(Boolean);
  if (parts[0] !== "api" && parts[0] !== "apis") return `GET ${resource}`;
  parts = parts[0] === "api" ? parts.slice(2) : parts.slice(3);
  const oldWatch = parts[0] === "watch";
  if (oldWatch) parts = parts.slice(1);
  if (parts[0] === "namespaces" && parts.length >= 3) parts = parts.slice(2);
  // No resource named (discovery of a group version).
  if (parts.length === 0) return `GET ${resource}`;
  const watch = oldWatch || /(^|&)watch=(true|1)(&|$)/.test(query);
  if (watch) return `WATCH ${resource}`;
  return `${parts.length === 1 ? "LIST" : "GET"} ${resource}`;
}

/** Reads by verb in a snapshot difference (requests under no resource not counted). */
export function reads(counts: Counts): Record<ReadVerb, number> {
  const out: Record<ReadVerb, number> = { GET: 0, LIST: 0, WATCH: 0 };
  for (const [k, v] of Object.entries(counts)) {
    const [verb, resource = ""] = k.split(" ");
    if (!(READ_VERBS as readonly string[]).includes(verb) || !isResource(resource)) continue;
    out[verb as ReadVerb] += v;
  }
  return out;
}

/** Whether a counted resource is an API resource (not `apis/...`, `version`, `readyz`, ...). */
function isResource(resource: string): boolean {
  return !/^(api|apis)(\/|$)|^(version|readyz|livez|healthz|openapi)/.test(resource);
}

/** Sum of the write requests in a snapshot difference. */
export function writes(counts: Counts): number {
  return Object.entries(counts)
    .filter(([k]) => (WRITE_METHODS as readonly string[]).includes(k.split(" ")[0]))
    .reduce((n, [, v]) => n + v, 0);
}

/** `after - before`, keeping only the keys that moved. */
export function delta(before: Counts, after: Counts): Counts {
  const out: Counts = {};
  for (const [k, v] of Object.entries(after)) {
    const d = v - (before[k] ?? 0);
    if (d !== 0) out[k] = d;
  }
  return out;
}

/** A running counting proxy. */
export interface WriteCounter {
  /** A kubeconfig file whose server is the proxy. */
  kubeconfig: string;
  /** A copy of the counts so far. */
  snapshot(): Counts;
  close(): Promise<void>;
}

interface KubeconfigDoc {
  clusters: { name: string; cluster: Record<string, string> }[];
  users?: { name: string; user?: Record<string, unknown> }[];
  contexts: { name: string; context: { cluster: string; user: string } }[];
  "current-context": string;
}

/**
 * Starts the proxy for the cluster of `kubeconfig` and writes `proxyKubeconfig` (a copy of
 * it whose server is the proxy).
 */
export async function startWriteCounter(
  kubeconfig: string,
  proxyKubeconfig: string,
): Promise<WriteCounter> {
  const doc = parse(readFileSync(kubeconfig, "utf8")) as KubeconfigDoc;
  const ctx = doc.contexts.find((c) => c.name === doc["current-context"])!.context;
  const cluster = doc.clusters.find((c) => c.name === ctx.cluster)!.cluster;
  const upstream = new URL(cluster.server);
  const ca = Buffer.from(cluster["certificate-authority-data"], "base64");
  const token = doc.users?.find((u) => u.name === ctx.user)?.user?.token;
  if (typeof token !== "string" || !token)
    throw new Error(`the kubeconfig ${kubeconfig} has no bearer token for the counting proxy`);
  const agent = new Agent({ keepAlive: true, maxSockets: Infinity, ca });
  const counts: Counts = {};

  const server: Server = createServer((req, res) => {
    const key = requestKey(req.method ?? "GET", req.url ?? "/");
    counts[key] = (counts[key] ?? 0) + 1;
    const up = request(
      {
        hostname: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, host: upstream.host, authorization: `Bearer ${token}` },
        agent,
      },
      (upRes) => {
        res.writeHead(upRes.statusCode ?? 502, upRes.headers);
        upRes.pipe(res);
      },
    );
    up.on("error", () => {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
    // A client that hangs up (an aborted watch) ends the upstream stream too.
    res.on("close", () => {
      if (!res.writableFinished) up.destroy();
    });
    req.pipe(up);
  });
  server.requestTimeout = 0;
  server.keepAliveTimeout = 120_000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const addr = server.address();
  const port = typeof addr === "object" && addr ? addr.port : 0;

  const copy = structuredClone(doc);
  const c = copy.clusters.find((x) => x.name === ctx.cluster)!.cluster;
  c.server = `http://127.0.0.1:${port}`;
  delete c["certificate-authority-data"];
  // Plain HTTP to loopback: client libraries refuse it unless TLS verification is "skipped".
  (c as Record<string, unknown>)["insecure-skip-tls-verify"] = true;
  // No credentials in the copy: the proxy adds the token (see the header).
  for (const u of copy.users ?? []) if (u.name === ctx.user) u.user = {};
  // JSON (which is YAML too): the controller reads it without loading a YAML parser, as it reads
  // its in-cluster credentials in the image, so the memory measured is the image's.
  writeFileSync(proxyKubeconfig, JSON.stringify(copy, null, 2) + "\n", { mode: 0o600 });

  return {
    kubeconfig: proxyKubeconfig,
    snapshot: () => ({ ...counts }),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
        agent.destroy();
      }),
  };
}
