/**
 * The controller in shards, as processes against the real apiserver: every CocoonSet is
 * reconciled by exactly the shard its name hashes to; a shard's leader killed in the middle
 * of a fan-out is replaced by that shard's standby, which finishes it without creating any
 * pod twice; and a change of the shard count (one process, then two shards beside it, then
 * the old one stopped) hands every CocoonSet over with no two processes reconciling one at
 * the same time and none left behind. Each test's controllers watch only its namespace and
 * elect their leaders on Leases there. Each shard's caches hold only its own buckets' pods and
 * CocoonHibernations; pods without their bucket label are labelled once (a patch, the same
 * pod), and counts go 1 → 2 and 2 → 4 → 3 with no pod recreated. Passes are counted from the controllers' own debug
 * lines (one per reconcile, with its duration).
 */
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { before, describe, test } from "node:test";
import { shardOf } from "../../controller/shard.js";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { paths, waitForList, type KubeObject } from "../../engine/kube/index.js";
import { LABELS, shardBucketOf } from "../../engine/spec/index.js";
import { adminClient, testKubeconfig } from "../support/cluster.js";
import { createHibernation } from "../support/lifecycle.js";
import {
  cocoonSet,
  createCocoonSet,
  fleetPods,
  IMAGE,
  patchSpec,
  waitForConverged,
} from "../support/controller-fleet.js";
import { startFaultProxy, type AnsweredRequest } from "../support/fault-proxy.js";
import {
  Cleanup,
  controllerNamespace,
  startController,
  tempDir,
  type ControllerProcess,
  type LogLine,
} from "../support/controller-process.js";

/** Short Leases: a standby takes over 3 s after its leader dies. */
const LEASE = ["--leader-election-lease-duration", "3s"];

before(async () => {
  await ensureCrd(adminClient());
});

function startShard(
  c: Cleanup,
  ns: string,
  shard: string,
  label: string,
  extra: string[] = [],
  kubeconfig = testKubeconfig(),
): Promise<ControllerProcess> {
  return startController(c, {
    kubeconfig,
    namespaces: [ns],
    leaderElect: true,
    leaderElectionNamespace: ns,
    extraArgs: ["--shard", shard, ...LEASE, ...extra],
    label,
  });
}

const isPass = (l: LogLine) =>
  l.msg === "reconciled" ||
  l.msg === "reconciled; requeue" ||
  l.msg === "reconcile failed; requeued with backoff";

/** Whether `l` is the line ending a pass of the CocoonSet `ns/name`. */
const passOn = (ns: string, name: string) => (l: LogLine) =>
  isPass(l) && l.controller === "cocoonset" && l.namespace === ns && l.name === name;

/**
 * Waits for a pass of `ns/name` in `proc`'s log. The line is written after the pass's last
 * write, and reaches the test through a pipe that can lag behind the watch that showed it.
 */
function waitForPass(proc: ControllerProcess, ns: string, name: string): Promise<LogLine> {
  return proc.waitForLog(`a pass of ${ns}/${name}`, passOn(ns, name), { timeoutMs: 30_000 });
}

/** The passes `proc` ran on `ns/name`, as [start, end] in milliseconds. */
function passesOf(proc: ControllerProcess, ns: string, name: string): [number, number][] {
  return proc.logs(passOn(ns, name)).map((l) => {
    const end = Date.parse(String(l.time));
    return [end - Number(l.seconds ?? 0) * 1000, end];
  });
}

/** `per` names for each of `count` shards: `prefix-0`, `prefix-1`, … taken in order. */
function namesPerShard(ns: string, prefix: string, count: number, per: number): string[][] {
  const out: string[][] = Array.from({ length: count }, () => []);
  for (let i = 0; out.some((n) => n.length < per); i++) {
    const name = `${prefix}-${i}`;
    const s = shardOf(ns, name, count);
    if (out[s].length < per) out[s].push(name);
  }
  return out;
}

describe("controller shards", { timeout: 180_000 }, () => {
  test("two shards: every CocoonSet is reconciled by the shard its name hashes to, and only by it", async (t) => {
    const c = new Cleanup(t);
    const ns = await controllerNamespace(c, "shards");
    const shards = [
      await startShard(c, ns, "0/2", "shard-0"),
      await startShard(c, ns, "1/2", "shard-1"),
    ];
    await Promise.all(shards.map((s) => s.synced()));
    const names = namesPerShard(ns, "f", 2, 3);
    for (const name of names.flat()) await createCocoonSet(ns, name, { replicas: 1 });
    for (const name of names.flat()) await waitForConverged(ns, name, { replicas: 1 });

    const counts: string[] = [];
    for (const [owner, group] of names.entries()) {
      for (const name of group) {
        await waitForPass(shards[owner], ns, name); // reconciled by its shard
        const mine = passesOf(shards[owner], ns, name).length;
        const theirs = passesOf(shards[1 - owner], ns, name).length;
        counts.push(`${name}: shard ${owner} ${mine}, shard ${1 - owner} ${theirs}`);
        assert.equal(theirs, 0, `${name} never reconciled by shard ${1 - owner}`);
      }
    }
    t.diagnostic(`passes per shard: ${counts.join("; ")}`);
    // A CocoonHibernation is labelled with its pod's fleet's bucket and reconciled by that
    // fleet's shard, whatever its own name hashes to.
    const fleet = names[0][0];
    let cr = "h-0";
    for (let i = 1; shardOf(ns, cr, 2) === 0; i++) cr = `h-${i}`;
    await createHibernation(ns, cr, `${fleet}-0`, "Wake");
    await waitForList(adminClient(), paths.cocoonHibernations(ns), (items) => items.length === 1, {
      labelSelector: `${LABELS.shardBucket}=${shardBucketOf(ns, fleet)}`,
      description: "the CocoonHibernation labelled with its fleet's bucket",
    });
    const crPass = (l: LogLine) =>
      isPass(l) && l.controller === "cocoonhibernation" && l.name === cr;
    await shards[0].waitForLog(`${cr} reconciled by shard 0`, crPass);
    assert.equal(shards[1].logs(crPass).length, 0, `${cr} never reconciled by shard 1`);
    // Each shard's Lease says its share.
    const leases = await adminClient().list(paths.leases(ns));
    assert.deepEqual(
      leases.items
        .map((l) => [l.metadata.name, l.metadata.annotations?.["cocoonset.cocoonstack.io/shard"]])
        .sort(),
      [
        ["cocoonset-controller-shard-0-of-2", "0/2"],
        ["cocoonset-controller-shard-1-of-2", "1/2"],
      ],
    );
  });

  test("each shard is sent only its own CocoonSets and their status writes (what the apiserver answers, seen at a proxy in front of each shard), and every CocoonSet's name", async (t) => {
    const c = new Cleanup(t);
    const ns = await controllerNamespace(c, "shard-sent");
    const admin = adminClient();
    const dir = tempDir(c, "shard-sent");
    const shards: ControllerProcess[] = [];
    const seen: AnsweredRequest[][] = [];
    for (const i of [0, 1]) {
      const proxy = await startFaultProxy(admin, { rate: 0, answers: true });
      c.defer("close the proxy", () => proxy.close());
      const file = join(dir, `kubeconfig-${i}`);
      writeFileSync(file, proxy.kubeconfig);
      shards.push(await startShard(c, ns, `${i}/2`, `shard-${i}`, [], file));
      seen.push(proxy.stats.answers);
    }
    await Promise.all(shards.map((s) => s.synced()));
    // Two fleets of each shard written as the Fleet writes them (with their bucket), and one of
    // each written without it (as kubectl would): the latter are labelled once.
    const names = namesPerShard(ns, "s", 2, 3);
    const unlabelled = new Set(names.map((group) => group[2]));
    for (const name of names.flat()) {
      const body = cocoonSet(ns, name, { agent: { image: IMAGE, replicas: 1 } });
      if (!unlabelled.has(name))
        body.metadata.labels = { [LABELS.shardBucket]: String(shardBucketOf(ns, name)) };
      await admin.create(paths.cocoonSets(ns), body);
    }
    for (const name of names.flat()) await waitForConverged(ns, name, { replicas: 1 });

    const UNLABELLED = `!${LABELS.shardBucket}`;
    const isSets = (a: AnsweredRequest) => a.path.startsWith(paths.cocoonSets(ns));
    const metadataOnly = (a: AnsweredRequest) => a.accept.includes("PartialObjectMetadata");
    const namesIn = (answers: AnsweredRequest[]) =>
      new Set(answers.flatMap((a) => a.objects.map((o) => o.name ?? "")));
    for (const [i, own] of names.entries()) {
      const sets = seen[i].filter(isSets);
      const full = sets.filter(
        (a) => !metadataOnly(a) && a.query.get("labelSelector") !== UNLABELLED,
      );
      const sent = full.flatMap((a) => a.objects).length;
      t.diagnostic(
        `shard ${i}: ${sent} CocoonSets sent whole (lists, watch events, reads), of ${[...namesIn(full)].sort().join(", ")}`,
      );
      assert.deepEqual(
        [...namesIn(full)].sort(),
        [...own].sort(),
        `shard ${i} is sent only its own`,
      );
      assert.ok(sent > own.length, "its own fleets' status writes among them");
      // The labeller's watch of the CocoonSets without a bucket: only those written without one.
      const bare = sets.filter((a) => a.query.get("labelSelector") === UNLABELLED);
      assert.deepEqual(
        [...namesIn(bare)].sort(),
        [...unlabelled].sort(),
        "only the unlabelled are sent to the labeller",
      );
      // Every CocoonSet's name, of every namespace (a VM name is unique in the whole cluster),
      // metadata only (the VM-name check's and the tasks' list).
      assert.deepEqual(sets.filter(metadataOnly), [], "no names list of the namespace alone");
      const listed = seen[i].filter((a) => a.path === paths.cocoonSets() && metadataOnly(a));
      assert.ok(listed.length > 0, "a metadata-only list and watch of every namespace");
      const kinds = new Set(listed.flatMap((a) => a.objects.map((o) => o.kind)));
      assert.deepEqual([...kinds], ["PartialObjectMetadata"], "sent as PartialObjectMetadata");
      const mine = listed.map((a) => ({
        ...a,
        objects: a.objects.filter((o) => o.namespace === ns),
      }));
      assert.deepEqual([...namesIn(mine)].sort(), names.flat().sort());
      // Each fleet reconciled by its own shard only.
      for (const name of own) {
        await waitForPass(shards[i], ns, name);
        assert.equal(passesOf(shards[1 - i], ns, name).length, 0);
      }
    }
    for (const name of unlabelled)
      assert.equal(
        (await admin.get<KubeObject>(paths.cocoonSet(ns, name))).metadata.labels?.[
          LABELS.shardBucket
        ],
        String(shardBucketOf(ns, name)),
        `${name} labelled with its bucket`,
      );
  });

  test("a shard's leader killed in the middle of a fan-out: its standby finishes it and no pod is created twice", async (t) => {
    const c = new Cleanup(t);
    const ns = await controllerNamespace(c, "shard-kill");
    const client = adminClient();
    const [[name]] = namesPerShard(ns, "big", 2, 1);
    const slow = ["--fanout-concurrency", "2"];
    const leader = await startShard(c, ns, "0/2", "shard-0-a", slow);
    await leader.synced();
    const standby = await startShard(c, ns, "0/2", "shard-0-b", slow);
    const other = await startShard(c, ns, "1/2", "shard-1");
    await standby.ports(); // up, and trying for the Lease its leader holds
    await createCocoonSet(ns, name, { replicas: 100 });
    const subAgents = `${LABELS.name}=${name},${LABELS.role}=sub-agent`;
    await waitForList(client, paths.pods(ns), (items) => items.length >= 5, {
      labelSelector: subAgents,
      description: "the fan-out to be under way",
    });
    assert.equal((await leader.stop("SIGKILL")).signal, "SIGKILL");
    const atKill = (await client.list(paths.pods(ns), { labelSelector: subAgents })).items;
    assert.ok(atKill.length < 100, `killed mid fan-out (${atKill.length} of 100)`);

    await standby.synced();
    const { pods } = await waitForConverged(ns, name, { replicas: 100 }, 120_000);
    assert.equal(pods.length, 101);
    const all = await fleetPods(client, ns, name);
    assert.equal(all.length, 101, "no leftover pod");
    const existing = new Set(atKill.map((p: KubeObject) => p.metadata.name));
    const again = standby.logs((l) => l.msg === "created pod" && existing.has(String(l.pod)));
    assert.deepEqual(again, [], "the standby creates none of the pods the leader had created");
    assert.equal(passesOf(other, ns, name).length, 0, "the other shard never touched it");
    const sessions = other.logs((l) => l.msg === "caches synced; starting workers").length;
    assert.equal(sessions, 1, "the other shard kept its one session throughout");
  });

  test("from one process to two shards: unlabelled pods are labelled once, each shard caches only its own, and each CocoonSet is handed over, never reconciled by two processes at once", async (t) => {
    const c = new Cleanup(t);
    const ns = await controllerNamespace(c, "shard-move");
    const client = adminClient();
    const names = namesPerShard(ns, "m", 2, 2).flat();
    const single = await startShard(c, ns, "0/1", "unsharded");
    await single.synced();
    for (const name of names) await createCocoonSet(ns, name, { replicas: 1 });
    for (const name of names) await waitForConverged(ns, name, { replicas: 1 });

    // Pods from before the label: the label taken off; the running process labels them back.
    const before = await podUids(ns);
    assert.equal(before.size, names.length * 2);
    const from = single.lines.length;
    for (const pod of before.keys())
      await client.patch(paths.pod(ns, pod), {
        metadata: { labels: { [LABELS.shardBucket]: null } },
      });
    await waitForList(client, paths.pods(ns), (items) => items.length === before.size, {
      labelSelector: LABELS.shardBucket,
      description: "every pod labelled with its bucket again",
    });
    for (const pod of before.keys())
      await single.waitForLog(
        `${pod} labelled`,
        (l) => isLabelling(l) && l.path === paths.pod(ns, pod),
        { from },
      );
    assert.equal(
      single.lines.slice(from).filter(isLabelling).length,
      before.size,
      "each labelled once",
    );
    for (const p of (await client.list(paths.pods(ns))).items)
      assert.equal(
        p.metadata.labels?.[LABELS.shardBucket],
        String(shardBucketOf(ns, p.metadata.labels?.[LABELS.name] ?? "")),
      );

    // The new count starts beside the old process: its shards hold everything back, and each
    // caches only the pods of its own fleets.
    const shards = [
      await startShard(c, ns, "0/2", "shard-0"),
      await startShard(c, ns, "1/2", "shard-1"),
    ];
    const synced = await Promise.all(shards.map((s) => s.synced()));
    synced.forEach((line, i) => {
      const sets = names.filter((n) => shardOf(ns, n, 2) === i).length;
      const cached = line.cached as Record<string, number>;
      assert.equal(cached.pods, sets * 2, `shard ${i} caches its ${sets * 2} pods`);
      assert.equal(cached.cocoonsets, sets, `shard ${i} caches its ${sets} CocoonSets`);
      // Every CocoonSet's name, of every namespace: this test's and the lane's other files'.
      assert.ok(cached["cocoonset-names"] >= names.length, "and every CocoonSet's name");
    });
    for (const name of names) await patchSpec(ns, name, { agent: { replicas: 2 } });
    for (const name of names) await waitForConverged(ns, name, { replicas: 2 });
    for (const name of names)
      for (const s of shards)
        assert.equal(passesOf(s, ns, name).length, 0, `${s.label} waits while the old one runs`);

    // The old process stops (its Lease released): the shards take over at once.
    const stoppedAt = Date.now();
    assert.deepEqual(await single.stop("SIGTERM"), { code: 0, signal: null });
    for (const name of names) await patchSpec(ns, name, { agent: { replicas: 3 } });
    for (const name of names) await waitForConverged(ns, name, { replicas: 3 });
    t.diagnostic(`handed over and converged ${Date.now() - stoppedAt} ms after the stop`);

    assertOneAtATime([single, ...shards], ns, names);
    for (const name of names) {
      const owner = shardOf(ns, name, 2);
      await waitForPass(shards[owner], ns, name); // taken by its shard
      assert.equal(passesOf(shards[1 - owner], ns, name).length, 0);
    }
    assertKept(before, await podUids(ns));
  });

  test("shards 2 → 4 → 3: every CocoonSet reconciled by one shard at a time, no pod recreated, the handover measured", async (t) => {
    const c = new Cleanup(t);
    const ns = await controllerNamespace(c, "shard-count");
    // One fleet of each shard of 4 (so each of 2 and 3 has some too).
    const names = namesPerShard(ns, "n", 4, 1).flat();
    const generation = (count: number) =>
      Promise.all(
        Array.from({ length: count }, (_, i) =>
          startShard(c, ns, `${i}/${count}`, `${i}-of-${count}`),
        ),
      );
    const two = await generation(2);
    await Promise.all(two.map((s) => s.synced()));
    for (const name of names) await createCocoonSet(ns, name, { replicas: 1 });
    for (const name of names) await waitForConverged(ns, name, { replicas: 1 });
    const before = await podUids(ns);

    /** Starts `next` beside `old`, stops `old`, and converges a change: the handover's times. */
    const handOver = async (old: ControllerProcess[], count: number, replicas: number) => {
      const next = await generation(count);
      await Promise.all(next.map((s) => s.synced()));
      const stoppedAt = Date.now();
      for (const s of old) assert.deepEqual(await s.stop("SIGTERM"), { code: 0, signal: null });
      const releasedAt = Date.now();
      for (const name of names) await patchSpec(ns, name, { agent: { replicas } });
      for (const name of names) await waitForConverged(ns, name, { replicas });
      const firstPass = Math.max(
        ...names.map((n) => Math.min(...next.flatMap((s) => passesOf(s, ns, n).map(([a]) => a)))),
      );
      t.diagnostic(
        `${old.length} → ${count} shards: old stopped in ${releasedAt - stoppedAt} ms; every fleet's first pass by the new shards ${firstPass - releasedAt} ms after; converged ${Date.now() - releasedAt} ms after`,
      );
      for (const name of names) {
        const owner = shardOf(ns, name, count);
        next.forEach((s, i) =>
          assert.equal(passesOf(s, ns, name).length > 0, i === owner, `${name}: ${s.label}`),
        );
      }
      return next;
    };
    const four = await handOver(two, 4, 2);
    const three = await handOver(four, 3, 3);
    assertOneAtATime([...two, ...four, ...three], ns, names);
    assertKept(before, await podUids(ns));
  });
});

const isLabelling = (l: LogLine) => l.msg === "labelled with its shard bucket";

/** The pods of `ns` by name, with their uids. */
async function podUids(ns: string): Promise<Map<string, string>> {
  const pods = (await adminClient().list(paths.pods(ns))).items;
  return new Map(pods.map((p) => [p.metadata.name ?? "", p.metadata.uid ?? ""]));
}

/** Every pod of `before` is still there, the same pod (same uid): none was recreated. */
function assertKept(before: Map<string, string>, now: Map<string, string>): void {
  for (const [name, uid] of before) assert.equal(now.get(name), uid, `${name} not recreated`);
}

/** No two of `procs` ever reconciled one of the CocoonSets at the same time. */
function assertOneAtATime(procs: ControllerProcess[], ns: string, names: string[]): void {
  for (const name of names) {
    const runs = procs.flatMap((p) => passesOf(p, ns, name).map(([a, b]) => ({ p, a, b })));
    for (const x of runs)
      for (const y of runs)
        if (x.p !== y.p)
          assert.ok(
            x.b <= y.a || y.b <= x.a,
            `${name}: ${x.p.label} [${x.a}, ${x.b}] overlaps ${y.p.label} [${y.a}, ${y.b}]`,
          );
  }
}
