/**
 * The one Kubernetes client of the project: a small REST client over a kubeconfig, with
 * retries, typed errors, pagination and watches. Provider, controller, CLI and tests all
 * talk to the apiserver through it.
 *
 * Guarantees: a request is retried on 429 (honouring `Retry-After`), on 5xx and on
 * connection failures, with exponential backoff under a per-request deadline; it is never
 * retried on another 4xx. Every retry is reported to the `onRetry` hook (debug logs).
 *
 * Caveats: a retried POST may have succeeded the first time; callers treat AlreadyExists
 * as success where that matters (the engine's fan-out does).
 */
import { existsSync } from "node:fs";
import { Agent, request, type RequestOptions } from "node:https";
import { Agent as HttpAgent, request as httpRequest } from "node:http";
import { homedir } from "node:os";
import { delimiter, join } from "node:path";
import { BrandedError, errorMessage, type BrandedErrorOptions } from "./branded-error.js";
import {
  KubeConfig,
  mergeKubeconfigFiles,
  SERVICE_ACCOUNT_DIR,
  type KubeRequestOptions,
} from "./kubeconfig.js";
import { ConnectProxyAgent, parseProxyUrl } from "./proxy-agent.js";
import { sleep } from "./sleep.js";
import { LineSplitter } from "./lines.js";
import type { ObjectMeta, OwnerReference } from "./objects.js";

export type { ObjectMeta, OwnerReference };

/** A Kubernetes object as plain JSON. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  [key: string]: unknown;
}

/** Any object the client reads or writes, as far as the wait and watch helpers need. */
export interface ObjectLike {
  apiVersion?: string;
  kind?: string;
  metadata?: ObjectMeta;
}

/** The meta/v1 Status an ERROR watch event carries in place of an object. */
function watchStatus(o: object): { code?: number; reason?: string; message?: string } {
  const { code, reason, message } = o as Record<string, unknown>;
  return {
    code: typeof code === "number" ? code : undefined,
    reason: typeof reason === "string" ? reason : undefined,
    message: typeof message === "string" ? message : undefined,
  };
}

/** A list response. */
export interface KubeList<T = KubeObject> {
  metadata: { resourceVersion?: string; continue?: string };
  items: T[];
}

/** A watch event. */
export interface WatchEvent<T = KubeObject> {
  type: "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR";
  object: T;
}

/** An error answered by the apiserver (or the transport), with the HTTP status. */
export class KubeApiError extends BrandedError {
  constructor(
    message: string,
    readonly status: number,
    readonly reason: string,
    readonly method: string,
    readonly path: string,
    readonly retryAfterMs?: number,
  ) {
    super(message);
  }
}

/** True for a 404 from the apiserver. */
export const isNotFound = (e: unknown): boolean => KubeApiError.isInstance(e) && e.status === 404;
/** True for a 409 AlreadyExists. */
export const isAlreadyExists = (e: unknown): boolean =>
  KubeApiError.isInstance(e) && e.status === 409 && e.reason === "AlreadyExists";
/** True for a 409 Conflict (stale resourceVersion). */
export const isConflict = (e: unknown): boolean =>
  KubeApiError.isInstance(e) && e.status === 409 && e.reason !== "AlreadyExists";
/** True for a 403. */
export const isForbidden = (e: unknown): boolean => KubeApiError.isInstance(e) && e.status === 403;
/** True for a 410 Gone (expired resourceVersion). */
export const isGone = (e: unknown): boolean => KubeApiError.isInstance(e) && e.status === 410;

/** Reason of the error a watch ends with when its stream sends a line that is not an event. */
export const MALFORMED_WATCH_EVENT = "MalformedWatchEvent";
/**
 * True when a watch ended because of a garbled line: events may be lost, so the caller
 * must list again before it watches on.
 */
export const isMalformedWatchEvent = (e: unknown): boolean =>
  KubeApiError.isInstance(e) && e.reason === MALFORMED_WATCH_EVENT;

/** Patch content types. */
/**
 * The Accept headers of a list and of a watch that ask for the objects' metadata only
 * (PartialObjectMetadata): no spec or status is sent. A watch must not offer the list's type
 * (the apiserver answers 200 and ends the stream at once).
 */
const METADATA_ONLY_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
const METADATA_ONLY = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";

export const PatchType = {
  merge: "application/merge-patch+json",
  json: "application/json-patch+json",
  strategic: "application/strategic-merge-patch+json",
} as const;

/** What a retry looked like, for debug logs and tests. */
export interface RetryInfo {
  method: string;
  path: string;
  attempt: number;
  delayMs: number;
  cause: string;
}

/** Options of {@link KubeClient}. */
export interface KubeClientOptions {
  /** Kubeconfig file. @default `$KUBECONFIG`, else in-cluster, else `~/.kube/config` */
  kubeconfig?: string;
  /** The kubeconfig context to use (kubectl's `--context`). @default its current context */
  context?: string;
  /** An already loaded configuration (wins over `kubeconfig`). */
  config?: KubeConfig;
  /** Per-request deadline including retries. @default 60000 */
  requestTimeoutMs?: number;
  /** Max sockets to the apiserver. @default 32 */
  maxSockets?: number;
  /** Called before each retry. */
  onRetry?: (info: RetryInfo) => void;
}

/** Thrown when no usable kubeconfig is found; says where it looked. */
export class KubeConfigError extends BrandedError {
  constructor(message: string, options?: BrandedErrorOptions) {
    super(message, options);
  }
}

/**
 * Loads a kubeconfig as controller-runtime does: the `--kubeconfig` file, else `$KUBECONFIG`
 * (a list of files merged as client-go merges them), else the in-cluster service account,
 * else `~/.kube/config`. `context` picks a context of the kubeconfig (not of the in-cluster
 * credentials, which have none). The error names every place it looked.
 */
export function loadKubeConfig(
  kubeconfig?: string,
  context?: string,
  serviceAccountDir = SERVICE_ACCOUNT_DIR,
): { config: KubeConfig; source: string } {
  const inClusterToken = join(serviceAccountDir, "token");
  // `files` is where the kubeconfig was read, `how` why there (the flag, or the variable).
  const use = (kc: KubeConfig, files: string, how: string) => {
    if (context) {
      try {
        kc = kc.withCurrentContext(context);
      } catch (e) {
        throw new KubeConfigError(
          `the kubeconfig ${files} (${how}): ${errorMessage(e)} (--context)`,
        );
      }
    }
    if (!kc.getCurrentCluster()) {
      throw new KubeConfigError(`the kubeconfig ${files} (${how}) has no current cluster`);
    }
    return { config: kc, source: `${how} ${files}` };
  };
  const fromFile = (file: string, source: string) => {
    try {
      return use(KubeConfig.fromFile(file), file, source);
    } catch (e) {
      if (KubeConfigError.isInstance(e)) throw e;
      throw new KubeConfigError(
        `the kubeconfig ${file} (${source}) does not parse: ${errorMessage(e)}`,
      );
    }
  };
  if (kubeconfig) {
    if (!existsSync(kubeconfig))
      throw new KubeConfigError(`the kubeconfig ${kubeconfig} (--kubeconfig) does not exist`);
    return fromFile(kubeconfig, "--kubeconfig");
  }
  const envFiles = (process.env.KUBECONFIG ?? "").split(delimiter).filter(Boolean);
  if (envFiles.some((f) => existsSync(f))) {
    let merged: { text: string; read: string[] };
    try {
      merged = mergeKubeconfigFiles(envFiles);
    } catch (e) {
      throw new KubeConfigError(
        `the kubeconfig ${envFiles.join(delimiter)} ($KUBECONFIG) does not parse: ${errorMessage(e)}`,
      );
    }
    const { text, read } = merged;
    if (read.length === 1) return fromFile(read[0], "$KUBECONFIG");
    let kc: KubeConfig;
    try {
      kc = KubeConfig.parse(text);
    } catch (e) {
      throw new KubeConfigError(
        `the kubeconfig ${read.join(delimiter)} ($KUBECONFIG) does not parse: ${errorMessage(e)}`,
      );
    }
    return use(kc, read.join(delimiter), "$KUBECONFIG");
  }
  if (process.env.KUBERNETES_SERVICE_HOST && existsSync(inClusterToken)) {
    if (context)
      throw new KubeConfigError(
        `--context ${context} names a kubeconfig context, and no kubeconfig was found (only in-cluster credentials)`,
      );
    return {
      config: KubeConfig.inCluster(serviceAccountDir),
      source: "in-cluster service account",
    };
  }
  const home = join(homedir(), ".kube", "config");
  if (existsSync(home)) return fromFile(home, "~/.kube/config");
  throw new KubeConfigError(
    `no kubeconfig found: looked at --kubeconfig (not given), $KUBECONFIG (${process.env.KUBECONFIG ?? "unset"}), in-cluster credentials (${inClusterToken}) and ${home}`,
  );
}

interface Transport {
  server: URL;
  options: RequestOptions;
  headers: Record<string, string>;
  /** When the credentials are read again (a minute, or sooner when they expire sooner). */
  renewAt: number;
}

/**
 * Told of every HTTP request to the apiserver as it is answered (retries and watches each
 * count): `code` is the status, or `"<error>"` when no response came; `host` is host:port.
 */
export type RequestObserver = (code: string, method: string, host: string) => void;

/** Counts of requests by verb, for benchmarks (steady-state writes). */
export interface RequestCounters {
  byVerb: Record<string, number>;
  retries: number;
}

/** How a DELETE is sent: its propagation, the uid it must match, the grace period. */
export interface DeleteOptions {
  propagationPolicy?: "Background" | "Foreground" | "Orphan";
  uid?: string;
  gracePeriodSeconds?: number;
}

/** A REST client for one apiserver. */
export class KubeClient {
  readonly config: KubeConfig;
  readonly source: string;
  readonly counters: RequestCounters = { byVerb: {}, retries: 0 };
  private transport?: Transport;
  private agent: Agent | HttpAgent;
  private readonly timeoutMs: number;
  private readonly onRetry?: (info: RetryInfo) => void;
  private readonly observers = new Set<RequestObserver>();

  constructor(opts: KubeClientOptions = {}) {
    if (opts.config) {
      this.config = opts.config;
      this.source = "provided configuration";
    } else {
      const loaded = loadKubeConfig(opts.kubeconfig, opts.context);
      this.config = loaded.config;
      this.source = loaded.source;
    }
    const cluster = this.config.getCurrentCluster();
    const server = cluster?.server ?? "";
    const agentOpts = { keepAlive: true, maxSockets: opts.maxSockets ?? 32 };
    let proxy: URL | undefined;
    try {
      proxy = cluster?.proxyUrl ? parseProxyUrl(cluster.proxyUrl) : undefined;
    } catch (e) {
      throw new KubeConfigError(`the kubeconfig ${this.source}: ${errorMessage(e)}`);
    }
    if (proxy && server.startsWith("http:"))
      throw new KubeConfigError(
        `the kubeconfig ${this.source}: proxy-url with a plain-http server is not supported`,
      );
    this.agent = proxy
      ? new ConnectProxyAgent(proxy, agentOpts)
      : server.startsWith("http:")
        ? new HttpAgent(agentOpts)
        : new Agent(agentOpts);
    this.timeoutMs = opts.requestTimeoutMs ?? 60_000;
    this.onRetry = opts.onRetry;
  }

  /** Builds a client from a kubeconfig given as YAML text (the provider's secret input). */
  static fromString(
    kubeconfigYaml: string,
    opts: Omit<KubeClientOptions, "config" | "kubeconfig"> = {},
  ): KubeClient {
    let kc: KubeConfig;
    try {
      kc = KubeConfig.parse(kubeconfigYaml);
    } catch (e) {
      throw new KubeConfigError(`the kubeconfig input does not parse: ${errorMessage(e)}`);
    }
    if (!kc.getCurrentCluster())
      throw new KubeConfigError("the kubeconfig input has no current cluster");
    return new KubeClient({ ...opts, config: kc });
  }

  /** The apiserver URL. */
  get server(): string {
    return this.config.getCurrentCluster()?.server ?? "";
  }

  /** The namespace the kubeconfig's current context names, if any. */
  get contextNamespace(): string | undefined {
    const ns = this.config.getContextObject(this.config.getCurrentContext())?.namespace;
    return ns?.trim() ? ns.trim() : undefined;
  }

  /** Calls `fn` for every request from now on (metrics); returns what stops it. */
  observeRequests(fn: RequestObserver): () => void {
    this.observers.add(fn);
    return () => this.observers.delete(fn);
  }

  private observed(code: string, method: string, host: string): void {
    for (const fn of this.observers) fn(code, method, host);
  }

  /** Forgets the credentials after a 401 when a fresh run of an exec plugin may help. */
  private reauthenticate(): boolean {
    if (!this.config.invalidateCredentials()) return false;
    this.transport = undefined;
    return true;
  }

  /** Closes idle sockets so the process can exit. */
  close(): void {
    this.agent.destroy();
  }

  private async getTransport(): Promise<Transport> {
    // Credentials may rotate (projected tokens, exec plugins): re-read them every minute, or
    // when an exec plugin's credential expires if that is sooner.
    if (this.transport && Date.now() < this.transport.renewAt) return this.transport;
    const opts: KubeRequestOptions = { headers: {} };
    let expiresAt: number | undefined;
    try {
      ({ expiresAt } = await this.config.applyToHTTPSOptions(opts));
    } catch (e) {
      // A credential or TLS setting that cannot be applied will not fix itself: no retry.
      throw new KubeConfigError(
        `cannot use the credentials of ${this.source} for ${this.server}: ${errorMessage(e)}`,
      );
    }
    const server = new URL(this.server);
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(opts.headers ?? {})) headers[k.toLowerCase()] = String(v);
    this.transport = {
      server,
      headers,
      renewAt: Math.min(Date.now() + 60_000, expiresAt ?? Infinity),
      options: {
        ca: opts.ca,
        cert: opts.cert,
        key: opts.key,
        auth: opts.auth,
        rejectUnauthorized: opts.rejectUnauthorized,
        servername: opts.servername,
      },
    };
    return this.transport;
  }

  /** Opens a raw request and returns the response stream (used by watches). */
  private async open(
    method: string,
    path: string,
    body: string | undefined,
    contentType: string | undefined,
    signal?: AbortSignal,
    timeoutMs?: number,
    accept = "application/json",
  ): Promise<import("node:http").IncomingMessage> {
    const t = await this.getTransport();
    const base = t.server.pathname.replace(/\/$/, "");
    const headers: Record<string, string> = { accept, ...t.headers };
    if (body !== undefined) {
      headers["content-type"] = contentType ?? "application/json";
      headers["content-length"] = String(Buffer.byteLength(body));
    }
    const reqOpts: RequestOptions = {
      ...t.options,
      method,
      hostname: t.server.hostname,
      port: t.server.port,
      path: base + path,
      headers,
      agent: this.agent,
      signal,
    };
    return new Promise((resolve, reject) => {
      const req = t.server.protocol === "http:" ? httpRequest(reqOpts) : request(reqOpts);
      if (timeoutMs)
        req.setTimeout(timeoutMs, () =>
          req.destroy(new Error(`no response within ${timeoutMs} ms`)),
        );
      let answered = false;
      req.on("response", (res) => {
        answered = true;
        this.observed(String(res.statusCode ?? 0), method, t.server.host);
        resolve(res);
      });
      req.on("error", (e) => {
        // An abort after the answer (a watch that is stopped) is not a failed request.
        if (!answered) this.observed("<error>", method, t.server.host);
        reject(e);
      });
      if (body !== undefined) req.write(body);
      req.end();
    });
  }

  /**
   * One API call with retries. Returns the parsed JSON body; throws KubeApiError for
   * non-2xx answers (after retries for 429/5xx) and for transport errors past the deadline.
   */
  async request<T = unknown>(
    method: string,
    path: string,
    opts: { body?: unknown; contentType?: string; signal?: AbortSignal; accept?: string } = {},
  ): Promise<T> {
    const body = opts.body === undefined ? undefined : JSON.stringify(opts.body);
    const deadline = Date.now() + this.timeoutMs;
    const verb = method.toUpperCase();
    this.counters.byVerb[verb] = (this.counters.byVerb[verb] ?? 0) + 1;
    let reauthenticated = false;
    for (let attempt = 1; ; attempt++) {
      let err: KubeApiError;
      try {
        const res = await this.open(
          verb,
          path,
          body,
          opts.contentType,
          opts.signal,
          30_000,
          opts.accept,
        );
        const text = await readBody(res);
        const status = res.statusCode ?? 0;
        if (status >= 200 && status < 300) return (text ? JSON.parse(text) : {}) as T;
        // A refused exec credential: run the plugin again and retry once (client-go re-runs
        // the plugin on a 401 too).
        if (status === 401 && !reauthenticated && this.reauthenticate()) {
          reauthenticated = true;
          attempt--;
          continue;
        }
        err = toApiError(verb, path, status, text, res.headers["retry-after"]);
      } catch (e) {
        if (KubeApiError.isInstance(e) || KubeConfigError.isInstance(e)) throw e;
        if (opts.signal?.aborted) throw e;
        const cause = (e as NodeJS.ErrnoException).code ?? errorMessage(e);
        // A certificate that does not verify will not verify on a retry either.
        if (isTlsVerificationError(cause))
          throw new KubeApiError(
            `${verb} ${path}: the TLS certificate of ${this.server} does not verify (${cause}): ${errorMessage(e)}`,
            0,
            "TLSVerificationFailed",
            verb,
            path,
          );
        err = new KubeApiError(
          `${verb} ${path}: cannot reach the apiserver at ${this.server} (${cause})`,
          0,
          "ConnectionFailed",
          verb,
          path,
        );
      }
      const retriable = err.status === 0 || err.status === 429 || err.status >= 500;
      if (!retriable) throw err;
      const backoff = Math.min(100 * 2 ** (attempt - 1), 5000);
      const delayMs = Math.max(err.retryAfterMs ?? 0, backoff * (0.8 + Math.random() * 0.4));
      if (Date.now() + delayMs > deadline) throw err;
      this.counters.retries++;
      this.onRetry?.({
        method: verb,
        path,
        attempt,
        delayMs: Math.round(delayMs),
        cause: err.status ? `HTTP ${err.status}` : err.reason,
      });
      await sleep(delayMs);
    }
  }

  /** GET one object. */
  get<T = KubeObject>(path: string): Promise<T> {
    return this.request<T>("GET", path);
  }

  /** GET one object, or undefined on 404. */
  async getOrUndefined<T = KubeObject>(path: string): Promise<T | undefined> {
    try {
      return await this.get<T>(path);
    } catch (e) {
      if (isNotFound(e)) return undefined;
      throw e;
    }
  }

  /** POST an object to a collection. */
  create<T = KubeObject>(collectionPath: string, body: unknown): Promise<T> {
    return this.request<T>("POST", collectionPath, { body });
  }

  /** PUT an object. */
  replace<T = KubeObject>(path: string, body: unknown): Promise<T> {
    return this.request<T>("PUT", path, { body });
  }

  /** PATCH an object with the given patch type. */
  patch<T = KubeObject>(path: string, body: unknown, type: string = PatchType.merge): Promise<T> {
    return this.request<T>("PATCH", path, { body, contentType: type });
  }

  /**
   * DELETE an object; resolves true when the delete was accepted, false on 404 (and on a
   * failed `uid` precondition: the object of that uid is gone).
   * @param propagationPolicy Background, Foreground or Orphan
   * @param gracePeriodSeconds 0 removes a pod at once (what a kubelet sends when it is done)
   */
  async delete(path: string, opts: DeleteOptions = {}): Promise<boolean> {
    return (await this.deleteObject(path, opts)) !== undefined;
  }

  /**
   * DELETE an object as {@link delete} does, answering what the apiserver answered (for a pod,
   * the pod as the delete left it: whether it is gone or terminating); undefined where
   * `delete` answers false.
   */
  async deleteObject<T = KubeObject>(
    path: string,
    opts: DeleteOptions = {},
  ): Promise<T | undefined> {
    const body: Record<string, unknown> = { apiVersion: "v1", kind: "DeleteOptions" };
    if (opts.propagationPolicy) body.propagationPolicy = opts.propagationPolicy;
    if (opts.gracePeriodSeconds !== undefined) body.gracePeriodSeconds = opts.gracePeriodSeconds;
    if (opts.uid) body.preconditions = { uid: opts.uid };
    try {
      return (await this.request<T>("DELETE", path, { body })) ?? ({} as T);
    } catch (e) {
      if (isNotFound(e)) return undefined;
      // A uid precondition that fails means the object was replaced: ours is gone.
      if (opts.uid && isConflict(e)) return undefined;
      throw e;
    }
  }

  /** Lists a collection, following `continue` tokens. */
  async list<T = KubeObject>(
    collectionPath: string,
    query: {
      labelSelector?: string;
      fieldSelector?: string;
      limit?: number;
      /** Objects' metadata only (PartialObjectMetadata). */
      metadataOnly?: boolean;
    } = {},
  ): Promise<KubeList<T>> {
    const items: T[] = [];
    let cont: string | undefined;
    let rv: string | undefined;
    do {
      const q = new URLSearchParams();
      if (query.labelSelector) q.set("labelSelector", query.labelSelector);
      if (query.fieldSelector) q.set("fieldSelector", query.fieldSelector);
      q.set("limit", String(query.limit ?? 500));
      if (cont) q.set("continue", cont);
      const page = await this.request<KubeList<T>>("GET", `${collectionPath}?${q.toString()}`, {
        accept: query.metadataOnly ? METADATA_ONLY_LIST : undefined,
      });
      // A metadata-only list of nothing says `items: null`.
      items.push(...(page.items ?? []));
      cont = page.metadata.continue || undefined;
      rv = page.metadata.resourceVersion;
    } while (cont);
    return { metadata: { resourceVersion: rv }, items };
  }

  /**
   * Watches a collection from `resourceVersion` and calls `onEvent` for each event until the
   * server closes the stream, `signal` aborts, or `onEvent` returns true (done). Resolves
   * with the last resourceVersion seen. A 410 arrives as a thrown KubeApiError (isGone).
   */
  async watch<T extends ObjectLike = KubeObject>(
    collectionPath: string,
    query: {
      resourceVersion?: string;
      labelSelector?: string;
      fieldSelector?: string;
      timeoutSeconds?: number;
      /** Objects' metadata only (events carry PartialObjectMetadata). */
      metadataOnly?: boolean;
      /**
       * Updates are not decoded: a MODIFIED event's line is read only for its
       * resourceVersion and not handed to `onEvent` (a watcher of names, which no update
       * changes, is spared decoding every status write of the collection).
       */
      skipUpdates?: boolean;
    },
    onEvent: (ev: WatchEvent<T>) => boolean | void,
    signal?: AbortSignal,
  ): Promise<string | undefined> {
    const q = new URLSearchParams({ watch: "true", allowWatchBookmarks: "true" });
    if (query.resourceVersion) q.set("resourceVersion", query.resourceVersion);
    if (query.labelSelector) q.set("labelSelector", query.labelSelector);
    if (query.fieldSelector) q.set("fieldSelector", query.fieldSelector);
    q.set("timeoutSeconds", String(query.timeoutSeconds ?? 300));
    const path = `${collectionPath}?${q.toString()}`;
    const res = await this.open(
      "GET",
      path,
      undefined,
      undefined,
      signal,
      undefined,
      query.metadataOnly ? METADATA_ONLY : undefined,
    );
    // The watcher's next attempt runs the exec plugin again.
    if (res.statusCode === 401) this.reauthenticate();
    if ((res.statusCode ?? 0) >= 300) {
      throw toApiError(
        "GET",
        path,
        res.statusCode ?? 0,
        await readBody(res),
        res.headers["retry-after"],
      );
    }
    let rv = query.resourceVersion;
    const lines = new LineSplitter();
    return new Promise((resolve, reject) => {
      let finished = false;
      const finish = (err?: unknown) => {
        if (finished) return;
        finished = true;
        res.destroy();
        if (err) reject(err instanceof Error ? err : new Error(JSON.stringify(err)));
        else resolve(rv);
      };
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        for (const raw of lines.push(chunk)) {
          const line = raw.trim();
          if (!line || finished) continue;
          if (query.skipUpdates && line.startsWith(MODIFIED_LINE)) {
            rv = resourceVersionOfLine(line) ?? rv;
            continue;
          }
          const ev = parseWatchLine<T>(line, collectionPath, path);
          if (ev instanceof KubeApiError) return finish(ev);
          rv = ev.object.metadata?.resourceVersion ?? rv;
          if (ev.type === "BOOKMARK") continue;
          try {
            if (onEvent(ev) === true) return finish();
          } catch (e) {
            return finish(e);
          }
        }
      });
      res.on("end", () => finish());
      res.on("error", (e) => (signal?.aborted ? finish() : finish(e)));
      signal?.addEventListener("abort", () => finish(), { once: true });
    });
  }
}

/** How the apiserver begins a watch line of an update (compact JSON, `type` first). */
const MODIFIED_LINE = '{"type":"MODIFIED",';
const RESOURCE_VERSION_KEY = '"resourceVersion":"';

/**
 * The object's resourceVersion in a watch line, without decoding the line: the first
 * `"resourceVersion":"` key is the object's (its metadata comes before any map a user fills,
 * and a quote inside a value is escaped). Undefined where none is found.
 */
function resourceVersionOfLine(line: string): string | undefined {
  const at = line.indexOf(RESOURCE_VERSION_KEY);
  if (at < 0) return undefined;
  const from = at + RESOURCE_VERSION_KEY.length;
  const to = line.indexOf('"', from);
  return to > from ? line.slice(from, to) : undefined;
}

/**
 * One line of a watch stream: its event, or the error that ends the watch (a line that is
 * not an event, or an ERROR event).
 */
function parseWatchLine<T extends ObjectLike>(
  line: string,
  collectionPath: string,
  path: string,
): WatchEvent<T> | KubeApiError {
  let ev: WatchEvent<T>;
  try {
    ev = JSON.parse(line) as WatchEvent<T>;
    if (typeof ev !== "object" || ev === null || typeof ev.object !== "object")
      // Plain Error: caught just below, where a bad line ends the watch.
      throw new Error("not a watch event");
  } catch {
    // Events may have been lost with this line: the caller re-lists (as for a 410).
    return new KubeApiError(
      `watch ${collectionPath}: the stream sent a line that is not a watch event: ${JSON.stringify(line.slice(0, 120))}`,
      0,
      MALFORMED_WATCH_EVENT,
      "GET",
      path,
    );
  }
  if (ev.type === "ERROR") {
    const st = watchStatus(ev.object);
    return new KubeApiError(
      `watch ${collectionPath}: ${st.message ?? "error"}`,
      st.code ?? 500,
      st.reason ?? "",
      "GET",
      path,
    );
  }
  return ev;
}

/** Node's codes for a server certificate that fails verification. */
function isTlsVerificationError(code: string): boolean {
  return /^(ERR_TLS_CERT_ALTNAME_INVALID|CERT_|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_(GET_ISSUER_CERT|VERIFY_LEAF_SIGNATURE))/.test(
    code,
  );
}

function readBody(res: import("node:http").IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = "";
    res.setEncoding("utf8");
    res.on("data", (d: string) => (text += d));
    res.on("end", () => resolve(text));
    res.on("error", reject);
  });
}

function toApiError(
  method: string,
  path: string,
  status: number,
  text: string,
  retryAfter?: string | string[],
): KubeApiError {
  let reason = "";
  let message = text.slice(0, 500);
  try {
    const st = JSON.parse(text) as { reason?: string; message?: string };
    reason = st.reason ?? "";
    message = st.message ?? message;
  } catch {
    // not a Status object
  }
  const ra = Array.isArray(retryAfter) ? retryAfter[0] : retryAfter;
  const retryAfterMs = ra && /^\d+$/.test(ra) ? parseInt(ra, 10) * 1000 : undefined;
  return new KubeApiError(
    `${method} ${path}: HTTP ${status}${reason ? ` ${reason}` : ""}: ${message}`,
    status,
    reason,
    method,
    path,
    retryAfterMs,
  );
}
