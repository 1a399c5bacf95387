/**
 * The manager's shared informer cache: one set of informers per watched kind (one informer
 * per watched scope), whatever number of controllers read or watch that kind, each kind with
 * named indexes the cache keeps current from its own informers' events.
 *
 * Guarantees:
 * - an index is updated before any other handler of the same event runs, so a watch that
 *   maps an event through an index sees the index with that event applied;
 * - an object's index values are computed from the object alone; an update moves the object
 *   from its old values to its new ones, a delete removes it.
 */
import type { Logger } from "pino";
import type { KubeClient, KubeObject } from "../engine/kube/index.js";
import { Informer, objectKey, type InformerHandlers } from "./informer.js";

/** An index function: the values an object is filed under (each `namespace/…` by convention). */
export type IndexFunc = (obj: KubeObject) => readonly string[];

/** A kind the cache watches, with the indexes kept on it. */
export interface Kind {
  /** Names the kind in the cache (e.g. `pods`); two kinds of one name must be the same watch. */
  name: string;
  /** Collection path in one namespace, or in all of them (`undefined`). */
  path(namespace: string | undefined): string;
  labelSelector?: string;
  /**
   * Its objects carry the fleet's shard bucket label (`LABELS.shardBucket`): a shard's
   * informers of the kind select only its own buckets (controller/shard.ts).
   */
  sharded?: boolean;
  /**
   * A sharded kind whose bucket is that of its own `namespace/name` (CocoonSets), not read
   * from its label: a shard reconciles only the objects of its buckets by name, and one whose
   * label says otherwise is relabelled by the shard that holds it. @default false
   */
  bucketFromName?: boolean;
  /**
   * Watched only by a process whose cache of the full kind holds part of it (a shard holds its
   * buckets, a controller of some namespaces those namespaces), and then in every namespace,
   * whatever the watched ones: a process whose cache holds every object leaves this kind's
   * empty. @default false
   */
  partialOnly?: boolean;
  /** Only the objects' metadata is listed and watched (PartialObjectMetadata). @default false */
  metadataOnly?: boolean;
  /**
   * Only its objects coming and going matter (names): watched updates are not decoded, and
   * its handlers see adds and deletes (and a re-list's changes). @default false
   */
  skipUpdates?: boolean;
  /**
   * What of each object is kept, applied before it is cached or handed to a handler.
   * @default {@link trimForCache}
   */
  transform?: <U extends KubeObject>(obj: U) => U;
  /** Named index functions. */
  indexes?: Record<string, IndexFunc>;
  /**
   * The account may lack the right to watch the kind (nodes, under a namespaced Role): a
   * refusal (403) stops its informer, the cache counts it synced, and its readers read
   * afresh instead. @default false
   */
  optional?: boolean;
  /** The kind has no namespace (nodes): one informer, whatever the watched namespaces. */
  clusterScoped?: boolean;
}

/** One index: the cache keys (`namespace/name`) filed under each value, and each key's values. */
class Index {
  private readonly byValue = new Map<string, Set<string>>();
  private readonly valuesOf = new Map<string, readonly string[]>();

  constructor(private readonly fn: IndexFunc) {}

  update(obj: KubeObject): void {
    const key = objectKey(obj);
    this.remove(key);
    const values = this.fn(obj);
    if (values.length === 0) return;
    this.valuesOf.set(key, values);
    for (const v of values) {
      let set = this.byValue.get(v);
      if (!set) this.byValue.set(v, (set = new Set()));
      set.add(key);
    }
  }

  remove(key: string): void {
    for (const v of this.valuesOf.get(key) ?? []) {
      const set = this.byValue.get(v);
      set?.delete(key);
      if (set?.size === 0) this.byValue.delete(v);
    }
    this.valuesOf.delete(key);
  }

  keys(value: string): string[] {
    return [...(this.byValue.get(value) ?? [])];
  }
}

/** What a {@link KindCache} reads of an informer. */
export type InformerLike = Pick<
  Informer,
  "addHandlers" | "get" | "list" | "hasSynced" | "isSupervised"
>;

/**
 * An informer of `kind` in namespace `ns` (every namespace: undefined), with what the kind
 * says of its watch; `labelSelector` replaces the kind's own (a shard adds its buckets).
 */
export function kindInformer(
  kind: Kind,
  ns: string | undefined,
  deps: { client: KubeClient; log?: Logger; labelSelector?: string },
): Informer {
  return new Informer({
    client: deps.client,
    path: kind.path(ns),
    labelSelector: "labelSelector" in deps ? deps.labelSelector : kind.labelSelector,
    metadataOnly: kind.metadataOnly,
    skipUpdates: kind.skipUpdates,
    transform: kind.transform,
    log: deps.log,
    optional: kind.optional,
  });
}

/** One kind's informers seen as one store, with its named indexes. */
export class KindCache {
  private readonly indexes = new Map<string, Index>();

  /**
   * @param informers one per watched scope (not started yet, or started: the indexes are
   *   filled from what they already hold)
   * @param clusterWide whether they watch every namespace
   * @param selected whether they select a shard's buckets (they hold only its share)
   */
  constructor(
    readonly informers: readonly InformerLike[],
    readonly clusterWide = false,
    indexes: Record<string, IndexFunc> = {},
    readonly selected = false,
  ) {
    for (const [name, fn] of Object.entries(indexes)) this.indexes.set(name, new Index(fn));
    // Registered before any other handler: the indexes see each event first.
    for (const inf of informers) {
      inf.addHandlers({
        onAdd: (o) => this.indexAll(o),
        onUpdate: (_old, o) => this.indexAll(o),
        onDelete: (o) => {
          for (const index of this.indexes.values()) index.remove(objectKey(o));
        },
      });
    }
  }

  /** Adds handlers to every informer of the kind (objects already cached replay as adds). */
  addHandlers(h: InformerHandlers): void {
    for (const inf of this.informers) inf.addHandlers(h);
  }

  /** A cached object by `namespace/name`. */
  get(key: string): KubeObject | undefined {
    for (const inf of this.informers) {
      const o = inf.get(key);
      if (o) return o;
    }
    return undefined;
  }

  /** Every cached object. */
  list(): KubeObject[] {
    return this.informers.flatMap((i) => i.list());
  }

  /** The cached objects an index files under `value`. @throws Error for an unknown index */
  byIndex(index: string, value: string): KubeObject[] {
    const idx = this.indexes.get(index);
    // A programmer error: the index is declared with the kind.
    if (!idx) throw new Error(`no index "${index}"`);
    return idx.keys(value).flatMap((k) => this.get(k) ?? []);
  }

  /** True once every informer has listed and is still supervised. */
  synced(): boolean {
    return this.informers.every((i) => i.hasSynced() && i.isSupervised());
  }

  private indexAll(o: KubeObject): void {
    for (const index of this.indexes.values()) index.update(o);
  }
}

/** Reads the caches of the kinds by name (what a watch's mapping reads). */
export interface CacheReader {
  /** The cache of one kind. @throws Error for a kind not watched */
  kind(name: string): KindCache;
}

/** The informers of every kind the manager's controllers watch, created per leading session. */
export class SharedCache implements CacheReader {
  private readonly kinds = new Map<string, KindCache>();
  private readonly all: Informer[] = [];

  /**
   * @param kinds the kinds to watch (merged by name: their indexes together)
   * @param scopes the watched namespaces (`[undefined]`: all of them)
   */
  constructor(
    kinds: readonly Kind[],
    scopes: readonly (string | undefined)[],
    deps: { client: KubeClient; log?: Logger; bucketSelector?: string },
  ) {
    for (const kind of mergeKinds(kinds)) {
      const selected = !!kind.sharded && !!deps.bucketSelector;
      const selectors = [kind.labelSelector, selected ? deps.bucketSelector : undefined];
      const labelSelector = selectors.filter((x) => x).join(",") || undefined;
      const own = kind.clusterScoped || kind.partialOnly ? [undefined] : scopes;
      const partial = !!deps.bucketSelector || scopes[0] !== undefined;
      const watched = !kind.partialOnly || partial;
      const informers = (watched ? own : []).map((ns) =>
        kindInformer(kind, ns, { ...deps, labelSelector }),
      );
      this.all.push(...informers);
      this.kinds.set(
        kind.name,
        new KindCache(informers, own[0] === undefined, kind.indexes, selected),
      );
    }
  }

  /** The cache of one kind. @throws Error for a kind no controller watches */
  kind(name: string): KindCache {
    const k = this.kinds.get(name);
    // A programmer error: every kind read is declared by a controller.
    if (!k) throw new Error(`the cache does not watch ${name}`);
    return k;
  }

  /** Every informer, of every kind. */
  informers(): Informer[] {
    return [...this.all];
  }

  start(): void {
    for (const i of this.informers()) i.start();
  }

  /** Resolves once every informer has listed (or stopped, or was refused an optional kind). */
  async waitForSync(): Promise<void> {
    await Promise.all(this.informers().map((i) => i.waitForSync()));
  }

  /** True once every informer has listed, or was refused an optional kind. */
  synced(): boolean {
    return this.informers().every((i) => i.hasSynced() || i.wasRefused());
  }

  async stop(): Promise<void> {
    await Promise.all(this.informers().map((i) => i.stop()));
  }
}

/**
 * The kinds by name, each with the indexes of every declaration.
 * @throws Error when two declarations of one name watch different collections
 */
export function mergeKinds(kinds: readonly Kind[]): Kind[] {
  const byName = new Map<string, Kind>();
  for (const k of kinds) {
    const seen = byName.get(k.name);
    if (!seen) {
      byName.set(k.name, { ...k, indexes: { ...k.indexes } });
      continue;
    }
    // A programmer error: one name, one watch.
    if (
      seen.path("x") !== k.path("x") ||
      seen.labelSelector !== k.labelSelector ||
      !seen.sharded !== !k.sharded ||
      !seen.partialOnly !== !k.partialOnly ||
      !seen.bucketFromName !== !k.bucketFromName ||
      !seen.metadataOnly !== !k.metadataOnly ||
      !seen.skipUpdates !== !k.skipUpdates ||
      seen.transform !== k.transform ||
      seen.optional !== k.optional ||
      seen.clusterScoped !== k.clusterScoped
    )
      throw new Error(`two different watches are named ${k.name}`);
    seen.indexes = { ...seen.indexes, ...k.indexes };
  }
  return [...byName.values()];
}
