/**
 * The controller in shards, as processes against the real apiserver: every CocoonSet is
 * reconciled by exactly the shard its name hashes to; a shard's leader killed in the middle
 * of a fan-out is replaced by that shard's standby, which finishes it without creating any
 * pod twice; and a change of the shard count (one process, then two shards beside it, then
 * the old one stopped) hands every CocoonSet over with no two processes reconciling one at
 * the same time and none left behind. Each test's controllers watch only its namespace and
 * elect their leaders on Leases there. Passes are counted from the controllers' own debug
 * lines (one per reconcile, with its duration).
 */
import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import { shardOf } from "../../controller/shard.js";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { paths, waitForList, type KubeObject } from "../../engine/kube/index.js";
import { LABELS } from "../../engine/spec/index.js";
import { adminClient, testKubeconfig } from "../support/cluster.js";
import {
  createCocoonSet,
  fleetPods,
  patchSpec,
  waitForConverged,
} from "../support/controller-fleet.js";
import {
  Cleanup,
  controllerNamespace,
  startController,
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
): Promise<ControllerProcess> {
  return startController(c, {
    kubeconfig: testKubeconfig(),
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

/** The passes `proc` ran on `ns/name`, as [start, end] in milliseconds. */
function passesOf(proc: ControllerProcess, ns: string, name: string): [number, number][] {
  return proc
    .logs((l) => isPass(l) && l.controller === "cocoonset" && l.namespace === ns && l.name === name)
    .map((l) => {
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
    names.forEach((group, owner) => {
      for (const name of group) {
        const mine = passesOf(shards[owner], ns, name).length;
        const theirs = passesOf(shards[1 - owner], ns, name).length;
        counts.push(`${name}: shard ${owner} ${mine}, shard ${1 - owner} ${theirs}`);
        assert.ok(mine > 0, `${name} reconciled by its shard ${owner}`);
        assert.equal(theirs, 0, `${name} never reconciled by shard ${1 - owner}`);
      }
    });
    t.diagnostic(`passes per shard: ${counts.join("; ")}`);
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
  });

  test("from one process to two shards: each CocoonSet is handed over, never reconciled by two processes at once", async (t) => {
    const c = new Cleanup(t);
    const ns = await controllerNamespace(c, "shard-move");
    const names = namesPerShard(ns, "m", 2, 2).flat();
    const single = await startShard(c, ns, "0/1", "unsharded");
    await single.synced();
    for (const name of names) await createCocoonSet(ns, name, { replicas: 1 });
    for (const name of names) await waitForConverged(ns, name, { replicas: 1 });

    // The new count starts beside the old process: its shards hold everything back.
    const shards = [
      await startShard(c, ns, "0/2", "shard-0"),
      await startShard(c, ns, "1/2", "shard-1"),
    ];
    await Promise.all(shards.map((s) => s.synced()));
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

    // No two processes ever reconciled one CocoonSet at the same time, and each is now its shard's.
    const procs = [single, ...shards];
    for (const name of names) {
      const runs = procs.flatMap((p) => passesOf(p, ns, name).map(([a, b]) => ({ p, a, b })));
      for (const x of runs)
        for (const y of runs)
          if (x.p !== y.p)
            assert.ok(
              x.b <= y.a || y.b <= x.a,
              `${name}: ${x.p.label} [${x.a}, ${x.b}] overlaps ${y.p.label} [${y.a}, ${y.b}]`,
            );
      const owner = shardOf(ns, name, 2);
      assert.ok(passesOf(shards[owner], ns, name).length > 0, `${name} taken by shard ${owner}`);
      assert.equal(passesOf(shards[1 - owner], ns, name).length, 0);
    }
  });
});
