/**
 * The idle and expiry policies (spec.idle, spec.expiry) carried out by the controller, in the
 * test's process on a clock the test moves, with the node-agent simulator and the embedded
 * registry: an idle sub-agent hibernated through the policy's own CocoonHibernation and woken
 * by a renewal of its activity Lease; a fleet idle as a whole suspended through its status
 * (the spec untouched) and woken by activity; the Expiring condition, then an expiry's suspend
 * and an expiry's deletion (pods, CocoonHibernations and snapshot tags gone); the fleet's hook
 * called before its expiry is written.
 */
import assert from "node:assert/strict";
import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { before, describe, test, type TestContext } from "node:test";
import type { HookEvent } from "../../engine/idle/index.js";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { paths, waitForObject } from "../../engine/kube/index.js";
import { OciRegistry } from "../../engine/registry/oci.js";
import {
  ANNOTATIONS,
  KIND,
  SNAPSHOT_TAGS,
  type CocoonHibernation,
  type CocoonSet,
  type Pod,
} from "../../engine/spec/index.js";
import { adminClient } from "../support/cluster.js";
import {
  createCocoonSet,
  fleetPods,
  waitForConverged,
  waitForEvent,
} from "../support/controller-fleet.js";
import { type InProcessController } from "../support/controller-in-process.js";
import { Cleanup, controllerNamespace, metricValue } from "../support/controller-process.js";
import { startIdleController } from "../support/idle-controller.js";
import {
  optInNodeAgent,
  registryAddress,
  slotsInputs,
  vmReady,
  waitForPods,
} from "../support/lifecycle.js";
import { create, remove } from "../../provider/dynamic/index.js";
import { ObjectHistory } from "../support/object-history.js";

const client = adminClient();
type HibernationEvent = {
  metadata: { name?: string; resourceVersion?: string };
  regarding?: { kind?: string };
};
const MINUTE = 60_000;
const annotationsOf = (p: Pod | undefined) => p?.metadata?.annotations ?? {};
const phaseOf = (cs: CocoonSet) => cs.status?.phase ?? "";
const awake = (p: Pod) => vmReady(p) && annotationsOf(p)[ANNOTATIONS.hibernate] === undefined;
const hibernated = (p: Pod) =>
  annotationsOf(p)[ANNOTATIONS.hibernate] === "true" &&
  annotationsOf(p)[ANNOTATIONS.lifecycleState] === "hibernated";

before(async () => {
  await ensureCrd(client);
});

/** An opted-in namespace and an in-process controller on it, with the registry, on a warp clock. */
async function setUp(c: Cleanup, prefix: string) {
  const ns = await controllerNamespace(c, prefix);
  await optInNodeAgent(ns);
  return { ns, ...(await startIdleController(c, ns)) };
}

/** Waits (watch) for the CocoonHibernation `name` to satisfy `done`; the controller's log on failure. */
async function hibernationOf(
  proc: { tail(n?: number): string },
  ns: string,
  name: string,
  done: (h: CocoonHibernation) => boolean,
): Promise<CocoonHibernation> {
  try {
    return (await waitForObject(
      client,
      paths.cocoonHibernations(ns),
      name,
      (h) => h !== undefined && done(h as unknown as CocoonHibernation),
      { timeoutMs: 90_000, description: `CocoonHibernation ${name}` },
    )) as unknown as CocoonHibernation;
  } catch (e) {
    assert.fail(`${String(e)}\n${proc.tail(60)}`);
  }
}

/**
 * Waits until the CocoonHibernation controller has nothing queued and no reconcile running
 * (its queue's depth and active workers, from its metrics): what was due has run.
 */
async function hibernationQueueIdle(proc: InProcessController): Promise<void> {
  const labels = { controller: "cocoonhibernation" };
  const deadline = Date.now() + 60_000;
  for (;;) {
    const text = await proc.metricsText();
    const depth = metricValue(text, "workqueue_depth", { name: "cocoonhibernation" });
    const active = metricValue(text, "controller_runtime_active_workers", labels);
    if (depth === 0 && active === 0) return;
    if (Date.now() > deadline)
      assert.fail(`the hibernation queue never idle (depth ${depth}, active ${active})`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * A hook service on loopback (plain http is allowed there): each call's event, and the
 * CocoonSet's `idleSuspendedSince` as the apiserver held it when the call came.
 */
async function hookService(t: TestContext, ns: string, fleet: string) {
  const calls: { event: HookEvent; idleSuspendedSince?: string }[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const event = JSON.parse(Buffer.concat(chunks).toString("utf8")) as HookEvent;
      void client.get<CocoonSet>(paths.cocoonSet(ns, fleet)).then(
        (cs) => {
          calls.push({ event, idleSuspendedSince: cs.status?.idleSuspendedSince });
          res.writeHead(204).end();
        },
        () => res.writeHead(500).end(),
      );
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  return { url, calls };
}

describe(
  "the idle and expiry policies (controller, simulator, registry)",
  { timeout: 300_000 },
  () => {
    test("an idle sub-agent is hibernated through the policy's CocoonHibernation; a Lease renewal wakes it", async (t) => {
      const c = new Cleanup(t);
      const { ns, clock, proc, renew } = await setUp(c, "idle-member");
      await createCocoonSet(ns, "nap", { replicas: 1, idle: { after: "10m" } });
      await waitForConverged(ns, "nap", { replicas: 1 });
      await waitForPods(ns, "nap", 2, vmReady, "both VMs booted");

      // The main agent is used at minute 6; at minute 11 only the sub-agent has been idle 10m.
      clock.advance(6 * MINUTE);
      await renew("nap", ["nap-0"]);
      clock.advance(5 * MINUTE);
      const ch = await hibernationOf(
        proc,
        ns,
        "nap-1-idle",
        (h) => h.status?.phase === "Hibernated",
      );
      const cs = await client.get<CocoonSet>(paths.cocoonSet(ns, "nap"));
      assert.deepEqual(
        ch.metadata?.ownerReferences?.map((r) => [r.kind, r.name, r.uid]),
        [[KIND, "nap", cs.metadata.uid]],
        "owned by the CocoonSet",
      );
      assert.deepEqual(ch.spec, { podRef: { name: "nap-1" }, desire: "Hibernate" });
      const [main, sub] = await fleetPods(client, ns, "nap");
      assert.ok(hibernated(sub), "the sub-agent's VM hibernated");
      assert.ok(awake(main), "the main agent, used since, runs on");
      const record = cs.status?.vms?.["1"];
      assert.ok(record?.idleSince, "status.vms[1].idleSince records the hibernation");
      assert.ok(record?.lastActivity && record.lastActivity < record.idleSince);
      assert.equal(cs.status?.idleSuspendedSince, undefined, "the fleet is not suspended");
      assert.equal(cs.spec.suspend, undefined, "the spec is untouched");
      const vm = annotationsOf(sub)[ANNOTATIONS.vmName];
      assert.deepEqual(
        await new OciRegistry(registryAddress()).listTags(vm),
        [SNAPSHOT_TAGS.hibernate],
        "the snapshot is kept",
      );
      await waitForEvent(
        ns,
        "nap",
        "IdleHibernated",
        /^sub-agent 1 \(pod nap-1\) idle since .*: hibernated$/,
      );

      // Activity on the hibernated member wakes it: the same CR turns to Wake.
      await renew("nap", ["nap-1"]);
      await hibernationOf(
        proc,
        ns,
        "nap-1-idle",
        (h) => h.spec?.desire === "Wake" && h.status?.phase === "Active",
      );
      await waitForPods(ns, "nap", 2, awake, "both VMs running again");
      // The wake over, the CR goes: asking Wake, it would withdraw a later hibernate request.
      await waitForObject(
        client,
        paths.cocoonHibernations(ns),
        "nap-1-idle",
        (o) => o === undefined,
        {
          timeoutMs: 60_000,
          description: "the policy's CocoonHibernation gone once the wake is over",
        },
      );
      const woken = await client.get<CocoonSet>(paths.cocoonSet(ns, "nap"));
      assert.equal(woken.status?.vms?.["1"]?.idleSince, undefined, "no longer idle-hibernated");
      assert.ok(
        (woken.status?.vms?.["1"]?.lastActivity ?? "") >= (record?.idleSince ?? "~"),
        "the wake counts as activity",
      );
      assert.equal(woken.metadata.generation, cs.metadata.generation, "the spec is untouched");
      await waitForEvent(
        ns,
        "nap",
        "WokenOnActivity",
        /^sub-agent 1 \(pod nap-1\) active at .*: woken$/,
      );

      // Nobody uses either for 10 minutes more: the fleet suspends, nothing of the wake in its way.
      clock.advance(11 * MINUTE);
      await waitForObject(
        client,
        paths.cocoonSets(ns),
        "nap",
        (o) =>
          !!(o as unknown as CocoonSet | undefined)?.status?.idleSuspendedSince &&
          phaseOf(o as unknown as CocoonSet) === "Suspended",
        { timeoutMs: 90_000, description: "nap idle-suspended" },
      );
      for (const p of await fleetPods(client, ns, "nap"))
        assert.ok(hibernated(p), `${p.metadata?.name} hibernated`);
    });

    test("the slots resource's delete (what `pulumi destroy` runs) of a fleet with an idle-hibernated member drops that member's snapshot and leaves nothing", async (t) => {
      const c = new Cleanup(t);
      const { ns, clock, proc, renew } = await setUp(c, "idle-destroy");
      await createCocoonSet(ns, "doze", { replicas: 1, idle: { after: "10m" } });
      await waitForConverged(ns, "doze", { replicas: 1 });
      await waitForPods(ns, "doze", 2, vmReady, "both VMs booted");
      const cs = await client.get<CocoonSet>(paths.cocoonSet(ns, "doze"));
      // The deploy that made the fleet: its outputs are what destroy is given.
      const deployed = await create(
        slotsInputs(ns, "doze", cs.metadata.uid ?? "", cs.spec, { registry: registryAddress() }),
      );

      clock.advance(6 * MINUTE);
      await renew("doze", ["doze-0"]);
      clock.advance(5 * MINUTE);
      await hibernationOf(proc, ns, "doze-1-idle", (h) => h.status?.phase === "Hibernated");
      const [main, sub] = await fleetPods(client, ns, "doze");
      const vms = [main, sub].map((p) => annotationsOf(p)[ANNOTATIONS.vmName]);
      const reg = new OciRegistry(registryAddress());
      assert.deepEqual(await reg.listTags(vms[1]), [SNAPSHOT_TAGS.hibernate], "the idle snapshot");

      await remove(`${ns}/doze`, deployed.outs);
      assert.equal(await client.getOrUndefined(paths.cocoonSet(ns, "doze")), undefined);
      assert.deepEqual((await client.list(paths.pods(ns))).items, [], "no pod left");
      assert.deepEqual(
        (await client.list(paths.cocoonHibernations(ns))).items,
        [],
        "the policy's CocoonHibernation went with its owner",
      );
      assert.deepEqual(await reg.listTags(vms[1]), [], "the idle member's snapshot dropped");
    });

    test("members idle-hibernated: once settled, the CocoonHibernation controller makes no pass and writes nothing", async (t) => {
      const c = new Cleanup(t);
      const { ns, clock, proc, renew } = await setUp(c, "idle-quiet");
      await createCocoonSet(ns, "calm", { replicas: 3, idle: { after: "10m" } });
      await waitForConverged(ns, "calm", { replicas: 3 });
      await waitForPods(ns, "calm", 4, vmReady, "every VM booted");
      // The main agent stays in use; its three sub-agents go idle and are hibernated.
      clock.advance(6 * MINUTE);
      await renew("calm", ["calm-0"]);
      clock.advance(5 * MINUTE);
      const names = ["calm-1-idle", "calm-2-idle", "calm-3-idle"];
      for (const n of names)
        await hibernationOf(proc, ns, n, (h) => h.status?.phase === "Hibernated");
      await hibernationQueueIdle(proc);
      const facts = async () => ({
        passes: await proc.metric("controller_runtime_reconcile_total", {
          controller: "cocoonhibernation",
        }),
        versions: (await client.list<CocoonHibernation>(paths.cocoonHibernations(ns))).items
          .map((h) => `${h.metadata.name}@${h.metadata.resourceVersion}`)
          .sort(),
        events: (await client.list<HibernationEvent>(paths.events(ns))).items
          .filter((e) => e.regarding?.kind === "CocoonHibernation")
          .map((e) => `${e.metadata.name}@${e.metadata.resourceVersion}`)
          .sort(),
      });
      const settled = await facts();
      assert.equal(settled.versions.length, 3);

      // Four minutes of the controller's time: the main agent used every minute (a fleet pass
      // each), every requeue the hibernations asked for due. Nothing of theirs to decide.
      for (let minute = 0; minute < 4; minute++) {
        clock.advance(MINUTE);
        await renew("calm", ["calm-0"]);
      }
      await hibernationQueueIdle(proc);
      const after = await facts();
      assert.deepEqual(after.versions, settled.versions, "no CocoonHibernation written");
      assert.deepEqual(after.events, settled.events, "no event about them");
      assert.equal(
        after.passes - settled.passes,
        0,
        `no hibernation pass once settled\n${proc.tail(30)}`,
      );
      for (const p of (await fleetPods(client, ns, "calm")).slice(1))
        assert.ok(hibernated(p), `${p.metadata?.name} still hibernated`);
    });

    test("a fleet idle as a whole is suspended through its status, the spec untouched, and woken by activity", async (t) => {
      const c = new Cleanup(t);
      const { ns, clock, renew } = await setUp(c, "idle-fleet");
      await createCocoonSet(ns, "doze", { replicas: 1, idle: { after: "10m" } });
      await waitForConverged(ns, "doze", { replicas: 1 });
      await waitForPods(ns, "doze", 2, vmReady, "both VMs booted");
      const history = await ObjectHistory.start<CocoonSet>(t, client, paths.cocoonSets(ns), "doze");
      const generation = history.seen.at(-1)?.metadata.generation;

      clock.advance(11 * MINUTE);
      const suspended = await history.until(
        (cs) => !!cs.status?.idleSuspendedSince && phaseOf(cs) === "Suspended",
        "idle-suspended, phase Suspended",
        { show: phaseOf, timeoutMs: 90_000 },
      );
      assert.equal(suspended.spec.suspend, undefined, "spec.suspend is never written");
      assert.equal(suspended.metadata.generation, generation, "the spec is untouched");
      const pods = await fleetPods(client, ns, "doze");
      assert.equal(pods.length, 2, "as a retain suspend: every pod kept");
      for (const p of pods) assert.ok(hibernated(p), `${p.metadata?.name} hibernated`);
      assert.deepEqual(
        (await client.list(paths.cocoonHibernations(ns))).items,
        [],
        "the whole fleet goes through the suspend, not a CocoonHibernation per member",
      );
      await waitForEvent(ns, "doze", "IdleSuspended", /the fleet is suspended$/);

      // Activity on any member wakes the fleet, as an unsuspend does.
      const since = history.seen.length;
      await renew("doze", ["doze-1"]);
      await waitForPods(ns, "doze", 2, awake, "every VM running again");
      const running = await history.until(
        (cs) => !cs.status?.idleSuspendedSince && phaseOf(cs) === "Running",
        "awake, phase Running",
        { since, show: phaseOf, timeoutMs: 90_000 },
      );
      assert.equal(running.spec.suspend, undefined);
      assert.equal(running.metadata.generation, generation, "the spec is untouched");
      await waitForEvent(ns, "doze", "IdleWoken", /: the fleet wakes, main agent first$/);
    });

    test("expiry: the Expiring condition a tenth of `after` ahead, then the fleet is suspended", async (t) => {
      const c = new Cleanup(t);
      const { ns, clock } = await setUp(c, "expiry-suspend");
      const hook = await hookService(t, ns, "brief");
      await createCocoonSet(ns, "brief", {
        replicas: 0,
        expiry: { after: "2h" },
        hooks: { url: hook.url },
      });
      const { cs } = await waitForConverged(ns, "brief", { replicas: 0 });
      await waitForPods(ns, "brief", 1, vmReady, "the main agent's VM booted");
      const created = Date.parse(cs.metadata.creationTimestamp ?? "");
      const expiresAt = new Date(created + 120 * MINUTE).toISOString().replace(/\.\d+Z$/, "Z");
      const history = await ObjectHistory.start<CocoonSet>(
        t,
        client,
        paths.cocoonSets(ns),
        "brief",
      );
      const far = await history.until((o) => o.status?.expiresAt !== undefined, "expiresAt");
      assert.equal(far.status?.expiresAt, expiresAt);
      const expiring = (o: CocoonSet) => o.status?.conditions?.find((x) => x.type === "Expiring");
      assert.deepEqual(
        [expiring(far)?.status, expiring(far)?.reason],
        ["False", "ExpiryFar"],
        "announced later",
      );

      // 2h / 10 = 12 minutes ahead (less than an hour): 11 minutes before, it is announced.
      clock.advance(created + 109 * MINUTE - clock.now());
      const near = await history.until((o) => expiring(o)?.status === "True", "Expiring True", {
        timeoutMs: 60_000,
      });
      assert.equal(expiring(near)?.reason, "ExpiryNear");
      assert.equal(expiring(near)?.message, `expires at ${expiresAt} (suspend)`);
      assert.equal(near.status?.idleSuspendedSince, undefined, "not yet");
      await waitForEvent(
        ns,
        "brief",
        "Expiring",
        `the fleet expires at ${expiresAt}; then it is suspended`,
      );

      clock.advance(12 * MINUTE);
      const done = await history.until(
        (o) => !!o.status?.idleSuspendedSince && phaseOf(o) === "Suspended",
        "expired: suspended",
        { show: phaseOf, timeoutMs: 90_000 },
      );
      assert.equal(expiring(done)?.reason, "Expired");
      assert.equal(done.spec.suspend, undefined, "the spec is untouched");
      const [main] = await fleetPods(client, ns, "brief");
      assert.ok(hibernated(main), "the main agent's VM hibernated, its snapshot kept");
      await waitForEvent(ns, "brief", "Expired", `the fleet expired at ${expiresAt}: suspended`);
      // The hook was called before the expiry was written, and once the main agent hibernated.
      const expiry = hook.calls.filter((x) => x.event.moment === "BeforeExpire");
      assert.equal(expiry.length, 1, JSON.stringify(hook.calls.map((x) => x.event)));
      assert.equal(expiry[0].event.cause, "expiry");
      assert.equal(expiry[0].event.cocoonSet, "brief");
      assert.equal(expiry[0].idleSuspendedSince, undefined, "called before the expiry's write");
      const hibernate = hook.calls.filter((x) => x.event.moment === "BeforeHibernate");
      assert.ok(hibernate.length >= 1, "the main agent's hibernation was announced too");
      assert.ok(hibernate.every((x) => x.idleSuspendedSince !== undefined));
    });

    test("expiry with action delete: the fleet is deleted through the normal release, its tags dropped", async (t) => {
      const c = new Cleanup(t);
      const { ns, clock, proc, renew } = await setUp(c, "expiry-delete");
      const reg = new OciRegistry(registryAddress());
      await createCocoonSet(ns, "temp", {
        replicas: 1,
        idle: { after: "10m" },
        expiry: { after: "1h", action: "delete" },
      });
      const { cs } = await waitForConverged(ns, "temp", { replicas: 1 });
      const booted = await waitForPods(ns, "temp", 2, vmReady, "both VMs booted");
      const vms = booted.map((p) => annotationsOf(p)[ANNOTATIONS.vmName] ?? "").sort();

      // The sub-agent is idle-hibernated first: its snapshot is in the registry.
      clock.advance(6 * MINUTE);
      await renew("temp", ["temp-0"]);
      clock.advance(5 * MINUTE);
      await hibernationOf(proc, ns, "temp-1-idle", (h) => h.status?.phase === "Hibernated");
      assert.deepEqual(await reg.listTags(vms[1]), [SNAPSHOT_TAGS.hibernate]);

      const created = Date.parse(cs.metadata.creationTimestamp ?? "");
      clock.advance(created + 61 * MINUTE - clock.now());
      await waitForObject(client, paths.cocoonSets(ns), "temp", (o) => o === undefined, {
        timeoutMs: 120_000,
        description: "the expired CocoonSet gone",
      });
      await waitForObject(
        client,
        paths.cocoonHibernations(ns),
        "temp-1-idle",
        (o) => o === undefined,
        {
          timeoutMs: 120_000,
          description: "the policy's CocoonHibernation gone with its owner",
        },
      );
      assert.deepEqual(await fleetPods(client, ns, "temp"), [], "every pod released");
      // As any deletion of a fleet: every `:hibernate` dropped, the main agent keeps `:latest`.
      assert.deepEqual(await reg.listTags(vms[0]), [SNAPSHOT_TAGS.latest], "main keeps :latest");
      assert.deepEqual(await reg.listTags(vms[1]), [], "the sub-agent's tags dropped");
      const [expired] = await waitForEvent(ns, "temp", "Expired", /: deleted$/);
      assert.equal(expired.type, "Normal");
    });
  },
);
