/**
 * A supervised list-then-watch cache of one collection.
 *
 * Guarantees:
 * - the cache is filled by a full list, then kept current by a watch from the list's
 *   resourceVersion; a watch that ends normally resumes from the last resourceVersion seen;
 * - a 410 (expired resourceVersion) re-lists at once and diffs the new list against the
 *   cache, so handlers see the adds, updates and deletes they missed;
 * - any other error re-lists after a backoff (0.8 s doubling to 30 s, with jitter), reset
 *   once the informer has been healthy for a while; the loop only ends on `stop()`;
 * - a watch that stays silent past its server timeout is cut, so a half-open connection
 *   cannot freeze the cache.
 *
 * Caveats: handlers run synchronously inside the event loop of the watch; keep them cheap
 * (enqueue a key). A handler that throws is logged and does not stop the informer.
 *
 * Memory: every object is passed through `transform` before it is cached or handed to a
 * handler; by default {@link trimForCache} drops `metadata.managedFields`, which nothing
 * in the controller reads and which is often the largest part of a pod.
 */
import type { Logger } from "pino";
import { isGone, KubeApiError, type KubeClient, type KubeObject } from "../engine/kube/index.js";
import { sleep } from "../engine/kube/sleep.js";
import { errorMessage } from "../engine/kube/branded-error.js";

/** Callbacks of an {@link Informer}. */
export interface InformerHandlers<T extends KubeObject = KubeObject> {
  onAdd?(obj: T): void;
  onUpdate?(oldObj: T, newObj: T): void;
  onDelete?(obj: T): void;
}

/** Options of {@link Informer}. */
export interface InformerOptions {
  client: KubeClient;
  /** Collection path, e.g. `paths.configMaps(ns)`. */
  path: string;
  labelSelector?: string;
  /** Only the objects' metadata is listed and watched (PartialObjectMetadata). @default false */
  metadataOnly?: boolean;
  /**
   * Only objects coming and going matter (a cache of names): watched updates are not
   * decoded, so each object stays cached as listed or added. @default false
   */
  skipUpdates?: boolean;
  log?: Logger;
  /** First retry delay after an error. @default 800 */
  initialBackoffMs?: number;
  /** Cap of the retry delay. @default 30000 */
  maxBackoffMs?: number;
  /** Healthy time after which the backoff starts over. @default 60000 */
  resetBackoffAfterMs?: number;
  /** Server-side watch timeout; each watch gets a random value between this and 1.5×. @default 300 */
  watchTimeoutSeconds?: number;
  /**
   * Applied to every listed or watched object before it is cached and handed to handlers
   * (it may change the object in place). @default {@link trimForCache}
   */
  transform?: <U extends KubeObject>(obj: U) => U;
  /**
   * The account may lack the right to list or watch this collection: a refusal (403) ends
   * the loop after one warning instead of retrying, and readers fall back to fresh reads.
   * @default false
   */
  optional?: boolean;
}

/**
 * Drops `metadata.managedFields` (server-side apply bookkeeping, unread by the controller)
 * from an object, in place. An update sent from such an object without the field leaves
 * the server's managedFields as they are.
 */
export function trimForCache<U extends KubeObject>(obj: U): U {
  if (obj.metadata && "managedFields" in obj.metadata) delete obj.metadata.managedFields;
  return obj;
}

/**
 * An object cut down, in place, to its name, namespace, uid, resourceVersion and deletion
 * mark (as listed or added: a names list skips updates): what a list of names needs (a
 * metadata-only watch still sends labels, annotations and managedFields).
 */
export function keepNameOnly<U extends KubeObject>(obj: U): U {
  const m = obj.metadata;
  obj.metadata = {
    name: m.name,
    namespace: m.namespace,
    uid: m.uid,
    resourceVersion: m.resourceVersion,
    ...(m.deletionTimestamp ? { deletionTimestamp: m.deletionTimestamp } : {}),
  };
  return obj;
}

// What of a pod the engine reads (the Pod type of engine/spec/kube-types.ts, and the
// capacity's CapacityPod): the planner, attribution, capacity, status and the hibernation
// planner see nothing else. Everything else the apiserver and the kubelet fill in (volumes,
// probes, ports, defaults, image ids, container states' details) is dropped.
const POD_SPEC_FIELDS = [
  "nodeName",
  "nodeSelector",
  "serviceAccountName",
  "terminationGracePeriodSeconds",
  "tolerations",
  "affinity",
  "overhead",
  "resources",
] as const;
const POD_STATUS_FIELDS = ["phase", "reason", "message", "podIP", "conditions", "startTime"];

function pick<T extends object>(from: T, keys: readonly string[]): Partial<T> {
  const out: Record<string, unknown> = {};
  for (const k of keys) {
    const v = (from as Record<string, unknown>)[k];
    if (v !== undefined) out[k] = v;
  }
  return out as Partial<T>;
}

/**
 * A pod cut down, in place, to the fields the engine reads, besides {@link trimForCache}:
 * its metadata whole (labels, annotations and owners carry the fleet's record), the spec's
 * placement, service account and each container's name, image, resources, `envFrom` (and an
 * init container's restart policy), the status' phase, reason, conditions, IP, start time and
 * which containers run. The pods of a fleet are most of what the controller holds.
 */
export function trimPodForCache<U extends KubeObject>(obj: U): U {
  trimForCache(obj);
  const pod = obj as unknown as {
    spec?: Record<string, unknown> & { containers?: object[]; initContainers?: object[] };
    status?: Record<string, unknown> & { containerStatuses?: { name?: string; state?: object }[] };
  };
  if (pod.spec) {
    const spec: Record<string, unknown> = pick(pod.spec, POD_SPEC_FIELDS);
    spec.containers = (pod.spec.containers ?? []).map((c) =>
      pick(c, ["name", "image", "resources", "envFrom"]),
    );
    if (pod.spec.initContainers)
      spec.initContainers = pod.spec.initContainers.map((c) =>
        pick(c, ["name", "resources", "restartPolicy"]),
      );
    pod.spec = spec;
  }
  if (pod.status) {
    const status: Record<string, unknown> = pick(pod.status, POD_STATUS_FIELDS);
    if (pod.status.containerStatuses)
      status.containerStatuses = pod.status.containerStatuses.map((c) => ({
        name: c.name,
        state: Object.fromEntries(Object.keys(c.state ?? {}).map((k) => [k, {}])),
      }));
    pod.status = status;
  }
  return obj;
}

/** The last error an informer hit, for readiness and logs. */
export interface InformerError {
  message: string;
  at: Date;
}

/** Cache key of an object: `namespace/name` (or `name` for cluster-scoped objects). */
export function objectKey(o: KubeObject): string {
  const ns = o.metadata.namespace;
  return ns ? `${ns}/${o.metadata.name ?? ""}` : (o.metadata.name ?? "");
}

/** A supervised list-then-watch cache. */
export class Informer<T extends KubeObject = KubeObject> {
  private readonly cache = new Map<string, T>();
  private readonly handlers: InformerHandlers<T>[] = [];
  private readonly abort = new AbortController();
  private readonly opts: Required<
    Omit<
      InformerOptions,
      "labelSelector" | "log" | "client" | "path" | "transform" | "metadataOnly" | "skipUpdates"
    >
  > &
    InformerOptions;
  private synced = false;
  private syncWaiters: (() => void)[] = [];
  private loop?: Promise<void>;
  private loopEnded = false;
  /** An optional informer the apiserver refused (403): it never syncs. */
  private refused = false;
  private error?: InformerError;
  private relists = 0;
  private readonly transform: <U extends KubeObject>(obj: U) => U;

  constructor(opts: InformerOptions) {
    this.opts = {
      initialBackoffMs: 800,
      maxBackoffMs: 30_000,
      resetBackoffAfterMs: 60_000,
      watchTimeoutSeconds: 300,
      optional: false,
      ...opts,
    };
    this.transform = opts.transform ?? trimForCache;
  }

  /** The collection path this informer watches. */
  get path(): string {
    return this.opts.path;
  }

  /** Adds handlers; objects already cached are replayed to `onAdd`. */
  addHandlers(h: InformerHandlers<T>): void {
    this.handlers.push(h);
    for (const o of this.cache.values()) this.call(h, "onAdd", o);
  }

  /** Starts the supervised loop (idempotent). */
  start(): void {
    this.loop ??= this.run().finally(() => {
      this.loopEnded = true;
    });
  }

  /** Stops watching and waits for the loop to end. */
  async stop(): Promise<void> {
    this.abort.abort();
    for (const w of this.syncWaiters.splice(0)) w();
    await this.loop;
  }

  /** True when the informer is optional and the apiserver refused it (403): it never syncs. */
  wasRefused(): boolean {
    return this.refused;
  }

  /** True once the first list has filled the cache (stays true across re-lists). */
  hasSynced(): boolean {
    return this.synced;
  }

  /** Resolves once synced, or when the informer stops. */
  waitForSync(): Promise<void> {
    if (this.synced || this.abort.signal.aborted || this.refused) return Promise.resolve();
    return new Promise((resolve) => this.syncWaiters.push(resolve));
  }

  /** True once `start()` has run (the informer may have stopped since). */
  wasStarted(): boolean {
    return this.loop !== undefined;
  }

  /**
   * True while the informer is watching or retrying: started, not stopped, and its loop
   * alive. False after `stop()`.
   */
  isSupervised(): boolean {
    return this.loop !== undefined && !this.loopEnded && !this.abort.signal.aborted;
  }

  /** The last error, cleared by the next successful list. */
  lastError(): InformerError | undefined {
    return this.error;
  }

  /** How many times the informer listed after its first list (re-lists). */
  relistCount(): number {
    return this.relists;
  }

  /** A cached object by `namespace/name`. */
  get(key: string): T | undefined {
    return this.cache.get(key);
  }

  /** Every cached object. */
  list(): T[] {
    return [...this.cache.values()];
  }

  private async run(): Promise<void> {
    const signal = this.abort.signal;
    let attempt = 0;
    let healthySince: number | undefined;
    let rv: string | undefined;
    let needList = true;
    while (!signal.aborted) {
      try {
        if (needList) {
          rv = await this.relist();
          needList = false;
          healthySince = Date.now();
          this.error = undefined;
        }
        const started = Date.now();
        rv = await this.watchOnce(rv);
        // A stream the server closes at once (e.g. while shutting down) must not spin.
        if (Date.now() - started < 1000) await sleep(this.opts.initialBackoffMs, signal);
      } catch (e) {
        if (signal.aborted) break;
        needList = true;
        const message = errorMessage(e);
        this.error = { message, at: new Date() };
        if (this.opts.optional && KubeApiError.isInstance(e) && e.status === 403) {
          this.opts.log?.warn(
            { path: this.opts.path, err: message },
            "not allowed to watch; reading these objects afresh instead",
          );
          this.refused = true;
          for (const w of this.syncWaiters.splice(0)) w();
          break;
        }
        if (isGone(e)) {
          // The resourceVersion expired: the fix is a fresh list, not a wait.
          this.opts.log?.info({ path: this.opts.path }, "watch expired (410); re-listing");
          continue;
        }
        if (
          healthySince !== undefined &&
          Date.now() - healthySince >= this.opts.resetBackoffAfterMs
        )
          attempt = 0;
        healthySince = undefined;
        const base = Math.min(this.opts.initialBackoffMs * 2 ** attempt, this.opts.maxBackoffMs);
        const delay = Math.round(base * (0.5 + Math.random() * 0.5));
        attempt++;
        this.opts.log?.warn(
          { path: this.opts.path, err: message, retryInMs: delay, attempt },
          "watch failed; re-listing after backoff",
        );
        await sleep(delay, signal);
      }
    }
  }

  private async relist(): Promise<string | undefined> {
    const list = await this.opts.client.list<T>(this.opts.path, {
      labelSelector: this.opts.labelSelector,
      metadataOnly: this.opts.metadataOnly,
    });
    if (this.synced) this.relists++;
    const seen = new Set<string>();
    for (const listed of list.items) {
      const obj = this.transform(listed);
      const key = objectKey(obj);
      seen.add(key);
      const old = this.cache.get(key);
      this.cache.set(key, obj);
      if (!old) this.emit("onAdd", obj);
      else if (old.metadata.resourceVersion !== obj.metadata.resourceVersion)
        this.emit("onUpdate", old, obj);
    }
    for (const [key, old] of this.cache) {
      if (seen.has(key)) continue;
      this.cache.delete(key);
      this.emit("onDelete", old);
    }
    if (!this.synced) {
      this.synced = true;
      for (const w of this.syncWaiters.splice(0)) w();
    }
    return list.metadata.resourceVersion;
  }

  private async watchOnce(rv: string | undefined): Promise<string | undefined> {
    const timeoutSeconds = Math.round(this.opts.watchTimeoutSeconds * (1 + Math.random() * 0.5));
    // The server ends the watch after timeoutSeconds; silence well beyond that means the
    // connection is dead without either side noticing.
    const watchdog = new AbortController();
    // AbortSignal.any also covers a stop() that happened before this watch began.
    const signal = AbortSignal.any([this.abort.signal, watchdog.signal]);
    const timer = setTimeout(() => watchdog.abort(), (timeoutSeconds + 30) * 1000);
    try {
      return await this.opts.client.watch<T>(
        this.opts.path,
        {
          resourceVersion: rv,
          labelSelector: this.opts.labelSelector,
          timeoutSeconds,
          metadataOnly: this.opts.metadataOnly,
          skipUpdates: this.opts.skipUpdates,
        },
        (ev) => {
          const obj = this.transform(ev.object);
          const key = objectKey(obj);
          const old = this.cache.get(key);
          if (ev.type === "DELETED") {
            this.cache.delete(key);
            this.emit("onDelete", old ?? obj);
          } else if (ev.type === "ADDED" || ev.type === "MODIFIED") {
            this.cache.set(key, obj);
            if (old) this.emit("onUpdate", old, obj);
            else this.emit("onAdd", obj);
          }
        },
        signal,
      );
    } finally {
      clearTimeout(timer);
    }
  }

  private emit(kind: "onAdd" | "onDelete", obj: T): void;
  private emit(kind: "onUpdate", oldObj: T, newObj: T): void;
  private emit(kind: keyof InformerHandlers<T>, a: T, b?: T): void {
    for (const h of this.handlers) this.call(h, kind, a, b);
  }

  private call(h: InformerHandlers<T>, kind: keyof InformerHandlers<T>, a: T, b?: T): void {
    try {
      if (kind === "onUpdate") h.onUpdate?.(a, b as T);
      else h[kind]?.(a);
    } catch (e) {
      this.opts.log?.error(
        { path: this.opts.path, err: errorMessage(e), handler: kind },
        "informer handler threw",
      );
    }
  }
}
