/**
 * A keyed work queue in the style of client-go's rate-limited delaying queue: it holds keys
 * (`namespace/name`), never events, so many changes to one object collapse into one
 * reconcile.
 *
 * Guarantees:
 * - a key is queued at most once (adds of a queued key are dropped);
 * - a key is never handed out while it is being processed; an add during processing marks
 *   it dirty, and `done(key)` queues it again;
 * - `addRateLimited` delays by the larger of a per-key exponential backoff and a global
 *   token bucket; `forget` resets the per-key part.
 *
 * Caveats: after `shutDown()` nothing new is handed out, queued keys are dropped, and every
 * pending `get()` resolves `undefined`; keys in flight still need their `done(key)`.
 */

import { type Clock, systemClock } from "../engine/kube/sleep.js";

export { type Clock, systemClock };

/** Options of {@link WorkQueue}. */
export interface WorkQueueOptions {
  /** @default systemClock */
  clock?: Clock;
  /** First per-key retry delay. @default 5 */
  baseDelayMs?: number;
  /** Cap of the per-key retry delay. @default 1_000_000 (1000 s) */
  maxDelayMs?: number;
  /** Refill rate of the global bucket, in tokens per second. @default 10 */
  qps?: number;
  /** Size of the global bucket. @default 100 */
  burst?: number;
  /** Told of adds, retries and waiting and processing times (client-go's queue metrics). */
  metrics?: WorkQueueMetrics;
}

/** What a queue reports as it works, each time with the key concerned. */
export interface WorkQueueMetrics {
  /** The key entered the queue (an add of an already queued key is not one). */
  added(key: string): void;
  /** The key was re-added with rate limiting. */
  retried(key: string): void;
  /** The key was handed out after waiting `seconds` in the queue. */
  waited(key: string, seconds: number): void;
  /** The key was marked done `seconds` after it was handed out. */
  worked(key: string, seconds: number): void;
}

interface Delayed {
  readyAt: number;
  handle: unknown;
}

/** The rate-limited, delaying, deduplicating work queue. */
export class WorkQueue {
  private readonly clock: Clock;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;
  private readonly qps: number;
  private readonly burst: number;

  private readonly queue: string[] = [];
  /** Keys that need processing: queued, or re-added while in flight. */
  private readonly dirty = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly waiting = new Map<string, Delayed>();
  private readonly failures = new Map<string, number>();
  /** When each queued key entered the queue, and when each key in flight was handed out. */
  private readonly queuedAt = new Map<string, number>();
  private readonly startedAt = new Map<string, number>();
  private readonly metrics?: WorkQueueMetrics;
  private readonly getters: ((key: string | undefined) => void)[] = [];
  private idleWaiters: (() => void)[] = [];
  private tokens: number;
  private tokensAt: number;
  private stopping = false;

  constructor(opts: WorkQueueOptions = {}) {
    this.clock = opts.clock ?? systemClock;
    this.baseDelayMs = opts.baseDelayMs ?? 5;
    this.maxDelayMs = opts.maxDelayMs ?? 1_000_000;
    this.qps = opts.qps ?? 10;
    this.burst = opts.burst ?? 100;
    this.tokens = this.burst;
    this.tokensAt = this.clock.now();
    this.metrics = opts.metrics;
  }

  /** Queues a key now (deduplicated). */
  add(key: string): void {
    if (this.stopping || this.dirty.has(key)) return;
    this.dirty.add(key);
    if (this.processing.has(key)) return;
    this.enqueue(key);
  }

  /**
   * Queues a key after `ms`. When the key already waits, the earlier deadline wins.
   * @param ms delay; 0 or less adds at once
   */
  addAfter(key: string, ms: number): void {
    if (this.stopping) return;
    if (ms <= 0) return this.add(key);
    const readyAt = this.clock.now() + ms;
    const prev = this.waiting.get(key);
    if (prev && prev.readyAt <= readyAt) return;
    if (prev) this.clock.clearTimeout(prev.handle);
    const handle = this.clock.setTimeout(() => {
      this.waiting.delete(key);
      this.add(key);
    }, ms);
    this.waiting.set(key, { readyAt, handle });
  }

  /** Queues a key after its rate-limited delay and counts one more failure for it. */
  addRateLimited(key: string): void {
    if (!this.stopping) this.metrics?.retried(key);
    this.addAfter(key, this.when(key));
  }

  /**
   * The delay the next `addRateLimited(key)` gets, counting the failure: the larger of the
   * per-key exponential backoff (`base * 2^failures`, capped) and the global bucket's wait.
   */
  when(key: string): number {
    const n = this.failures.get(key) ?? 0;
    this.failures.set(key, n + 1);
    const perKey = Math.min(this.baseDelayMs * 2 ** n, this.maxDelayMs);
    return Math.max(perKey, this.reserveToken());
  }

  /**
   * Drops the key's delayed add, if one waits: a reconcile that just ended decided from newer
   * facts when (and whether) it must come back, so an earlier pass's wish is void.
   */
  cancelDelayed(key: string): void {
    const prev = this.waiting.get(key);
    if (!prev) return;
    this.clock.clearTimeout(prev.handle);
    this.waiting.delete(key);
  }

  /** Resets the failure count of a key (after a successful reconcile). */
  forget(key: string): void {
    this.failures.delete(key);
  }

  /** How many times a key failed since its last `forget`. */
  numRequeues(key: string): number {
    return this.failures.get(key) ?? 0;
  }

  /**
   * The next key to process, or `undefined` once the queue shuts down. The key stays in
   * flight until `done(key)`.
   */
  get(): Promise<string | undefined> {
    if (this.stopping) return Promise.resolve(undefined);
    const key = this.queue.shift();
    if (key !== undefined) return Promise.resolve(this.take(key));
    return new Promise((resolve) => this.getters.push(resolve));
  }

  /** Marks a key processed; a key re-added meanwhile is queued again. */
  done(key: string): void {
    const started = this.startedAt.get(key);
    this.startedAt.delete(key);
    if (started !== undefined) this.metrics?.worked(key, (this.clock.now() - started) / 1000);
    this.processing.delete(key);
    if (this.dirty.has(key) && !this.stopping) this.enqueue(key);
    if (this.processing.size === 0) {
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const w of waiters) w();
    }
  }

  /** Keys waiting to be handed out (the depth metric; delayed keys are not counted). */
  len(): number {
    return this.queue.length;
  }

  /** The keys waiting to be handed out, in order. */
  queuedKeys(): string[] {
    return [...this.queue];
  }

  /** The keys in flight, each with the clock time it was handed out. */
  inFlightSince(): [string, number][] {
    return [...this.startedAt];
  }

  /** The queue clock's time. */
  now(): number {
    return this.clock.now();
  }

  /** Keys currently in flight. */
  inFlight(): number {
    return this.processing.size;
  }

  /** True after {@link WorkQueue.shutDown}. */
  get shuttingDown(): boolean {
    return this.stopping;
  }

  /** Stops handing out keys; pending `get()`s resolve `undefined`; in-flight keys may finish. */
  shutDown(): void {
    if (this.stopping) return;
    this.stopping = true;
    for (const d of this.waiting.values()) this.clock.clearTimeout(d.handle);
    this.waiting.clear();
    this.queue.length = 0;
    this.queuedAt.clear();
    for (const g of this.getters.splice(0)) g(undefined);
  }

  /** Resolves when no key is in flight. */
  drained(): Promise<void> {
    if (this.processing.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private enqueue(key: string): void {
    this.metrics?.added(key);
    this.queuedAt.set(key, this.clock.now());
    const getter = this.getters.shift();
    if (getter) getter(this.take(key));
    else this.queue.push(key);
  }

  private take(key: string): string {
    const now = this.clock.now();
    const since = this.queuedAt.get(key) ?? now;
    this.queuedAt.delete(key);
    this.metrics?.waited(key, (now - since) / 1000);
    this.startedAt.set(key, now);
    this.dirty.delete(key);
    this.processing.add(key);
    return key;
  }

  /** Takes one token from the global bucket and returns how long until it was available. */
  private reserveToken(): number {
    const now = this.clock.now();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.tokensAt) * this.qps) / 1000);
    this.tokensAt = now;
    this.tokens -= 1;
    return this.tokens >= 0 ? 0 : Math.ceil((-this.tokens * 1000) / this.qps);
  }
}
