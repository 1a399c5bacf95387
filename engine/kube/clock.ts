/**
 * Timer functions and the current time, one interface for every component that waits (the
 * controller's work queues, the snapshot registry's guard), injectable so tests run on a fake
 * clock.
 */

/** Timer functions and the current time. */
export interface Clock {
  /** Milliseconds since some fixed point. */
  now(): number;
  /** Schedules `fn` after `ms`; returns a handle for {@link Clock.clearTimeout}. */
  setTimeout(fn: () => void, ms: number): unknown;
  /** Cancels a timer. */
  clearTimeout(handle: unknown): void;
}

/** The process clock: its timers never keep a stopping process alive. */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => {
    const t = setTimeout(fn, ms);
    t.unref();
    return t;
  },
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
};
