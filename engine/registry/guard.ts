/**
 * Isolation of the snapshot registry from the callers that wait on it: a circuit breaker per
 * registry, a bound on the requests in flight, and a wait budget per call shorter than a
 * request's own timeout. A registry that is slow or hung then costs a caller (a reconcile
 * worker) at most the wait budget, and, once the breaker is open, nothing: the call is
 * refused at once with {@link RegistryUnansweredError} and the caller requeues.
 *
 * The breaker's state machine is pure ({@link breakerAdmit}, {@link breakerSettle}); the
 * class around it ({@link GuardedRegistry}) only keeps the state and the timers.
 *
 * - closed: calls go through; `failureThreshold` failures in a row open it. A failure is a
 *   call without an answer (no connection, its timeout, an answer cut off), a 5xx, or a call
 *   still unanswered when its caller's wait budget ran out (counted then, once).
 * - open: every call is refused at once until the cool-down is over.
 * - half-open: one call goes through as a probe, the others are refused; its success closes
 *   the breaker (and resets the cool-down), its failure opens it again with the cool-down
 *   doubled, up to `maxCoolDownMs`.
 *
 * A call the caller stopped waiting for is not cancelled: its answer still settles the
 * breaker (a tag delete still lands). Answers to calls started before the breaker opened do
 * not close it; only the half-open probe does.
 */
import { type Clock, systemClock } from "../kube/sleep.js";
import { BrandedError, errorMessage } from "../kube/branded-error.js";
import { RegistryError } from "./oci.js";

/** The breaker's settings. */
export interface BreakerSettings {
  /** Failures in a row that open the breaker. */
  failureThreshold: number;
  /** The first cool-down, in ms; each failed probe doubles it. */
  coolDownMs: number;
  /** The longest cool-down, in ms. */
  maxCoolDownMs: number;
}

/** The controller's breaker: three failures in a row, a 5 s cool-down doubling to 60 s. */
export const DEFAULT_BREAKER: BreakerSettings = {
  failureThreshold: 3,
  coolDownMs: 5_000,
  maxCoolDownMs: 60_000,
};

/** One registry's breaker. Times are ms on the injected clock. */
export type BreakerState =
  | { kind: "closed"; failures: number; lastError?: string }
  | { kind: "open"; since: number; until: number; coolDownMs: number; lastError: string }
  | { kind: "half-open"; since: number; coolDownMs: number; lastError: string };

/** A new, closed breaker. */
export const CLOSED: BreakerState = { kind: "closed", failures: 0 };

/** What the breaker says of a call about to start. */
export interface Admission {
  state: BreakerState;
  /** Whether the call may go to the registry. */
  admitted: boolean;
  /** The call is the half-open probe: its outcome decides the breaker. */
  probe: boolean;
  /** When refused: how long until the breaker lets a call through again (at least 1 ms). */
  retryAfterMs?: number;
}

/** Decides whether a call may start at `now`. */
export function breakerAdmit(s: BreakerState, now: number): Admission {
  switch (s.kind) {
    case "closed":
      return { state: s, admitted: true, probe: false };
    case "open":
      if (now >= s.until)
        return {
          state: {
            kind: "half-open",
            since: now,
            coolDownMs: s.coolDownMs,
            lastError: s.lastError,
          },
          admitted: true,
          probe: true,
        };
      return { state: s, admitted: false, probe: false, retryAfterMs: Math.max(1, s.until - now) };
    case "half-open":
      // The probe is out: the others come back after the cool-down the probe may restart.
      return { state: s, admitted: false, probe: false, retryAfterMs: s.coolDownMs };
  }
}

/** A call's outcome: an answer (success) or none (failure, with what was seen). */
export type Outcome = { ok: true } | { ok: false; error: string };

/** The breaker after a call admitted as `probe` (or not) ended with `outcome` at `now`. */
export function breakerSettle(
  s: BreakerState,
  outcome: Outcome,
  probe: boolean,
  now: number,
  settings: BreakerSettings,
): BreakerState {
  switch (s.kind) {
    case "closed":
      if (outcome.ok) return CLOSED;
      if (s.failures + 1 < settings.failureThreshold)
        return { kind: "closed", failures: s.failures + 1, lastError: outcome.error };
      return {
        kind: "open",
        since: now,
        until: now + settings.coolDownMs,
        coolDownMs: settings.coolDownMs,
        lastError: outcome.error,
      };
    case "open":
      // A late answer of a call from before: the half-open probe decides, not it.
      return s;
    case "half-open": {
      if (!probe) return s;
      if (outcome.ok) return CLOSED;
      const coolDownMs = Math.min(s.coolDownMs * 2, settings.maxCoolDownMs);
      return {
        kind: "open",
        since: now,
        until: now + coolDownMs,
        coolDownMs,
        lastError: outcome.error,
      };
    }
  }
}

/** Whether a registry error means the registry did not answer usefully (a breaker failure). */
function isUnanswered(e: unknown): boolean {
  if (RegistryUnansweredError.isInstance(e)) return true;
  if (!RegistryError.isInstance(e)) return true;
  return e.status === 0 || e.status >= 500;
}

/**
 * A call refused without asking the registry (its breaker is open, or the call's wait budget
 * ran out): the registry is unanswered, and the caller should come back after
 * {@link retryAfterMs}.
 */
export class RegistryUnansweredError extends BrandedError {
  constructor(
    message: string,
    /** How long until the registry is asked again. */
    readonly retryAfterMs: number,
  ) {
    super(message);
  }
}

/** What {@link GuardedRegistry} guards: the calls a snapshot registry answers. */
export interface TagClient {
  hasManifest(name: string, reference: string): Promise<boolean>;
  deleteManifest(name: string, reference: string): Promise<void>;
  /** Ends the requests in flight (at shutdown). */
  close?(): void;
}

/** Options of {@link GuardedRegistry}. */
export interface GuardOptions {
  /** How the registry is named in messages (never with credentials). */
  name: string;
  /** Requests in flight at once; further calls wait their turn within their budget. @default 4 */
  concurrency?: number;
  /** How long a caller waits for one call, queue included. @default 2000 */
  waitMs?: number;
  /** @default {@link DEFAULT_BREAKER} */
  breaker?: Partial<BreakerSettings>;
  /** @default the real clock */
  clock?: Clock;
  /** Called when the breaker changes kind (closed, open, half-open). */
  onStateChange?: (state: BreakerState) => void;
  /** Called with each call's outcome, for metrics. */
  onCall?: (result: "ok" | "failed" | "slow" | "refused") => void;
}

/** What {@link GuardedRegistry.status} reports. */
export interface GuardStatus {
  state: BreakerState["kind"];
  /** Whether callers are being refused or kept waiting: the registry is unanswered. */
  unanswered: boolean;
  /** A sentence for probes and events (the registry's name, never its credentials). */
  reason: string;
  /** Requests in flight now (hung ones included). */
  inFlight: number;
}

/** A snapshot registry client behind a breaker, a concurrency bound and a wait budget. */
export class GuardedRegistry implements TagClient {
  private state: BreakerState = CLOSED;
  private inFlight = 0;
  private readonly queue: { start: () => void; alive: () => boolean }[] = [];
  private readonly settings: BreakerSettings;
  private readonly concurrency: number;
  private readonly waitMs: number;
  private readonly clock: Clock;
  /** Told when the breaker changes kind; the controller's metrics set it. */
  onStateChange?: (state: BreakerState) => void;
  /** Told each call's result; the controller's metrics set it. */
  onCall?: (result: "ok" | "failed" | "slow" | "refused") => void;

  constructor(
    private readonly inner: TagClient,
    private readonly opts: GuardOptions,
  ) {
    this.settings = { ...DEFAULT_BREAKER, ...opts.breaker };
    this.concurrency = Math.max(1, opts.concurrency ?? 4);
    this.waitMs = Math.max(1, opts.waitMs ?? 2_000);
    this.clock = opts.clock ?? systemClock;
    this.onStateChange = opts.onStateChange;
    this.onCall = opts.onCall;
  }

  hasManifest(name: string, reference: string): Promise<boolean> {
    return this.guard(`HEAD ${name}:${reference}`, () => this.inner.hasManifest(name, reference));
  }

  deleteManifest(name: string, reference: string): Promise<void> {
    return this.guard(`DELETE ${name}:${reference}`, () =>
      this.inner.deleteManifest(name, reference),
    );
  }

  /** Ends the requests still in flight, which no caller waits for any more (at shutdown). */
  close(): void {
    this.inner.close?.();
  }

  /** The breaker now, for `/readyz/registry`, events and tests. */
  status(): GuardStatus {
    const s = this.state;
    const now = this.clock.now();
    if (s.kind === "closed")
      return {
        state: "closed",
        unanswered: false,
        reason: `snapshot registry ${this.opts.name} answers`,
        inFlight: this.inFlight,
      };
    const again =
      s.kind === "open"
        ? `asked again in ${Math.ceil(Math.max(0, s.until - now) / 1000)}s`
        : "one call is asking it again";
    return {
      state: s.kind,
      unanswered: true,
      reason: `snapshot registry ${this.opts.name} unanswered since ${new Date(s.since).toISOString()} (${again}; last: ${s.lastError})`,
      inFlight: this.inFlight,
    };
  }

  /** How long a caller refused now should wait before asking again. */
  retryAfterMs(): number {
    const s = this.state;
    if (s.kind === "open") return Math.max(1, s.until - this.clock.now());
    if (s.kind === "half-open") return s.coolDownMs;
    return this.settings.coolDownMs;
  }

  private set(next: BreakerState): void {
    const before = this.state.kind;
    this.state = next;
    if (next.kind !== before) this.onStateChange?.(next);
  }

  private settle(outcome: Outcome, probe: boolean): void {
    this.set(breakerSettle(this.state, outcome, probe, this.clock.now(), this.settings));
  }

  private refuse(what: string, retryAfterMs: number): RegistryUnansweredError {
    this.onCall?.("refused");
    const s = this.state;
    const last = s.kind === "closed" ? "" : `; last: ${s.lastError}`;
    return new RegistryUnansweredError(
      `${what}: snapshot registry ${this.opts.name} unanswered, not asked (circuit ${s.kind}, asked again in ${Math.ceil(retryAfterMs / 1000)}s${last})`,
      retryAfterMs,
    );
  }

  private guard<T>(what: string, call: () => Promise<T>): Promise<T> {
    const admission = breakerAdmit(this.state, this.clock.now());
    this.set(admission.state);
    if (!admission.admitted)
      return Promise.reject(this.refuse(what, admission.retryAfterMs ?? this.retryAfterMs()));
    const probe = admission.probe;
    return new Promise<T>((resolve, reject) => {
      let waiting = true;
      let started = false;
      let counted = false;
      const finish = (outcome: Outcome, result: () => void) => {
        this.inFlight--;
        this.release();
        if (!counted) this.settle(outcome, probe);
        this.onCall?.(counted ? "slow" : outcome.ok ? "ok" : "failed");
        if (!waiting) return;
        waiting = false;
        this.clock.clearTimeout(timer);
        result();
      };
      const start = () => {
        started = true;
        call().then(
          (v) => finish({ ok: true }, () => resolve(v)),
          // A refusal (401, 404, …) is an answer: the registry is there.
          (e: unknown) =>
            finish(isUnanswered(e) ? { ok: false, error: errorMessage(e) } : { ok: true }, () =>
              reject(e instanceof Error ? e : new Error(errorMessage(e))),
            ),
        );
      };
      const timer = this.clock.setTimeout(() => {
        if (!waiting) return;
        waiting = false;
        if (started) {
          // Counted now, once: its later answer no longer moves the breaker.
          counted = true;
          this.settle({ ok: false, error: `no answer within ${this.waitMs} ms` }, probe);
        } else if (probe) {
          // A probe that never got a turn: the requests ahead of it are not answered either.
          this.settle({ ok: false, error: `no free request slot within ${this.waitMs} ms` }, probe);
        }
        this.onCall?.("slow");
        reject(
          new RegistryUnansweredError(
            `${what}: snapshot registry ${this.opts.name} did not answer within ${this.waitMs} ms${started ? "" : ` (${this.concurrency} requests already waiting on it)`}`,
            this.retryAfterMs(),
          ),
        );
      }, this.waitMs);
      if (this.inFlight < this.concurrency) {
        this.inFlight++;
        start();
      } else this.queue.push({ start, alive: () => waiting });
    });
  }

  /** A request slot was freed: the first queued call whose caller still waits takes it. */
  private release(): void {
    for (;;) {
      const next = this.queue.shift();
      if (!next) return;
      if (!next.alive()) continue;
      this.inFlight++;
      next.start();
      return;
    }
  }
}
