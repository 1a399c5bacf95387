/**
 * A fleet's shard bucket: one of {@link SHARD_BUCKETS} fixed buckets, a stable function of
 * the CocoonSet's `namespace/name`, written as a label on every pod the engine builds (and, by
 * the controller, on each CocoonHibernation of a fleet's pod). A sharded controller assigns
 * whole buckets to its shards, so each shard's informers select only its own buckets' objects
 * on the apiserver, and a change of the shard count moves buckets, never relabels a pod.
 */

/** How many buckets the fleets fall into (and so the most shards a controller can use). */
export const SHARD_BUCKETS = 256;

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

/** Buckets already computed (the hash is BigInt arithmetic, and a controller asks per event). */
const bucketMemo = new Map<string, number>();
/** How many buckets {@link bucketMemo} keeps before it starts again. */
const BUCKET_MEMO_MAX = 65_536;

/** The bucket of the CocoonSet `namespace/name`. */
export function shardBucketOf(namespace: string, name: string): number {
  const key = `${namespace}/${name}`;
  let bucket = bucketMemo.get(key);
  if (bucket === undefined) {
    bucket = jumpHash(fnv1a64(key), SHARD_BUCKETS);
    if (bucketMemo.size >= BUCKET_MEMO_MAX) bucketMemo.clear();
    bucketMemo.set(key, bucket);
  }
  return bucket;
}

/** A bucket label's value read back; undefined for a value that is not a bucket. */
export function parseShardBucket(value: string | undefined): number | undefined {
  if (value === undefined || !/^\d{1,3}$/.test(value)) return undefined;
  const b = Number(value);
  return b < SHARD_BUCKETS ? b : undefined;
}
