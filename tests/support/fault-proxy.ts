/**
 * Test support: a loopback HTTP proxy in front of the apiserver that injects faults, so tests
 * can check that the engine converges through throttling, server errors and lost answers.
 *
 * About one request in five (never a watch) gets one of: a 429 with `Retry-After: 1`, a 503,
 * a connection dropped before the request is forwarded, or a connection dropped after the
 * apiserver answered (the change happened, the client never hears of it). The proxy adds the
 * admin credentials itself, so its kubeconfig carries none.
 *
 * It also observes what clients send: how many requests of a group are in flight at once
 * (`track`, optionally holding them until N are, `holdUntil`), and every request in arrival
 * order with its body (`record`).
 */
import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { request as httpsRequest } from "node:https";
import type { AddressInfo } from "node:net";
import { stringify } from "yaml";
import type { KubeClient } from "../../engine/kube/index.js";

/** The faults the proxy injects. */
export type Fault = "429" | "503" | "drop-before" | "drop-after";

const FAULTS: readonly Fault[] = ["429", "503", "drop-before", "drop-after"];

/** Options of {@link startFaultProxy}. */
export interface FaultProxyOptions {
  /** Share of non-watch requests that get a fault. @default 0.2 */
  rate?: number;
  /** Seed of the fault choice, for a reproducible sequence. @default random */
  seed?: number;
  /**
   * Names the group a request counts in for concurrency (`stats.peak`), or undefined to not
   * count it. A request is in flight from its arrival until its answer is sent.
   */
  track?: (method: string, path: string) => string | undefined;
  /**
   * Holds each tracked request until this many of its group are in flight (or no other one
   * arrived for 1 s), so a client that could send more at once would show it in the peak.
   */
  holdUntil?: number;
  /** Keep every non-watch request, body included, in `stats.log`. @default false */
  record?: boolean;
  /**
   * Keep, for every GET (lists and watches too), the objects the apiserver answered with, in
   * `stats.answers`: what a client was really sent. @default false
   */
  answers?: boolean;
}

/** The objects the apiserver sent for one GET (with `answers`). */
export interface AnsweredRequest {
  /** The path without the query. */
  path: string;
  query: URLSearchParams;
  /** The request's Accept header (a metadata-only list or watch asks for PartialObjectMetadata). */
  accept: string;
  /** Each object sent (a list's items, a watch's events, or the one object), in order. */
  objects: { kind?: string; namespace?: string; name?: string }[];
}

/** A request the proxy saw (with `record`). */
export interface RecordedRequest {
  method: string;
  /** The path without the query. */
  path: string;
  query: URLSearchParams;
  /** The JSON body, if any. */
  body?: unknown;
}

/** A running proxy. */
export interface FaultProxy {
  /** `http://127.0.0.1:<port>`. */
  url: string;
  /** A kubeconfig (YAML text) pointing at the proxy, with no credentials. */
  kubeconfig: string;
  /** Requests forwarded, faults injected by kind, tracked concurrency and recorded requests. */
  stats: {
    requests: number;
    watches: number;
    faults: Record<Fault, number>;
    /** Tracked requests in flight now, by group. */
    inFlight: Record<string, number>;
    /** The most tracked requests ever in flight at once, by group. */
    peak: Record<string, number>;
    /** Non-watch requests in arrival order (with `record`). */
    log: RecordedRequest[];
    /** What every GET was answered with, in arrival order (with `answers`). */
    answers: AnsweredRequest[];
  };
  /** Stops listening and closes open connections. */
  close(): Promise<void>;
}

// mulberry32: a tiny seeded generator, enough to pick faults reproducibly.
function generator(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function isWatch(url: string): boolean {
  const u = new URL(url, "http://proxy");
  return u.searchParams.get("watch") === "true" || u.pathname.includes("/watch/");
}

/**
 * Starts the proxy in front of the cluster `admin` talks to, using its CA and token.
 * @param admin a client with a bearer token for an https apiserver
 */
export async function startFaultProxy(
  admin: KubeClient,
  opts: FaultProxyOptions = {},
): Promise<FaultProxy> {
  const cluster = admin.config.getCurrentCluster();
  const token = admin.config.getCurrentUser()?.token;
  if (!cluster || !token) throw new Error("the fault proxy needs a kubeconfig with a token user");
  const upstream = new URL(cluster.server);
  const ca = cluster.caData ? Buffer.from(cluster.caData, "base64") : undefined;
  const rate = opts.rate ?? 0.2;
  const random = generator(opts.seed ?? randomBytes(4).readUInt32LE(0));
  const stats: FaultProxy["stats"] = {
    requests: 0,
    watches: 0,
    faults: { "429": 0, "503": 0, "drop-before": 0, "drop-after": 0 },
    inFlight: {},
    peak: {},
    log: [],
    answers: [],
  };

  // Held tracked requests by group, released together (see holdUntil).
  const held: Record<string, (() => void)[]> = {};
  const idle: Record<string, NodeJS.Timeout> = {};
  const releaseHeld = (group: string) => {
    clearTimeout(idle[group]);
    for (const go of (held[group] ?? []).splice(0)) go();
  };
  /** Counts a tracked request in flight until its answer is sent; resolves when it may go on. */
  const admit = (group: string, res: ServerResponse): Promise<void> => {
    stats.inFlight[group] = (stats.inFlight[group] ?? 0) + 1;
    stats.peak[group] = Math.max(stats.peak[group] ?? 0, stats.inFlight[group]);
    res.once("close", () => stats.inFlight[group]--);
    if (!opts.holdUntil) return Promise.resolve();
    const wait = new Promise<void>((resolve) => (held[group] ??= []).push(resolve));
    if (stats.inFlight[group] >= opts.holdUntil) releaseHeld(group);
    else {
      clearTimeout(idle[group]);
      idle[group] = setTimeout(() => releaseHeld(group), 1000);
    }
    return wait;
  };
  const readBody = (req: IncomingMessage): Promise<Buffer> =>
    new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => resolve(Buffer.concat(chunks)));
      req.on("error", reject);
    });

  /** Notes the objects of a GET's answer as they stream by (a watch's line by line). */
  const tapAnswer = (req: IncomingMessage, answer: IncomingMessage): void => {
    const url = new URL(req.url ?? "/", "http://proxy");
    const entry: AnsweredRequest = {
      path: url.pathname,
      query: url.searchParams,
      accept: String(req.headers.accept ?? ""),
      objects: [],
    };
    stats.answers.push(entry);
    type Meta = { kind?: string; metadata?: { namespace?: string; name?: string } };
    const note = (o: Meta | undefined) => {
      if (o?.metadata) entry.objects.push({ kind: o.kind, ...o.metadata });
    };
    const watch = isWatch(req.url ?? "");
    let text = "";
    answer.setEncoding("utf8");
    answer.on("data", (chunk: string) => {
      text += chunk;
      if (!watch) return;
      let nl: number;
      while ((nl = text.indexOf("\n")) >= 0) {
        const line = text.slice(0, nl).trim();
        text = text.slice(nl + 1);
        if (!line) continue;
        const ev = JSON.parse(line) as { type?: string; object?: Meta };
        if (ev.type !== "BOOKMARK" && ev.type !== "ERROR") note(ev.object);
      }
    });
    answer.on("end", () => {
      if (watch || !text) return;
      try {
        const body = JSON.parse(text) as Meta & { items?: Meta[] | null };
        // A list (a metadata-only list of nothing says `items: null`).
        if ("items" in body) for (const item of body.items ?? []) note(item);
        else if (body.kind !== "Status") note(body);
      } catch {
        // Not JSON: nothing to note.
      }
    });
  };

  const forward = (
    req: IncomingMessage,
    res: ServerResponse,
    dropAnswer: boolean,
    body?: Buffer,
  ): void => {
    const headers = { ...req.headers, host: upstream.host, authorization: `Bearer ${token}` };
    const up = httpsRequest(
      {
        hostname: upstream.hostname,
        port: upstream.port,
        path: req.url,
        method: req.method,
        headers,
        ca,
      },
      (answer) => {
        if (dropAnswer) {
          // Let the apiserver finish the change, then lose its answer.
          answer.resume();
          answer.on("end", () => req.socket.destroy());
          return;
        }
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        if (opts.answers && req.method === "GET") tapAnswer(req, answer);
        answer.pipe(res);
      },
    );
    up.on("error", () => req.socket.destroy());
    // A client that goes away (a finished watch) ends the upstream request too.
    res.on("close", () => up.destroy());
    if (body) up.end(body);
    else req.pipe(up);
  };

  /** Reads the body, records and tracks the request, then forwards it. */
  const observed = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const body = await readBody(req);
    const url = new URL(req.url ?? "/", "http://proxy");
    const method = req.method ?? "GET";
    if (opts.record) {
      let parsed: unknown;
      try {
        parsed = body.length ? JSON.parse(body.toString("utf8")) : undefined;
      } catch {
        parsed = body.toString("utf8");
      }
      stats.log.push({ method, path: url.pathname, query: url.searchParams, body: parsed });
    }
    const group = opts.track?.(method, url.pathname);
    if (group !== undefined) await admit(group, res);
    forward(req, res, false, body);
  };

  const server = createServer((req, res) => {
    if (isWatch(req.url ?? "")) {
      stats.watches++;
      forward(req, res, false);
      return;
    }
    stats.requests++;
    if (random() >= rate) {
      if (opts.record || opts.track) observed(req, res).catch(() => req.socket.destroy());
      else forward(req, res, false);
      return;
    }
    const fault = FAULTS[Math.floor(random() * FAULTS.length)];
    stats.faults[fault]++;
    switch (fault) {
      case "429":
      case "503": {
        const code = Number(fault);
        req.resume();
        res.writeHead(code, {
          "content-type": "application/json",
          ...(code === 429 ? { "retry-after": "1" } : {}),
        });
        res.end(
          JSON.stringify({
            kind: "Status",
            apiVersion: "v1",
            status: "Failure",
            reason: code === 429 ? "TooManyRequests" : "ServiceUnavailable",
            message: `injected by the fault proxy`,
            code,
          }),
        );
        return;
      }
      case "drop-before":
        req.socket.destroy();
        return;
      case "drop-after":
        forward(req, res, true);
        return;
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  // client-node refuses a plain-http server unless TLS verification is marked as skipped;
  // there is no TLS on this hop (loopback), so the flag only unlocks http.
  const kubeconfig = stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "fault-proxy", cluster: { server: url, "insecure-skip-tls-verify": true } }],
    users: [{ name: "fault-proxy", user: {} }],
    contexts: [{ name: "fault-proxy", context: { cluster: "fault-proxy", user: "fault-proxy" } }],
    "current-context": "fault-proxy",
  });
  return {
    url,
    kubeconfig,
    stats,
    close: () =>
      new Promise<void>((resolve) => {
        for (const group of Object.keys(held)) releaseHeld(group);
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
