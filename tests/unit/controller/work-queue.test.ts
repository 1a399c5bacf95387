import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { WorkQueue } from "../../../controller/work-queue.js";
import { FakeClock } from "../../support/fake-clock.js";

/** A queue on a fake clock with a bucket large enough to stay out of the way. */
function setup(opts: { qps?: number; burst?: number } = {}) {
  const clock = new FakeClock();
  const q = new WorkQueue({ clock, qps: opts.qps ?? 1e9, burst: opts.burst ?? 1e9 });
  return { clock, q };
}

/** What `tryGet` answers when `get()` did not settle. */
const PENDING = Symbol("pending");

/** Resolves to the key if `get()` settles within the current turn of the event loop. */
async function tryGet(q: WorkQueue): Promise<string | undefined | typeof PENDING> {
  return Promise.race([
    q.get(),
    new Promise<typeof PENDING>((r) => setImmediate(() => r(PENDING))),
  ]);
}

describe("work queue", { timeout: 20_000 }, () => {
  test("adds of a queued key are deduplicated and keys come out in order", async () => {
    const { q } = setup();
    for (const k of ["a", "b", "a", "c", "b"]) q.add(k);
    assert.equal(q.len(), 3);
    assert.deepEqual([await q.get(), await q.get(), await q.get()], ["a", "b", "c"]);
    assert.equal(q.len(), 0);
  });

  test("a key added while in flight is not handed out until done, then exactly once", async () => {
    const { q } = setup();
    q.add("a");
    assert.equal(await q.get(), "a");
    q.add("a");
    q.add("a");
    assert.equal(q.len(), 0, "in-flight key is not queued");
    const waiting = tryGet(q);
    q.done("a");
    assert.equal(await waiting, "a", "the dirty key is handed out after done");
    q.done("a");
    assert.equal(await tryGet(q), PENDING, "no second copy");
  });

  test("cancelDelayed drops a key's delayed add (a later pass decided anew); other keys keep theirs", async () => {
    const { clock, q } = setup();
    q.addAfter("a", 5_000);
    q.addAfter("b", 5_000);
    q.cancelDelayed("a");
    q.cancelDelayed("c");
    clock.advance(60_000);
    assert.deepEqual(q.queuedKeys(), ["b"]);
    // And a new delayed add after it is honoured.
    q.addAfter("a", 1_000);
    clock.advance(1_000);
    assert.deepEqual(q.queuedKeys(), ["b", "a"]);
  });

  test("done on a key that was not re-added does not requeue it", async () => {
    const { q } = setup();
    q.add("a");
    await q.get();
    q.done("a");
    assert.equal(q.len(), 0);
  });

  test("a pending get resolves with the next added key", async () => {
    const { q } = setup();
    const p = q.get();
    q.add("x");
    assert.equal(await p, "x");
    assert.equal(q.inFlight(), 1);
  });

  test("addAfter holds the key until its delay elapsed", async () => {
    const { q, clock } = setup();
    q.addAfter("a", 100);
    clock.advance(99);
    assert.equal(q.len(), 0);
    clock.advance(1);
    assert.equal(q.len(), 1);
    assert.equal(await q.get(), "a");
  });

  test("addAfter keeps the earlier deadline when a key is delayed twice", () => {
    const { q, clock } = setup();
    q.addAfter("a", 500);
    q.addAfter("a", 100);
    q.addAfter("a", 300);
    clock.advance(100);
    assert.equal(q.len(), 1);
    clock.advance(1000);
    assert.equal(q.len(), 1, "the later timers were dropped");
    assert.equal(clock.pending(), 0);
  });

  test("addAfter with a zero delay adds at once", () => {
    const { q } = setup();
    q.addAfter("a", 0);
    assert.equal(q.len(), 1);
  });

  const backoffTable: [number, number][] = [
    [1, 5],
    [2, 10],
    [3, 20],
    [4, 40],
    [10, 2560],
    [18, 655_360],
    [19, 1_000_000],
    [40, 1_000_000],
  ];
  for (const [failure, delay] of backoffTable) {
    test(`failure #${failure} of one key waits ${delay} ms`, () => {
      const { q } = setup();
      let last = 0;
      for (let i = 0; i < failure; i++) last = q.when("k");
      assert.equal(last, delay);
      assert.equal(q.numRequeues("k"), failure);
    });
  }

  test("addRateLimited queues the key after its backoff, and forget starts over", () => {
    const { q, clock } = setup();
    q.addRateLimited("k");
    clock.advance(4);
    assert.equal(q.len(), 0);
    clock.advance(1);
    assert.equal(q.len(), 1);
    assert.equal(q.when("k"), 10);
    q.forget("k");
    assert.equal(q.numRequeues("k"), 0);
    assert.equal(q.when("k"), 5);
  });

  test("backoff is per key", () => {
    const { q } = setup();
    q.when("a");
    q.when("a");
    assert.equal(q.when("a"), 20);
    assert.equal(q.when("b"), 5);
  });

  test("the global bucket delays failures past its burst, whatever the key", () => {
    const { q, clock } = setup({ qps: 10, burst: 2 });
    assert.deepEqual(
      ["a", "b", "c", "d"].map((k) => q.when(k)),
      [5, 5, 100, 200],
    );
    clock.advance(1000);
    assert.equal(q.when("e"), 5, "tokens refill over time");
  });

  test("shutDown resolves pending gets, refuses new work, and lets in-flight keys finish", async () => {
    const { q, clock } = setup();
    q.add("a");
    q.add("b");
    q.addAfter("c", 10);
    assert.equal(await q.get(), "a");
    const pending = [q.get(), q.get()];
    assert.equal(await pending[0], "b");
    q.shutDown();
    assert.equal(await pending[1], undefined);
    assert.equal(await q.get(), undefined);
    q.add("d");
    clock.advance(100);
    assert.equal(q.len(), 0, "nothing is queued after shutdown");
    let drained = false;
    const d = q.drained().then(() => (drained = true));
    q.done("a");
    await Promise.resolve();
    assert.equal(drained, false, "b is still in flight");
    q.done("b");
    await d;
    assert.equal(drained, true);
  });

  test("property: a key is never handed to two workers at once, and no add is lost or doubled", async () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant("add" as const), key: fc.constantFrom("a", "b", "c", "d") }),
      fc.record({ kind: fc.constant("get" as const) }),
      fc.record({ kind: fc.constant("done" as const), worker: fc.nat(7) }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(op, { maxLength: 120 }), async (ops) => {
        const { q } = setup();
        const held: string[] = [];
        // Per key: adds since its last hand-out ("owed" hand-outs collapse into one).
        const owed = new Map<string, boolean>();
        const handOut = (key: string) => {
          assert.ok(!held.includes(key), `key ${key} handed out while in flight`);
          assert.equal(owed.get(key), true, `key ${key} handed out without an add`);
          owed.set(key, false);
          held.push(key);
        };
        for (const o of ops) {
          if (o.kind === "add") {
            q.add(o.key);
            owed.set(o.key, true);
          } else if (o.kind === "get") {
            if (q.len() > 0) handOut((await q.get())!);
          } else if (held.length > 0) {
            const [key] = held.splice(o.worker % held.length, 1);
            q.done(key);
          }
        }
        // Drain: finish everything, then keep serving until the queue is empty.
        while (held.length > 0 || q.len() > 0) {
          while (held.length > 0) q.done(held.pop()!);
          while (q.len() > 0) handOut((await q.get())!);
        }
        for (const [key, o] of owed) assert.equal(o, false, `add of ${key} was never served`);
      }),
      { numRuns: 300 },
    );
  });

  test("property: a burst of adds and delayed adds of a key is processed exactly once", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            key: fc.constantFrom("a", "b", "c"),
            delay: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 5000 })),
          }),
          { minLength: 1, maxLength: 60 },
        ),
        async (adds) => {
          const { q, clock } = setup();
          for (const a of adds) q.addAfter(a.key, a.delay);
          clock.advance(10_000);
          const seen: string[] = [];
          while (q.len() > 0) {
            const k = (await q.get())!;
            seen.push(k);
            q.done(k);
          }
          clock.advance(10_000);
          assert.equal(q.len(), 0);
          assert.deepEqual(seen.sort(), [...new Set(adds.map((a) => a.key))].sort());
        },
      ),
      { numRuns: 300 },
    );
  });

  test("property: any number of re-adds during processing yields exactly one more hand-out", async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 20 }), async (readds) => {
        const { q } = setup();
        q.add("k");
        assert.equal(await q.get(), "k");
        for (let i = 0; i < readds; i++) q.add("k");
        assert.equal(q.len(), 0);
        q.done("k");
        assert.equal(q.len(), 1);
        assert.equal(await q.get(), "k");
        q.done("k");
        assert.equal(q.len(), 0);
      }),
    );
  });

  test("property: rate-limited delays follow 5 ms doubling to 1000 s and never undercut the bucket", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 40 }),
        fc.integer({ min: 1, max: 50 }),
        fc.integer({ min: 1, max: 20 }),
        (failures, qps, burst) => {
          const clock = new FakeClock();
          const q = new WorkQueue({ clock, qps, burst });
          for (let i = 0; i < failures; i++) {
            const d = q.when("k");
            assert.ok(d >= Math.min(5 * 2 ** i, 1_000_000), `failure ${i + 1}: ${d}`);
            const beyondBurst = i + 1 - burst;
            if (beyondBurst > 0) assert.ok(d >= Math.ceil((beyondBurst * 1000) / qps) - 1);
          }
          const huge = new WorkQueue({ clock, qps: 1e9, burst: 1e9 });
          const seq = Array.from({ length: failures }, () => huge.when("k"));
          assert.deepEqual(
            seq,
            seq.map((_, i) => Math.min(5 * 2 ** i, 1_000_000)),
          );
        },
      ),
    );
  });

  test("reports adds, retries, waiting and processing times as client-go's queue metrics count them", async () => {
    const clock = new FakeClock();
    const events: string[] = [];
    const q = new WorkQueue({
      clock,
      qps: 1e9,
      burst: 1e9,
      metrics: {
        added: (k) => events.push(`added ${k}`),
        retried: (k) => events.push(`retried ${k}`),
        waited: (k, s) => events.push(`waited ${k} ${s}`),
        worked: (k, s) => events.push(`worked ${k} ${s}`),
      },
    });
    q.add("a");
    q.add("a"); // already queued: not an add
    clock.advance(1500);
    assert.deepEqual(q.queuedKeys(), ["a"]);
    const key = await q.get();
    assert.equal(key, "a");
    assert.deepEqual(q.inFlightSince(), [["a", clock.now()]]);
    q.add("a"); // in flight: marked dirty, queued again at done()
    clock.advance(250);
    q.done("a");
    assert.deepEqual(q.queuedKeys(), ["a"]);
    await q.get();
    q.addRateLimited("a");
    q.done("a");
    assert.deepEqual(events, [
      "added a",
      "waited a 1.5",
      "worked a 0.25",
      "added a",
      "waited a 0",
      "retried a",
      "worked a 0",
    ]);
  });
});
