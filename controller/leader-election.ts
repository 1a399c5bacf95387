/**
 * Leader election on a `coordination.k8s.io/v1` Lease, so that only one controller replica
 * reconciles at a time.
 *
 * Guarantees:
 * - writes are optimistic: every update carries the resourceVersion that was read, and a
 *   409 means another candidate won the race; a leader renews from the Lease as it last
 *   wrote it (one write a renewal, no read), and reads it again after any failure;
 * - a lease held by someone else is taken only when its holder is empty or when its record
 *   has not changed for a full `leaseDurationSeconds` as observed on this process's own
 *   clock (clock skew between replicas does not matter);
 * - a leader that cannot renew within `renewDeadlineMs` steps down (`onStoppedLeading`)
 *   before its lease can expire for the others;
 * - `release()` clears the holder and shortens the duration, so a standby takes over on its
 *   next retry instead of waiting out the lease.
 *
 * @see https://kubernetes.io/docs/concepts/architecture/leases/
 */
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import type { Logger } from "pino";
import {
  isAlreadyExists,
  isConflict,
  paths,
  type KubeClient,
  type KubeObject,
} from "../engine/kube/index.js";
import { microTime } from "./events.js";
import { sleep } from "../engine/kube/sleep.js";
import { errorMessage } from "../engine/kube/branded-error.js";

/** The spec of a Lease. */
export interface LeaseSpec {
  holderIdentity?: string | null;
  leaseDurationSeconds?: number;
  acquireTime?: string | null;
  renewTime?: string | null;
  leaseTransitions?: number;
}

/** A Lease object. */
export interface Lease extends KubeObject {
  spec?: LeaseSpec;
}

/** Options of {@link LeaderElector}. */
export interface LeaderElectorOptions {
  client: KubeClient;
  /** Namespace of the Lease. */
  namespace: string;
  /** Name of the Lease. @default "cocoonset-controller" */
  name?: string;
  /** This candidate's identity. @default hostname + random suffix */
  identity?: string;
  /** @default 15 */
  leaseDurationSeconds?: number;
  /** Interval between renewals while leading. @default 2000 */
  renewIntervalMs?: number;
  /** Interval between attempts while not leading. @default 2000 */
  retryIntervalMs?: number;
  /** A leader that could not renew for this long steps down. @default 10000 */
  renewDeadlineMs?: number;
  log?: Logger;
  /** @default Date.now */
  now?: () => number;
  onStartedLeading?: () => void;
  onStoppedLeading?: () => void;
  /** Labels and annotations the Lease carries while this candidate holds it (a shard's share). */
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

/** Default Lease name. */
export const DEFAULT_LEASE_NAME = "cocoonset-controller";

/** A controller identity: the hostname (the pod name in a cluster) plus a random suffix. */
export function defaultIdentity(): string {
  return `${hostname()}_${randomBytes(4).toString("hex")}`;
}

/** A candidate for the leader Lease. */
export class LeaderElector {
  /** This candidate's identity (the Lease's holderIdentity while leading). */
  readonly identity: string;
  private readonly client: KubeClient;
  private readonly namespace: string;
  private readonly name: string;
  private readonly durationS: number;
  private readonly renewMs: number;
  private readonly retryMs: number;
  private readonly deadlineMs: number;
  private readonly log?: Logger;
  private readonly now: () => number;
  private readonly onStarted?: () => void;
  private readonly onStopped?: () => void;
  private readonly labels: Record<string, string>;
  private readonly annotations: Record<string, string>;
  private leading = false;
  /** Set by an attempt that found the Lease held (or just taken) by another candidate. */
  private lostToOther = false;
  private lastRenew = 0;
  /**
   * The Lease as this leader last wrote it: a renewal writes from it (its resourceVersion makes
   * the write a compare-and-swap) without reading the Lease first; any failure forgets it.
   */
  private written?: Lease;
  /** The Lease as this leader last wrote it, kept across a failed renewal until it steps down. */
  private held?: Lease;
  private observedSpec = "";
  private observedAt = 0;
  private abort = new AbortController();
  private loop?: Promise<void>;

  constructor(opts: LeaderElectorOptions) {
    this.client = opts.client;
    this.namespace = opts.namespace;
    this.name = opts.name ?? DEFAULT_LEASE_NAME;
    this.identity = opts.identity ?? defaultIdentity();
    this.durationS = opts.leaseDurationSeconds ?? 15;
    // A short lease shortens the others in proportion (15 s: renew and retry every 2 s, a
    // 10 s renew deadline), so a leader always steps down before its lease can expire.
    const leaseMs = this.durationS * 1000;
    this.renewMs = opts.renewIntervalMs ?? Math.min(2000, Math.round(leaseMs / 7.5));
    this.retryMs = opts.retryIntervalMs ?? Math.min(2000, Math.round(leaseMs / 7.5));
    this.deadlineMs = opts.renewDeadlineMs ?? Math.min(10_000, Math.round((leaseMs * 2) / 3));
    this.log = opts.log;
    this.now = opts.now ?? Date.now;
    this.onStarted = opts.onStartedLeading;
    this.onStopped = opts.onStoppedLeading;
    this.labels = opts.labels ?? {};
    this.annotations = opts.annotations ?? {};
  }

  /** The Lease as this candidate last wrote it while it leads; undefined when not leading. */
  current(): Lease | undefined {
    return this.leading ? this.held : undefined;
  }

  /** True while this candidate holds the Lease. */
  isLeader(): boolean {
    return this.leading;
  }

  /** Starts campaigning in the background (idempotent). */
  start(): void {
    if (this.loop) return;
    this.abort = new AbortController();
    this.loop = this.run(this.abort.signal);
  }

  /** Stops campaigning and, when leading, releases the Lease. */
  async stop(): Promise<void> {
    this.abort.abort();
    await this.loop;
    this.loop = undefined;
    await this.release();
  }

  /**
   * One attempt: acquire the Lease when it is free or expired, or renew it when held.
   * Resolves true when this candidate holds the Lease afterwards. Never throws for API
   * errors (they count as a failed attempt).
   */
  async tryAcquireOrRenew(): Promise<boolean> {
    let ok: boolean;
    try {
      const fromCopy = this.leading && this.written !== undefined;
      ok = await this.attempt();
      // A renewal from the copy that fails (409: someone wrote the Lease since) is decided
      // on a fresh read at once: another holder there means stepping down now, not at the
      // renew deadline.
      if (!ok && fromCopy) {
        this.written = undefined;
        ok = await this.attempt();
      }
    } catch (e) {
      this.log?.warn({ err: errorMessage(e), lease: this.name }, "lease attempt failed");
      ok = false;
    }
    if (!ok) this.written = undefined;
    const t = this.now();
    if (ok) {
      this.lastRenew = t;
      if (!this.leading) {
        this.leading = true;
        this.log?.info({ lease: this.name, identity: this.identity }, "became leader");
        this.onStarted?.();
      }
    } else if (this.leading && (t - this.lastRenew >= this.deadlineMs || this.lostToOther)) {
      this.stepDown("could not renew the lease");
    }
    return ok;
  }

  /**
   * Gives the Lease up: clears the holder and sets a 1 s duration. No-op when another
   * candidate holds it. Never throws.
   */
  async release(): Promise<void> {
    const wasLeading = this.leading;
    try {
      const lease = await this.client.getOrUndefined<Lease>(this.leasePath());
      if (lease && lease.spec?.holderIdentity === this.identity) {
        await this.client.replace(this.leasePath(), {
          ...lease,
          spec: {
            ...lease.spec,
            holderIdentity: null,
            leaseDurationSeconds: 1,
            acquireTime: null,
            renewTime: microTime(this.now()),
          },
        });
        this.log?.info({ lease: this.name }, "released the lease");
      }
    } catch (e) {
      this.log?.warn({ err: errorMessage(e), lease: this.name }, "could not release the lease");
    }
    if (wasLeading) this.stepDown("released");
  }

  private leasePath(): string {
    return paths.lease(this.namespace, this.name);
  }

  private stepDown(why: string): void {
    this.written = undefined;
    this.held = undefined;
    if (!this.leading) return;
    this.leading = false;
    const level = why === "released" ? "info" : "warn";
    this.log?.[level]({ lease: this.name, identity: this.identity, why }, "stopped leading");
    this.onStopped?.();
  }

  private async attempt(): Promise<boolean> {
    this.lostToOther = false;
    const t = this.now();
    const lease =
      this.leading && this.written
        ? this.written
        : await this.client.getOrUndefined<Lease>(this.leasePath());
    if (!lease) {
      try {
        this.written = this.held = await this.client.create<Lease>(paths.leases(this.namespace), {
          apiVersion: "coordination.k8s.io/v1",
          kind: "Lease",
          metadata: {
            name: this.name,
            namespace: this.namespace,
            labels: this.labels,
            annotations: this.annotations,
          },
          spec: {
            holderIdentity: this.identity,
            leaseDurationSeconds: this.durationS,
            acquireTime: microTime(t),
            renewTime: microTime(t),
            leaseTransitions: 0,
          },
        });
        return true;
      } catch (e) {
        if (isAlreadyExists(e)) return false;
        throw e;
      }
    }
    const spec = lease.spec ?? {};
    const raw = JSON.stringify(spec);
    if (raw !== this.observedSpec) {
      this.observedSpec = raw;
      this.observedAt = t;
    }
    const holder = spec.holderIdentity ?? "";
    const mine = holder === this.identity;
    const duration = (spec.leaseDurationSeconds ?? this.durationS) * 1000;
    if (!mine && holder !== "" && this.observedAt + duration > t) {
      this.lostToOther = true;
      return false;
    }
    const next: LeaseSpec = mine
      ? { ...spec, leaseDurationSeconds: this.durationS, renewTime: microTime(t) }
      : {
          ...spec,
          holderIdentity: this.identity,
          leaseDurationSeconds: this.durationS,
          acquireTime: microTime(t),
          renewTime: microTime(t),
          leaseTransitions: (spec.leaseTransitions ?? 0) + 1,
        };
    try {
      // The resourceVersion read above makes this a compare-and-swap.
      const metadata = {
        ...lease.metadata,
        labels: { ...lease.metadata.labels, ...this.labels },
        annotations: { ...lease.metadata.annotations, ...this.annotations },
      };
      const updated = await this.client.replace<Lease>(this.leasePath(), {
        ...lease,
        metadata,
        spec: next,
      });
      this.observedSpec = JSON.stringify(updated.spec ?? {});
      this.observedAt = t;
      this.written = this.held = updated;
      return true;
    } catch (e) {
      if (isConflict(e)) {
        this.lostToOther = !mine;
        return false;
      }
      throw e;
    }
  }

  private async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      await this.tryAcquireOrRenew();
      const base = this.leading ? this.renewMs : this.retryMs;
      // Jitter keeps standbys from hitting the Lease in lockstep.
      await sleep(base * (this.leading ? 1 : 1 + Math.random() * 0.2), signal);
    }
  }
}
