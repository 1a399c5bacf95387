/** The one delay of the project: a timer that ends early (without error) when the signal aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}

// Timer functions and the current time, one interface for every component that waits (the
// controller's work queues, the snapshot registry's guard), injectable so tests run on a
// fake clock.

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
