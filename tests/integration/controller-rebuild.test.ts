/**
 * Acceptance tests of `cocoonset controller`: a failing sub-agent is rebuilt on the backoff
 * schedule and dead-lettered after 4 rebuilds (events, metrics, revival by a spec edit), by
 * the controller in the test's process on a clock the test moves past each backoff the
 * controller requeues for; and a controller process killed in the middle of a 100-slot
 * fan-out is restarted and converges to exactly 100 sub-agents.
 */
import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { BACKOFF_SCHEDULE_SECONDS, MAX_REBUILD_ATTEMPTS } from "../../engine/spec/constants.js";
import { ANNOTATIONS, LABELS, type CocoonSet, type Pod } from "../../engine/spec/index.js";
import { paths, waitForList, waitForObject, type KubeObject } from "../../engine/kube/index.js";
import { adminClient, isReady, testKubeconfig } from "../support/cluster.js";
import {
  createCocoonSet,
  failPod,
  fleetPods,
  historyOf,
  listEvents,
  patchSpec,
  poke,
  slotOf,
  waitForConverged,
  waitForEvent,
} from "../support/controller-fleet.js";
import { advancePastRequeues, startInProcessController } from "../support/controller-in-process.js";
import { Cleanup, controllerNamespace, startController } from "../support/controller-process.js";
import { WarpClock } from "../support/fake-clock.js";

before(async () => {
  await ensureCrd(adminClient());
});

describe("cocoonset controller: rebuilds and restarts", { timeout: 240_000 }, () => {
  test("a failing sub-agent is rebuilt after 0 s, 1 s, 5 s and 30 s, then left in dead-letter; a spec edit revives the slot", async (t) => {
    const c = new Cleanup(t);
    const ns = await controllerNamespace(c, "ctl-rebuild");
    const client = adminClient();
    const clock = new WarpClock();
    const proc = await startInProcessController(c, { namespaces: [ns], clock });
    await proc.synced();

    await createCocoonSet(ns, "rb", { replicas: 2 });
    await waitForConverged(ns, "rb", { replicas: 2 });
    let pod = await client.get<Pod>(paths.pod(ns, "rb-2"));

    // Each round: fail the current pod of slot 2, wait for the history entry the controller
    // writes before its delete, then for the replacement pod (a watch each time).
    const lastDeleted: number[] = [];
    const failedAt: number[] = [];
    const logFrom: number[] = [];
    for (let k = 1; k <= MAX_REBUILD_ATTEMPTS; k++) {
      const uid = pod.metadata!.uid!;
      failedAt.push(clock.now());
      logFrom.push(proc.lines.length);
      await failPod(ns, "rb-2", uid);
      if (k > 1)
        await advancePastRequeues(
          proc,
          clock,
          { ns, name: "rb", from: logFrom[k - 1] },
          `rebuild ${k}`,
          async () =>
            (historyOf(await client.get(paths.cocoonSet(ns, "rb"))).get(2)?.count ?? 0) >= k,
        );
      const cs = await waitForObject(
        client,
        paths.cocoonSets(ns),
        "rb",
        (o) => (historyOf(o).get(2)?.count ?? 0) >= k,
        { timeoutMs: 60_000, description: `rebuild history count ${k} for slot 2` },
      );
      const entry = historyOf(cs).get(2)!;
      assert.equal(entry.count, k, "one history entry per failure");
      lastDeleted.push(Date.parse(entry.lastDeleted));
      pod = (await waitForObject(
        client,
        paths.pods(ns),
        "rb-2",
        (p) => !!p && p.metadata.uid !== uid && !p.metadata.deletionTimestamp && isReady(p),
        { description: `the replacement of slot 2 after rebuild ${k}` },
      )) as unknown as Pod;
    }
    // The first rebuild is immediate: the pass that saw the failure deleted the pod, with no
    // backoff requeue before it (read from the log, whatever the machine's load).
    const round1 = proc.lines.slice(logFrom[0]);
    const rebuilt = round1.findIndex(
      (l) => l.msg === "deleted pod" && l.pod === "rb-2" && l.decision === "rebuild",
    );
    assert.ok(rebuilt >= 0, `the first rebuild is logged\n${proc.tail()}`);
    assert.deepEqual(
      round1
        .slice(0, rebuilt)
        .filter((l) => l.name === "rb" && Number(l.requeueAfterMs ?? 0) > 0)
        .map((l) => `${l.msg} ${String(l.requeueAfterMs)}`),
      [],
      "the first rebuild waits 0 s: no backoff requeue before it",
    );
    // Each next one waits out the schedule since the last delete (lastDeleted has whole
    // seconds, so the deltas are exact lower bounds).
    for (let k = 1; k < MAX_REBUILD_ATTEMPTS; k++) {
      const delta = lastDeleted[k] - lastDeleted[k - 1];
      assert.ok(
        delta >= BACKOFF_SCHEDULE_SECONDS[k] * 1000,
        `rebuild ${k + 1} came ${delta} ms after rebuild ${k}; the schedule says ≥ ${BACKOFF_SCHEDULE_SECONDS[k]} s`,
      );
    }
    // The 30 s wait was the controller's own: when the pod failed before the schedule allowed
    // its rebuild (as it does unless the machine held the test up for half a minute), a backoff
    // requeue was logged before the delete (read from the log, whatever the machine's load).
    if (failedAt[3] < lastDeleted[2] + BACKOFF_SCHEDULE_SECONDS[3] * 1000 - 1000) {
      const round4 = proc.lines.slice(logFrom[3]);
      const deleted = round4.findIndex(
        (l) => l.msg === "deleted pod" && l.pod === "rb-2" && l.decision === "rebuild",
      );
      assert.ok(deleted >= 0, `the fourth rebuild is logged\n${proc.tail()}`);
      assert.ok(
        round4.slice(0, deleted).some((l) => l.name === "rb" && Number(l.requeueAfterMs ?? 0) > 0),
        `the fourth rebuild waited for its backoff: a requeue was logged before it\n${proc.tail()}`,
      );
    }

    // A fifth failure exhausts the budget: the pod stays, marked dead-letter.
    const lastUid = pod.metadata!.uid!;
    await failPod(ns, "rb-2", lastUid);
    await waitForObject(
      client,
      paths.pods(ns),
      "rb-2",
      (p) =>
        p?.metadata.uid === lastUid && p.metadata.annotations?.[ANNOTATIONS.deadLetter] === "true",
      { description: "slot 2 to be marked dead-letter" },
    );
    const [dead] = await waitForEvent(
      ns,
      "rb",
      "SubAgentDeadLetter",
      "slot 2 exhausted 4 rebuilds; pod rb-2 left in dead-letter",
    );
    assert.equal(dead.type, "Warning");
    assert.equal(dead.reportingController, "cocoonset-controller");
    const rebuilding = (await listEvents(ns)).filter((e) => e.reason === "SubAgentRebuilding");
    assert.deepEqual(
      rebuilding.map((e) => `${e.type} ${e.note}`).sort(),
      [1, 2, 3, 4].map((k) => `Normal slot 2 attempt ${k}/4`),
    );
    const labels = { namespace: ns, cocoonset: "rb" };
    assert.equal(await proc.metric("cocoonset_subagent_dead_letter_total", labels), 1);
    assert.equal(await proc.metric("cocoonset_subagent_rebuild_total", labels), 4);

    // It stays: a later pass (started after a change to the pod) leaves it alone.
    const since = Date.now();
    await poke(ns, "rb-2");
    await proc.reconciledSince(ns, "rb", since);
    const parked = await client.get<Pod>(paths.pod(ns, "rb-2"));
    assert.equal(parked.metadata?.uid, lastUid, "the dead-letter pod is not deleted");
    assert.equal(parked.status?.phase, "Failed");
    assert.equal(await proc.metric("cocoonset_subagent_rebuild_total", labels), 4);
    assert.equal(await proc.metric("cocoonset_subagent_dead_letter_total", labels), 1);
    const csParked = await client.get<CocoonSet>(paths.cocoonSet(ns, "rb"));
    assert.equal(csParked.status?.readyAgents, 2);
    assert.equal(csParked.status?.desiredAgents, 3);
    assert.equal(csParked.status?.phase, "Scaling");

    // A spec edit revives the slot: a new pod with the new image and a fresh budget.
    await patchSpec(ns, "rb", { agent: { image: "ghcr.io/cocoonstack/agent:2" } });
    const { cs: revived, pods } = await waitForConverged(ns, "rb", { replicas: 2 });
    const slot2 = pods.find((p) => p.metadata?.name === "rb-2")!;
    assert.notEqual(slot2.metadata?.uid, lastUid);
    assert.equal(slot2.metadata?.annotations?.[ANNOTATIONS.deadLetter], undefined);
    assert.equal(slot2.metadata?.annotations?.[ANNOTATIONS.image], "ghcr.io/cocoonstack/agent:2");
    assert.equal(historyOf(revived).has(2), false, "the slot's history is cleared");
  });

  test("SIGKILL in the middle of a 100-slot fan-out, then a restart, converges to exactly slots 1..100", async (t) => {
    const c = new Cleanup(t);
    const ns = await controllerNamespace(c, "ctl-kill");
    const client = adminClient();
    await createCocoonSet(ns, "big", { replicas: 100 });
    // Two creates in flight make the fan-out long enough to be caught in the middle.
    const first = await startController(c, {
      kubeconfig: testKubeconfig(),
      namespaces: [ns],
      extraArgs: ["--fanout-concurrency", "2"],
      label: "first",
    });
    const subAgents = `${LABELS.name}=big,${LABELS.role}=sub-agent`;
    await waitForList(client, paths.pods(ns), (items) => items.length >= 5, {
      labelSelector: subAgents,
      description: "the fan-out to be under way",
    });
    const killed = await first.stop("SIGKILL");
    assert.equal(killed.signal, "SIGKILL");
    const atKill = (await client.list(paths.pods(ns), { labelSelector: subAgents })).items;
    assert.ok(
      atKill.length > 0 && atKill.length < 100,
      `the controller died in the middle of the fan-out (${atKill.length} of 100 sub-agents)`,
    );

    const second = await startController(c, {
      kubeconfig: testKubeconfig(),
      namespaces: [ns],
      label: "second",
    });
    const { pods } = await waitForConverged(ns, "big", { replicas: 100 }, 120_000);
    const subs = pods.filter((p) => p.metadata?.labels?.[LABELS.role] === "sub-agent");
    assert.equal(subs.length, 100);
    assert.deepEqual(
      subs.map((p) => Number(slotOf(p))).sort((a, b) => a - b),
      Array.from({ length: 100 }, (_, i) => i + 1),
      "one pod per slot 1..100",
    );
    for (const p of subs) assert.equal(p.metadata?.name, `big-${slotOf(p)}`);
    const all = await fleetPods(client, ns, "big");
    assert.equal(all.length, 101, "no leftover pod");
    assert.equal(new Set(all.map((p) => p.metadata?.uid)).size, 101);
    const before = new Set(atKill.map((p: KubeObject) => p.metadata.name));
    const recreated = second
      .logs((l) => l.msg === "created pod")
      .filter((l) => before.has(String(l.pod)));
    assert.deepEqual(recreated, [], "the restarted controller does not recreate existing slots");
  });
});
