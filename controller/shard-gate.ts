/**
 * The shard gate of a leading controller process: an informer on the Leases of its leader
 * election's namespace of other generations than its own, read as shards (controller/shard.ts)
 * beside its own Lease as its leader election last wrote it, and the verdict on each key the
 * process's queue would take. A key of another shard is never queued; a key a live shard of
 * another count holds since earlier (a count change in progress) waits until that shard's
 * Lease goes. An unsharded controller runs the gate too, so that going back from N shards to
 * one hands over the same way.
 */
import { paths, type KubeClient } from "../engine/kube/index.js";
import { Informer } from "./informer.js";
import type { Lease } from "./leader-election.js";
import {
  claims,
  formatShard,
  parseShard,
  SHARD_ANNOTATION,
  SHARD_HASH_ANNOTATION,
  SHARD_GENERATION_LABEL,
  SHARD_HASH_VERSION,
  SHARD_LEASE_LABEL,
  shardGeneration,
  shardLeaseName,
  shardVerdict,
  UNSHARDED,
  type Shard,
  type ShardLease,
  type ShardTarget,
  type ShardVerdict,
} from "./shard.js";
import type { Logger } from "./types.js";

/** How often a key held back by another shard's Lease is looked at again. */
export const SHARD_HELD_REQUEUE_MS = 1000;

/**
 * How long the Leases read as shards are reused for the verdicts of a burst of events, while
 * neither the informer nor this process's own Lease changed: a Lease expires by the clock,
 * and this is small beside any Lease's duration.
 */
const LEASES_REUSED_MS = 200;

/** The labels and annotations a shard's Lease carries (given to its leader election). */
export function shardLeaseMetadata(
  base: string,
  shard: Shard,
): { labels: Record<string, string>; annotations: Record<string, string> } {
  return {
    labels: { [SHARD_LEASE_LABEL]: base, [SHARD_GENERATION_LABEL]: shardGeneration(shard.count) },
    annotations: {
      [SHARD_ANNOTATION]: formatShard(shard),
      [SHARD_HASH_ANNOTATION]: String(SHARD_HASH_VERSION),
    },
  };
}

/**
 * A Lease as a shard: the base name's Lease without a shard annotation is an unsharded
 * controller's (one from before shards, too). Undefined for Leases of other things.
 */
function shardLeaseOf(lease: Lease, base: string, nowMs: number): ShardLease | undefined {
  const name = lease.metadata.name ?? "";
  const ours = lease.metadata.labels?.[SHARD_LEASE_LABEL] === base || name === base;
  if (!ours) return undefined;
  const share = parseShard(lease.metadata.annotations?.[SHARD_ANNOTATION]) ?? UNSHARDED;
  // A Lease without the version is a controller's from before buckets: version 1.
  const version = Number(lease.metadata.annotations?.[SHARD_HASH_ANNOTATION] ?? 1);
  const spec = lease.spec ?? {};
  const renewed = Date.parse(spec.renewTime ?? "");
  const fresh =
    Number.isFinite(renewed) && renewed + (spec.leaseDurationSeconds ?? 15) * 1000 > nowMs;
  const acquired = Date.parse(spec.acquireTime ?? "");
  return {
    name,
    index: share.index,
    count: share.count,
    version: Number.isInteger(version) && version > 0 ? version : 1,
    held: !!spec.holderIdentity && fresh,
    acquiredAtMs: Number.isFinite(acquired) ? acquired : 0,
  };
}

/** The verdicts of one leading process on the keys of its queue. */
export class ShardGate {
  readonly informer: Informer;
  readonly leaseName: string;
  /** Changes the informer has shown: a verdict reads the Leases again after one. */
  private changes = 0;
  /** The Leases as last read, and what they were read from. */
  private read?: { atMs: number; own: Lease | undefined; changes: number; leases: ShardLease[] };

  constructor(
    client: KubeClient,
    private readonly opts: {
      namespace: string;
      base: string;
      shard: Shard;
      log?: Logger;
      now?: () => number;
      /** This process's own Lease as its leader election last wrote it (none: not held). */
      own?: () => Lease | undefined;
    },
  ) {
    this.leaseName = shardLeaseName(opts.base, opts.shard);
    // The Leases of other generations only (and those without the label: older controllers',
    // other things'): a sibling's renewal cannot change a verdict, so it is not sent here.
    this.informer = new Informer({
      client,
      path: paths.leases(opts.namespace),
      labelSelector: `${SHARD_GENERATION_LABEL}!=${shardGeneration(opts.shard.count)}`,
      log: opts.log,
    });
    const changed = () => void this.changes++;
    this.informer.addHandlers({ onAdd: changed, onUpdate: changed, onDelete: changed });
  }

  /** The shards' Leases as the cache holds them now. */
  leases(): ShardLease[] {
    const now = (this.opts.now ?? Date.now)();
    const own = this.opts.own?.();
    const last = this.read;
    if (
      last &&
      last.own === own &&
      last.changes === this.changes &&
      now >= last.atMs &&
      now - last.atMs < LEASES_REUSED_MS
    )
      return last.leases;
    const out: ShardLease[] = [];
    for (const o of own ? [own, ...this.informer.list()] : this.informer.list()) {
      const l = shardLeaseOf(o, this.opts.base, now);
      if (l) out.push(l);
    }
    this.read = { atMs: now, own, changes: this.changes, leases: out };
    return out;
  }

  /**
   * What this process does with `namespace/name`. Until its own Lease shows in the cache it
   * holds everything of its share back (it cannot tell its acquire time yet).
   */
  verdict(target: ShardTarget): ShardVerdict {
    // Another share's key is never this process's, whatever the Leases say.
    if (!claims({ ...this.opts.shard, version: SHARD_HASH_VERSION }, target))
      return { kind: "other" };
    const leases = this.leases();
    const self = leases.find((l) => l.name === this.leaseName);
    if (!self) {
      const pending: ShardLease = {
        name: this.leaseName,
        ...this.opts.shard,
        version: SHARD_HASH_VERSION,
        held: false,
        acquiredAtMs: Number.MAX_SAFE_INTEGER,
      };
      const v = shardVerdict(pending, target, []);
      return v.kind === "other" ? v : { kind: "held", by: pending };
    }
    return shardVerdict(self, target, leases);
  }
}
