// The snapshot registry's isolation: the breaker's state machine as tables on an injected
// clock, and the guard around a registry that hangs, fails or answers (a fake: a pure unit).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  breakerAdmit,
  breakerSettle,
  CLOSED,
  DEFAULT_BREAKER,
  GuardedRegistry,
  RegistryUnansweredError,
  type BreakerState,
  type Outcome,
  type TagClient,
} from "../../../engine/registry/guard.js";
import { RegistryError } from "../../../engine/registry/oci.js";
import { FakeClock } from "../../support/fake-clock.js";

const S = DEFAULT_BREAKER;
const FAIL: Outcome = { ok: false, error: "boom" };
const OK: Outcome = { ok: true };

describe("breaker: admission", () => {
  const open: BreakerState = {
    kind: "open",
    since: 0,
    until: 5_000,
    coolDownMs: 5_000,
    lastError: "x",
  };
  const half: BreakerState = { kind: "half-open", since: 5_000, coolDownMs: 5_000, lastError: "x" };
  const table: [
    string,
    BreakerState,
    number,
    { admitted: boolean; probe: boolean; kind: string; retry?: number },
  ][] = [
    ["closed admits", CLOSED, 0, { admitted: true, probe: false, kind: "closed" }],
    [
      "closed with failures admits",
      { kind: "closed", failures: 2 },
      0,
      { admitted: true, probe: false, kind: "closed" },
    ],
    [
      "open refuses during the cool-down",
      open,
      1_000,
      { admitted: false, probe: false, kind: "open", retry: 4_000 },
    ],
    [
      "open refuses 1 ms before its end",
      open,
      4_999,
      { admitted: false, probe: false, kind: "open", retry: 1 },
    ],
    [
      "open lets one probe through at its end",
      open,
      5_000,
      { admitted: true, probe: true, kind: "half-open" },
    ],
    [
      "open lets a probe through after its end",
      open,
      60_000,
      { admitted: true, probe: true, kind: "half-open" },
    ],
    [
      "half-open refuses while the probe is out",
      half,
      5_001,
      { admitted: false, probe: false, kind: "half-open", retry: 5_000 },
    ],
  ];
  for (const [name, state, now, want] of table)
    it(name, () => {
      const a = breakerAdmit(state, now);
      assert.equal(a.admitted, want.admitted);
      assert.equal(a.probe, want.probe);
      assert.equal(a.state.kind, want.kind);
      assert.equal(a.retryAfterMs, want.retry);
    });
});

describe("breaker: outcomes", () => {
  const open = (since: number, coolDownMs: number): BreakerState => ({
    kind: "open",
    since,
    until: since + coolDownMs,
    coolDownMs,
    lastError: "boom",
  });
  const half = (coolDownMs: number): BreakerState => ({
    kind: "half-open",
    since: 0,
    coolDownMs,
    lastError: "x",
  });
  const table: [string, BreakerState, Outcome, boolean, BreakerState][] = [
    ["a success keeps it closed", { kind: "closed", failures: 2 }, OK, false, CLOSED],
    ["a failure counts", CLOSED, FAIL, false, { kind: "closed", failures: 1, lastError: "boom" }],
    [
      "a second failure counts",
      { kind: "closed", failures: 1 },
      FAIL,
      false,
      { kind: "closed", failures: 2, lastError: "boom" },
    ],
    [
      "the third failure in a row opens it",
      { kind: "closed", failures: 2 },
      FAIL,
      false,
      open(100, 5_000),
    ],
    ["a late success does not close it", open(0, 5_000), OK, false, open(0, 5_000)],
    ["a late failure does not extend it", open(0, 5_000), FAIL, false, open(0, 5_000)],
    ["the probe's success closes it", half(20_000), OK, true, CLOSED],
    ["the probe's failure doubles the cool-down", half(5_000), FAIL, true, open(100, 10_000)],
    ["the cool-down stops at its maximum", half(40_000), FAIL, true, open(100, 60_000)],
    [
      "another call's answer does not decide a half-open breaker",
      half(5_000),
      OK,
      false,
      half(5_000),
    ],
  ];
  for (const [name, state, outcome, probe, want] of table)
    it(name, () => assert.deepEqual(breakerSettle(state, outcome, probe, 100, S), want));
});

/** A registry whose calls the test answers by hand. */
class ManualRegistry implements TagClient {
  calls: { name: string; resolve: (v: boolean) => void; reject: (e: unknown) => void }[] = [];
  hasManifest(name: string): Promise<boolean> {
    return new Promise((resolve, reject) => this.calls.push({ name, resolve, reject }));
  }
  deleteManifest(name: string): Promise<void> {
    return this.hasManifest(name).then(() => undefined);
  }
}

const flush = () => new Promise<void>((r) => setImmediate(r));

/** Settles `p` into a value for assertions, without an unhandled rejection. */
function track<T>(p: Promise<T>): { done: boolean; value?: T; error?: unknown } {
  const t: { done: boolean; value?: T; error?: unknown } = { done: false };
  p.then(
    (v) => Object.assign(t, { done: true, value: v }),
    (e: unknown) => Object.assign(t, { done: true, error: e }),
  );
  return t;
}

function guarded(opts: { concurrency?: number } = {}) {
  const clock = new FakeClock(0);
  const inner = new ManualRegistry();
  const states: string[] = [];
  const g = new GuardedRegistry(inner, {
    name: "registry.test",
    clock,
    waitMs: 2_000,
    concurrency: opts.concurrency ?? 4,
    onStateChange: (s) => states.push(s.kind),
  });
  return { clock, inner, g, states };
}

describe("guarded registry", () => {
  it("a hung registry costs a caller the wait budget, then nothing: the breaker opens", async () => {
    const { clock, inner, g, states } = guarded();
    const first = [1, 2, 3].map((i) => track(g.hasManifest(`vm-${i}`, "hibernate")));
    await flush();
    assert.equal(inner.calls.length, 3);
    clock.advance(1_999);
    await flush();
    assert.ok(
      first.every((t) => !t.done),
      "still within the budget",
    );
    clock.advance(1);
    await flush();
    for (const t of first) assert.ok(RegistryUnansweredError.isInstance(t.error), String(t.error));
    assert.deepEqual(states, ["open"]);
    assert.equal(g.status().unanswered, true);
    assert.match(g.status().reason, /registry\.test unanswered/);
    // Refused at once, the registry not asked.
    const refused = track(g.hasManifest("vm-4", "hibernate"));
    await flush();
    assert.ok(RegistryUnansweredError.isInstance(refused.error));
    assert.equal(refused.error.retryAfterMs, 5_000);
    assert.equal(inner.calls.length, 3);
  });

  it("after the cool-down one probe asks; its answer closes the breaker", async () => {
    const { clock, inner, g, states } = guarded();
    for (let i = 0; i < 3; i++) track(g.hasManifest(`vm-${i}`, "hibernate"));
    clock.advance(2_000);
    await flush();
    clock.advance(5_000);
    const probe = track(g.hasManifest("vm-p", "hibernate"));
    const other = track(g.hasManifest("vm-q", "hibernate"));
    await flush();
    assert.equal(inner.calls.length, 4, "only the probe reached the registry");
    assert.ok(RegistryUnansweredError.isInstance(other.error));
    inner.calls[3].resolve(true);
    await flush();
    assert.equal(probe.value, true);
    assert.deepEqual(states, ["open", "half-open", "closed"]);
    assert.equal(g.status().unanswered, false);
  });

  it("a failed probe opens it again for twice as long", async () => {
    const { clock, inner, g } = guarded();
    for (let i = 0; i < 3; i++) track(g.hasManifest(`vm-${i}`, "hibernate"));
    clock.advance(2_000);
    await flush();
    clock.advance(5_000);
    const probe = track(g.hasManifest("vm-p", "hibernate"));
    await flush();
    inner.calls[3].reject(new RegistryError("GET: connect ECONNREFUSED", 0));
    await flush();
    assert.ok(RegistryError.isInstance(probe.error));
    assert.equal(g.retryAfterMs(), 10_000);
    clock.advance(9_999);
    const early = track(g.hasManifest("x", "hibernate"));
    await flush();
    assert.ok(RegistryUnansweredError.isInstance(early.error));
    assert.equal(inner.calls.length, 4);
    clock.advance(1);
    track(g.hasManifest("x", "hibernate"));
    await flush();
    assert.equal(inner.calls.length, 5, "the next probe asks");
  });

  it("late answers of the hung calls do not close it", async () => {
    const { clock, inner, g } = guarded();
    for (let i = 0; i < 3; i++) track(g.hasManifest(`vm-${i}`, "hibernate"));
    clock.advance(2_000);
    await flush();
    for (const c of inner.calls) c.resolve(true);
    await flush();
    assert.equal(g.status().state, "open");
  });

  it("a refusal (401, 404) is an answer, not a failure", async () => {
    const { inner, g } = guarded();
    for (let i = 0; i < 5; i++) {
      const t = track(g.hasManifest(`vm-${i}`, "hibernate"));
      await flush();
      inner.calls[i].reject(new RegistryError("HEAD: HTTP 401 unauthorized", 401));
      await flush();
      assert.ok(RegistryError.isInstance(t.error));
    }
    assert.equal(g.status().state, "closed");
  });

  it("5xx and no answer are failures; an answer in between resets the count", async () => {
    const { inner, g } = guarded();
    const answer = async (i: number, how: "503" | "none" | "ok") => {
      track(g.hasManifest(`vm-${i}`, "hibernate"));
      await flush();
      if (how === "ok") inner.calls[i].resolve(false);
      else inner.calls[i].reject(new RegistryError("x", how === "503" ? 503 : 0));
      await flush();
    };
    await answer(0, "503");
    await answer(1, "none");
    await answer(2, "ok");
    await answer(3, "503");
    await answer(4, "none");
    assert.equal(g.status().state, "closed");
    await answer(5, "503");
    assert.equal(g.status().state, "open");
  });

  it("at most `concurrency` requests are in flight; a queued call gives up within its budget", async () => {
    const { clock, inner, g } = guarded({ concurrency: 2 });
    const a = track(g.hasManifest("a", "hibernate"));
    const b = track(g.hasManifest("b", "hibernate"));
    const c = track(g.hasManifest("c", "hibernate"));
    await flush();
    assert.equal(inner.calls.length, 2);
    assert.equal(g.status().inFlight, 2);
    inner.calls[0].resolve(true);
    await flush();
    assert.equal(a.value, true);
    assert.equal(inner.calls.length, 3, "the queued call took the freed slot");
    inner.calls[2].resolve(false);
    await flush();
    assert.equal(c.value, false);
    // b hangs: a queued call behind a full set of hung requests gives up at its budget.
    track(g.hasManifest("d", "hibernate"));
    const e = track(g.hasManifest("e", "hibernate"));
    await flush();
    assert.equal(inner.calls.length, 4);
    clock.advance(2_000);
    await flush();
    assert.ok(b.done && RegistryUnansweredError.isInstance(b.error));
    assert.ok(RegistryUnansweredError.isInstance(e.error));
    assert.match((e.error as Error).message, /already waiting/);
    assert.equal(inner.calls.length, 4, "a call whose caller gave up never starts");
  });
});
