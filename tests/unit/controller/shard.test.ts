/**
 * Shards: the hash is stable and spreads CocoonSets evenly, growing the count moves keys only
 * into the new shard, every CocoonSet has exactly one shard of a count, and while two counts
 * run side by side no CocoonSet is reconciled by two live shards (whatever the Leases' acquire
 * times), and once the old count's Leases are gone every CocoonSet is reconciled again.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import {
  fnv1a64,
  jumpHash,
  parseShard,
  shardLeaseName,
  shardOf,
  bucketSelector,
  bucketsOf,
  shardOfBucket,
  shardVerdict,
  type ShardLease,
  type ShardTarget,
} from "../../../controller/shard.js";
import { parseShardBucket, SHARD_BUCKETS, shardBucketOf } from "../../../engine/spec/index.js";

describe("the hash", () => {
  test("FNV-1a 64 of known strings", () => {
    // The reference values of the 64-bit FNV-1a hash.
    assert.equal(fnv1a64(""), 0xcbf29ce484222325n);
    assert.equal(fnv1a64("a"), 0xaf63dc4c8601ec8cn);
    assert.equal(fnv1a64("foobar"), 0x85944171f73967e8n);
  });

  test("jump hash: one bucket takes everything; the bucket is in range and stable", () => {
    fc.assert(
      fc.property(
        fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }),
        fc.integer({ min: 1, max: 300 }),
        (k, n) => {
          const b = jumpHash(k, n);
          assert.ok(b >= 0 && b < n);
          assert.equal(jumpHash(k, n), b);
          if (n === 1) assert.equal(b, 0);
        },
      ),
    );
  });

  test("every count splits the 256 buckets evenly (within one), and N → N+1 moves buckets only into the new shard", () => {
    for (let n = 1; n <= 64; n++) {
      const sizes = new Array<number>(n).fill(0);
      for (let b = 0; b < SHARD_BUCKETS; b++) sizes[shardOfBucket(b, n)]++;
      assert.ok(Math.max(...sizes) - Math.min(...sizes) <= 1, `${n}: ${sizes.join(" ")}`);
      assert.deepEqual(
        Array.from({ length: n }, (_, i) => bucketsOf({ index: i, count: n }).length),
        sizes,
      );
      let moved = 0;
      for (let b = 0; b < SHARD_BUCKETS; b++) {
        const was = shardOfBucket(b, n);
        const now = shardOfBucket(b, n + 1);
        assert.ok(now === was || now === n, `bucket ${b}: ${was} → ${now} of ${n + 1}`);
        if (now !== was) moved++;
      }
      assert.equal(moved, bucketsOf({ index: n, count: n + 1 }).length);
      assert.ok(
        moved <= Math.ceil(SHARD_BUCKETS / (n + 1)),
        `${moved} moved from ${n} to ${n + 1}`,
      );
    }
  });

  test("a shard's selector names its buckets; an unsharded process selects nothing", () => {
    assert.equal(bucketSelector({ index: 0, count: 1 }), undefined);
    const sel = bucketSelector({ index: 1, count: 4 }) ?? "";
    assert.match(sel, /^cocoonset\.cocoonstack\.io\/shard-bucket in \((\d+,){63}\d+\)$/);
    assert.equal(shardBucketOf("ns", "f"), shardBucketOf("ns", "f"));
    assert.equal(parseShardBucket("255"), 255);
    for (const bad of ["256", "-1", "1.5", "", "x", undefined])
      assert.equal(parseShardBucket(bad), undefined);
  });

  test("growing the count by one moves a CocoonSet only into the new shard", () => {
    fc.assert(
      fc.property(fc.string(), fc.string(), fc.integer({ min: 1, max: 64 }), (ns, name, n) => {
        const was = shardOf(ns, name, n);
        const now = shardOf(ns, name, n + 1);
        assert.ok(now === was || now === n, `${was} → ${now} of ${n + 1}`);
      }),
    );
  });

  test("10,000 CocoonSets spread over 4 shards within 5% of even, and N → N+1 moves about 1/(N+1)", () => {
    const keys = Array.from({ length: 10_000 }, (_, i) => [`team-${i % 37}`, `fleet-${i}`]);
    const counts = [0, 0, 0, 0];
    for (const [ns, name] of keys) counts[shardOf(ns, name, 4)]++;
    for (const c of counts) assert.ok(Math.abs(c - 2500) < 125, `shard sizes ${counts.join(", ")}`);
    const moved = keys.filter(([ns, name]) => shardOf(ns, name, 4) !== shardOf(ns, name, 5));
    assert.ok(Math.abs(moved.length - 2000) < 150, `${moved.length} of 10000 moved from 4 to 5`);
  });
});

describe("parseShard and lease names", () => {
  const table: [string, { index: number; count: number } | undefined][] = [
    ["0/1", { index: 0, count: 1 }],
    ["3/4", { index: 3, count: 4 }],
    [" 1/2 ", { index: 1, count: 2 }],
    ["4/4", undefined],
    ["0/0", undefined],
    ["1/257", undefined],
    ["-1/2", undefined],
    ["1", undefined],
    ["a/b", undefined],
    ["", undefined],
  ];
  for (const [value, want] of table)
    test(`parses ${JSON.stringify(value)}`, () => assert.deepEqual(parseShard(value), want));
  test("an unsharded controller keeps the base Lease name", () => {
    assert.equal(
      shardLeaseName("cocoonset-controller", { index: 0, count: 1 }),
      "cocoonset-controller",
    );
    assert.equal(
      shardLeaseName("cocoonset-controller", { index: 2, count: 4 }),
      "cocoonset-controller-shard-2-of-4",
    );
  });
});

const lease = (
  index: number,
  count: number,
  acquiredAtMs: number,
  held = true,
  version = 2,
): ShardLease => ({
  name: `${shardLeaseName("ctl", { index, count })}${version === 2 ? "" : `-v${version}`}`,
  index,
  count,
  version,
  held,
  acquiredAtMs,
});

const at = (namespace: string, name: string): ShardTarget => ({ namespace, name });

/** The live shards that would reconcile `ns/name` now. */
function reconcilers(leases: ShardLease[], ns: string, name: string): ShardLease[] {
  return leases.filter((l) => l.held && shardVerdict(l, at(ns, name), leases).kind === "mine");
}

describe("shardVerdict", () => {
  test("one count: each CocoonSet is its own shard's, the others are told whose it is", () => {
    const leases = [0, 1, 2].map((i) => lease(i, 3, 1000));
    for (const name of ["a", "b", "c", "d", "e", "f"]) {
      const owner = shardOf("ns", name, 3);
      for (const l of leases) {
        const v = shardVerdict(l, at("ns", name), leases);
        assert.deepEqual(v, l.index === owner ? { kind: "mine" } : { kind: "other" });
      }
    }
  });

  test("a count change: the earlier holder keeps the CocoonSet, the new one holds it back until the old Lease goes", () => {
    const old = [lease(0, 1, 1000)];
    const next = [lease(0, 2, 5000), lease(1, 2, 5000)];
    const owner = next[shardOf("ns", "f", 2)];
    assert.deepEqual(shardVerdict(old[0], at("ns", "f"), [...old, ...next]), { kind: "mine" });
    assert.deepEqual(shardVerdict(owner, at("ns", "f"), [...old, ...next]), {
      kind: "held",
      by: old[0],
    });
    const released = [lease(0, 1, 1000, false)];
    assert.deepEqual(shardVerdict(owner, at("ns", "f"), [...released, ...next]), { kind: "mine" });
  });

  test("a version change at one count: the shard of the earlier version keeps what it claims until its Lease goes", () => {
    const v1 = [lease(0, 2, 1000, true, 1), lease(1, 2, 1000, true, 1)];
    const v2 = [lease(0, 2, 5000), lease(1, 2, 5000)];
    for (const name of ["a", "b", "c", "d", "e", "f", "g", "h"]) {
      const all = [...v1, ...v2];
      const now = reconcilers(all, "ns", name);
      assert.equal(now.length, 1, `${name}: ${now.map((l) => l.name).join(", ")}`);
      assert.equal(now[0].version, 1);
      const after = reconcilers([...v1.map((l) => ({ ...l, held: false })), ...v2], "ns", name);
      assert.deepEqual(after, [v2[shardOf("ns", name, 2)]]);
    }
  });

  test("a CocoonHibernation's bucket label decides, not its name", () => {
    const leases = [lease(0, 4, 1000), lease(1, 4, 1000), lease(2, 4, 1000), lease(3, 4, 1000)];
    for (let bucket = 0; bucket < SHARD_BUCKETS; bucket += 17) {
      const mine = leases.filter(
        (l) => shardVerdict(l, { namespace: "ns", name: "cr", bucket }, leases).kind === "mine",
      );
      assert.deepEqual(mine, [leases[shardOfBucket(bucket, 4)]]);
    }
  });

  test("property: at most one live shard reconciles a CocoonSet, and exactly one once a single count is left", () => {
    const leaseArb = fc.record({
      index: fc.nat(7),
      count: fc.integer({ min: 1, max: 8 }),
      held: fc.boolean(),
      acquiredAtMs: fc.integer({ min: 0, max: 20 }),
      version: fc.integer({ min: 1, max: 2 }),
    });
    fc.assert(
      fc.property(
        fc.array(leaseArb, { maxLength: 12 }),
        fc.string({ maxLength: 6 }),
        fc.string({ maxLength: 6 }),
        (raw, ns, name) => {
          // One Lease per share (a share's processes elect one holder on it).
          const byName = new Map<string, ShardLease>();
          for (const r of raw) {
            const l = lease(r.index % r.count, r.count, r.acquiredAtMs, r.held, r.version);
            byName.set(l.name, l);
          }
          const leases = [...byName.values()];
          assert.ok(reconcilers(leases, ns, name).length <= 1);
          // The old counts stop: with every share of one count held, exactly one reconciles.
          const count = raw[0]?.count ?? 1;
          const only = Array.from({ length: count }, (_, i) => lease(i, count, 7));
          const stopped = leases
            .filter((l) => l.count !== count || l.version !== 2)
            .map((l) => ({ ...l, held: false }));
          assert.equal(reconcilers([...stopped, ...only], ns, name).length, 1);
        },
      ),
      { numRuns: 2000 },
    );
  });
});
