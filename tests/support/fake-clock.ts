/** A manual clock for unit tests: timers fire only when the test advances time. */
import type { Clock } from "../../controller/work-queue.js";

interface Timer {
  at: number;
  seq: number;
  fn: () => void;
}

/** A {@link Clock} whose time moves only through {@link FakeClock.advance}. */
export class FakeClock implements Clock {
  private t: number;
  private seq = 0;
  private timers = new Map<number, Timer>();

  constructor(start = 1_000_000) {
    this.t = start;
  }

  now(): number {
    return this.t;
  }

  setTimeout(fn: () => void, ms: number): unknown {
    const id = ++this.seq;
    this.timers.set(id, { at: this.t + Math.max(0, ms), seq: id, fn });
    return id;
  }

  clearTimeout(handle: unknown): void {
    this.timers.delete(handle as number);
  }

  /** Timers not yet fired. */
  pending(): number {
    return this.timers.size;
  }

  /** Moves time forward, firing due timers in order (each sees its own due time). */
  advance(ms: number): void {
    const end = this.t + ms;
    for (;;) {
      let next: [number, Timer] | undefined;
      for (const e of this.timers) {
        if (e[1].at > end) continue;
        if (!next || e[1].at < next[1].at || (e[1].at === next[1].at && e[1].seq < next[1].seq))
          next = e;
      }
      if (!next) break;
      this.timers.delete(next[0]);
      this.t = next[1].at;
      next[1].fn();
    }
    this.t = end;
  }
}

interface WarpTimer {
  at: number;
  fn: () => void;
  handle: NodeJS.Timeout;
}

/**
 * A {@link Clock} that runs with real time and that a test can move forward at once: a
 * controller on it does its real work at real speed, and a backoff it waits out ends when
 * the test calls {@link WarpClock.advance} (timers due by then fire).
 */
export class WarpClock implements Clock {
  private offset = 0;
  private seq = 0;
  private timers = new Map<number, WarpTimer>();

  now(): number {
    return Date.now() + this.offset;
  }

  setTimeout(fn: () => void, ms: number): unknown {
    const id = ++this.seq;
    this.schedule(id, this.now() + Math.max(0, ms), fn);
    return id;
  }

  clearTimeout(handle: unknown): void {
    const t = this.timers.get(handle as number);
    if (!t) return;
    clearTimeout(t.handle);
    this.timers.delete(handle as number);
  }

  /** Moves time forward by `ms`; every timer keeps its due time on the new timeline. */
  advance(ms: number): void {
    this.offset += ms;
    for (const [id, t] of [...this.timers]) {
      clearTimeout(t.handle);
      this.schedule(id, t.at, t.fn);
    }
  }

  private schedule(id: number, at: number, fn: () => void): void {
    const handle = setTimeout(
      () => {
        this.timers.delete(id);
        fn();
      },
      Math.max(0, at - this.now()),
    );
    handle.unref();
    this.timers.set(id, { at, fn, handle });
  }
}
