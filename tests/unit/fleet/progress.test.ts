// The progress deadline (engine/plan/progress.ts): what counts as movement, when the
// deadline is exceeded, what the condition and the Warning say, and how a planned pass
// carries it (the fleet stuck behind a pod that holds a slot's name).
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  atRest,
  deadlineWarning,
  judgeProgress,
  progressDeadlineSeconds,
  progressSignature,
  storedDeadlineRecheckMs,
  PROGRESS_DEADLINE_EXCEEDED,
} from "../../../engine/plan/progress.js";
import { deriveStatus } from "../../../engine/plan/status.js";
import { planPass } from "../../../engine/planner/plan.js";
import type { CocoonSetStatus } from "../../../engine/spec/generated/types.js";
import type { Pod } from "../../../engine/spec/index.js";
import { NOW, cocoonSet, mainPod, subPod } from "./fixtures.js";

const at = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
const MIN = 60_000;

const scaling = (over: Partial<CocoonSetStatus> = {}): CocoonSetStatus => ({
  observedGeneration: 3,
  phase: "Scaling",
  readyAgents: 2,
  desiredAgents: 3,
  readyToolboxes: 0,
  desiredToolboxes: 0,
  agents: [
    { slot: 0, role: "main", podName: "demo-0", phase: "Running" },
    { slot: 1, role: "sub-agent", podName: "demo-1", phase: "Running" },
  ],
  ...over,
});

test("the phases at rest are Running and Suspended only", () => {
  const table: [string | undefined, boolean][] = [
    ["Running", true],
    ["Suspended", true],
    ["Pending", false],
    ["Scaling", false],
    ["Suspending", false],
    ["Waking", false],
    ["Migrating", false],
    ["Failed", false],
    [undefined, false],
  ];
  for (const [phase, rest] of table) assert.equal(atRest(phase), rest, String(phase));
});

test("the deadline is the spec's, else 600 s", () => {
  assert.equal(progressDeadlineSeconds(cocoonSet()), 600);
  assert.equal(progressDeadlineSeconds(cocoonSet({ progressDeadlineSeconds: 30 })), 30);
});

test("movement: generation, phase, counts and members move; condition messages do not", () => {
  const base = scaling();
  const table: [string, CocoonSetStatus, boolean][] = [
    ["same", scaling(), false],
    ["new generation", scaling({ observedGeneration: 4 }), true],
    ["phase", scaling({ phase: "Pending" }), true],
    ["ready count", scaling({ readyAgents: 3 }), true],
    [
      "a member's phase",
      scaling({
        agents: [
          { slot: 0, role: "main", podName: "demo-0", phase: "Running" },
          { slot: 1, role: "sub-agent", podName: "demo-1", phase: "Pending" },
        ],
      }),
      true,
    ],
    [
      "a VM id",
      scaling({
        agents: [
          { slot: 0, role: "main", podName: "demo-0", phase: "Running", vmID: "v2" },
          { slot: 1, role: "sub-agent", podName: "demo-1", phase: "Running" },
        ],
      }),
      true,
    ],
    [
      "a condition message only",
      scaling({
        conditions: [
          {
            type: "SlotBlocked",
            status: "True",
            reason: "ForeignPod",
            message: "another",
            lastTransitionTime: at(NOW),
          },
        ],
      }),
      false,
    ],
  ];
  for (const [name, next, moved] of table)
    assert.equal(progressSignature(base) !== progressSignature(next), moved, name);
});

test("judgeProgress: the clock, the deadline and the recheck, by table", () => {
  const since = at(NOW - 11 * MIN);
  const table: {
    name: string;
    previous: CocoonSetStatus | undefined;
    next: CocoonSetStatus;
    deadline: number;
    want: { last?: string; exceeded: boolean; recheckMs?: number };
  }[] = [
    {
      name: "no stored status: starts now",
      previous: undefined,
      next: scaling(),
      deadline: 600,
      want: { last: at(NOW), exceeded: false, recheckMs: 600_000 },
    },
    {
      name: "stored without a time (at rest before): starts now",
      previous: scaling({ phase: "Running" }),
      next: scaling(),
      deadline: 600,
      want: { last: at(NOW), exceeded: false, recheckMs: 600_000 },
    },
    {
      name: "no movement for 11 minutes, deadline 10: exceeded",
      previous: scaling({ lastProgressTime: since }),
      next: scaling(),
      deadline: 600,
      want: { last: since, exceeded: true },
    },
    {
      name: "no movement for 11 minutes, deadline 20: 9 minutes left",
      previous: scaling({ lastProgressTime: since }),
      next: scaling(),
      deadline: 1200,
      want: { last: since, exceeded: false, recheckMs: 9 * MIN },
    },
    {
      name: "movement after 11 minutes: the clock starts again",
      previous: scaling({ lastProgressTime: since }),
      next: scaling({ readyAgents: 3, phase: "Pending" }),
      deadline: 600,
      want: { last: at(NOW), exceeded: false, recheckMs: 600_000 },
    },
    {
      name: "at rest: no time kept, no deadline",
      previous: scaling({ lastProgressTime: since }),
      next: scaling({ phase: "Running", readyAgents: 3 }),
      deadline: 600,
      want: { exceeded: false },
    },
    {
      name: "a stored time in the future counts as now",
      previous: scaling({ lastProgressTime: at(NOW + 5 * MIN) }),
      next: scaling(),
      deadline: 600,
      want: { last: at(NOW + 5 * MIN), exceeded: false, recheckMs: 600_000 },
    },
  ];
  for (const row of table) {
    const v = judgeProgress({
      previous: row.previous,
      next: row.next,
      deadlineSeconds: row.deadline,
      waitingFor: ["slot 2: pod demo-2 already exists"],
      nowMs: NOW,
    });
    assert.equal(v.lastProgressTime, row.want.last, row.name);
    assert.equal(v.exceeded !== undefined, row.want.exceeded, row.name);
    assert.equal(v.recheckMs, row.want.recheckMs, row.name);
    if (v.exceeded) assert.match(v.exceeded, /slot 2: pod demo-2 already exists/, row.name);
  }
});

test("the message names the causes, at most five, and stays the same from pass to pass", () => {
  const causes = ["a", "b", "c", "d", "e", "f", "g", "a"];
  const v = judgeProgress({
    previous: scaling({ lastProgressTime: at(NOW - 11 * MIN) }),
    next: scaling(),
    deadlineSeconds: 600,
    waitingFor: causes,
    nowMs: NOW,
  });
  assert.equal(
    v.exceeded,
    `no progress since ${at(NOW - 11 * MIN)} (progressDeadlineSeconds 600), phase Scaling: waiting for: a; b; c; d; e; and 2 more`,
  );
  const later = judgeProgress({
    previous: scaling({ lastProgressTime: at(NOW - 11 * MIN) }),
    next: scaling(),
    deadlineSeconds: 600,
    waitingFor: causes,
    nowMs: NOW + 5 * MIN,
  });
  assert.equal(later.exceeded, v.exceeded);
});

test("deriveStatus: Progressing turns False (ProgressDeadlineExceeded) only past the deadline", () => {
  const cs = cocoonSet({}, { replicas: 2 });
  const pods: Pod[] = [mainPod(cs), subPod(cs, 1)];
  const first = deriveStatus({ cocoonSet: cs, pods, nowMs: NOW, waitingFor: ["x"] });
  assert.equal(first.phase, "Scaling");
  assert.equal(first.lastProgressTime, at(NOW));
  const progressing = (s: CocoonSetStatus) => s.conditions?.find((c) => c.type === "Progressing");
  assert.equal(progressing(first)?.reason, "Reconciling");
  const stored = { ...cs, status: first };
  const before = deriveStatus({ cocoonSet: stored, pods, nowMs: NOW + 9 * MIN, waitingFor: ["x"] });
  assert.equal(progressing(before)?.reason, "Reconciling");
  const after = deriveStatus({ cocoonSet: stored, pods, nowMs: NOW + 10 * MIN, waitingFor: ["x"] });
  assert.deepEqual(
    { ...progressing(after), lastTransitionTime: undefined },
    {
      type: "Progressing",
      status: "False",
      reason: PROGRESS_DEADLINE_EXCEEDED,
      message: `no progress since ${at(NOW)} (progressDeadlineSeconds 600), phase Scaling: waiting for: x`,
      observedGeneration: 3,
      lastTransitionTime: undefined,
    },
  );
  assert.equal(deadlineWarning(stored.status, after), progressing(after)?.message);
  assert.equal(deadlineWarning(after, after), undefined, "said once");
});

test("a converged fleet keeps no progress time and never exceeds", () => {
  const cs = cocoonSet({}, { replicas: 1 });
  const pods = [mainPod(cs), subPod(cs, 1)];
  const s = deriveStatus({ cocoonSet: cs, pods, nowMs: NOW });
  assert.equal(s.phase, "Running");
  assert.equal(s.lastProgressTime, undefined);
  assert.equal(storedDeadlineRecheckMs({ ...cs, status: s }, NOW + 60 * MIN), undefined);
});

test("planPass: a slot held by another pod turns into ProgressDeadlineExceeded naming the holder, with one Warning", () => {
  const cs = cocoonSet({ progressDeadlineSeconds: 120 }, { replicas: 2 });
  const holder: Pod = {
    metadata: { name: "demo-2", namespace: "team", uid: "intruder" },
    spec: { containers: [] },
    status: { phase: "Running" },
  };
  const pods = [mainPod(cs), subPod(cs, 1), holder];
  const first = planPass({ cocoonSet: cs, pods, nowMs: NOW });
  assert.equal(first.status?.lastProgressTime, at(NOW));
  assert.equal(first.steps.filter((s) => s.decision === "stalled").length, 0);
  // Looked at again when the deadline runs out, even though only the blocked poll asks.
  const stored = { ...cs, status: first.status };
  const mid = planPass({ cocoonSet: stored, pods, nowMs: NOW + 115_000 });
  assert.equal(mid.requeueAfterMs, 5_000);
  const late = planPass({ cocoonSet: stored, pods, nowMs: NOW + 121_000 });
  const progressing = late.status?.conditions?.find((c) => c.type === "Progressing");
  assert.equal(progressing?.status, "False");
  assert.equal(progressing?.reason, PROGRESS_DEADLINE_EXCEEDED);
  assert.match(progressing?.message ?? "", /slot 2: pod demo-2 already exists/);
  const warnings = late.steps.filter((s) => s.decision === "stalled");
  assert.equal(warnings.length, 1);
  assert.deepEqual(
    warnings[0].actions.map((a) => (a.kind === "event" ? [a.type, a.reason] : a.kind)),
    [["Warning", PROGRESS_DEADLINE_EXCEEDED]],
  );
  // Once stored, the next pass neither writes nor warns again.
  const again = planPass({ cocoonSet: { ...cs, status: late.status }, pods, nowMs: NOW + 200_000 });
  assert.equal(again.status, undefined);
  assert.equal(again.steps.filter((s) => s.decision === "stalled").length, 0);
});
