/**
 * PodExpectations: a table of single writes and the events that settle them, and a property
 * over interleavings of passes, watch events delivered late, pods failing and terminations
 * finishing: a pass that plans from a lagging cache and skips slots with outstanding
 * expectations never creates a pod whose name is taken and never deletes a pod twice. The
 * same model with the expectations switched off finds a counterexample, so the property can
 * fail.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import {
  EXPECTATION_TTL_MS,
  PodExpectations,
  showsVersion,
} from "../../../controller/expectations.js";

const FLEET = "ns/fleet";

describe("PodExpectations, one write at a time", () => {
  const cases: {
    name: string;
    run: (e: PodExpectations) => void;
    outstanding: string[];
  }[] = [
    {
      name: "a create is outstanding until its uid appears",
      run: (e) => e.expectCreated(FLEET, { name: "fleet-1", uid: "u1" }),
      outstanding: ["fleet-1"],
    },
    {
      name: "a create is settled by its own uid",
      run: (e) => {
        e.expectCreated(FLEET, { name: "fleet-1", uid: "u1" });
        e.observe(FLEET, { name: "fleet-1", uid: "u1", terminating: false });
      },
      outstanding: [],
    },
    {
      name: "an older pod of the same name does not settle a create",
      run: (e) => {
        e.expectCreated(FLEET, { name: "fleet-1", uid: "u2" });
        e.observe(FLEET, { name: "fleet-1", uid: "u1", terminating: true });
        e.observeGone(FLEET, { name: "fleet-1", uid: "u1" });
      },
      outstanding: ["fleet-1"],
    },
    {
      name: "a create whose pod came and went is settled by the deletion",
      run: (e) => {
        e.expectCreated(FLEET, { name: "fleet-1", uid: "u1" });
        e.observeGone(FLEET, { name: "fleet-1", uid: "u1" });
      },
      outstanding: [],
    },
    {
      name: "a delete is outstanding while the cache still shows the pod running",
      run: (e) => {
        e.expectDeleted(FLEET, { name: "fleet-2", uid: "u2" });
        e.observe(FLEET, { name: "fleet-2", uid: "u2", terminating: false });
      },
      outstanding: ["fleet-2"],
    },
    {
      name: "a delete is settled once the pod shows terminating",
      run: (e) => {
        e.expectDeleted(FLEET, { name: "fleet-2", uid: "u2" });
        e.observe(FLEET, { name: "fleet-2", uid: "u2", terminating: true });
      },
      outstanding: [],
    },
    {
      name: "a delete is settled once the pod is gone",
      run: (e) => {
        e.expectDeleted(FLEET, { name: "fleet-2", uid: "u2" });
        e.observeGone(FLEET, { name: "fleet-2", uid: "u2" });
      },
      outstanding: [],
    },
    {
      name: "a patch is outstanding while the cache shows the version before it",
      run: (e) => {
        e.expectPatched(FLEET, { name: "fleet-0", uid: "u0", resourceVersion: "120" });
        e.observe(FLEET, {
          name: "fleet-0",
          uid: "u0",
          terminating: false,
          resourceVersion: "118",
        });
      },
      outstanding: ["fleet-0"],
    },
    {
      name: "a patch is settled by the version it wrote",
      run: (e) => {
        e.expectPatched(FLEET, { name: "fleet-0", uid: "u0", resourceVersion: "120" });
        e.observe(FLEET, {
          name: "fleet-0",
          uid: "u0",
          terminating: false,
          resourceVersion: "120",
        });
      },
      outstanding: [],
    },
    {
      name: "a patch is settled by a later version (a relist skipped it)",
      run: (e) => {
        e.expectPatched(FLEET, { name: "fleet-0", uid: "u0", resourceVersion: "120" });
        e.observe(FLEET, {
          name: "fleet-0",
          uid: "u0",
          terminating: false,
          resourceVersion: "1000",
        });
      },
      outstanding: [],
    },
    {
      name: "a patch is not settled by another pod of the name at a later version",
      run: (e) => {
        e.expectPatched(FLEET, { name: "fleet-0", uid: "u0", resourceVersion: "120" });
        e.observe(FLEET, {
          name: "fleet-0",
          uid: "u9",
          terminating: false,
          resourceVersion: "130",
        });
      },
      outstanding: ["fleet-0"],
    },
    {
      name: "a patch is settled when its pod terminates or goes",
      run: (e) => {
        e.expectPatched(FLEET, { name: "fleet-0", uid: "u0", resourceVersion: "120" });
        e.observe(FLEET, { name: "fleet-0", uid: "u0", terminating: true });
        e.expectPatched(FLEET, { name: "fleet-3", uid: "u3", resourceVersion: "121" });
        e.observeGone(FLEET, { name: "fleet-3", uid: "u3" });
      },
      outstanding: [],
    },
    {
      name: "fleets are kept apart",
      run: (e) => {
        e.expectCreated("ns/other", { name: "fleet-1", uid: "u1" });
        e.observe(FLEET, { name: "fleet-1", uid: "u1", terminating: false });
      },
      outstanding: [],
    },
  ];
  for (const c of cases) {
    test(c.name, () => {
      const e = new PodExpectations(() => 0);
      c.run(e);
      assert.deepEqual([...e.outstanding(FLEET)].sort(), c.outstanding);
    });
  }

  test("an expectation expires after the TTL, and says when", () => {
    let now = 1000;
    const e = new PodExpectations(() => now, 500);
    e.expectCreated(FLEET, { name: "fleet-1", uid: "u1" });
    now = 1200;
    e.expectDeleted(FLEET, { name: "fleet-2", uid: "u2" });
    assert.equal(e.nextExpiryMs(FLEET), 300);
    now = 1499;
    assert.deepEqual([...e.outstanding(FLEET)].sort(), ["fleet-1", "fleet-2"]);
    now = 1500;
    assert.deepEqual([...e.outstanding(FLEET)], ["fleet-2"]);
    now = 1700;
    assert.deepEqual([...e.outstanding(FLEET)], []);
    assert.equal(e.nextExpiryMs(FLEET), undefined);
    assert.equal(EXPECTATION_TTL_MS, 300_000, "ReplicaSet's five minutes");
  });

  test("showsVersion: the written version or a later one, never an opaque guess", () => {
    const table: [string | undefined, string | undefined, boolean][] = [
      ["120", "120", true],
      ["121", "120", true],
      ["1000", "999", true],
      ["99", "120", false],
      ["abc", "abc", true],
      ["abd", "abc", false],
      [undefined, "120", false],
      ["120", undefined, false],
    ];
    for (const [seen, written, want] of table)
      assert.equal(showsVersion(seen, written), want, `${seen} shows ${written}`);
  });

  test("forget drops a fleet's expectations", () => {
    const e = new PodExpectations(() => 0);
    e.expectCreated(FLEET, { name: "fleet-1", uid: "u1" });
    e.forget(FLEET);
    assert.equal(e.outstanding(FLEET).size, 0);
  });
});

// --- the property: a model of the apiserver, a watch that lags, and passes

interface ModelPod {
  name: string;
  uid: string;
  failed: boolean;
  terminating: boolean;
}
type WatchEvent = { type: "put"; pod: ModelPod } | { type: "gone"; pod: ModelPod };

type Op =
  | { kind: "pass" }
  | { kind: "deliver"; count: number }
  | { kind: "fail"; slot: number }
  | { kind: "finish"; slot: number };

const SLOTS = 3;
const nameOf = (slot: number) => `fleet-${slot}`;

/** Runs the ops; returns the violations seen (empty when the pass never acted twice). */
function simulate(ops: Op[], useExpectations: boolean): string[] {
  const cluster = new Map<string, ModelPod>();
  const cache = new Map<string, ModelPod>();
  const pending: WatchEvent[] = [];
  const expectations = new PodExpectations(() => 0);
  const violations: string[] = [];
  let nextUid = 0;
  const emit = (ev: WatchEvent) => pending.push({ ...ev, pod: { ...ev.pod } });

  for (const op of ops) {
    switch (op.kind) {
      case "deliver":
        for (const ev of pending.splice(0, op.count)) {
          if (ev.type === "put") {
            cache.set(ev.pod.name, ev.pod);
            expectations.observe(FLEET, ev.pod);
          } else {
            if (cache.get(ev.pod.name)?.uid === ev.pod.uid) cache.delete(ev.pod.name);
            expectations.observeGone(FLEET, ev.pod);
          }
        }
        break;
      case "fail": {
        const p = cluster.get(nameOf(op.slot));
        if (p && !p.failed && !p.terminating) {
          p.failed = true;
          emit({ type: "put", pod: p });
        }
        break;
      }
      case "finish": {
        const p = cluster.get(nameOf(op.slot));
        if (p?.terminating) {
          cluster.delete(p.name);
          emit({ type: "gone", pod: p });
        }
        break;
      }
      case "pass": {
        const busy = useExpectations ? expectations.outstanding(FLEET) : new Set<string>();
        for (let slot = 0; slot < SLOTS; slot++) {
          const name = nameOf(slot);
          if (busy.has(name)) continue;
          const seen = cache.get(name);
          if (!seen) {
            // create
            if (cluster.has(name)) {
              violations.push(`created ${name} while the apiserver has it`);
              continue;
            }
            const pod = { name, uid: `u${nextUid++}`, failed: false, terminating: false };
            cluster.set(name, pod);
            emit({ type: "put", pod });
            expectations.expectCreated(FLEET, pod);
          } else if (seen.failed && !seen.terminating) {
            // delete the Failed pod (with its uid as precondition), counting the failure
            const live = cluster.get(name);
            if (!live || live.uid !== seen.uid || live.terminating) {
              violations.push(`deleted ${name} (${seen.uid}) a second time`);
              continue;
            }
            live.terminating = true;
            emit({ type: "put", pod: live });
            expectations.expectDeleted(FLEET, live);
          }
        }
        break;
      }
    }
  }
  return violations;
}

const ops = fc.array(
  fc.oneof(
    fc.constant<Op>({ kind: "pass" }),
    fc.integer({ min: 1, max: 4 }).map<Op>((count) => ({ kind: "deliver", count })),
    fc.integer({ min: 0, max: SLOTS - 1 }).map<Op>((slot) => ({ kind: "fail", slot })),
    fc.integer({ min: 0, max: SLOTS - 1 }).map<Op>((slot) => ({ kind: "finish", slot })),
  ),
  { maxLength: 60 },
);

describe("passes on a lagging cache", () => {
  test("with expectations, no interleaving creates a taken name or deletes a pod twice", () => {
    fc.assert(
      fc.property(ops, (run) => {
        assert.deepEqual(simulate(run, true), []);
      }),
      { numRuns: 2000 },
    );
  });

  test("without them, some interleaving does (the property can fail)", () => {
    const found = fc.check(
      fc.property(ops, (run) => simulate(run, false).length === 0),
      { numRuns: 2000 },
    );
    assert.equal(found.failed, true, "a lagging cache makes a pass act twice");
  });
});
