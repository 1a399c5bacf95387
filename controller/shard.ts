/**
 * Shards: when one controller process is not enough, N processes each reconcile a disjoint
 * share of the CocoonSets. A CocoonSet's shard is a stable function of its `namespace/name`
 * (a 64-bit FNV-1a hash, then jump consistent hashing, so that going from N to N+1 shards
 * moves only about 1/(N+1) of the CocoonSets). Each shard elects its leader on a Lease of its
 * own, so every shard has its standby.
 *
 * While the shard count changes (the Operator rolls the shards' Deployments), processes of
 * the old count and of the new one run side by side for a while, and every CocoonSet has an
 * owner in each. Each shard's Lease says which share it holds (`index/count`); of two live
 * shards of different counts that claim one CocoonSet, the one whose holder acquired its
 * Lease first reconciles it and the other holds it back until that Lease is released or
 * expires. Both read the same Leases, so no CocoonSet is reconciled by two shards at once,
 * and the new generation takes over as the old one stops. Pure: the caller reads the Leases.
 */

/** This process's share: shard `index` of `count`. */
export interface Shard {
  index: number;
  count: number;
}

/** One process reconciles everything. */
export const UNSHARDED: Shard = { index: 0, count: 1 };

/** The most shards a controller can be split into. */
export const MAX_SHARDS = 256;

/** Annotation on a shard's Lease: the share it holds, `index/count`. */
export const SHARD_ANNOTATION = "cocoonset.cocoonstack.io/shard";
/** Label on the shards' Leases: the base name they share, so a shard lists its siblings. */
export const SHARD_LEASE_LABEL = "cocoonset.cocoonstack.io/shard-lease";

const FNV_OFFSET = 0xcbf29ce484222325n;
const FNV_PRIME = 0x100000001b3n;
const MASK64 = (1n << 64n) - 1n;

/** 64-bit FNV-1a of the UTF-8 bytes of `s`. */
export function fnv1a64(s: string): bigint {
  let h = FNV_OFFSET;
  for (const byte of new TextEncoder().encode(s)) {
    h ^= BigInt(byte);
    h = (h * FNV_PRIME) & MASK64;
  }
  return h;
}

/**
 * Jump consistent hashing (Lamping and Veach, 2014): the bucket in [0, buckets) of a 64-bit
 * key, such that growing the buckets by one moves a key only into the new bucket.
 */
export function jumpHash(key: bigint, buckets: number): number {
  let b = -1;
  let j = 0;
  let k = key;
  while (j < buckets) {
    b = j;
    k = (k * 2862933555777941757n + 1n) & MASK64;
    j = Math.floor(((b + 1) * 2 ** 31) / (Number(k >> 33n) + 1));
  }
  return b;
}

/** The shard (of `count`) that reconciles the CocoonSet `namespace/name`. */
export function shardOf(namespace: string, name: string, count: number): number {
  if (count <= 1) return 0;
  return jumpHash(fnv1a64(`${namespace}/${name}`), count);
}

/** A shard as its Lease shows it. */
export interface ShardLease {
  /** The Lease's name (ties between equal acquire times go to the smaller name). */
  name: string;
  index: number;
  count: number;
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
  | { kind: "other"; shard: number }
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
  namespace: string,
  name: string,
  leases: readonly ShardLease[],
): ShardVerdict {
  const own = shardOf(namespace, name, self.count);
  if (own !== self.index) return { kind: "other", shard: own };
  for (const lease of leases) {
    if (!lease.held || lease.count === self.count || lease.name === self.name) continue;
    if (shardOf(namespace, name, lease.count) === lease.index && before(lease, self))
      return { kind: "held", by: lease };
  }
  return { kind: "mine" };
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
