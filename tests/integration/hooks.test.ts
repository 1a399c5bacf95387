/**
 * Lifecycle hooks (spec.hooks) end to end: the controller (in this process, on a WarpClock,
 * with the embedded registry), the node-agent simulator in the test's namespace, and an HTTPS
 * server of the test's own as the platform's service (a CA of the test's, given as caBundle;
 * credentials and a query in the URL). On each call the server reads the pod from the
 * apiserver before it answers, so what the pod looked like at the call is a fact, not a
 * timing.
 *
 * - order: each member's BeforeHibernate comes while its pod is not yet asked to hibernate,
 *   and the ask follows the call (one write, which clears the pod's hook record); AfterWake
 *   comes once the VM runs again; neither the URL's credentials nor the body reach the
 *   controller's log or the events;
 * - Fail: a hook that does not answer within timeoutSeconds, then one that answers 503, holds
 *   the hibernation back (Warning HookFailed, retried with the same event id) until a 2xx;
 * - Ignore: a failing hook lets the suspend and the wake go on, once each, and says so
 *   (Warning HookFailureIgnored);
 * - a CocoonHibernation's hibernate and wake call the fleet's hook (cause `hibernation`);
 * - a controller stopped between a call and its transition: the next one calls again with
 *   the same id and the hibernation is written once.
 *
 * Every wait is a watch (the pods, the CocoonSet, the events) or the server's own receipt.
 */
import assert from "node:assert/strict";
import { createServer, type Server } from "node:https";
import type { IncomingMessage, ServerResponse } from "node:http";
import { once } from "node:events";
import type { AddressInfo } from "node:net";
import { before, describe, test, type TestContext } from "node:test";
import { createClientCa, issueServerCertificate } from "../../cluster/pki.js";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import type { HookEvent } from "../../engine/idle/index.js";
import { vmLive } from "../../engine/pods/pod-state.js";
import {
  ANNOTATIONS,
  type CocoonHibernation,
  type CocoonSet,
  type Pod,
} from "../../engine/spec/index.js";
import { PatchType, paths, waitForObject } from "../../engine/kube/index.js";
import type { HooksSpec } from "../../engine/spec/generated/types.js";
import { adminClient } from "../support/cluster.js";
import {
  createCocoonSet,
  listEvents,
  patchSpec,
  waitForConverged,
  waitForEvent,
} from "../support/controller-fleet.js";
import { Cleanup, controllerNamespace } from "../support/controller-process.js";
import { startInProcessController } from "../support/controller-in-process.js";
import { WarpClock } from "../support/fake-clock.js";
import {
  createHibernation,
  optInNodeAgent,
  registryAddress,
  vmReady,
  waitForPods,
  waitForSet,
} from "../support/lifecycle.js";
import { ObjectHistory } from "../support/object-history.js";

const client = adminClient();
const USER = "hookuser";
const PASSWORD = "hookpass-S3CRET";
const QUERY = "QS3CRET";

const annotationsOf = (p: Pod | undefined) => p?.metadata?.annotations ?? {};
const hibernateOf = (p: Pod | undefined) => annotationsOf(p)[ANNOTATIONS.hibernate];
const recordOf = (p: Pod | undefined) => annotationsOf(p)[ANNOTATIONS.hookPending];

/** One call the service received. */
interface Call {
  /** When it arrived (this process's clock). */
  at: number;
  event: HookEvent;
  auth?: string;
  /** The pod as the apiserver had it when the call arrived. */
  podAt?: Pod;
  /** The caller closed the connection before an answer (a timeout, a stop). */
  cut: boolean;
}

const ca = createClientCa("cocoonset hooks test CA");
const serving = issueServerCertificate(ca, "127.0.0.1", { ips: ["127.0.0.1"] });
const caBundle = Buffer.from(ca.certPem).toString("base64");

/** The platform's service: records each call and answers as `answer` says. */
class HookService {
  readonly calls: Call[] = [];
  /** The answer to the n-th call (from 0): a status, or none at all. */
  answer: (n: number, call: Call) => number | "hang" = () => 200;
  private waiters: { done: () => boolean; resolve: () => void }[] = [];
  private readonly server: Server;

  private constructor(private readonly ns: string) {
    this.server = createServer({ cert: serving.certPem, key: serving.keyPem }, (req, res) => {
      void this.handle(req, res);
    });
  }

  static async start(t: TestContext, ns: string): Promise<HookService> {
    const s = new HookService(ns);
    s.server.listen(0, "127.0.0.1");
    await once(s.server, "listening");
    t.after(() => {
      s.server.closeAllConnections();
      s.server.close();
    });
    return s;
  }

  /** spec.hooks for this service, with credentials and a query in its URL. */
  hooks(extra: Partial<HooksSpec> = {}): HooksSpec {
    const port = (this.server.address() as AddressInfo).port;
    return {
      url: `https://${USER}:${PASSWORD}@127.0.0.1:${port}/cocoon/events?token=${QUERY}`,
      caBundle,
      ...extra,
    };
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const event = JSON.parse(Buffer.concat(chunks).toString("utf8")) as HookEvent;
    const podAt = event.pod
      ? await client.getOrUndefined<Pod>(paths.pod(this.ns, event.pod))
      : undefined;
    const call: Call = {
      at: Date.now(),
      event,
      auth: req.headers.authorization,
      podAt,
      cut: false,
    };
    res.on("close", () => {
      if (!res.writableEnded) call.cut = true;
      this.notify();
    });
    const answer = this.answer(this.calls.length, call);
    this.calls.push(call);
    this.notify();
    if (answer !== "hang") res.writeHead(answer).end();
  }

  private notify(): void {
    this.waiters = this.waiters.filter((w) => {
      if (!w.done()) return true;
      w.resolve();
      return false;
    });
  }

  /** Waits until `done` holds of the calls so far (fails after `timeoutMs`). */
  async until(done: (calls: Call[]) => boolean, what: string, timeoutMs = 90_000): Promise<Call[]> {
    if (done(this.calls)) return this.calls;
    let timer: NodeJS.Timeout | undefined;
    try {
      await new Promise<void>((resolve, reject) => {
        this.waiters.push({ done: () => done(this.calls), resolve });
        timer = setTimeout(
          () =>
            reject(
              new Error(
                `${what}: not within ${timeoutMs} ms; calls: ${JSON.stringify(this.calls)}`,
              ),
            ),
          timeoutMs,
        );
      });
    } finally {
      clearTimeout(timer);
    }
    return this.calls;
  }

  of(moment: HookEvent["moment"], pod?: string): Call[] {
    return this.calls.filter((c) => c.event.moment === moment && (!pod || c.event.pod === pod));
  }
}

/** A namespace the simulator acts on, a hook service, and a controller on it, synced. */
async function setUp(t: TestContext, c: Cleanup, prefix: string, shutdownGraceMs?: number) {
  const ns = await controllerNamespace(c, prefix);
  await optInNodeAgent(ns);
  const service = await HookService.start(t, ns);
  const clock = new WarpClock();
  const start = async (label: string) => {
    const ctl = await startInProcessController(c, {
      namespaces: [ns],
      clock,
      label,
      ociRegistry: registryAddress(),
      ...(shutdownGraceMs === undefined ? {} : { shutdownGraceMs }),
    });
    await ctl.synced();
    return ctl;
  };
  const ctl = await start("controller");
  return { ns, service, ctl, start };
}

/** Creates the fleet with `hooks` and waits until every VM runs. */
async function fleetWithHooks(ns: string, replicas: number, hooks: HooksSpec): Promise<CocoonSet> {
  const cs = await createCocoonSet(ns, "crew", { replicas, hooks });
  await waitForConverged(ns, "crew", { replicas });
  await waitForPods(ns, "crew", replicas + 1, vmReady, "every VM booted by the simulator");
  return cs;
}

const suspended = (ns: string) =>
  waitForSet(
    ns,
    "crew",
    (cs) =>
      cs.status?.phase === "Suspended" && cs.status.observedGeneration === cs.metadata.generation,
    "phase Suspended at the new generation",
  );

/** How many times the pod went from not asked to hibernate to asked. */
function hibernateWrites(h: ObjectHistory<Pod>): number {
  let n = 0;
  let asked = false;
  for (const p of h.seen) {
    const now = hibernateOf(p) === "true";
    if (now && !asked) n++;
    asked = now;
  }
  return n;
}

/** The first version of the pod asked to hibernate, and when the watch delivered it. */
function firstAsked(h: ObjectHistory<Pod>): { pod: Pod; at: number } {
  const i = h.seen.findIndex((p) => hibernateOf(p) === "true");
  assert.ok(i >= 0, `${h.name} was asked to hibernate`);
  return { pod: h.seen[i], at: h.times[i] };
}

/** Neither the URL's secrets nor any part of a call's body in the log lines or the events. */
async function assertNothingLeaked(ns: string, raw: readonly string[], calls: readonly Call[]) {
  const events = (await listEvents(ns)).map((e) => `${e.reason ?? ""}: ${e.note ?? ""}`);
  const secret = [
    PASSWORD,
    QUERY,
    `${USER}:`,
    "CocoonSetLifecycleEvent",
    ...calls.map((c) => c.event.id),
  ];
  for (const [where, lines] of [
    ["the controller's log", raw],
    ["the events", events],
  ] as const)
    for (const line of lines)
      for (const s of secret) assert.ok(!line.includes(s), `${where} shows ${s}: ${line}`);
}

before(async () => {
  await ensureCrd(client);
});

describe(
  "lifecycle hooks (controller, simulator, registry, an HTTPS service)",
  { timeout: 300_000 },
  () => {
    test("BeforeHibernate precedes each member's hibernation, AfterWake follows its wake; nothing secret is shown", async (t) => {
      const c = new Cleanup(t);
      const { ns, service, ctl } = await setUp(t, c, "hooks-order");
      const cs = await fleetWithHooks(ns, 1, service.hooks({ timeoutSeconds: 5 }));
      assert.equal(service.calls.length, 0, "creating a fleet calls no hook");
      const names = ["crew-0", "crew-1"];
      const histories = new Map<string, ObjectHistory<Pod>>();
      for (const name of names)
        histories.set(name, await ObjectHistory.start<Pod>(t, client, paths.pods(ns), name));

      await patchSpec(ns, "crew", { suspend: true });
      const generation = (await suspended(ns)).metadata.generation;
      assert.equal(service.of("BeforeHibernate").length, 2, "one call per member");
      for (const [i, name] of names.entries()) {
        const [call] = service.of("BeforeHibernate", name);
        const e = call.event;
        assert.deepEqual(
          { ...e, id: "", time: "" },
          {
            apiVersion: "cocoonset.cocoonstack.io/v1",
            kind: "CocoonSetLifecycleEvent",
            id: "",
            moment: "BeforeHibernate",
            cause: "suspend",
            time: "",
            namespace: ns,
            cocoonSet: "crew",
            uid: cs.metadata.uid,
            member: String(i),
            pod: name,
            vm: `vk-${ns}-crew-${i}`,
          },
        );
        assert.match(e.id, /^[0-9a-f]{32}$/);
        assert.equal(call.auth, `Basic ${Buffer.from(`${USER}:${PASSWORD}`).toString("base64")}`);
        // At the call the VM ran and was not asked to hibernate; the pod held the decision.
        assert.ok(vmReady(call.podAt!), `${name}'s VM ran at the call`);
        assert.equal(hibernateOf(call.podAt), undefined, `${name} not asked yet at the call`);
        assert.equal(recordOf(call.podAt), `BeforeHibernate suspend ${e.time} g${generation}`);
        // The ask came after the call, once, in the write that cleared the record.
        const h = histories.get(name)!;
        const asked = firstAsked(h);
        assert.ok(asked.at >= call.at, `${name}: asked to hibernate after the hook's call`);
        assert.equal(recordOf(asked.pod), undefined, "the hibernation's write clears the record");
        assert.equal(hibernateWrites(h), 1);
        assert.equal(call.cut, false);
      }

      const since = service.calls.length;
      await patchSpec(ns, "crew", { suspend: false });
      await waitForPods(
        ns,
        "crew",
        2,
        (p) => vmReady(p) && hibernateOf(p) === undefined && recordOf(p) === undefined,
        "every VM running again and its after-wake hook answered",
      );
      const after = service.calls.slice(since);
      assert.deepEqual(
        after.map((x) => x.event.moment),
        ["AfterWake", "AfterWake"],
      );
      for (const name of names) {
        const [call] = after.filter((x) => x.event.pod === name);
        assert.equal(call.event.cause, "wake");
        // At the call the VM ran again: the hook comes after the wake, not before.
        assert.ok(vmLive(call.podAt!) && vmReady(call.podAt!), `${name} ran again at the call`);
        assert.equal(hibernateOf(call.podAt), undefined);
        assert.equal(recordOf(call.podAt), `AfterWake wake ${call.event.time}`);
        assert.notEqual(call.event.id, service.of("BeforeHibernate", name)[0].event.id);
      }
      await assertNothingLeaked(ns, ctl.rawLines, service.calls);
    });

    test("Fail: a hook that times out, then answers 503, holds the hibernation (HookFailed, retried with the same id) until a 2xx", async (t) => {
      const c = new Cleanup(t);
      const { ns, service, ctl } = await setUp(t, c, "hooks-fail");
      // The first call gets no answer (the 2 s timeout ends it), the next two a 503.
      service.answer = (n) => (n === 0 ? "hang" : n <= 2 ? 503 : 200);
      await fleetWithHooks(ns, 0, service.hooks({ timeoutSeconds: 2, failurePolicy: "Fail" }));
      const history = await ObjectHistory.start<Pod>(t, client, paths.pods(ns), "crew-0");
      await patchSpec(ns, "crew", { suspend: true });

      const [slow] = await waitForEvent(ns, "crew", "HookFailed", /: no answer within 2s; /);
      assert.equal(slow.type, "Warning");
      assert.match(
        slow.note ?? "",
        /^lifecycle hook https:\/\/127\.0\.0\.1:\d+\/cocoon\/events \(BeforeHibernate, suspend\) for pod crew-0 failed: no answer within 2s; the transition waits and the call is retried with backoff \(failurePolicy Fail\)$/,
      );
      await waitForEvent(ns, "crew", "HookFailed", /failed: HTTP 503; the transition waits/);
      await suspended(ns);
      const calls = service.of("BeforeHibernate", "crew-0");
      // A timeout, two 503s, then the 2xx (a loaded machine may add a timeout of its own).
      assert.ok(calls.length >= 4, `${calls.length} calls`);
      assert.equal(calls[0].cut, true, "the controller gave up on the silent call");
      const answered = calls.at(-1)!;
      assert.equal(answered.cut, false);
      assert.equal(
        new Set(calls.map((x) => x.event.id)).size,
        1,
        "every retry carries the same id",
      );
      for (const call of calls)
        assert.equal(
          hibernateOf(call.podAt),
          undefined,
          "held: not asked to hibernate before the 2xx",
        );
      assert.ok(firstAsked(history).at >= answered.at, "asked only after the answered call");
      assert.equal(hibernateWrites(history), 1);
      await assertNothingLeaked(ns, ctl.rawLines, service.calls);
    });

    test("Ignore: a failing hook lets the suspend and the wake go on, once each, and says so", async (t) => {
      const c = new Cleanup(t);
      const { ns, service, ctl } = await setUp(t, c, "hooks-ignore");
      service.answer = () => 500;
      await fleetWithHooks(ns, 0, service.hooks({ failurePolicy: "Ignore" }));
      await patchSpec(ns, "crew", { suspend: true });
      await suspended(ns);
      const [ignored] = await waitForEvent(
        ns,
        "crew",
        "HookFailureIgnored",
        /\(BeforeHibernate, suspend\) for pod crew-0 failed: HTTP 500; the transition went on \(failurePolicy Ignore\)$/,
      );
      assert.equal(ignored.type, "Warning");
      assert.equal(service.of("BeforeHibernate").length, 1, "no retry under Ignore");

      await patchSpec(ns, "crew", { suspend: false });
      await waitForPods(
        ns,
        "crew",
        1,
        (p) => vmReady(p) && hibernateOf(p) === undefined && recordOf(p) === undefined,
        "the VM running again and its record cleared",
      );
      await waitForEvent(
        ns,
        "crew",
        "HookFailureIgnored",
        /\(AfterWake, wake\) for pod crew-0 failed: HTTP 500/,
      );
      assert.equal(service.of("AfterWake").length, 1);
      assert.equal(service.calls.length, 2);
      await assertNothingLeaked(ns, ctl.rawLines, service.calls);
    });

    test("a CocoonHibernation's hibernate and wake call the fleet's hook (cause hibernation)", async (t) => {
      const c = new Cleanup(t);
      const { ns, service } = await setUp(t, c, "hooks-cr");
      await fleetWithHooks(ns, 1, service.hooks());
      const history = await ObjectHistory.start<Pod>(t, client, paths.pods(ns), "crew-1");
      await createHibernation(ns, "nap", "crew-1", "Hibernate");
      const phase = (want: string) =>
        waitForObject(
          client,
          paths.cocoonHibernations(ns),
          "nap",
          (o) => (o as CocoonHibernation | undefined)?.status?.phase === want,
          { timeoutMs: 90_000, description: `CocoonHibernation nap ${want}` },
        );
      await phase("Hibernated");
      const [call] = service.of("BeforeHibernate");
      assert.equal(service.calls.length, 1, "only the member the CocoonHibernation names");
      assert.deepEqual(
        [call.event.cause, call.event.member, call.event.pod],
        ["hibernation", "1", "crew-1"],
      );
      assert.equal(hibernateOf(call.podAt), undefined);
      assert.ok(firstAsked(history).at >= call.at);
      assert.equal(recordOf(firstAsked(history).pod), undefined);

      await client.patch(
        paths.cocoonHibernation(ns, "nap"),
        { spec: { desire: "Wake" } },
        PatchType.merge,
      );
      await phase("Active");
      await waitForPods(
        ns,
        "crew",
        2,
        (p) => vmReady(p) && recordOf(p) === undefined,
        "crew-1 running again with its after-wake hook answered",
      );
      const [woke] = service.of("AfterWake");
      assert.deepEqual([woke.event.cause, woke.event.pod], ["hibernation", "crew-1"]);
      assert.ok(vmLive(woke.podAt!), "the VM ran again at the call");
      assert.equal(service.calls.length, 2);
    });

    test("a controller stopped between a call and its transition: the next calls again with the same id and hibernates once", async (t) => {
      const c = new Cleanup(t);
      // No grace: the stop cuts the pass short while its call is out.
      const { ns, service, ctl, start } = await setUp(t, c, "hooks-stop", 0);
      service.answer = (n) => (n === 0 ? "hang" : 200);
      await fleetWithHooks(ns, 0, service.hooks());
      const history = await ObjectHistory.start<Pod>(t, client, paths.pods(ns), "crew-0");
      await patchSpec(ns, "crew", { suspend: true });
      await service.until((calls) => calls.length === 1, "the first call");
      assert.deepEqual(await ctl.stop(), { code: 0, signal: null });
      await service.until((calls) => calls[0].cut, "the stopped controller's call cut");
      const held = await client.get<Pod>(paths.pod(ns, "crew-0"));
      assert.equal(hibernateOf(held), undefined, "stopped before the transition");
      assert.match(
        recordOf(held) ?? "",
        new RegExp(`^BeforeHibernate suspend ${service.calls[0].event.time} g\\d+$`),
      );

      await start("controller after the stop");
      await suspended(ns);
      const calls = service.of("BeforeHibernate");
      assert.equal(calls.length, 2);
      assert.equal(calls[1].event.id, calls[0].event.id, "called again with the same id");
      assert.equal(calls[1].cut, false);
      assert.equal(hibernateWrites(history), 1, "hibernated once");
      const records = new Set(history.seen.map(recordOf).filter((r) => r !== undefined));
      assert.equal(records.size, 1, "one decision, written once");
    });
  },
);
