/**
 * `cocoonset controller` and a node that refuses a sub-agent (docs/behaviour.md §3.6): the
 * main agent's node has room for the main agent only, so the cluster's kubelet admission
 * refuses the sub-agent bound next to it (`OutOfcpu`). The controller still rebuilds it on
 * the backoff schedule (on a clock the test moves past each requeue), and says why at each
 * step: a Warning `NodeRefused` per refused pod, the rebuild events naming the reason, the
 * slot's status entry carrying the kubelet's reason and message, and the dead-letter event
 * naming the refusal. Once the node has room, a spec edit revives the slot and the entry
 * loses the refusal.
 *
 * The fleet runs in a node pool of its own: one simulated node carries the pool's label and
 * the engine's taint, with the allocatable the test sets, so no other test's room changes.
 */
import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { ANNOTATIONS, type CocoonSet, type Pod } from "../../engine/spec/index.js";
import { paths, waitForList, waitForObject } from "../../engine/kube/index.js";
import { adminClient, suffix } from "../support/cluster.js";
import {
  createCocoonSet,
  historyOf,
  listEvents,
  patchSpec,
  waitForConverged,
  waitForEvent,
  type EventV1,
} from "../support/controller-fleet.js";
import { advancePastRequeues, startInProcessController } from "../support/controller-in-process.js";
import { Cleanup, controllerNamespace } from "../support/controller-process.js";
import { WarpClock } from "../support/fake-clock.js";
import { poolNode, setAllocatable } from "../support/pool-node.js";

const client = adminClient();

before(async () => {
  await ensureCrd(client);
});

describe("cocoonset controller: a sub-agent its node refuses", { timeout: 300_000 }, () => {
  test("is rebuilt on the backoff with the kubelet's reason in its status entry, a Warning NodeRefused per refused pod and the rebuild events, then dead-lettered naming the refusal; room and a spec edit revive it", async (t) => {
    const c = new Cleanup(t);
    const ns = await controllerNamespace(c, "ctl-refused");
    const pool = `refuse-${suffix()}`;
    // Room for the main agent (1 cpu), not for the sub-agent bound next to it.
    const node = await poolNode(t, pool, { cpu: "1500m", memory: "8Gi", pods: "10" });
    const clock = new WarpClock();
    const proc = await startInProcessController(c, { namespaces: [ns], clock });
    await proc.synced();

    const from = proc.lines.length;
    await createCocoonSet(ns, "rf", {
      replicas: 1,
      nodePool: pool,
      agent: {
        image: "ghcr.io/cocoonstack/agent:1",
        resources: { requests: { cpu: "1", memory: "1Gi" } },
      },
    });
    // Each backoff the controller requeues for is moved past at once, until the budget is out.
    await advancePastRequeues(
      proc,
      clock,
      { ns, name: "rf", from },
      "slot 1 in dead-letter",
      async () => {
        const p = await client.get<Pod>(paths.pod(ns, "rf-1")).catch(() => undefined);
        return p?.metadata?.annotations?.[ANNOTATIONS.deadLetter] === "true";
      },
      20,
    );

    // The pod left for people to look at is the node's refusal, as its kubelet wrote it.
    const message =
      "Pod was rejected: Node didn't have enough resource: cpu, requested: 1000, used: 1000, capacity: 1500";
    const dead = await client.get<Pod & { status?: { reason?: string; message?: string } }>(
      paths.pod(ns, "rf-1"),
    );
    assert.equal(dead.spec?.nodeName, node);
    assert.equal(dead.status?.phase, "Failed");
    assert.equal(dead.status?.reason, "OutOfcpu");
    assert.equal(dead.status?.message, message);
    const main = await client.get<Pod>(paths.pod(ns, "rf-0"));
    assert.equal(main.spec?.nodeName, node, "the main agent runs on the pool's node");

    // The slot's entry in the CocoonSet's status carries the refusal.
    const refusal = { node, reason: "OutOfcpu", message };
    const cs = (await waitForObject(
      client,
      paths.cocoonSets(ns),
      "rf",
      (o) =>
        ((o as CocoonSet | undefined)?.status?.agents ?? []).some(
          (a) => a.slot === 1 && a.podName === "rf-1" && a.nodeRefusal !== undefined,
        ),
      { timeoutMs: 60_000, description: "the status entry of slot 1 with its node's refusal" },
    )) as unknown as CocoonSet;
    const entry = cs.status?.agents?.find((a) => a.slot === 1);
    assert.equal(entry?.phase, "Failed");
    assert.deepEqual(entry?.nodeRefusal, refusal);
    assert.equal(cs.status?.agents?.find((a) => a.slot === 0)?.nodeRefusal, undefined);
    assert.equal(historyOf(cs).get(1)?.count, 4, "4 rebuilds, then dead-letter");

    // The events: the dead-letter names the refusal; one Warning NodeRefused per refused pod
    // (the original and the 4 rebuilt ones); each rebuild names the node's reason.
    const [deadLetter] = await waitForEvent(
      ns,
      "rf",
      "SubAgentDeadLetter",
      `slot 1 exhausted 4 rebuilds: node ${node} refused it (OutOfcpu: ${message}); pod rf-1 left in dead-letter`,
    );
    assert.equal(deadLetter.type, "Warning");
    assert.equal(deadLetter.reportingController, "cocoonset-controller");
    const ofFleet = (e: EventV1) => e.regarding?.kind === "CocoonSet" && e.regarding.name === "rf";
    const refusedEvents = (
      await waitForList<EventV1>(
        client,
        paths.events(ns),
        (all) => all.filter((e) => ofFleet(e) && e.reason === "NodeRefused").length >= 5,
        { timeoutMs: 60_000, description: "5 NodeRefused events on rf" },
      )
    ).filter((e) => ofFleet(e) && e.reason === "NodeRefused");
    const said = `slot 1: node ${node} refused pod rf-1 (OutOfcpu: ${message}); `;
    assert.deepEqual(
      refusedEvents.map((e) => `${e.type} ${e.note}`).sort(),
      [
        ...[1, 2, 3, 4].map((k) => `Warning ${said}rebuilding it, attempt ${k}/4`),
        `Warning ${said}no rebuild left (4 done): left in dead-letter`,
      ].sort(),
    );
    const rebuilding = (await listEvents(ns)).filter(
      (e) => ofFleet(e) && e.reason === "SubAgentRebuilding",
    );
    assert.deepEqual(
      rebuilding.map((e) => `${e.type} ${e.note}`).sort(),
      [1, 2, 3, 4].map((k) => `Normal slot 1 attempt ${k}/4 (node ${node} refused it: OutOfcpu)`),
    );
    const labels = { namespace: ns, cocoonset: "rf" };
    assert.equal(await proc.metric("cocoonset_subagent_rebuild_total", labels), 4);
    assert.equal(await proc.metric("cocoonset_subagent_dead_letter_total", labels), 1);

    // Room on the node and a spec edit: the slot starts over, runs, and its entry is plain.
    await setAllocatable(node, { cpu: "4", memory: "8Gi", pods: "10" });
    await patchSpec(ns, "rf", { agent: { image: "ghcr.io/cocoonstack/agent:2" } });
    const { cs: revived } = await waitForConverged(ns, "rf", { replicas: 1 }, 120_000);
    for (const a of revived.status?.agents ?? [])
      assert.equal(Object.hasOwn(a, "nodeRefusal"), false, `slot ${a.slot} has no refusal`);
    assert.equal(historyOf(revived).has(1), false, "the slot's history is cleared");
  });
});
