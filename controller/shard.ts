/**
 * Shards: when one controller process is not enough, N processes each reconcile a disjoint
 * share of the CocoonSets. A CocoonSet falls into one of 256 fixed buckets by its
 * `namespace/name` (engine/spec/shard-bucket.ts), a label on it, its pods and its
 * CocoonHibernations; each count splits the buckets evenly, and going from N to N+1 shards
 * moves only the 1/(N+1) of them the new shard takes (`shardOfBucket`). A shard's informers
 * select its buckets, so it caches only its own fleets (their CocoonSets, pods and
 * CocoonHibernations).
 * Each shard elects its leader on a Lease of its own, so every shard has its standby.
 *
 * While the shard count changes (the Operator rolls the shards' Deployments), processes of
 * the old count and of the new one run side by side for a while, and every CocoonSet has an
 * owner in each. Each shard's Lease says which share it holds (`index/count`) and the version
 * of the assignment it runs; of two live shards of different counts or versions that claim
 * one CocoonSet, the one whose holder acquired its
 * Lease first reconciles it and the other holds it back until that Lease is released or
 * expires. Both read the same Leases, so no CocoonSet is reconciled by two shards at once,
 * and the new generation takes over as the old one stops. Pure: the caller reads the Leases.
 */

import { fnv1a64, jumpHash, LABELS, SHARD_BUCKETS, shardBucketOf } from "../engine/spec/index.js";

export { fnv1a64, jumpHash };

/** This process's share: shard `index` of `count`. */
export interface Shard {
  index: number;
  count: number;
}

/** One process reconciles everything. */
export const UNSHARDED: Shard = { index: 0, count: 1 };

/** The most shards a controller can be split into: one per bucket. */
export const MAX_SHARDS = SHARD_BUCKETS;

/** Annotation on a shard's Lease: the share it holds, `index/count`. */
export const SHARD_ANNOTATION = "cocoonset.cocoonstack.io/shard";
/** Annotation on a shard's Lease: the version of the assignment function it runs. */
export const SHARD_HASH_ANNOTATION = "cocoonset.cocoonstack.io/shard-hash";
/** Label on the shards' Leases: the base name they share, so a shard lists its siblings. */
export const SHARD_LEASE_LABEL = "cocoonset.cocoonstack.io/shard-lease";
/**
 * Label on the shards' Leases: the generation of its holder, `<version>-<count>`
 * ({@link shardGeneration}). A shard's gate watches only the Leases of other generations
 * (those are what can hold a CocoonSet back), so its siblings' renewals never reach it.
 */
export const SHARD_GENERATION_LABEL = "cocoonset.cocoonstack.io/shard-generation";

/**
 * The assignment function's version, written on each shard's Lease
 * ({@link SHARD_HASH_ANNOTATION}). 1 (a Lease without the annotation): jump hashing of the key
 * itself to `count` shards. 2: the key's fixed bucket (engine/spec/shard-bucket.ts), each bucket
 * split evenly among `count` shards (`shardOfBucket`), so that a shard's objects are whole buckets its informers can
 * select on. Shards of different versions, like shards of different counts, claim through
 * their own function and hold back what an earlier live one claims.
 */
export const SHARD_HASH_VERSION = 2;

/** Each count's assignment of the buckets, computed once: `[count][bucket] = shard`. */
const assignments: number[][] = [];

/** How many buckets shard `index` of `count` holds: an even split, the first ones one more. */
function shareSize(index: number, count: number): number {
  return Math.floor(SHARD_BUCKETS / count) + (index < SHARD_BUCKETS % count ? 1 : 0);
}

/**
 * The buckets' shards for `count`, built from `count - 1`'s: each old shard gives the new one
 * just enough of its buckets (those ranking first by a hash of bucket and count) to leave
 * every shard its even share. So every count splits the buckets evenly (within one), and
 * going from N to N+1 shards moves buckets only into the new shard, as few as can be; N+1 to
 * N moves back only the last shard's.
 */
function assignment(count: number): number[] {
  for (let c = assignments.length + 1; c <= count; c++) {
    if (c === 1) {
      assignments.push(new Array<number>(SHARD_BUCKETS).fill(0));
      continue;
    }
    const next = [...assignments[c - 2]];
    const rank = (b: number) => fnv1a64(`${b}/${c}`);
    for (let i = 0; i < c - 1; i++) {
      const give = shareSize(i, c - 1) - shareSize(i, c);
      const held = next
        .map((shard, b) => ({ shard, b, r: rank(b) }))
        .filter((x) => x.shard === i)
        .sort((x, y) => (x.r < y.r ? -1 : x.r > y.r ? 1 : x.b - y.b));
      for (const x of held.slice(0, give)) next[x.b] = c - 1;
    }
    assignments.push(next);
  }
  return assignments[count - 1];
}

/** The shard (of `count`) that holds bucket `bucket`. */
export function shardOfBucket(bucket: number, count: number): number {
  if (count <= 1) return 0;
  return assignment(Math.min(count, SHARD_BUCKETS))[bucket];
}

/** The shard (of `count`) that reconciles the CocoonSet `namespace/name`. */
export function shardOf(namespace: string, name: string, count: number): number {
  return shardOfBucket(shardBucketOf(namespace, name), count);
}

/** The buckets shard `self` holds, ascending (every bucket when unsharded). */
export function bucketsOf(self: Shard): number[] {
  const out: number[] = [];
  for (let b = 0; b < SHARD_BUCKETS; b++)
    if (shardOfBucket(b, self.count) === self.index) out.push(b);
  return out;
}

/**
 * The label selector of the objects shard `self` holds (pods, CocoonHibernations): its buckets;
 * undefined when unsharded (it holds every object, labelled or not).
 */
export function bucketSelector(self: Shard): string | undefined {
  if (self.count <= 1) return undefined;
  return `${LABELS.shardBucket} in (${bucketsOf(self).join(",")})`;
}

/** Version 1's assignment: the key itself jump-hashed (Leases without a version). */
function shardOfV1(namespace: string, name: string, count: number): number {
  if (count <= 1) return 0;
  return jumpHash(fnv1a64(`${namespace}/${name}`), count);
}

/** What a verdict is asked about: a key and, when known, its bucket (else its name's). */
export interface ShardTarget {
  namespace: string;
  name: string;
  /** The object's bucket label; undefined: the bucket of `namespace/name`. */
  bucket?: number;
}

/** Whether shard `index/count` of assignment `version` claims `target`. */
export function claims(
  share: { index: number; count: number; version: number },
  target: ShardTarget,
): boolean {
  if (share.count <= 1) return share.index === 0;
  if (share.version === 1)
    return shardOfV1(target.namespace, target.name, share.count) === share.index;
  const bucket = target.bucket ?? shardBucketOf(target.namespace, target.name);
  return shardOfBucket(bucket, share.count) === share.index;
}

/** A shard as its Lease shows it. */
export interface ShardLease {
  /** The Lease's name (ties between equal acquire times go to the smaller name). */
  name: string;
  index: number;
  count: number;
  /** The assignment function's version the holder runs ({@link SHARD_HASH_VERSION}). */
  version: number;
  /** The Lease has a holder whose record is fresh (not released, not expired). */
  held: boolean;
  /** When its holder acquired it (milliseconds since the epoch). */
  acquiredAtMs: number;
}

/** What the shard `self` does with a CocoonSet now. */
export type ShardVerdict =
  /** Its share, and no earlier live shard of another count claims it: reconcile. */
  | { kind: "mine" }
  /** Another shard's share: not this process's business. */
  | { kind: "other" }
  /** Its share, but a shard of another count that holds its Lease since earlier claims it too. */
  | { kind: "held"; by: ShardLease };

const before = (a: ShardLease, b: ShardLease): boolean =>
  a.acquiredAtMs < b.acquiredAtMs || (a.acquiredAtMs === b.acquiredAtMs && a.name < b.name);

/**
 * Whether the shard holding `self` reconciles `namespace/name`, given the other shards'
 * Leases (its own among them is ignored). Of the live shards of different counts that claim
 * it, the earliest holder reconciles; the others hold it back.
 */
export function shardVerdict(
  self: ShardLease,
  target: ShardTarget,
  leases: readonly ShardLease[],
): ShardVerdict {
  if (!claims(self, target)) return { kind: "other" };
  for (const lease of leases) {
    const sameGeneration = lease.count === self.count && lease.version === self.version;
    if (!lease.held || sameGeneration || lease.name === self.name) continue;
    if (claims(lease, target) && before(lease, self)) return { kind: "held", by: lease };
  }
  return { kind: "mine" };
}

/** The generation label's value of a shard of `count` running this assignment version. */
export function shardGeneration(count: number): string {
  return `${SHARD_HASH_VERSION}-${count}`;
}

/** The Lease name of shard `self` on the base name (the base itself when unsharded). */
export function shardLeaseName(base: string, self: Shard): string {
  return self.count <= 1 ? base : `${base}-shard-${self.index}-of-${self.count}`;
}

/** `index/count` as the shard annotation writes it. */
export function formatShard(s: Shard): string {
  return `${s.index}/${s.count}`;
}

/**
 * Parses `index/count` (the annotation, or a `--shard` flag's value). Undefined for a value
 * that is not a valid share.
 */
export function parseShard(value: string | undefined): Shard | undefined {
  const m = /^(\d{1,3})\/(\d{1,3})$/.exec(value?.trim() ?? "");
  if (!m) return undefined;
  const index = Number(m[1]);
  const count = Number(m[2]);
  if (count < 1 || count > MAX_SHARDS || index >= count) return undefined;
  return { index, count };
}
