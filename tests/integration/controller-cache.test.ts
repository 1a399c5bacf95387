/**
 * The controller's pass on a pod cache that lags behind its own writes: the CocoonSet
 * reconciler with its informer-backed reads, whose pod informer's watch events are held back
 * while passes run. A pass never creates a pod the cache has not shown yet a second time,
 * never deletes (nor counts the failure of) a Failed pod twice, never takes the snapshot its
 * own hibernate request produced for a leftover, and acts again once the held-back events
 * arrive. Real apiserver, real informers; only the delivery of the pod
 * watch's events is delayed.
 */
import assert from "node:assert/strict";
import { before, describe, test, type TestContext } from "node:test";
import {
  CocoonSetReconciler,
  STALE_RECHECK_MS,
  createLogger,
  FLEET_POD_INDEXES,
  FleetCache,
  Informer,
  KindCache,
  SharedCache,
  type ControllerMetrics,
  type ReconcileContext,
} from "../../controller/index.js";
import { kindInformer } from "../../controller/cache.js";
import {
  cocoonSetKind,
  cocoonSetNamesKind,
  MANAGED_POD_SELECTOR,
  podKind,
} from "../../controller/cocoonset-controller.js";
import { HibernationReconciler } from "../../controller/hibernation-reconciler.js";
import { SIM_ANNOTATIONS } from "../../cluster/node-agent.js";
import { activityLeaseKind } from "../../controller/idle-activity.js";
import { markActivity } from "../../engine/execute/activity.js";
import { HIBERNATIONS_BY_POD, hibernationKind } from "../../controller/hibernation-controller.js";
import type { HibernationMetrics } from "../../controller/types.js";
import { namespaceOf } from "../../engine/kube/objects.js";
import { trimNodeForCache } from "../../controller/node-kind.js";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { PassError, type Reader } from "../../engine/execute/index.js";
import { paths, PatchType, type KubeClient } from "../../engine/kube/index.js";
import type { WatchEvent } from "../../engine/kube/client.js";
import {
  ANNOTATION_TRUE,
  ANNOTATIONS,
  LABELS,
  SNAPSHOT_TAGS,
  type CocoonHibernation,
  type CocoonSet,
  type Pod,
} from "../../engine/spec/index.js";
import { adminClient } from "../support/cluster.js";
import { optInNodeAgent, registryAddress, vmReady } from "../support/lifecycle.js";
import { OciRegistry } from "../../engine/registry/oci.js";
import { vmNameFor } from "../../engine/pods/pod-builder.js";
import {
  createCocoonSet,
  failPod,
  fleetPods,
  historyOf,
  patchSpec,
  statusCondition,
} from "../support/controller-fleet.js";
import { Cleanup, controllerNamespace } from "../support/controller-process.js";

before(async () => {
  await ensureCrd(adminClient());
});

/** A client whose watch events wait in a buffer while `held`, and arrive on `release()`. */
function delayedWatchClient(client: KubeClient) {
  let held = false;
  const buffered: (() => void)[] = [];
  const delayed = Object.create(client) as KubeClient;
  delayed.watch = ((
    path: string,
    query: Parameters<KubeClient["watch"]>[1],
    onEvent: (ev: WatchEvent) => boolean | void,
    signal?: AbortSignal,
  ) =>
    client.watch(
      path,
      query,
      (ev) => {
        if (!held) return onEvent(ev);
        buffered.push(() => void onEvent(ev));
        return undefined;
      },
      signal,
    )) as KubeClient["watch"];
  return {
    client: delayed,
    hold: () => (held = true),
    release: () => {
      held = false;
      for (const deliver of buffered.splice(0)) deliver();
    },
  };
}

const NODES = ["kwok-node-0", "kwok-node-1"];

const noMetrics: ControllerMetrics = {
  rebuild() {},
  deadLetter() {},
  reapDeleted() {},
  releaseDeleted() {},
  slotReleasePodDeleted() {},
  slotReleaseWake() {},
  slotReleaseWakeUnschedulable() {},
};

/** Resolves once `cond` holds (checked after each turn of the event loop), or fails. */
async function until(what: string, cond: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!(await cond())) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * A FleetCache of namespace `ns` on real informers, one of whose watches (the pods' or the
 * CocoonSets') goes through a client the test can hold back.
 */
async function laggingCache(c: Cleanup, ns: string, lagging: "pods" | "cocoonSets") {
  const client = adminClient();
  const watch = delayedWatchClient(client);
  const csInformer = new Informer({
    client: lagging === "cocoonSets" ? watch.client : client,
    path: paths.cocoonSets(ns),
  });
  const podInformer = new Informer({
    client: lagging === "pods" ? watch.client : client,
    path: paths.pods(ns),
    labelSelector: MANAGED_POD_SELECTOR,
  });
  const cache = new FleetCache(client);
  cache.attach(new KindCache([csInformer]), new KindCache([podInformer], false, FLEET_POD_INDEXES));
  csInformer.start();
  podInformer.start();
  c.defer("stop the informers", async () => {
    watch.release();
    await Promise.all([csInformer.stop(), podInformer.stop()]);
  });
  await Promise.all([csInformer.waitForSync(), podInformer.waitForSync()]);
  return { client, watch, cache, podInformer };
}

/** One pass of `reconciler` on `namespace/name`, quiet; a failed pass fails the test. */
function passOf(reconciler: CocoonSetReconciler, namespace: string, name: string) {
  const ctx: ReconcileContext<ControllerMetrics> = {
    log: createLogger({ level: "silent" }),
    events: { event: () => Promise.resolve() },
    metrics: noMetrics,
    signal: new AbortController().signal,
  };
  return async () => {
    try {
      return await reconciler.reconcile({ namespace, name }, ctx);
    } catch (e) {
      if (PassError.isInstance(e)) assert.fail(`pass failed: ${e.message}`);
      throw e;
    }
  };
}

/** The passes add the finalizer and no controller runs to remove it: the test does. */
function removeFinalizerAtEnd(c: Cleanup, client: KubeClient, ns: string, name: string): void {
  c.defer("remove the finalizer", async () => {
    await client
      .patch(paths.cocoonSet(ns, name), { metadata: { finalizers: null } }, PatchType.merge)
      .catch(() => undefined);
  });
}

describe("controller pass on a lagging pod cache", { timeout: 120_000 }, () => {
  test("holds back the slots with outstanding expectations: no second create, no second delete", async (t) => {
    const c = new Cleanup(t);
    const ns = await controllerNamespace(c, "ctl-cache");
    const { client, watch, cache, podInformer } = await laggingCache(c, ns, "pods");
    assert.ok(cache.synced());

    const reconciler = new CocoonSetReconciler(client, { cache });
    const fleet = `${ns}/lag`;
    const pass = passOf(reconciler, ns, "lag");
    const uids = async () =>
      new Map(
        (await fleetPods(client, ns, "lag")).map((p) => [p.metadata!.name!, p.metadata!.uid!]),
      );

    await createCocoonSet(ns, "lag", { replicas: 2 });
    removeFinalizerAtEnd(c, client, ns, "lag");
    await until("the CocoonSet in the cache", () => cache.cocoonSet(ns, "lag") !== undefined);

    // The first pass creates the main agent; the cache does not see it yet.
    watch.hold();
    await pass();
    const first = await uids();
    assert.deepEqual([...first.keys()], ["lag-0"]);
    assert.deepEqual([...cache.expectations.outstanding(fleet)], ["lag-0"]);
    // A second pass on the same stale cache does not create the main agent again (the name's
    // holder is read fresh, and the slot is expected besides).
    await pass();
    assert.equal((await uids()).get("lag-0"), first.get("lag-0"), "lag-0 not created again");
    assert.ok(cache.expectations.outstanding(fleet).has("lag-0"), "the watch has not shown it");

    // The watch catches up: the expectation is settled, and the passes converge.
    watch.release();
    await until("the create seen", () => cache.expectations.outstanding(fleet).size === 0);
    await until("3 agents Running", async () => {
      await pass();
      const pods = await fleetPods(client, ns, "lag");
      return pods.length === 3 && pods.every((p) => p.status?.phase === "Running");
    });

    // A sub-agent fails; once the cache shows it, a pass rebuilds it (history, delete) while
    // the cache does not see the delete.
    const failed = (await uids()).get("lag-1")!;
    await failPod(ns, "lag-1", failed);
    const failedInCache = (p?: Pod) => p?.metadata?.uid === failed && p.status?.phase === "Failed";
    await until("the failure in the cache", () => failedInCache(podInformer.get(`${ns}/lag-1`)));
    watch.hold();
    await pass();
    const afterRebuild = await client.get<CocoonSet>(paths.cocoonSet(ns, "lag"));
    assert.equal(historyOf(afterRebuild).get(1)?.count ?? 0, 1, "one failure counted");
    assert.ok(failedInCache(podInformer.get(`${ns}/lag-1`)), "cache is stale");
    assert.deepEqual([...cache.expectations.outstanding(fleet)], ["lag-1"]);
    // Again on the stale cache: the Failed pod is neither deleted nor counted a second time.
    await pass();
    const afterSecond = await client.get<CocoonSet>(paths.cocoonSet(ns, "lag"));
    assert.equal(historyOf(afterSecond).get(1)?.count ?? 0, 1, "still one failure counted");

    // Caught up: slot 1 gets its replacement, one rebuild in all.
    watch.release();
    await until("the replacement of lag-1", async () => {
      await pass();
      const now = (await uids()).get("lag-1");
      return now !== undefined && now !== failed;
    });
    const end = await client.get<CocoonSet>(paths.cocoonSet(ns, "lag"));
    assert.equal(historyOf(end).get(1)?.count ?? 0, 1);
  });

  test("a migration keeps the snapshot its own hibernate request produced while the cache lags behind the request", async (t) => {
    const c = new Cleanup(t);
    const ns = await controllerNamespace(c, "ctl-cache-move");
    await optInNodeAgent(ns);
    const { client, watch, cache, podInformer } = await laggingCache(c, ns, "pods");
    const registry = new OciRegistry(registryAddress());
    const pass = passOf(new CocoonSetReconciler(client, { cache, registry }), ns, "mover");
    const vm = vmNameFor(ns, "mover", 0);
    const cached = () => podInformer.get(`${ns}/mover-0`) as Pod | undefined;
    const asksHibernate = (p?: Pod) =>
      p?.metadata?.annotations?.[ANNOTATIONS.hibernate] === ANNOTATION_TRUE;
    const tags = () => registry.listTags(vm);

    await createCocoonSet(ns, "mover", { nodeName: NODES[0] });
    removeFinalizerAtEnd(c, client, ns, "mover");
    await until("the CocoonSet in the cache", () => cache.cocoonSet(ns, "mover") !== undefined);
    await until("the VM booted on node 0, in the cache", async () => {
      await pass();
      const p = cached();
      return p !== undefined && vmReady(p) && p.spec?.nodeName === NODES[0];
    });

    await patchSpec(ns, "mover", { nodeName: NODES[1] });
    await until("the new target in the cache", () => {
      return cache.cocoonSet(ns, "mover")?.spec.nodeName === NODES[1];
    });
    // The pass asks the main agent to hibernate; the cache does not see the request.
    watch.hold();
    await pass();
    assert.ok(asksHibernate(await client.get<Pod>(paths.pod(ns, "mover-0"))), "asked to hibernate");
    assert.ok(!asksHibernate(cached()), "the cache is behind the request");
    assert.deepEqual([...cache.expectations.outstanding(`${ns}/mover`)], ["mover-0"]);
    // The node hibernates the VM and pushes the tag. A pass that took the cached pod at its
    // word would see a tag nobody asked for and drop it as a leftover: the VM's only copy.
    await until("the node's :hibernate tag", async () =>
      (await tags()).includes(SNAPSHOT_TAGS.hibernate),
    );
    await pass();
    assert.ok((await tags()).includes(SNAPSHOT_TAGS.hibernate), "the snapshot is kept");

    // Caught up, the migration goes on: evicted, restored on node 1, the tag dropped.
    watch.release();
    await until("the VM restored on node 1, and its tag dropped", async () => {
      await pass();
      const pods = await fleetPods(client, ns, "mover");
      const live = pods.filter((p) => !p.metadata?.deletionTimestamp);
      return (
        live.length === 1 &&
        live[0].spec?.nodeName === NODES[1] &&
        vmReady(live[0]) &&
        !(await tags()).includes(SNAPSHOT_TAGS.hibernate)
      );
    });
  });
});

/**
 * A fleet of 5 suspended from the caches; the tags the registry was asked for, by VM, and the
 * passes it took. `staggered`: the VMs hibernate 0.5 s apart while the passes run every 10 ms.
 * `flaky`: the registry fails every second question, and the passes start once every VM
 * reports hibernated, so each pass asks for every tag it has not kept.
 */
async function suspendAsking(t: TestContext, prefix: string, mode: "staggered" | "flaky") {
  const c = new Cleanup(t);
  const ns = await controllerNamespace(c, prefix);
  await optInNodeAgent(ns);
  const { client, cache, podInformer } = await laggingCache(c, ns, "pods");
  // The registry the passes ask, counting each tag it is asked for.
  const oci = new OciRegistry(registryAddress());
  const asked = new Map<string, number>();
  let questions = 0;
  const registry = {
    hasManifest: (vm: string, tag: string) => {
      asked.set(`${vm}:${tag}`, (asked.get(`${vm}:${tag}`) ?? 0) + 1);
      if (mode === "flaky" && tag === SNAPSHOT_TAGS.hibernate && ++questions % 2 === 0)
        return Promise.reject(new Error(`no answer for ${vm} (test)`));
      return oci.hasManifest(vm, tag);
    },
    deleteManifest: (vm: string, tag: string) => oci.deleteManifest(vm, tag),
  };
  const reconciler = new CocoonSetReconciler(client, { cache, registry });
  const pass = passOf(reconciler, ns, "gate");
  await createCocoonSet(ns, "gate", { replicas: 4 });
  removeFinalizerAtEnd(c, client, ns, "gate");
  await until("the CocoonSet in the cache", () => cache.cocoonSet(ns, "gate") !== undefined);
  await until("5 VMs booted", async () => {
    await pass();
    const pods = await fleetPods(client, ns, "gate");
    return pods.length === 5 && pods.every(vmReady);
  });

  if (mode === "staggered")
    for (const m of [0, 1, 2, 3, 4])
      await client.patch(
        paths.pod(ns, `gate-${m}`),
        { metadata: { annotations: { [SIM_ANNOTATIONS.hibernateDelayMs]: String(500 * m) } } },
        PatchType.merge,
      );
  await patchSpec(ns, "gate", { suspend: true });
  if (mode === "flaky") {
    await until(
      "the suspend in the cache",
      () => cache.cocoonSet(ns, "gate")?.spec.suspend === true,
    );
    await pass();
    await until("every VM hibernated, in the cache", () => {
      const pods = podInformer.list() as Pod[];
      return (
        pods.length === 5 &&
        pods.every((p) => p.metadata?.annotations?.[ANNOTATIONS.lifecycleState] === "hibernated")
      );
    });
  }
  let passes = 0;
  await until("the fleet Suspended", async () => {
    passes++;
    // A pass the registry failed fails closed; the next one runs as the requeue would.
    await passOrError(reconciler, ns, "gate");
    return (await client.get<CocoonSet>(paths.cocoonSet(ns, "gate"))).status?.phase === "Suspended";
  });
  t.diagnostic(`${passes} passes; asked: ${JSON.stringify(Object.fromEntries(asked))}`);
  const vms = [0, 1, 2, 3, 4].map((m) => `${vmNameFor(ns, "gate", m)}:${SNAPSHOT_TAGS.hibernate}`);
  return { counts: vms.map((vm) => asked.get(vm) ?? 0), passes };
}

/** One reconcile whose pass may fail on the registry (its error is an answer, not the test's). */
async function passOrError(reconciler: CocoonSetReconciler, namespace: string, name: string) {
  try {
    await passOf(reconciler, namespace, name)();
  } catch (e) {
    if (!(e instanceof assert.AssertionError && /probe hibernate snapshot/.test(e.message)))
      throw e;
  }
}

describe("controller passes of a suspend from the caches", { timeout: 120_000 }, () => {
  test("the gate asks the registry for each member's snapshot once, not once per pass while the others hibernate", async (t) => {
    const { counts, passes } = await suspendAsking(t, "ctl-cache-gate", "staggered");
    assert.ok(passes > 5, `the suspend took several passes (${passes})`);
    // Each VM's tag once (or once more, if its pod changed after it reported hibernated).
    for (const n of counts) assert.ok(n >= 1 && n <= 2, `asked ${counts.join(", ")} times`);
  });

  test("a pass the registry failed keeps the tags it did confirm: the retry asks only for the rest", async (t) => {
    // Asking every tag again after each failed pass, it would fail every pass (one question
    // of two fails) and never reach Suspended.
    const { counts } = await suspendAsking(t, "ctl-cache-gate-flaky", "flaky");
    assert.ok(
      counts.every((n) => n >= 1 && n <= 5),
      `asked ${counts.join(", ")} times`,
    );
  });
});

describe("controller pass on a lagging CocoonSet cache", { timeout: 120_000 }, () => {
  test("a pass from a CocoonSet another writer overtook writes no status from it, reads nothing, and plans again once the watch shows the newer one, keeping the other writer's status", async (t) => {
    const c = new Cleanup(t);
    const ns = await controllerNamespace(c, "ctl-stale");
    const { client, watch: csWatch, cache } = await laggingCache(c, ns, "cocoonSets");

    const recording = recordingClient(client);
    const reconciler = new CocoonSetReconciler(recording.client, { cache });
    const lines: { level: string; msg: string }[] = [];
    const events: string[] = [];
    const ctx: ReconcileContext<ControllerMetrics> = {
      log: createLogger({
        level: "info",
        destination: {
          write: (line: string) =>
            void lines.push(JSON.parse(line) as { level: string; msg: string }),
        },
      }),
      events: {
        event: (_o, type, reason) => {
          events.push(`${type} ${reason}`);
          return Promise.resolve();
        },
      },
      metrics: noMetrics,
      signal: new AbortController().signal,
    };
    const key = { namespace: ns, name: "stale" };
    const live = () => client.get<CocoonSet>(paths.cocoonSet(ns, "stale"));
    const cocoonSetReads = () =>
      recording.sent.filter((r) => r === `GET ${paths.cocoonSet(ns, "stale")}`).length;

    await createCocoonSet(ns, "stale", { replicas: 1 });
    c.defer("remove the finalizer", async () => {
      await client
        .patch(paths.cocoonSet(ns, "stale"), { metadata: { finalizers: null } }, PatchType.merge)
        .catch(() => undefined);
    });
    await until("the CocoonSet in the cache", () => cache.cocoonSet(ns, "stale") !== undefined);
    await until("converged, status written", async () => {
      await reconciler.reconcile(key, ctx);
      return (await live()).status?.phase === "Running";
    });

    // Another writer leaves a status the pods contradict, and the cache shows it.
    await client.patch(
      paths.cocoonSetStatus(ns, "stale"),
      { status: { phase: "Scaling" } },
      PatchType.merge,
    );
    await until("the other writer's status in the cache", () => {
      return cache.cocoonSet(ns, "stale")?.status?.phase === "Scaling";
    });
    // Then the cache falls behind: it does not show the next writes, an annotation and a
    // record of a member the other writer made (as a second engine records its creates).
    csWatch.hold();
    await client.patch(
      paths.cocoonSet(ns, "stale"),
      { metadata: { annotations: { "example.com/touched": "1" } } },
      PatchType.merge,
    );
    const foreignRecord = { vm: `vk-${ns}-stale-5`, podUID: "0a0b0c0d-other-writer" };
    await client.patch(
      paths.cocoonSetStatus(ns, "stale"),
      { status: { vms: { "5": foreignRecord } } },
      PatchType.merge,
    );
    const before = lines.length;
    const overtaken = await reconciler.reconcile(key, ctx);
    assert.deepEqual(overtaken, { requeueAfterMs: STALE_RECHECK_MS }, "requeued, no error");
    assert.equal((await live()).status?.phase, "Scaling", "no status from the stale view");
    assert.deepEqual(
      lines.slice(before).filter((l) => l.level !== "debug"),
      [],
      "no log line for a conflict",
    );
    assert.deepEqual(events, [], "no event");
    assert.equal(
      cache.cocoonSet(ns, "stale")?.metadata.annotations?.["example.com/touched"],
      undefined,
    );

    // While the cache is still behind, the next pass neither reads nor writes: it looks again.
    const writesBefore = recording.sent.length;
    assert.deepEqual(await reconciler.reconcile(key, ctx), { requeueAfterMs: STALE_RECHECK_MS });
    assert.deepEqual(recording.sent.slice(writesBefore), [], "no request while the cache lags");

    // The watch brings the newer CocoonSet: the pass plans from it and writes the status its
    // pods give, without reading the CocoonSet, and the other writer's record is still there.
    csWatch.release();
    await until("the newer CocoonSet in the cache", () => {
      return cache.cocoonSet(ns, "stale")?.status?.vms?.["5"] !== undefined;
    });
    const again = await reconciler.reconcile(key, ctx);
    assert.equal(again.requeueAfterMs, undefined);
    const after = await live();
    assert.equal(after.status?.phase, "Running");
    assert.deepEqual(after.status?.vms?.["5"], foreignRecord, "the other writer's record is kept");
    assert.ok(after.status?.vms?.["0"], "the engine's own records are kept");
    assert.equal(after.metadata.annotations?.["example.com/touched"], "1");
    assert.equal(cocoonSetReads(), 0, "the CocoonSet is never read: the cache is");
  });
});

/** A client that records the method and path of every request it sends. */
function recordingClient(client: KubeClient) {
  const sent: string[] = [];
  const recording = Object.create(client) as KubeClient;
  recording.request = ((method: string, path: string, opts?: { body?: unknown }) => {
    sent.push(`${method.toUpperCase()} ${path.split("?")[0]}`);
    return client.request.call(recording, method, path, opts);
  }) as KubeClient["request"];
  return { client: recording, sent };
}

describe(
  "controller pass from the cache: create first, read a name only on 409",
  { timeout: 120_000 },
  () => {
    test("no GET to converge; a foreign holder found by its create blocks the slot as the fresh read would", async (t) => {
      const c = new Cleanup(t);
      const ns = await controllerNamespace(c, "ctl-held");
      const { cache } = await laggingCache(c, ns, "pods");
      const { client, sent } = recordingClient(adminClient());
      const reconciler = new CocoonSetReconciler(client, { cache });
      const events: string[] = [];
      const ctx: ReconcileContext<ControllerMetrics> = {
        log: createLogger({ level: "silent" }),
        events: {
          event: (_o, type, reason, message) => {
            events.push(`${type} ${reason} ${message}`);
            return Promise.resolve();
          },
        },
        metrics: noMetrics,
        signal: new AbortController().signal,
      };
      const admin = adminClient();
      const live = () => admin.get<CocoonSet>(paths.cocoonSet(ns, "held"));
      const gets = () => sent.filter((s) => s.startsWith("GET "));

      // What `kubectl run held-2` leaves: no fleet label, no owner.
      await admin.create(paths.pods(ns), {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "held-2", labels: { run: "held-2" } },
        spec: { containers: [{ name: "held-2", image: "busybox" }] },
      });
      await createCocoonSet(ns, "held", { replicas: 2 });
      c.defer("remove the finalizer", async () => {
        await admin
          .patch(paths.cocoonSet(ns, "held"), { metadata: { finalizers: null } }, PatchType.merge)
          .catch(() => undefined);
      });
      await until("the CocoonSet in the cache", () => cache.cocoonSet(ns, "held") !== undefined);

      const blocked = (cs: CocoonSet) =>
        cs.status?.conditions?.find((x) => x.type === "SlotBlocked")?.status === "True";
      await until("2 agents Running and slot 2 blocked", async () => {
        const r = await reconciler.reconcile({ namespace: ns, name: "held" }, ctx);
        const cs = await live();
        return r.requeueAfterMs !== 0 && cs.status?.readyAgents === 2 && blocked(cs);
      });
      // The finalizer was added from the cached copy; the only reads were of the held name,
      // the first right after its create met the pod (409), then once per pass, as a fresh
      // read of the fleet does for a blocked slot; and of the main agent's node, once per
      // pass that creates sub-agents next to it (behaviour.md §3.22).
      assert.ok(gets().length > 0, "the held name was read");
      assert.deepEqual(
        [...new Set(gets().filter((g) => !g.startsWith(`GET ${paths.nodes()}/`)))],
        [`GET ${paths.pod(ns, "held-2")}`],
        "no GET but of the held name and the main agent's node",
      );
      const creates = sent.filter((s) => s === `POST ${paths.pods(ns)}`).length;
      assert.equal(creates, 3, "held-0, held-1, and one create of held-2 that met the holder");
      const firstGet = sent.indexOf(`GET ${paths.pod(ns, "held-2")}`);
      assert.ok(
        sent.slice(0, firstGet).filter((s) => s === `POST ${paths.pods(ns)}`).length === 3,
        "held-2 was read only after its create",
      );
      const cs = await live();
      assert.equal(cs.status?.phase, "Scaling");
      assert.deepEqual(
        (cs.status?.agents ?? []).map((a) => a.slot),
        [0, 1],
      );
      const message = cs.status?.conditions?.find((x) => x.type === "SlotBlocked")?.message ?? "";
      assert.match(
        message,
        /^slot 2: pod held-2 already exists and is not this CocoonSet's \(no controller\)/,
      );
      assert.ok(
        events.includes(`Warning SlotBlocked ${message}`),
        `the SlotBlocked warning names the holder: ${events.join(" | ")}`,
      );
      assert.deepEqual((await fleetPods(admin, ns, "held")).map((p) => p.metadata!.name).sort(), [
        "held-0",
        "held-1",
      ]);

      // The holder gone: the next passes read the name, find it free, and create the slot.
      await admin.delete(paths.pod(ns, "held-2"));
      await until("held-2 is the fleet's", async () => {
        await reconciler.reconcile({ namespace: ns, name: "held" }, ctx);
        return (await fleetPods(admin, ns, "held")).length === 3;
      });
      const n = gets().length;
      await until("converged", async () => {
        await reconciler.reconcile({ namespace: ns, name: "held" }, ctx);
        return (await live()).status?.phase === "Running";
      });
      assert.equal(gets().length, n, "the freed name is not read again");
    });

    test("a create that meets the fleet's own pod the cache does not show yet expects it", async (t) => {
      const c = new Cleanup(t);
      const ns = await controllerNamespace(c, "ctl-own");
      const { client, watch, cache } = await laggingCache(c, ns, "pods");
      const ctx: ReconcileContext<ControllerMetrics> = {
        log: createLogger({ level: "silent" }),
        events: { event: () => Promise.resolve() },
        metrics: noMetrics,
        signal: new AbortController().signal,
      };
      await createCocoonSet(ns, "own", { replicas: 1 });
      c.defer("remove the finalizer", async () => {
        await client
          .patch(paths.cocoonSet(ns, "own"), { metadata: { finalizers: null } }, PatchType.merge)
          .catch(() => undefined);
      });
      await until("the CocoonSet in the cache", () => cache.cocoonSet(ns, "own") !== undefined);
      const finalized = () => (cache.cocoonSet(ns, "own")?.metadata.finalizers ?? []).length > 0;
      // One reconciler creates the main agent while the cache does not see it; a second one
      // on the same cache (a restarted process would re-list; this one has no expectations)
      // plans the main agent again, meets it, reads it, and expects it.
      watch.hold();
      await new CocoonSetReconciler(client, { cache }).reconcile(
        { namespace: ns, name: "own" },
        ctx,
      );
      const first = (await fleetPods(client, ns, "own")).map((p) => p.metadata!.uid);
      await until("the finalizer in the cache", finalized);
      assert.equal(first.length, 1);
      cache.expectations.forget(`${ns}/own`);
      const again = await new CocoonSetReconciler(client, { cache }).reconcile(
        { namespace: ns, name: "own" },
        ctx,
      );
      assert.ok(again.requeueAfterMs !== undefined && again.requeueAfterMs > 0, "not at once");
      assert.deepEqual(
        (await fleetPods(client, ns, "own")).map((p) => p.metadata!.uid),
        first,
        "no second main agent",
      );
      assert.deepEqual([...cache.expectations.outstanding(`${ns}/own`)], ["own-0"]);
      watch.release();
      await until("the create seen", () => cache.expectations.outstanding(`${ns}/own`).size === 0);
    });
  },
);

describe("controller pass from the caches: every read a pass makes", { timeout: 120_000 }, () => {
  test("a converged fleet with an idle policy, a CocoonHibernation and a migration target: no GET, no LIST (the fresh reads send them)", async (t) => {
    const c = new Cleanup(t);
    const ns = await controllerNamespace(c, "ctl-reads");
    const admin = adminClient();
    const informers = {
      cocoonSets: new Informer({ client: admin, path: paths.cocoonSets(ns) }),
      pods: kindInformer(podKind, ns, { client: admin }),
      hibernations: new Informer({ client: admin, path: paths.cocoonHibernations(ns) }),
      nodes: new Informer({ client: admin, path: paths.nodes(), transform: trimNodeForCache }),
      leases: kindInformer(activityLeaseKind, ns, { client: admin }),
    };
    const all = Object.values(informers);
    // The cache's own fresh reads (what it cannot answer) go through the recording client too.
    const { client, sent } = recordingClient(admin);
    const cache = new FleetCache(client);
    cache.attach(
      new KindCache([informers.cocoonSets]),
      new KindCache([informers.pods], false, FLEET_POD_INDEXES),
      {
        hibernations: new KindCache([informers.hibernations]),
        nodes: new KindCache([informers.nodes], true),
        leases: new KindCache([informers.leases], false, activityLeaseKind.indexes),
      },
    );
    for (const i of all) i.start();
    c.defer("stop the informers", async () => void (await Promise.all(all.map((i) => i.stop()))));
    await Promise.all(all.map((i) => i.waitForSync()));

    // What the pass asks the reader for, to show that it did ask.
    const asked: string[] = [];
    const reads: Reader = cache.reads;
    const node = reads.node.bind(reads);
    const hibernations = reads.hibernations.bind(reads);
    const leases = reads.activityLeases.bind(reads);
    reads.activityLeases = (cs) => {
      asked.push(`leases ${cs.metadata.name}`);
      return leases(cs);
    };
    reads.node = (name) => {
      asked.push(`node ${name}`);
      return node(name);
    };
    reads.hibernations = (namespace) => {
      asked.push(`hibernations ${namespace}`);
      return hibernations(namespace);
    };

    const registry = new OciRegistry(registryAddress());
    const pass = passOf(new CocoonSetReconciler(client, { cache, registry }), ns, "reads");
    const freshPass = passOf(new CocoonSetReconciler(client, { registry }), ns, "reads");
    const live = () => admin.get<CocoonSet>(paths.cocoonSet(ns, "reads"));

    // An idle policy: each pass runs the idle step first, which reads the fleet's activity
    // Leases and the namespace's CocoonHibernations through the same reader.
    await createCocoonSet(ns, "reads", { replicas: 1, nodeName: NODES[0], idle: { after: "1h" } });
    removeFinalizerAtEnd(c, admin, ns, "reads");
    await until("the CocoonSet in the cache", () => cache.cocoonSet(ns, "reads") !== undefined);
    await until("2 agents Running on node 0", async () => {
      await pass();
      const pods = await fleetPods(admin, ns, "reads");
      return (
        pods.length === 2 &&
        pods.every((p) => p.status?.phase === "Running" && p.spec?.nodeName) &&
        (await live()).status?.phase === "Running"
      );
    });

    // A CocoonHibernation asks the sub-agent to hibernate (its controller's first write, made
    // here by the test: no node agent answers in this namespace, so it stays asked), and
    // spec.nodeName names a node that does not exist: each pass reads the CRs of the namespace
    // and the target node, and changes nothing. A gateway marks the main agent in use.
    await markActivity(admin, ns, "reads", ["reads-0"], "gateway", new Date());
    await admin.create(paths.cocoonHibernations(ns), {
      apiVersion: "cocoonset.cocoonstack.io/v1",
      kind: "CocoonHibernation",
      metadata: { name: "h" },
      spec: { podRef: { name: "reads-1" }, desire: "Hibernate" },
    });
    await admin.patch(
      paths.pod(ns, "reads-1"),
      { metadata: { annotations: { [ANNOTATIONS.hibernate]: ANNOTATION_TRUE } } },
      PatchType.merge,
    );
    await patchSpec(ns, "reads", { nodeName: "no-such-node" });
    await until("the caches show all three", () => {
      const pod = informers.pods.get(`${ns}/reads-1`) as Pod | undefined;
      return (
        cache.cocoonSet(ns, "reads")?.spec.nodeName === "no-such-node" &&
        informers.hibernations.get(`${ns}/h`) !== undefined &&
        informers.leases.list().length === 1 &&
        pod?.metadata?.annotations?.[ANNOTATIONS.hibernate] === ANNOTATION_TRUE
      );
    });
    await until("the migration refused, and the status written", async () => {
      await pass();
      const cs = await live();
      return (
        statusCondition(cs, "MigrationRefused")?.status === "True" &&
        cs.status?.observedGeneration === cs.metadata.generation &&
        cache.cocoonSet(ns, "reads")?.metadata.resourceVersion === cs.metadata.resourceVersion
      );
    });

    // Converged: a pass from the caches reads nothing of the apiserver, though it asked its
    // reader for the node and the CRs.
    const gets = (from: number) => sent.slice(from).filter((s) => s.startsWith("GET "));
    let from = sent.length;
    asked.length = 0;
    await pass();
    assert.deepEqual(gets(from), [], "no GET and no LIST from the caches");
    assert.deepEqual(sent.slice(from), [], "nothing written either: converged");
    assert.ok(asked.includes("node no-such-node"), `the target node asked: ${asked.join(", ")}`);
    assert.ok(asked.includes(`hibernations ${ns}`), `the CRs asked: ${asked.join(", ")}`);
    assert.ok(asked.includes("leases reads"), `the activity Leases asked: ${asked.join(", ")}`);
    assert.equal(statusCondition(await live(), "MigrationRefused")?.status, "True");

    // The same pass with fresh reads: the CocoonSet, the pods, the CRs and the node.
    from = sent.length;
    await freshPass();
    const fresh = gets(from);
    t.diagnostic(`fresh reads of one converged pass: ${fresh.join(", ")}`);
    assert.ok(fresh.includes(`GET ${paths.cocoonSet(ns, "reads")}`), fresh.join(", "));
    assert.ok(fresh.includes(`GET ${paths.pods(ns)}`), fresh.join(", "));
    assert.ok(fresh.includes(`GET ${paths.cocoonHibernations(ns)}`), fresh.join(", "));
    assert.ok(fresh.includes(`GET ${paths.nodes()}/no-such-node`), fresh.join(", "));
    assert.ok(fresh.includes(`GET ${paths.leases(ns)}`), `the Leases listed: ${fresh.join(", ")}`);
  });
});

/**
 * Three fleet caches over `client`, listed, their CocoonSet kinds wired as the manager wires a
 * process's (`SharedCache`): one process's that watches every namespace (its CocoonSet cache
 * holds every fleet, and the names kind is left unwatched), a shard's that holds none of this
 * test's fleets (a bucket none is in), and one process's that watches `ns` only; the last two
 * with the names of every CocoonSet. Each with `ns`'s managed pods and CocoonHibernations.
 */
async function fleetCaches(c: Cleanup, admin: KubeClient, client: KubeClient, ns: string) {
  const kinds = [cocoonSetKind, cocoonSetNamesKind];
  const shared = {
    whole: new SharedCache(kinds, [undefined], { client: admin }),
    shard: new SharedCache(kinds, [undefined], {
      client: admin,
      bucketSelector: `${LABELS.shardBucket}=no-such-bucket`,
    }),
    namespaced: new SharedCache(kinds, [ns], { client: admin }),
  };
  const informers = {
    pods: kindInformer(podKind, ns, { client: admin }),
    hibernations: new Informer({ client: admin, path: paths.cocoonHibernations(ns) }),
  };
  const pods = new KindCache([informers.pods], false, FLEET_POD_INDEXES);
  const hibernations = new KindCache([informers.hibernations], false, hibernationKind.indexes);
  const attached = (cache: SharedCache) => {
    const fleets = new FleetCache(client);
    fleets.attach(cache.kind(cocoonSetKind.name), pods, {
      hibernations,
      names: cache.kind(cocoonSetNamesKind.name),
    });
    return fleets;
  };
  const [whole, shard, namespaced] = [shared.whole, shared.shard, shared.namespaced].map(attached);
  const all = [...Object.values(shared), ...Object.values(informers)];
  for (const i of all) i.start();
  c.defer("stop the informers", async () => void (await Promise.all(all.map((i) => i.stop()))));
  await Promise.all(all.map((i) => i.waitForSync()));
  const names = shared.shard.kind(cocoonSetNamesKind.name);
  assert.equal(shared.whole.kind(cocoonSetNamesKind.name).informers.length, 0);
  return { whole, shard, namespaced, informers: { ...informers, names }, hibernations };
}

describe("CocoonHibernation pass from the caches", { timeout: 120_000 }, () => {
  test("lists no CocoonSet: the fleets that could name the pod's VM come from the cache, or (a shard that does not hold them) by name; the fresh read lists them all", async (t) => {
    const c = new Cleanup(t);
    const ns = await controllerNamespace(c, "ctl-hib-reads");
    const admin = adminClient();
    const { client, sent } = recordingClient(admin);
    const { whole, shard, namespaced, informers, hibernations } = await fleetCaches(
      c,
      admin,
      client,
      ns,
    );

    // What each reader answered, to show which fleets the pass was given.
    const given: string[][] = [];
    for (const reads of [whole.reads, shard.reads, namespaced.reads]) {
      const naming = reads.cocoonSetsNamingVms.bind(reads);
      reads.cocoonSetsNamingVms = async (namespace, vms) => {
        const fleets = await naming(namespace, vms);
        given.push(fleets.map((f) => `${namespaceOf(f)}/${f.metadata.name}`));
        return fleets;
      };
    }

    const pass = passOf(new CocoonSetReconciler(admin, { cache: whole }), ns, "reads");
    await createCocoonSet(ns, "reads", { replicas: 1, nodeName: NODES[0] });
    removeFinalizerAtEnd(c, admin, ns, "reads");
    // Another fleet of the namespace, whose VM names cannot be the pod's.
    await createCocoonSet(ns, "other", { replicas: 0, nodeName: NODES[0] });
    await until("the CocoonSets in the cache", () => whole.cocoonSet(ns, "other") !== undefined);
    await until("2 agents Running", async () => {
      await pass();
      const list = await fleetPods(admin, ns, "reads");
      return list.length === 2 && list.every((p) => p.status?.phase === "Running");
    });

    await admin.create(paths.cocoonHibernations(ns), {
      apiVersion: "cocoonset.cocoonstack.io/v1",
      kind: "CocoonHibernation",
      metadata: { name: "h" },
      spec: { podRef: { name: "reads-1" }, desire: "Hibernate" },
    });
    await until("the CR in the cache", () => informers.hibernations.get(`${ns}/h`) !== undefined);
    const registry = new OciRegistry(registryAddress());
    const reconcilerOn = (reads?: Reader) => {
      const r = new HibernationReconciler(client, { registry, reads });
      r.attach(hibernations, HIBERNATIONS_BY_POD);
      return (): Promise<unknown> =>
        r.reconcile({ namespace: ns, name: "h" }, hibernationContext()).catch((e: unknown) => e);
    };
    const gets = (from: number) => sent.slice(from).filter((s) => s.startsWith("GET "));
    const cr = `GET ${paths.cocoonHibernation(ns, "h")}`;
    const pod = `GET ${paths.pod(ns, "reads-1")}`;

    // From the whole cache, until the pass asked the pod to hibernate and recorded its VM;
    // then one pass reads the CR once (under the pod's lock) and the pod, nothing else.
    const fromCache = reconcilerOn(whole.reads);
    await until("the pod asked to hibernate, its VM recorded", async () => {
      await fromCache();
      const written = await admin.get<CocoonHibernation>(paths.cocoonHibernation(ns, "h"));
      const asked = await admin.get<Pod>(paths.pod(ns, "reads-1"));
      return (
        written.status?.vmName === vmNameFor(ns, "reads", 1) &&
        asked.metadata?.annotations?.[ANNOTATIONS.hibernate] === ANNOTATION_TRUE
      );
    });
    let from = sent.length;
    await fromCache();
    assert.deepEqual(gets(from), [cr, pod]);
    assert.deepEqual(given.pop(), [`${ns}/reads`], "only the fleet that could name the VM");

    // From a shard that does not hold the fleet: found by its name, read by name.
    from = sent.length;
    await reconcilerOn(shard.reads)();
    assert.deepEqual(gets(from), [cr, pod, `GET ${paths.cocoonSet(ns, "reads")}`]);
    assert.deepEqual(given.pop(), [`${ns}/reads`]);

    // From a controller of this namespace: its own cache, the names of every CocoonSet found
    // it (it listed the cluster's before, on every pass).
    from = sent.length;
    await reconcilerOn(namespaced.reads)();
    assert.deepEqual(gets(from), [cr, pod]);
    assert.deepEqual(given.pop(), [`${ns}/reads`]);

    // Afresh: the cluster's CocoonSets are listed.
    from = sent.length;
    await reconcilerOn()();
    const fresh = gets(from);
    t.diagnostic(`fresh reads of one CocoonHibernation pass: ${fresh.join(", ")}`);
    assert.ok(fresh.includes(`GET ${paths.cocoonSets()}`), fresh.join(", "));
  });
});

/** A CocoonHibernation reconcile's context that keeps nothing. */
function hibernationContext(): ReconcileContext<HibernationMetrics> {
  return {
    log: createLogger({ level: "silent" }),
    events: { event: () => Promise.resolve() },
    metrics: { phaseDuration() {} },
    signal: new AbortController().signal,
  };
}

describe("the VM-name check's fleets from the caches", { timeout: 120_000 }, () => {
  test("a pass is given its name's neighbours, read from the cache (a shard reads them by name; a controller of some namespaces finds them in every CocoonSet's names); a fleet claiming a static VM identity every fleet, which a shard and a namespaced controller list", async (t) => {
    const c = new Cleanup(t);
    const ns = await controllerNamespace(c, "ctl-vm-neighbours");
    const admin = adminClient();
    const { client, sent } = recordingClient(admin);
    const { whole, shard, namespaced, informers } = await fleetCaches(c, admin, client, ns);

    // `web` and `web-b` are neighbours (`vk-<ns>-web-b-0` is toolbox `b-0` of `web`); `api`
    // is no one's; `desk` adopts a static VM.
    for (const name of ["web", "web-b", "api"])
      await createCocoonSet(ns, name, { replicas: 0, nodeName: NODES[0] });
    await admin.create(paths.cocoonSets(ns), {
      apiVersion: "cocoonset.cocoonstack.io/v1",
      kind: "CocoonSet",
      metadata: { name: "desk", namespace: ns },
      spec: {
        agent: { image: "ghcr.io/acme/agent:1", replicas: 0 },
        toolboxes: [{ name: "vnc", mode: "static", staticVMID: "vm-9", staticIP: "10.0.0.9" }],
      },
    });
    await until("the four in the caches", () =>
      ["web", "web-b", "api", "desk"].every(
        (n) =>
          whole.cocoonSet(ns, n) &&
          namespaced.cocoonSet(ns, n) &&
          informers.names.get(`${ns}/${n}`),
      ),
    );
    const web = whole.cocoonSet(ns, "web")!;
    const desk = whole.cocoonSet(ns, "desk")!;
    const mine = (fleets: CocoonSet[]) =>
      fleets
        .filter((f) => f.metadata.namespace === ns)
        .map((f) => f.metadata.name)
        .sort();
    const asked = async (read: () => Promise<CocoonSet[]>) => {
      const from = sent.length;
      const fleets = await read();
      return { fleets: mine(fleets), sent: sent.slice(from) };
    };

    assert.deepEqual(await asked(() => whole.reads.cocoonSetsForVmNames(web)), {
      fleets: ["web", "web-b"],
      sent: [],
    });
    assert.deepEqual(await asked(() => shard.reads.cocoonSetsForVmNames(web)), {
      fleets: ["web", "web-b"],
      sent: [`GET ${paths.cocoonSet(ns, "web")}`, `GET ${paths.cocoonSet(ns, "web-b")}`],
    });
    // A controller of this namespace holds them: found in the names, read from its cache.
    assert.deepEqual(await asked(() => namespaced.reads.cocoonSetsForVmNames(web)), {
      fleets: ["web", "web-b"],
      sent: [],
    });
    // A static identity may be reported by any fleet: every one, from the whole cache or listed.
    assert.deepEqual(await asked(() => whole.reads.cocoonSetsForVmNames(desk)), {
      fleets: ["api", "desk", "web", "web-b"],
      sent: [],
    });
    assert.deepEqual(await asked(() => shard.reads.cocoonSetsForVmNames(desk)), {
      fleets: ["api", "desk", "web", "web-b"],
      sent: [`GET ${paths.cocoonSets()}`],
    });
    assert.deepEqual(await asked(() => namespaced.reads.cocoonSetsForVmNames(desk)), {
      fleets: ["api", "desk", "web", "web-b"],
      sent: [`GET ${paths.cocoonSets()}`],
    });

    // The names follow fleets coming and going, not their updates: a label written on `api`
    // leaves its name as first seen (the update is not decoded), while `web-b` going and
    // `web-c` coming change `web`'s neighbours in both caches.
    const listed = informers.names.get(`${ns}/api`)?.metadata.resourceVersion;
    const labelled = await admin.patch<CocoonSet>(
      paths.cocoonSet(ns, "api"),
      { metadata: { labels: { touched: "yes" } } },
      PatchType.merge,
    );
    await admin.delete(paths.cocoonSet(ns, "web-b"));
    await createCocoonSet(ns, "web-c", { replicas: 0, nodeName: NODES[0] });
    await until(
      "web-b gone from and web-c in both caches, the label in the whole one",
      () =>
        !informers.names.get(`${ns}/web-b`) &&
        !!informers.names.get(`${ns}/web-c`) &&
        !whole.cocoonSet(ns, "web-b") &&
        !!whole.cocoonSet(ns, "web-c") &&
        !namespaced.cocoonSet(ns, "web-b") &&
        !!namespaced.cocoonSet(ns, "web-c") &&
        whole.cocoonSet(ns, "api")?.metadata.resourceVersion === labelled.metadata.resourceVersion,
    );
    assert.equal(
      informers.names.get(`${ns}/api`)?.metadata.resourceVersion,
      listed,
      "the names' copy of api is as first seen",
    );
    assert.deepEqual((await asked(() => whole.reads.cocoonSetsForVmNames(web))).fleets, [
      "web",
      "web-c",
    ]);
    for (const cache of [shard, namespaced])
      assert.deepEqual((await asked(() => cache.reads.cocoonSetsForVmNames(web))).fleets, [
        "web",
        "web-c",
      ]);
  });
});
