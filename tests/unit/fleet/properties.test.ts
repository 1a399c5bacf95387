// Property tests of the planner, driven through the pure simulator:
//  1. fixpoint: apply the plan, let pods become Ready, re-plan: it converges and then plans nothing;
//  2. ownership: no plan ever deletes or annotates a pod the CocoonSet does not control;
//  3. attempt limit: whatever the order of failures (and of failed writes or deletes), no slot
//     is rebuilt more than 4 times;
//  4. read only: a pass plans from frozen objects (the controller's cache, shared, uncopied)
//     and never writes to them;
//  5. kept results: a pass from frozen objects, an unchanged one kept from pass to pass as the
//     cache keeps it (engine/spec/frozen.ts keeps what was derived from it), plans exactly as
//     a pass from fresh copies.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import type { Plan } from "../../../engine/plan/index.js";
import { planPass } from "../../../engine/planner/index.js";
import { buildAgentPod, isOwnedPod, isTerminal } from "../../../engine/pods/index.js";
import { readRebuildHistory } from "../../../engine/pods/rebuild-history.js";
import { MAX_REBUILD_ATTEMPTS } from "../../../engine/spec/constants.js";
import { ANNOTATIONS, type CocoonSet, type Pod } from "../../../engine/spec/index.js";
import { applyPlanToPods } from "../../../engine/execute/simulate.js";
import { attributedView, memberVm } from "../../../engine/attribution/index.js";
import type { VMRecord } from "../../../engine/spec/generated/types.js";
import { frozen } from "../../../engine/spec/index.js";
import {
  NOW,
  cocoonSet,
  deadLettered,
  failed,
  live,
  mainPod,
  subPod,
  toolbox,
  toolboxPod,
  withHistory,
} from "./fixtures.js";

const TOOLBOX_NAMES = ["cache", "db", "web"];

interface SpecShape {
  replicas: number;
  image: string;
  os: "linux" | "windows";
  toolboxes: string[];
}

const specArb: fc.Arbitrary<SpecShape> = fc.record({
  replicas: fc.integer({ min: 0, max: 8 }),
  image: fc.constantFrom("ghcr.io/acme/agent:1", "ghcr.io/acme/agent:2"),
  os: fc.constantFrom("linux" as const, "windows" as const),
  toolboxes: fc.subarray(TOOLBOX_NAMES),
});

function toCocoonSet(shape: SpecShape): CocoonSet {
  return cocoonSet(
    { toolboxes: shape.toolboxes.map((n) => toolbox(n)) },
    { replicas: shape.replicas, image: shape.image, os: shape.os },
  );
}

type MemberState = "absent" | "ready" | "pending" | "failed" | "dead-letter";
const memberState = fc.constantFrom<MemberState>(
  "absent",
  "ready",
  "pending",
  "failed",
  "dead-letter",
);

function inState(pod: Pod, state: MemberState): Pod | undefined {
  switch (state) {
    case "absent":
      return undefined;
    case "ready":
      return pod;
    case "pending":
      return { ...pod, status: { phase: "Pending" } };
    case "failed":
      return failed(pod);
    case "dead-letter":
      return deadLettered(failed(pod));
  }
}

/** The kubelet's part: every owned pod that is not terminal becomes Running and Ready. */
function becomeReady(cs: CocoonSet, pods: readonly Pod[]): Pod[] {
  return pods.map((p) =>
    isOwnedPod(cs, p) && !isTerminal(p)
      ? { ...p, status: { phase: "Running", conditions: [{ type: "Ready", status: "True" }] } }
      : p,
  );
}

/**
 * The fleet after `plan` was carried out on `pods`: the status the pass writes is the next
 * pass's, record and counts alike, and the pods it left become Ready.
 */
function afterPass(
  cs: CocoonSet,
  pods: readonly Pod[],
  plan: Plan,
  nowMs: number,
): { cs: CocoonSet; pods: Pod[] } {
  const result = applyPlanToPods(pods, plan, { nowMs });
  const next = storeHistory(plan.status ? { ...cs, status: plan.status } : cs, result.historyValue);
  return { cs: next, pods: becomeReady(next, result.pods) };
}

/** `status.vms` naming each of `pods` (`<name>-<member>`) as the member its name says. */
function recordOf(cs: CocoonSet, pods: readonly Pod[]): Record<string, VMRecord> {
  const prefix = `${cs.metadata.name}-`;
  return Object.fromEntries(
    pods.map((p) => {
      const member = (p.metadata?.name ?? "").slice(prefix.length);
      return [member, { vm: memberVm(cs, member), podUID: p.metadata?.uid ?? "" }];
    }),
  );
}

function hasWork(plan: Plan): boolean {
  return plan.steps.some((s) => s.actions.length > 0) || plan.requeueAfterMs !== undefined;
}

function storeHistory(cs: CocoonSet, value: string | undefined): CocoonSet {
  return value === undefined ? cs : withHistory(cs, value);
}

describe("planner properties", () => {
  it("applying plans converges to a fixpoint that plans nothing more", () => {
    const historyArb = fc.dictionary(
      fc.integer({ min: 1, max: 10 }).map(String),
      fc.record({
        count: fc.integer({ min: 0, max: 5 }),
        agoMs: fc.integer({ min: 0, max: 40_000 }),
      }),
    );
    fc.assert(
      fc.property(
        specArb,
        specArb,
        fc.constantFrom<MemberState>("absent", "ready", "pending"),
        fc.array(memberState, { minLength: 8, maxLength: 8 }),
        fc.array(memberState, { minLength: 3, maxLength: 3 }),
        historyArb,
        (target, previous, mainState, subStates, toolboxStates, history) => {
          const before = toCocoonSet(previous);
          let cs = withHistory(
            toCocoonSet(target),
            JSON.stringify(
              Object.fromEntries(
                Object.entries(history).map(([slot, e]) => [
                  slot,
                  { count: e.count, lastDeleted: new Date(NOW - e.agoMs).toISOString() },
                ]),
              ),
            ),
          );
          let pods: Pod[] = [];
          const main = inState(mainPod(before), mainState);
          if (main) pods.push(main);
          for (let slot = 1; slot <= previous.replicas; slot++) {
            const pod = inState(subPod(before, slot), subStates[slot - 1]);
            if (pod) pods.push(pod);
          }
          previous.toolboxes.forEach((name, i) => {
            const pod = inState(toolboxPod(before, toolbox(name)), toolboxStates[i]);
            if (pod) pods.push(pod);
          });

          let now = NOW;
          let plan = planPass({ cocoonSet: cs, pods, nowMs: now });
          for (let pass = 0; pass < 30 && hasWork(plan); pass++) {
            const result = applyPlanToPods(pods, plan, { nowMs: now });
            cs = storeHistory(cs, result.historyValue);
            pods = becomeReady(cs, result.pods);
            now += 31_000;
            plan = planPass({ cocoonSet: cs, pods, nowMs: now });
          }
          assert.equal(hasWork(plan), false, `not converged: ${JSON.stringify(plan.steps)}`);
          const again = planPass({ cocoonSet: cs, pods, nowMs: now + 60_000 });
          assert.deepEqual(again.steps, []);

          // The fixpoint is the fleet the spec asks for.
          const names = pods.map((p) => p.metadata?.name).sort();
          const expected = [
            "demo-0",
            ...Array.from({ length: target.replicas }, (_, i) => `demo-${i + 1}`),
            ...target.toolboxes.map((n) => `demo-${n}`),
          ].sort();
          assert.deepEqual(names, expected);
          for (const pod of pods) {
            const parked = pod.metadata?.annotations?.[ANNOTATIONS.deadLetter] === "true";
            assert.ok(parked || !isTerminal(pod), `${pod.metadata?.name} left terminal`);
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it("never deletes or annotates a pod the CocoonSet does not control", () => {
    const foreignArb = fc.record({
      name: fc.constantFrom(
        "demo-0",
        "demo-1",
        "demo-3",
        "demo-9",
        "demo-web",
        "demo-db",
        "other-1",
      ),
      role: fc.constantFrom("main", "sub-agent", "toolbox"),
      owner: fc.constantFrom("someone-else", "none", "not-controller"),
      failed: fc.boolean(),
    });
    fc.assert(
      fc.property(
        specArb,
        fc.array(memberState, { minLength: 8, maxLength: 8 }),
        fc.array(foreignArb, { maxLength: 6 }),
        (target, subStates, foreignShapes) => {
          const cs = toCocoonSet(target);
          const template = live(buildAgentPod(cs, 1));
          const foreign: Pod[] = foreignShapes.map((f, i) => {
            const pod = structuredClone(template);
            const ref = { ...pod.metadata!.ownerReferences![0] };
            pod.metadata = {
              ...pod.metadata,
              name: `${f.name}`,
              uid: `foreign-${i}`,
              labels: {
                ...pod.metadata?.labels,
                "cocoonset.cocoonstack.io/role": f.role,
                "cocoonset.cocoonstack.io/slot": f.name.split("-")[1],
              },
              ownerReferences:
                f.owner === "none"
                  ? []
                  : f.owner === "not-controller"
                    ? [{ ...ref, controller: false }]
                    : [{ ...ref, uid: "someone-else" }],
            };
            return f.failed ? failed(pod) : pod;
          });
          const taken = new Set(foreign.map((p) => p.metadata?.name));
          let pods: Pod[] = [...foreign];
          if (!taken.has("demo-0")) pods.push(mainPod(cs));
          for (let slot = 1; slot <= 8; slot++) {
            const pod = inState(subPod(cs, slot), subStates[slot - 1]);
            if (pod && !taken.has(pod.metadata?.name)) pods.push(pod);
          }
          let state = cs;
          let now = NOW;
          for (let pass = 0; pass < 6; pass++) {
            const plan = planPass({ cocoonSet: state, pods, nowMs: now });
            const owned = new Set(
              pods.filter((p) => isOwnedPod(cs, p)).map((p) => p.metadata?.uid),
            );
            for (const action of plan.steps.flatMap((s) => s.actions)) {
              if (action.kind === "delete-pod" || action.kind === "annotate-pod") {
                assert.ok(owned.has(action.uid), `${action.kind} of ${action.name}/${action.uid}`);
              }
            }
            const result = applyPlanToPods(pods, plan, { nowMs: now });
            state = storeHistory(state, result.historyValue);
            pods = becomeReady(cs, result.pods);
            now += 31_000;
          }
          for (const pod of foreign) {
            assert.deepEqual(
              pods.find((p) => p.metadata?.uid === pod.metadata?.uid),
              pod,
              `foreign pod ${pod.metadata?.name} was changed`,
            );
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it("never rebuilds a slot more than 4 times, whatever fails and in what order", () => {
    const roundArb = fc.record({
      failing: fc.array(fc.boolean(), { minLength: 4, maxLength: 4 }),
      advanceMs: fc.integer({ min: 0, max: 40_000 }),
      historyWriteFails: fc.boolean(),
      deleteFails: fc.boolean(),
    });
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 4 }),
        fc.array(roundArb, { minLength: 1, maxLength: 60 }),
        (replicas, rounds) => {
          let cs = cocoonSet({}, { replicas });
          let pods: Pod[] = [mainPod(cs)];
          for (let slot = 1; slot <= replicas; slot++) pods.push(subPod(cs, slot));
          const attempts = new Map<number, number>();
          const deletes = new Map<number, number>();
          let now = NOW;
          for (const round of rounds) {
            pods = pods.map((p) => {
              const slot = Number(p.metadata?.labels?.["cocoonset.cocoonstack.io/slot"]);
              return slot >= 1 && round.failing[slot - 1] ? failed(p) : p;
            });
            const plan = planPass({ cocoonSet: cs, pods, nowMs: now });
            const result = applyPlanToPods(pods, plan, {
              nowMs: now,
              fail: (action, step) => {
                if (step.decision !== "rebuild") return false;
                const slot = step.target.role === "sub-agent" ? step.target.slot : 0;
                if (action.kind === "write-history" && round.historyWriteFails) return true;
                if (action.kind === "write-history") {
                  attempts.set(slot, (attempts.get(slot) ?? 0) + 1);
                }
                if (action.kind === "delete-pod" && round.deleteFails) return true;
                if (action.kind === "delete-pod") deletes.set(slot, (deletes.get(slot) ?? 0) + 1);
                return false;
              },
            });
            for (const step of plan.steps) {
              if (step.decision === "rebuild") {
                assert.ok((step.attempt ?? 0) <= MAX_REBUILD_ATTEMPTS);
              }
            }
            cs = storeHistory(cs, result.historyValue);
            for (const entry of readRebuildHistory(cs).values()) {
              assert.ok(entry.count <= MAX_REBUILD_ATTEMPTS, `history count ${entry.count}`);
            }
            pods = result.pods;
            now += round.advanceMs;
          }
          for (const [slot, n] of attempts) {
            assert.ok(n <= MAX_REBUILD_ATTEMPTS, `slot ${slot} had ${n} recorded rebuilds`);
          }
          for (const [slot, n] of deletes) {
            assert.ok(n <= MAX_REBUILD_ATTEMPTS, `slot ${slot} was deleted ${n} times`);
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it("plans from frozen objects: a pass never writes to the CocoonSet or the pods it reads", () => {
    fc.assert(
      fc.property(
        specArb,
        specArb,
        fc.array(memberState, { minLength: 8, maxLength: 8 }),
        fc.array(memberState, { minLength: 3, maxLength: 3 }),
        (target, previous, subStates, toolboxStates) => {
          const before = toCocoonSet(previous);
          let cs = toCocoonSet(target);
          let pods: Pod[] = [mainPod(before)];
          for (let slot = 1; slot <= previous.replicas; slot++) {
            const pod = inState(subPod(before, slot), subStates[slot - 1]);
            if (pod) pods.push(pod);
          }
          previous.toolboxes.forEach((name, i) => {
            const pod = inState(toolboxPod(before, toolbox(name)), toolboxStates[i]);
            if (pod) pods.push(pod);
          });
          let now = NOW;
          for (let pass = 0; pass < 12; pass++) {
            // As the controller reads them: the cache's objects, frozen; a write to one throws.
            const read = frozen(structuredClone(cs));
            const seen = frozen(structuredClone(pods));
            const plan = planPass({
              cocoonSet: attributedView(read, seen),
              pods: seen,
              nowMs: now,
            });
            ({ cs, pods } = afterPass(cs, seen, plan, now));
            now += 31_000;
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  it("plans from kept frozen objects exactly as from fresh copies, pass after pass", () => {
    const decisions = new Set<string>();
    /** The cache's copy: the object kept from the last pass while its content is the same. */
    const kept = new Map<string, unknown>();
    const cached = <T>(key: string, o: T): T => {
      const json = JSON.stringify(o);
      const hit = kept.get(key) as T | undefined;
      if (hit !== undefined && JSON.stringify(hit) === json) return hit;
      const copy = frozen(structuredClone(o));
      kept.set(key, copy);
      return copy;
    };
    fc.assert(
      fc.property(
        fc.array(specArb, { minLength: 1, maxLength: 3 }),
        fc.array(memberState, { minLength: 8, maxLength: 8 }),
        (specs, subStates) => {
          kept.clear();
          let cs = toCocoonSet(specs[0]);
          let pods: Pod[] = [mainPod(cs)];
          for (let slot = 1; slot <= specs[0].replicas; slot++) {
            const pod = inState(subPod(cs, slot), subStates[slot - 1]);
            if (pod) pods.push(pod);
          }
          // The engine's record names every pod as its member (else each is only a pod that
          // holds a member's name, and nothing is planned for it).
          cs = {
            ...cs,
            status: {
              readyAgents: 0,
              desiredAgents: 0,
              readyToolboxes: 0,
              desiredToolboxes: 0,
              vms: recordOf(cs, pods),
            },
          };
          let now = NOW;
          for (let pass = 0; pass < 10; pass++) {
            // The spec changes now and then (a drift the kept results must not hide).
            const spec = specs[pass % specs.length];
            if (pass > 0 && pass % 3 === 0) cs = { ...cs, spec: toCocoonSet(spec).spec };
            // And the record loses a member now and then (its pod, unchanged, is no longer a
            // member: what was derived from it while it was must not be reused).
            if (pass % 4 === 2 && cs.status?.vms) {
              const vms = { ...cs.status.vms };
              delete vms[String(pass % 3)];
              cs = { ...cs, status: { ...cs.status, vms } };
            }
            const read = cached("cs", cs);
            const seen = pods.map((p) => cached(`pod/${p.metadata?.name}`, p));
            const fromCache = planPass({
              cocoonSet: attributedView(read, seen),
              pods: seen,
              nowMs: now,
            });
            const copies = structuredClone(pods);
            const fromFresh = planPass({
              cocoonSet: attributedView(structuredClone(cs), copies),
              pods: copies,
              nowMs: now,
            });
            assert.deepEqual(fromCache, fromFresh, `pass ${pass}`);
            for (const step of fromFresh.steps) decisions.add(step.decision);
            ({ cs, pods } = afterPass(cs, copies, fromFresh, now));
            now += 31_000;
          }
        },
      ),
      { numRuns: 200 },
    );
    // The runs planned what kept results could hide: drift, terminal pods, a status.
    for (const d of ["delete-drifted", "rebuild", "create", "blocked"])
      assert.ok(decisions.has(d), `some run planned ${d}: ${[...decisions].join(", ")}`);
  });
});
