// Vanish backoff: a slot whose pod keeps disappearing right after the engine created it is
// recreated with a growing wait and reported, never in a tight loop. Table tests of the pure
// pieces, the planner's steps and status, and a property: whatever the times at which a
// vanishing pod is looked at, creates are spaced by the schedule.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import type { Plan, PlanStep } from "../../../engine/plan/index.js";
import { deriveStatus } from "../../../engine/plan/status.js";
import { planPass } from "../../../engine/planner/index.js";
import {
  vanishingSlots,
  type SlotCreateLog,
  type SlotCreateRecord,
} from "../../../engine/pods/index.js";
import {
  decideRecreate,
  pruneCreateLog,
  vanishDelayMs,
  VANISH_MAX_DELAY_MS,
  VANISH_REPORT_AFTER,
  VANISH_WINDOW_MS,
} from "../../../engine/pods/vanish.js";
import { EVENT_REASONS } from "../../../engine/spec/constants.js";
import type { CocoonSet, Pod } from "../../../engine/spec/index.js";
import { NOW, cocoonSet, mainPod, subPod } from "./fixtures.js";

const fleet = cocoonSet({}, { replicas: 3 });
const main = mainPod(fleet);
const all = (cs: CocoonSet): Pod[] => [main, subPod(cs, 1), subPod(cs, 2), subPod(cs, 3)];
const without = (pods: Pod[], slot: number): Pod[] =>
  pods.filter((p) => p.metadata?.name !== `demo-${slot}`);

function plan(pods: Pod[], createLog: SlotCreateLog, nowMs = NOW, cs = fleet): Plan {
  return planPass({ cocoonSet: cs, pods, nowMs, createLog });
}

function slotStep(p: Plan, slot: number): PlanStep | undefined {
  return p.steps.find((s) => s.target.role === "sub-agent" && s.target.slot === slot);
}

const log = (entries: [number, SlotCreateRecord][]): SlotCreateLog => new Map(entries);

describe("vanish schedule", () => {
  it("waits 0 s for the first vanish, then 1, 2, 4, 8, 16 s, capped at 30 s", () => {
    assert.deepEqual(
      [0, 1, 2, 3, 4, 5, 6, 7, 8, 50, 5000].map(vanishDelayMs),
      [0, 0, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000, 30000],
    );
  });

  it("the longest wait ends inside the window, so a waiting slot never loses its streak", () => {
    assert.ok(VANISH_MAX_DELAY_MS < VANISH_WINDOW_MS);
  });
});

describe("decideRecreate", () => {
  const table: {
    name: string;
    last?: SlotCreateRecord;
    at: number;
    waitMs: number;
    vanished: number;
  }[] = [
    { name: "never created: at once", at: NOW, waitMs: 0, vanished: 0 },
    {
      name: "lived past the window: an ordinary loss, at once",
      last: { createdMs: NOW - VANISH_WINDOW_MS - 1, vanished: 5 },
      at: NOW,
      waitMs: 0,
      vanished: 0,
    },
    {
      name: "first vanish: at once",
      last: { createdMs: NOW - 100, vanished: 0 },
      at: NOW,
      waitMs: 0,
      vanished: 1,
    },
    {
      name: "second vanish 100 ms after the create: wait the rest of 1 s",
      last: { createdMs: NOW - 100, vanished: 1 },
      at: NOW,
      waitMs: 900,
      vanished: 2,
    },
    {
      name: "fourth vanish 4 s after the create: the 4 s are over",
      last: { createdMs: NOW - 4000, vanished: 3 },
      at: NOW,
      waitMs: 0,
      vanished: 4,
    },
    {
      name: "a create time in the future (another clock): an ordinary loss",
      last: { createdMs: NOW + 5000, vanished: 7 },
      at: NOW,
      waitMs: 0,
      vanished: 0,
    },
  ];
  for (const row of table) {
    it(row.name, () => {
      const d = decideRecreate(row.last, row.at);
      assert.equal(d.waitMs, row.waitMs);
      assert.deepEqual(d.record, { createdMs: row.at, vanished: row.vanished });
    });
  }
});

describe("pruneCreateLog", () => {
  const pods = new Map<number, Pod>([[1, subPod(fleet, 1)]]);
  it("keeps records inside the window, drops those past it and slots above replicas", () => {
    const pruned = pruneCreateLog(
      log([
        [1, { createdMs: NOW - 1000, vanished: 0 }],
        [2, { createdMs: NOW - 1000, vanished: 2 }],
        [3, { createdMs: NOW - VANISH_WINDOW_MS - 1, vanished: 4 }],
        [9, { createdMs: NOW - 1000, vanished: 1 }],
      ]),
      pods,
      3,
      NOW,
    );
    assert.deepEqual([...pruned.log.keys()], [1, 2]);
    assert.equal(pruned.recheckMs, undefined, "no present pod has a streak to clear");
  });

  it("asks for a recheck when a present pod with a streak will outlive the window", () => {
    const pruned = pruneCreateLog(
      log([[1, { createdMs: NOW - 10_000, vanished: 3 }]]),
      pods,
      3,
      NOW,
    );
    assert.equal(pruned.recheckMs, VANISH_WINDOW_MS - 10_000 + 1);
  });

  it("vanishingSlots lists the streaks long enough to report, ascending", () => {
    assert.deepEqual(
      vanishingSlots(
        log([
          [7, { createdMs: NOW, vanished: VANISH_REPORT_AFTER + 2 }],
          [2, { createdMs: NOW, vanished: VANISH_REPORT_AFTER }],
          [3, { createdMs: NOW, vanished: VANISH_REPORT_AFTER - 1 }],
        ]),
      ),
      [2, 7],
    );
  });
});

describe("the planner with a create log", () => {
  it("a slot that was never created, or lost its pod once, is created at once", () => {
    const p = plan(without(all(fleet), 2), log([[2, { createdMs: NOW - 500, vanished: 0 }]]));
    const step = slotStep(p, 2);
    assert.equal(step?.decision, "create");
    assert.deepEqual(step?.createRecord, { createdMs: NOW, vanished: 1 });
    assert.deepEqual(
      step?.actions.map((a) => a.kind),
      ["create-pod"],
      "no report for a single vanish",
    );
  });

  it("a slot in a streak waits: no create, a wait step, and the pass requeues after it", () => {
    const p = plan(without(all(fleet), 2), log([[2, { createdMs: NOW - 300, vanished: 2 }]]));
    const step = slotStep(p, 2);
    assert.equal(step?.decision, "wait-vanished");
    assert.equal(step?.waitMs, 2000 - 300);
    assert.deepEqual(step?.actions, []);
    assert.equal(p.mutatesPods, false);
    assert.equal(p.requeueAfterMs, 1700);
  });

  it("from the third vanish in a row the create carries a Warning event", () => {
    const p = plan(without(all(fleet), 3), log([[3, { createdMs: NOW - 2000, vanished: 2 }]]));
    const step = slotStep(p, 3);
    assert.equal(step?.decision, "create");
    assert.deepEqual(step?.createRecord, { createdMs: NOW, vanished: 3 });
    const event = step?.actions[1];
    assert.deepEqual(event, {
      kind: "event",
      type: "Warning",
      reason: EVENT_REASONS.subAgentPodVanishing,
      message: `slot 3: pod demo-3 vanished 3 times in a row within ${VANISH_WINDOW_MS / 1000} s of its creation; recreating it with backoff`,
    });
  });

  it("the plan hands back the pruned log; the records of planned creates travel on the steps", () => {
    const p = plan(
      without(all(fleet), 1),
      log([
        [1, { createdMs: NOW - VANISH_WINDOW_MS - 5, vanished: 3 }],
        [2, { createdMs: NOW - 10, vanished: 0 }],
      ]),
    );
    assert.deepEqual([...p.createLog], [[2, { createdMs: NOW - 10, vanished: 0 }]]);
    assert.deepEqual(slotStep(p, 1)?.createRecord, { createdMs: NOW, vanished: 0 });
  });

  it("a pod the engine deletes itself (a rebuild) drops the slot's record: no vanish counted", () => {
    const cs = cocoonSet({}, { replicas: 3 });
    const failedPod = subPod(cs, 2);
    failedPod.status = { ...failedPod.status, phase: "Failed" };
    const pods = [...without(all(cs), 2), failedPod];
    const p = plan(pods, log([[2, { createdMs: NOW - 500, vanished: 2 }]]), NOW, cs);
    assert.equal(slotStep(p, 2)?.decision, "rebuild");
    assert.equal(p.createLog.has(2), false);
    const next = plan(without(all(cs), 2), p.createLog, NOW + 10, cs);
    assert.deepEqual(slotStep(next, 2)?.createRecord, { createdMs: NOW + 10, vanished: 0 });
  });

  it("without a create log every missing slot is created at once, as before", () => {
    const p = planPass({ cocoonSet: fleet, pods: [main], nowMs: NOW });
    assert.deepEqual(
      [1, 2, 3].map((s) => slotStep(p, s)?.decision),
      ["create", "create", "create"],
    );
  });
});

describe("status: the Degraded condition", () => {
  const status = (cs: CocoonSet, pods: Pod[], createLog: SlotCreateLog, nowMs = NOW) =>
    plan(pods, createLog, nowMs, cs).status;

  it("is True, naming the slots, while a streak is long enough to report", () => {
    const s = status(
      fleet,
      without(all(fleet), 2),
      log([[2, { createdMs: NOW - 100, vanished: VANISH_REPORT_AFTER }]]),
    );
    const degraded = s?.conditions?.find((c) => c.type === "Degraded");
    assert.equal(degraded?.status, "True");
    assert.equal(degraded?.reason, "PodsVanishing");
    assert.match(degraded?.message ?? "", /slot\(s\) 2 vanish right after creation/);
    assert.equal(s?.phase, "Scaling");
  });

  it("is absent for a fleet that never had a streak", () => {
    const s = deriveStatus({ cocoonSet: fleet, pods: all(fleet), nowMs: NOW });
    assert.equal(
      s.conditions?.some((c) => c.type === "Degraded"),
      false,
    );
  });

  it("turns False once the pod outlived the window, and the pass asked to look again then", () => {
    const record = { createdMs: NOW, vanished: VANISH_REPORT_AFTER };
    const during = plan(all(fleet), log([[2, record]]), NOW + 1000);
    assert.equal(during.requeueAfterMs, VANISH_WINDOW_MS - 1000 + 1);
    const degradedNow = during.status?.conditions?.find((c) => c.type === "Degraded");
    assert.equal(degradedNow?.status, "True");
    const reported: CocoonSet = { ...fleet, status: during.status };
    const later = plan(all(fleet), during.createLog, NOW + VANISH_WINDOW_MS + 1, reported);
    assert.equal(later.createLog.size, 0);
    const degraded = later.status?.conditions?.find((c) => c.type === "Degraded");
    assert.equal(degraded?.status, "False");
    assert.equal(degraded?.reason, "PodsStable");
  });
});

describe("property: a pod that always vanishes is recreated on the schedule, never faster", () => {
  it("whatever the times of the passes, creates of one slot are spaced by vanishDelayMs", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 1, max: 7000 }), { minLength: 5, maxLength: 80 }),
        (gaps) => {
          // Each pass sees slot 1 missing (its pod vanished right after every create).
          let createLog: SlotCreateLog = new Map();
          let now = NOW;
          const creates: { at: number; vanished: number }[] = [];
          for (const gap of gaps) {
            now += gap;
            const p = plan(without(all(fleet), 1), createLog, now);
            const step = slotStep(p, 1);
            const next = new Map(p.createLog);
            if (step?.decision === "create") {
              const record = step.createRecord as SlotCreateRecord;
              creates.push({ at: now, vanished: record.vanished });
              next.set(1, record);
            } else {
              assert.equal(step?.decision, "wait-vanished");
              assert.ok((step?.waitMs ?? 0) > 0);
            }
            createLog = next;
          }
          for (let i = 1; i < creates.length; i++) {
            const spacing = creates[i].at - creates[i - 1].at;
            if (spacing > VANISH_WINDOW_MS) continue; // the streak legitimately restarts
            assert.ok(
              spacing >= vanishDelayMs(creates[i].vanished),
              `create ${i} came ${spacing} ms after the previous one, streak ${creates[i].vanished}`,
            );
            assert.equal(creates[i].vanished, creates[i - 1].vanished + 1);
          }
        },
      ),
    );
  });

  it("passes 10 ms apart for 10 s create the slot 5 times, not 1000", () => {
    let createLog: SlotCreateLog = new Map();
    let creates = 0;
    for (let t = 0; t <= 10_000; t += 10) {
      const p = plan(without(all(fleet), 1), createLog, NOW + t);
      const step = slotStep(p, 1);
      const next = new Map(p.createLog);
      if (step?.decision === "create") {
        creates++;
        next.set(1, step.createRecord as SlotCreateRecord);
      }
      createLog = next;
    }
    // t = 0 (first create), 10 ms (first vanish: at once), then 1 s, 2 s and 4 s after the
    // previous create: 1.01 s, 3.01 s, 7.01 s; the next would be at 15.01 s.
    assert.equal(creates, 5);
  });
});
