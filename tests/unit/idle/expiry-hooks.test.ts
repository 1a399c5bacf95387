// The expiry schedule and the hooks' pure parts (engine/idle/expiry.ts, hooks.ts).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import {
  expiringLeadMs,
  expiryState,
  hookEvent,
  hookTarget,
  hookVerdict,
  type ExpiryPolicy,
} from "../../../engine/idle/index.js";

const H = 3_600_000;
const CREATED = new Date("2026-12-01T00:00:00Z");
const after = (ms: number): Date => new Date(CREATED.getTime() + ms);

describe("expiryState", () => {
  const day: ExpiryPolicy = { afterMs: 24 * H, since: "creation", action: "suspend" };
  const cases: { name: string; policy: ExpiryPolicy; activity?: Date; now: Date; want: object }[] =
    [
      {
        name: "a day's expiry is announced an hour ahead",
        policy: day,
        now: after(22 * H),
        want: { expiresAt: after(24 * H), announcedAt: after(23 * H), due: false, expiring: false },
      },
      {
        name: "inside the last hour it is expiring",
        policy: day,
        now: after(23.5 * H),
        want: { due: false, expiring: true, nextCheckAt: after(24 * H) },
      },
      {
        name: "at its time it is due",
        policy: day,
        now: after(24 * H),
        want: { due: true, expiring: false, nextCheckAt: undefined },
      },
      {
        name: "a short expiry is announced a tenth of `after` ahead",
        policy: { afterMs: 50 * 60_000, since: "creation", action: "delete" },
        now: after(0),
        want: { announcedAt: after(45 * 60_000), nextCheckAt: after(45 * 60_000) },
      },
      {
        name: "since idle, activity pushes it back",
        policy: { ...day, since: "idle" },
        activity: after(10 * H),
        now: after(24 * H),
        want: { expiresAt: after(34 * H), due: false },
      },
      {
        name: "since creation, activity does not",
        policy: day,
        activity: after(10 * H),
        now: after(24 * H),
        want: { due: true },
      },
    ];
  for (const c of cases) {
    it(c.name, () => {
      const s = expiryState(c.policy, CREATED, c.activity, c.now);
      for (const [k, v] of Object.entries(c.want))
        assert.deepEqual(s[k as keyof typeof s], v, `${c.name}: ${k}`);
    });
  }

  it("the lead is at most an hour and at most a tenth of `after`", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1000 * H }), (ms) => {
        const lead = expiringLeadMs(ms);
        assert.ok(lead <= H && lead <= ms / 10 && lead >= 0);
      }),
    );
  });
});

describe("hooks", () => {
  const subject = {
    namespace: "agents",
    cocoonSet: "coder",
    uid: "u-1",
    member: "2",
    pod: "coder-2",
  };
  it("an event's id is the same for every call about one transition, and differs between transitions", () => {
    const t = new Date("2026-12-01T10:00:00Z");
    const a = hookEvent(subject, "BeforeHibernate", "idle", t);
    assert.equal(a.id, hookEvent(subject, "BeforeHibernate", "idle", t).id);
    assert.notEqual(a.id, hookEvent(subject, "AfterWake", "activity", t).id);
    assert.notEqual(a.id, hookEvent({ ...subject, uid: "u-2" }, "BeforeHibernate", "idle", t).id);
    assert.equal(a.time, "2026-12-01T10:00:00.000Z");
    assert.equal(a.pod, "coder-2");
  });
  it("a failed call holds the transition only under Fail", () => {
    assert.equal(hookVerdict({ ok: true, status: 204 }, "Fail"), "proceed");
    assert.equal(
      hookVerdict({ ok: false, reason: "HTTP 500" }, "Ignore"),
      "proceed-despite-failure",
    );
    assert.equal(hookVerdict({ ok: false, reason: "timed out after 10s" }, "Fail"), "hold");
  });
  it("the URL shown drops credentials, query and fragment", () => {
    assert.equal(
      hookTarget("https://user:s3cret@hooks.example:8443/cocoon?token=abc#x"),
      "https://hooks.example:8443/cocoon",
    );
    assert.equal(hookTarget("not a url"), "(invalid)");
  });
});
