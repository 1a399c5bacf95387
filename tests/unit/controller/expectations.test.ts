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
  shownByWatch,
  showsVersion,
  type ObservedPod,
  type PodWrite,
} from "../../../controller/expectations.js";

const FLEET = "ns/fleet";

// One write whose answer came before the watch showed anything of it (a delete's pod is
// cached running: the cache never holding a pod leaves nothing to expect of its delete).
const created = (e: PodExpectations, name: string, uid: string, fleet = FLEET) =>
  e.expect(fleet, { kind: "create", name, uid }, undefined);
const deleted = (e: PodExpectations, name: string, uid: string) =>
  e.expect(FLEET, { kind: "delete", name, uid }, { name, uid, terminating: false });
const patched = (e: PodExpectations, name: string, uid: string, resourceVersion: string) =>
  e.expect(FLEET, { kind: "patch", name, uid, resourceVersion }, undefined);

describe("PodExpectations, one write at a time", () => {
  const cases: {
    name: string;
    run: (e: PodExpectations) => void;
    outstanding: string[];
  }[] = [
    {
      name: "a create is outstanding until its uid appears",
      run: (e) => created(e, "fleet-1", "u1"),
      outstanding: ["fleet-1"],
    },
    {
      name: "a create is settled by its own uid",
      run: (e) => {
        created(e, "fleet-1", "u1");
        e.observe(FLEET, { name: "fleet-1", uid: "u1", terminating: false });
      },
      outstanding: [],
    },
    {
      name: "an older pod of the same name does not settle a create",
      run: (e) => {
        created(e, "fleet-1", "u2");
        e.observe(FLEET, { name: "fleet-1", uid: "u1", terminating: true });
        e.observeGone(FLEET, { name: "fleet-1", uid: "u1" });
      },
      outstanding: ["fleet-1"],
    },
    {
      name: "a create whose pod came and went is settled by the deletion",
      run: (e) => {
        created(e, "fleet-1", "u1");
        e.observeGone(FLEET, { name: "fleet-1", uid: "u1" });
      },
      outstanding: [],
    },
    {
      name: "a delete is outstanding while the cache still shows the pod running",
      run: (e) => {
        deleted(e, "fleet-2", "u2");
        e.observe(FLEET, { name: "fleet-2", uid: "u2", terminating: false });
      },
      outstanding: ["fleet-2"],
    },
    {
      name: "a delete is settled once the pod shows terminating",
      run: (e) => {
        deleted(e, "fleet-2", "u2");
        e.observe(FLEET, { name: "fleet-2", uid: "u2", terminating: true });
      },
      outstanding: [],
    },
    {
      name: "a delete is settled once the pod is gone",
      run: (e) => {
        deleted(e, "fleet-2", "u2");
        e.observeGone(FLEET, { name: "fleet-2", uid: "u2" });
      },
      outstanding: [],
    },
    {
      name: "a patch is outstanding while the cache shows the version before it",
      run: (e) => {
        patched(e, "fleet-0", "u0", "120");
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
        patched(e, "fleet-0", "u0", "120");
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
        patched(e, "fleet-0", "u0", "120");
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
        patched(e, "fleet-0", "u0", "120");
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
        patched(e, "fleet-0", "u0", "120");
        e.observe(FLEET, { name: "fleet-0", uid: "u0", terminating: true });
        patched(e, "fleet-3", "u3", "121");
        e.observeGone(FLEET, { name: "fleet-3", uid: "u3" });
      },
      outstanding: [],
    },
    {
      name: "fleets are kept apart",
      run: (e) => {
        created(e, "fleet-1", "u1", "ns/other");
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
    created(e, "fleet-1", "u1");
    now = 1200;
    deleted(e, "fleet-2", "u2");
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
    created(e, "fleet-1", "u1");
    e.forget(FLEET);
    assert.equal(e.outstanding(FLEET).size, 0);
  });
});

describe("shownByWatch: a write's answer that comes after the watch's events", () => {
  const pod = (o: Partial<ObservedPod>): ObservedPod => ({
    name: "fleet-0",
    uid: "u0",
    terminating: false,
    ...o,
  });
  const create: PodWrite = { kind: "create", name: "fleet-0", uid: "u0" };
  const del: PodWrite = { kind: "delete", name: "fleet-0", uid: "u0" };
  const patch: PodWrite = { kind: "patch", name: "fleet-0", uid: "u0", resourceVersion: "120" };
  const table: [string, PodWrite, ObservedPod | undefined, boolean, boolean][] = [
    ["a create the cache does not show yet", create, undefined, false, false],
    ["a create whose pod the cache shows", create, pod({}), false, true],
    ["a create while an older pod of the name is cached", create, pod({ uid: "u9" }), false, false],
    ["a create whose pod came and went", create, undefined, true, true],
    ["a delete of a pod cached running", del, pod({}), false, false],
    ["a delete of a pod cached terminating", del, pod({ terminating: true }), false, true],
    ["a delete of a pod the cache never held", del, undefined, false, true],
    ["a delete of a pod gone", del, undefined, true, true],
    [
      "a patch the cache shows the version before",
      patch,
      pod({ resourceVersion: "118" }),
      false,
      false,
    ],
    ["a patch the cache shows", patch, pod({ resourceVersion: "120" }), false, true],
    [
      "a patch the cache shows a later version of",
      patch,
      pod({ resourceVersion: "125" }),
      false,
      true,
    ],
    [
      "a patch of a pod cached terminating",
      patch,
      pod({ resourceVersion: "118", terminating: true }),
      false,
      true,
    ],
    ["a patch of a pod not cached yet", patch, undefined, false, false],
    ["a patch of a pod gone (deleted by someone else meanwhile)", patch, undefined, true, true],
    [
      "a patch while another pod of the name is cached",
      patch,
      pod({ uid: "u9", resourceVersion: "130" }),
      false,
      false,
    ],
  ];
  for (const [name, write, cached, gone, want] of table)
    test(name, () => assert.equal(shownByWatch(write, cached, gone), want));

  test("a write whose pod the watch showed gone before the answer came is never expected", () => {
    for (const write of [create, del, patch]) {
      const e = new PodExpectations(() => 0);
      e.observeGone(FLEET, { name: "fleet-0", uid: "u0" });
      e.expect(FLEET, write, undefined);
      assert.deepEqual([...e.outstanding(FLEET)], [], write.kind);
    }
  });

  test("an expectation that expires is handed to the caller", () => {
    let now = 0;
    const e = new PodExpectations(() => now, 100);
    patched(e, "fleet-0", "u0", "120");
    const expired: PodWrite[] = [];
    assert.deepEqual([...e.outstanding(FLEET, (w) => expired.push(w))], ["fleet-0"]);
    now = 100;
    assert.deepEqual([...e.outstanding(FLEET, (w) => expired.push(w))], []);
    assert.deepEqual(
      expired.map((w) => [w.kind, w.name, w.uid]),
      [["patch", "fleet-0", "u0"]],
    );
  });
});

// --- the property: a model of the apiserver, a watch that lags, writes whose answers come
// late, other writers, and passes

interface ModelPod {
  name: string;
  uid: string;
  failed: boolean;
  terminating: boolean;
  /** The pod's resourceVersion, from the model's one counter (as etcd's revision). */
  rv: number;
  /** The pass asked this pod something (an annotation patch). */
  asked: boolean;
}
type WatchEvent = { type: "put"; pod: ModelPod } | { type: "gone"; pod: ModelPod };

type Op =
  | { kind: "pass" }
  | { kind: "deliver"; count: number }
  | { kind: "answer"; count: number }
  | { kind: "fail"; slot: number }
  | { kind: "evict"; slot: number }
  | { kind: "finish"; slot: number };

const SLOTS = 3;
const nameOf = (slot: number) => `fleet-${slot}`;

/**
 * How the controller records a write's answer: through `expect` with the cache's pod
 * ("shown"), or as if every answer came before the watch's events ("blind", the class of
 * bug where a pod deleted meanwhile held its slot until the TTL), or not at all ("none").
 */
type Mode = "shown" | "blind" | "none";

/**
 * Runs the ops; returns the violations seen: a pass that acted twice (safety), and, once every
 * event and answer is in, an expectation left outstanding (a slot held back with nothing left
 * to come: liveness).
 */
function simulate(ops: Op[], mode: Mode): string[] {
  const cluster = new Map<string, ModelPod>();
  const cache = new Map<string, ModelPod>();
  const events: WatchEvent[] = [];
  const answers: PodWrite[] = [];
  const expectations = new PodExpectations(() => 0);
  const violations: string[] = [];
  const deletedByPass = new Set<string>();
  let nextUid = 0;
  let rv = 100;
  const emit = (ev: WatchEvent) => events.push({ ...ev, pod: { ...ev.pod } });
  const observed = (p: ModelPod): ObservedPod => ({
    name: p.name,
    uid: p.uid,
    terminating: p.terminating,
    resourceVersion: String(p.rv),
  });
  const answer = (w: PodWrite) => {
    if (mode === "none") return;
    const cached = cache.get(w.name);
    if (mode === "shown") expectations.expect(FLEET, w, cached && observed(cached));
    // "blind": what the cache showed is not looked at (a delete still needs its pod cached).
    else
      expectations.expect(FLEET, w, w.kind === "delete" ? { ...w, terminating: false } : undefined);
  };
  const deliver = (count: number) => {
    for (const ev of events.splice(0, count)) {
      if (ev.type === "put") {
        cache.set(ev.pod.name, ev.pod);
        expectations.observe(FLEET, observed(ev.pod));
      } else {
        if (cache.get(ev.pod.name)?.uid === ev.pod.uid) cache.delete(ev.pod.name);
        expectations.observeGone(FLEET, ev.pod);
      }
    }
  };
  const terminate = (p: ModelPod) => {
    p.terminating = true;
    p.rv = ++rv;
    emit({ type: "put", pod: p });
  };

  for (const op of ops) {
    switch (op.kind) {
      case "deliver":
        deliver(op.count);
        break;
      case "answer":
        for (const w of answers.splice(0, op.count)) answer(w);
        break;
      case "fail": {
        const p = cluster.get(nameOf(op.slot));
        if (p && !p.failed && !p.terminating) {
          p.failed = true;
          p.rv = ++rv;
          emit({ type: "put", pod: p });
        }
        break;
      }
      case "evict": {
        // Another writer deletes the pod (a user, an eviction): what interrupted the wake.
        const p = cluster.get(nameOf(op.slot));
        if (p && !p.terminating) terminate(p);
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
        // A fleet's passes are serial: the answers of the last one are all in.
        for (const w of answers.splice(0)) answer(w);
        const busy = mode === "none" ? new Set<string>() : expectations.outstanding(FLEET);
        for (let slot = 0; slot < SLOTS; slot++) {
          const name = nameOf(slot);
          if (busy.has(name)) continue;
          const seen = cache.get(name);
          const live = cluster.get(name);
          if (!seen) {
            // create
            if (live) {
              violations.push(`created ${name} while the apiserver has it`);
              continue;
            }
            const pod: ModelPod = {
              name,
              uid: `u${nextUid++}`,
              failed: false,
              terminating: false,
              rv: ++rv,
              asked: false,
            };
            cluster.set(name, pod);
            emit({ type: "put", pod });
            answers.push({ kind: "create", name, uid: pod.uid });
          } else if (seen.failed && !seen.terminating) {
            // delete the Failed pod (with its uid as precondition), counting the failure
            if (deletedByPass.has(seen.uid)) {
              violations.push(`deleted ${name} (${seen.uid}) a second time`);
              continue;
            }
            if (!live || live.uid !== seen.uid) continue; // the precondition fails: nothing done
            deletedByPass.add(live.uid);
            if (!live.terminating) terminate(live);
            answers.push({ kind: "delete", name, uid: live.uid });
          } else if (
            !seen.asked &&
            !seen.terminating &&
            live?.uid === seen.uid &&
            !live.terminating
          ) {
            // ask the pod something once (the wake's annotation), with its uid as precondition
            live.asked = true;
            live.rv = ++rv;
            emit({ type: "put", pod: live });
            answers.push({ kind: "patch", name, uid: live.uid, resourceVersion: String(live.rv) });
          }
        }
        break;
      }
    }
  }
  // Every event and every answer in, in the worst order (the answers last): nothing may be
  // left outstanding, or a slot waits for the TTL with nothing left to come.
  deliver(events.length);
  for (const w of answers.splice(0)) answer(w);
  const left = mode === "none" ? new Set<string>() : expectations.outstanding(FLEET);
  for (const name of left) violations.push(`${name} held back with nothing left to come`);
  return violations;
}

const ops = fc.array(
  fc.oneof(
    fc.constant<Op>({ kind: "pass" }),
    fc.integer({ min: 1, max: 4 }).map<Op>((count) => ({ kind: "deliver", count })),
    fc.integer({ min: 1, max: 3 }).map<Op>((count) => ({ kind: "answer", count })),
    fc.integer({ min: 0, max: SLOTS - 1 }).map<Op>((slot) => ({ kind: "fail", slot })),
    fc.integer({ min: 0, max: SLOTS - 1 }).map<Op>((slot) => ({ kind: "evict", slot })),
    fc.integer({ min: 0, max: SLOTS - 1 }).map<Op>((slot) => ({ kind: "finish", slot })),
  ),
  { maxLength: 60 },
);

describe("passes on a lagging cache", () => {
  test("with expectations, no interleaving acts twice or leaves a slot held back", () => {
    fc.assert(
      fc.property(ops, (run) => {
        assert.deepEqual(simulate(run, "shown"), []);
      }),
      { numRuns: 3000 },
    );
  });

  test("without them, some interleaving acts twice (the property can fail)", () => {
    const found = fc.check(
      fc.property(ops, (run) => simulate(run, "none").length === 0),
      { numRuns: 3000 },
    );
    assert.equal(found.failed, true, "a lagging cache makes a pass act twice");
  });

  test("answers recorded blind to the watch leave a slot held back (the property can fail)", () => {
    const found = fc.check(
      fc.property(ops, (run) => simulate(run, "blind").length === 0),
      { numRuns: 3000 },
    );
    assert.equal(found.failed, true, "a write shown before its answer is expected for ever");
  });
});
