/**
 * The shard gate of a leading controller process: an informer on the Leases of its leader
 * election's namespace, read as shards (controller/shard.ts), and the verdict on each key the
 * process's queue would take. A key of another shard is never queued; a key a live shard of
 * another count holds since earlier (a count change in progress) waits until that shard's
 * Lease goes. An unsharded controller runs the gate too, so that going back from N shards to
 * one hands over the same way.
 */
import { paths, type KubeClient } from "../engine/kube/index.js";
import { Informer } from "./informer.js";
import type { Lease } from "./leader-election.js";
import {
  formatShard,
  parseShard,
  SHARD_ANNOTATION,
  SHARD_LEASE_LABEL,
  shardLeaseName,
  shardVerdict,
  UNSHARDED,
  type Shard,
  type ShardLease,
  type ShardVerdict,
} from "./shard.js";
import type { Logger } from "./types.js";

/** How often a key held back by another shard's Lease is looked at again. */
export const SHARD_HELD_REQUEUE_MS = 1000;

/** The labels and annotations a shard's Lease carries (given to its leader election). */
export function shardLeaseMetadata(
  base: string,
  shard: Shard,
): { labels: Record<string, string>; annotations: Record<string, string> } {
  return {
    labels: { [SHARD_LEASE_LABEL]: base },
    annotations: { [SHARD_ANNOTATION]: formatShard(shard) },
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
  const spec = lease.spec ?? {};
  const renewed = Date.parse(spec.renewTime ?? "");
  const fresh =
    Number.isFinite(renewed) && renewed + (spec.leaseDurationSeconds ?? 15) * 1000 > nowMs;
  const acquired = Date.parse(spec.acquireTime ?? "");
  return {
    name,
    index: share.index,
    count: share.count,
    held: !!spec.holderIdentity && fresh,
    acquiredAtMs: Number.isFinite(acquired) ? acquired : 0,
  };
}

/** The verdicts of one leading process on the keys of its queue. */
export class ShardGate {
  readonly informer: Informer;
  readonly leaseName: string;

  constructor(
    client: KubeClient,
    private readonly opts: {
      namespace: string;
      base: string;
      shard: Shard;
      log?: Logger;
      now?: () => number;
    },
  ) {
    this.leaseName = shardLeaseName(opts.base, opts.shard);
    this.informer = new Informer({ client, path: paths.leases(opts.namespace), log: opts.log });
  }

  /** The shards' Leases as the cache holds them now. */
  leases(): ShardLease[] {
    const now = (this.opts.now ?? Date.now)();
    const out: ShardLease[] = [];
    for (const o of this.informer.list()) {
      const l = shardLeaseOf(o, this.opts.base, now);
      if (l) out.push(l);
    }
    return out;
  }

  /**
   * What this process does with `namespace/name`. Until its own Lease shows in the cache it
   * holds everything of its share back (it cannot tell its acquire time yet).
   */
  verdict(namespace: string, name: string): ShardVerdict {
    const leases = this.leases();
    const self = leases.find((l) => l.name === this.leaseName);
    if (!self) {
      const pending: ShardLease = {
        name: this.leaseName,
        ...this.opts.shard,
        held: false,
        acquiredAtMs: Number.MAX_SAFE_INTEGER,
      };
      const v = shardVerdict(pending, namespace, name, []);
      return v.kind === "other" ? v : { kind: "held", by: pending };
    }
    return shardVerdict(self, namespace, name, leases);
  }
}
