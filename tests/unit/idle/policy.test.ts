// The idle policy's decisions (engine/idle/policy.ts): tables for each rule, and properties
// that hold for any fleet: nothing used within `after` is hibernated, a wake always rests on
// activity after the hibernation, and no policy leaves nothing of its own behind.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { planIdle, type IdleInput, type IdleMember } from "../../../engine/idle/index.js";

const T0 = Date.parse("2026-12-01T12:00:00Z");
const at = (minutes: number): Date => new Date(T0 + minutes * 60_000);
const AFTER = 30 * 60_000;
const NOW = at(100);

const main = (activity: number, state: IdleMember["state"] = "running"): IdleMember => ({
  key: "0",
  kind: "main",
  state,
  lastActivity: at(activity),
});
const sub = (
  key: string,
  activity: number,
  state: IdleMember["state"] = "running",
  idleSince?: number,
): IdleMember => ({
  key,
  kind: "sub-agent",
  state,
  lastActivity: at(activity),
  idleSince: idleSince === undefined ? undefined : at(idleSince),
});

const input = (members: IdleMember[], extra: Partial<IdleInput> = {}): IdleInput => ({
  afterMs: AFTER,
  now: NOW,
  suspended: false,
  members,
  ...extra,
});

describe("planIdle: members", () => {
  const cases: {
    name: string;
    in: IdleInput;
    hibernate: string[];
    wake: string[];
    fleet: string;
    next?: number;
  }[] = [
    {
      name: "an idle sub-agent is hibernated, the busy main agent is not",
      in: input([main(95), sub("1", 60), sub("2", 90)]),
      hibernate: ["1"],
      wake: [],
      fleet: "none",
      next: 120, // sub 2 goes idle at 90 + 30
    },
    {
      name: "exactly `after` without activity is idle",
      in: input([main(99), sub("1", 70)]),
      hibernate: ["1"],
      wake: [],
      fleet: "none",
      next: 129,
    },
    {
      name: "the main agent alone idle is never hibernated on its own",
      in: input([main(10), sub("1", 99)]),
      hibernate: [],
      wake: [],
      fleet: "none",
      next: 129,
    },
    {
      name: "a hibernated member used since its hibernation wakes",
      in: input([
        main(99),
        sub("1", 98, "idle-hibernated", 80),
        sub("2", 50, "idle-hibernated", 80),
      ]),
      hibernate: [],
      wake: ["1"],
      fleet: "none",
      next: 129,
    },
    {
      name: "a member someone else holds is neither hibernated nor woken",
      in: input([main(99), sub("1", 10, "held"), sub("2", 99, "held")]),
      hibernate: [],
      wake: [],
      fleet: "none",
      next: 129,
    },
    {
      name: "every member idle: the fleet is suspended whole, not member by member",
      in: input([
        main(60),
        sub("1", 20),
        sub("2", 65, "idle-hibernated", 66),
        sub("3", 10, "held"),
      ]),
      hibernate: [],
      wake: [],
      fleet: "suspend",
    },
    {
      name: "a member being built keeps the fleet awake",
      in: input([main(60), sub("1", 20), sub("2", 0, "absent")]),
      hibernate: ["1"],
      wake: [],
      fleet: "none",
    },
    {
      name: "an idle-suspended fleet wakes on activity after its suspension",
      in: input([main(60), sub("1", 99, "idle-hibernated", 80)], { fleetIdleSince: at(90) }),
      hibernate: [],
      wake: [],
      fleet: "wake",
    },
    {
      name: "an idle-suspended fleet with no activity since stays asleep",
      in: input([main(60), sub("1", 70)], { fleetIdleSince: at(90) }),
      hibernate: [],
      wake: [],
      fleet: "none",
    },
    {
      name: "a fleet the spec suspends is the spec's",
      in: input([main(0), sub("1", 0)], { suspended: true }),
      hibernate: [],
      wake: [],
      fleet: "none",
    },
    {
      name: "without a policy, what it hibernated wakes",
      in: input([main(0), sub("1", 0, "idle-hibernated", 40), sub("2", 0)], {
        afterMs: undefined,
        fleetIdleSince: at(50),
      }),
      hibernate: [],
      wake: ["1"],
      fleet: "wake",
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const d = planIdle(c.in);
      assert.deepEqual(
        d.hibernate.map((m) => m.key),
        c.hibernate,
      );
      assert.deepEqual(
        d.wake.map((m) => m.key),
        c.wake,
      );
      assert.equal(d.fleet.kind, c.fleet);
      if (c.next !== undefined)
        assert.equal(d.nextCheckAt?.toISOString(), at(c.next).toISOString());
    });
  }

  it("a member whose activity is unknown counts as used now", () => {
    const d = planIdle(input([main(100), { key: "1", kind: "toolbox", state: "running" }]));
    assert.deepEqual(d.hibernate, []);
    assert.equal(d.nextCheckAt?.toISOString(), new Date(NOW.getTime() + AFTER).toISOString());
  });
});

const memberArb = (key: string, kind: IdleMember["kind"]): fc.Arbitrary<IdleMember> =>
  fc.record({
    key: fc.constant(key),
    kind: fc.constant(kind),
    state: fc.constantFrom<IdleMember["state"]>("running", "idle-hibernated", "held", "absent"),
    lastActivity: fc.option(fc.integer({ min: 0, max: 100 }).map(at), { nil: undefined }),
    idleSince: fc.option(fc.integer({ min: 0, max: 100 }).map(at), { nil: undefined }),
  });

const inputArb: fc.Arbitrary<IdleInput> = fc
  .record({
    main: memberArb("0", "main"),
    subs: fc.array(fc.integer({ min: 0, max: 9 }), { maxLength: 6 }),
    kinds: fc.array(fc.constantFrom<IdleMember["kind"]>("sub-agent", "toolbox"), {
      minLength: 6,
      maxLength: 6,
    }),
    others: fc.array(memberArb("x", "sub-agent"), { minLength: 6, maxLength: 6 }),
    afterMin: fc.option(fc.integer({ min: 1, max: 120 }), { nil: undefined }),
    suspended: fc.boolean(),
    fleetIdleSince: fc.option(fc.integer({ min: 0, max: 100 }).map(at), { nil: undefined }),
  })
  .map(({ main, subs, kinds, others, afterMin, suspended, fleetIdleSince }) => ({
    afterMs: afterMin === undefined ? undefined : afterMin * 60_000,
    now: NOW,
    suspended,
    fleetIdleSince,
    members: [
      main,
      ...[...new Set(subs)].map((n, i) => ({ ...others[i], key: String(n + 1), kind: kinds[i] })),
    ],
  }));

describe("planIdle: properties", () => {
  it("hibernates only running, non-main members unused for `after`", () => {
    fc.assert(
      fc.property(inputArb, (inp) => {
        for (const h of planIdle(inp).hibernate) {
          const m = inp.members.find((x) => x.key === h.key);
          assert.ok(m && m.state === "running" && m.kind !== "main");
          assert.ok(inp.afterMs !== undefined);
          assert.ok(NOW.getTime() - (m.lastActivity ?? NOW).getTime() >= inp.afterMs);
        }
      }),
    );
  });

  it("wakes a member only for activity after its hibernation, or when the policy is gone", () => {
    fc.assert(
      fc.property(inputArb, (inp) => {
        for (const w of planIdle(inp).wake) {
          const m = inp.members.find((x) => x.key === w.key);
          assert.equal(m?.state, "idle-hibernated");
          if (inp.afterMs !== undefined)
            assert.ok(m.lastActivity && m.idleSince && m.lastActivity > m.idleSince);
        }
      }),
    );
  });

  it("never hibernates and wakes one member at once, nor touches a fleet the spec suspends", () => {
    fc.assert(
      fc.property(inputArb, (inp) => {
        const d = planIdle(inp);
        const woken = new Set(d.wake.map((m) => m.key));
        assert.ok(d.hibernate.every((m) => !woken.has(m.key)));
        if (inp.suspended && inp.afterMs !== undefined)
          assert.deepEqual(d, { hibernate: [], wake: [], fleet: { kind: "none" } });
      }),
    );
  });

  it("looks again when the next member goes idle: by then it is hibernated or the fleet suspended", () => {
    fc.assert(
      fc.property(inputArb, (inp) => {
        const d = planIdle(inp);
        if (!d.nextCheckAt) return;
        assert.ok(d.nextCheckAt > inp.now);
        // Nobody active since: an activity unknown at `now` was, as the policy counts it, `now`.
        const members = inp.members.map((m) => ({ ...m, lastActivity: m.lastActivity ?? inp.now }));
        const later = planIdle({ ...inp, members, now: d.nextCheckAt });
        assert.ok(later.hibernate.length > 0 || later.fleet.kind === "suspend");
      }),
      { numRuns: 2000 },
    );
  });
});
