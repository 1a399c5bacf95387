/**
 * The controller runtime against a real apiserver: the informer's list-then-watch cache,
 * its recovery after the apiserver restarts, leader election on a real Lease, and Events
 * through events.k8s.io.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { pino } from "pino";
import { KubeEventRecorder, REPORTING_CONTROLLER } from "../../controller/events.js";
import { runController } from "../../controller/cocoonset-controller.js";
import { Metrics } from "../../controller/metrics.js";
import { metricValue } from "../support/controller-process.js";
import type { ControllerOptions } from "../../controller/options.js";
import type { ObjectKey, ReconcileContext } from "../../controller/types.js";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { Informer } from "../../controller/informer.js";
import { LeaderElector, type Lease } from "../../controller/leader-election.js";
import {
  COCOONSET_API,
  paths,
  waitForList,
  waitForObject,
  type KubeObject,
} from "../../engine/kube/index.js";
import { restartApiserver } from "../support/apiserver-restart.js";
import { runControllerCli } from "../support/run-controller-cli.js";
import { adminClient, suffix, testClusterDir, withNamespace } from "../support/cluster.js";

/** A lease duration no test outlives. */
const HOUR_S = 3600;

const quiet = pino({ level: "silent" });

/** Records informer callbacks and lets a test await the first one matching a predicate. */
function recordInformer(inf: Informer) {
  const seen: { kind: "add" | "update" | "delete"; obj: KubeObject; old?: KubeObject }[] = [];
  const waiters: { match: (e: (typeof seen)[number]) => boolean; resolve: () => void }[] = [];
  const push = (e: (typeof seen)[number]) => {
    seen.push(e);
    for (const w of waiters.filter((w) => w.match(e))) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve();
    }
  };
  inf.addHandlers({
    onAdd: (obj) => push({ kind: "add", obj }),
    onUpdate: (old, obj) => push({ kind: "update", obj, old }),
    onDelete: (obj) => push({ kind: "delete", obj }),
  });
  const next = (
    what: string,
    match: (e: (typeof seen)[number]) => boolean,
    timeoutMs = 30_000,
  ): Promise<void> => {
    if (seen.some(match)) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`no informer event "${what}" within ${timeoutMs} ms`)),
        timeoutMs,
      );
      waiters.push({
        match,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      });
    });
  };
  return { seen, next };
}

const cm = (name: string, data: Record<string, string>): KubeObject => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name, labels: { "test.cocoonstack.io/informer": "yes" } },
  data,
});

describe("controller runtime on a real apiserver", { timeout: 180_000 }, () => {
  test("the informer delivers add, update and delete for ConfigMaps and mirrors the cluster", async (t) => {
    const ns = await withNamespace(t, "informer");
    const client = adminClient();
    await client.create(paths.configMaps(ns), cm("before", { v: "0" }));
    const inf = new Informer({
      client,
      path: paths.configMaps(ns),
      labelSelector: "test.cocoonstack.io/informer=yes",
      log: quiet,
    });
    t.after(() => inf.stop());
    const rec = recordInformer(inf);
    inf.start();
    await inf.waitForSync();
    assert.equal(inf.hasSynced(), true);
    await rec.next("initial add", (e) => e.kind === "add" && e.obj.metadata.name === "before");

    await client.create(paths.configMaps(ns), cm("one", { v: "1" }));
    // An unlabelled ConfigMap is outside the selector and must never show up.
    await client.create(paths.configMaps(ns), { ...cm("other", {}), metadata: { name: "other" } });
    await rec.next("add one", (e) => e.kind === "add" && e.obj.metadata.name === "one");

    const patched = await client.patch(paths.configMap(ns, "one"), { data: { v: "2" } });
    await rec.next(
      "update one",
      (e) =>
        e.kind === "update" &&
        e.obj.metadata.name === "one" &&
        (e.obj.data as Record<string, string>).v === "2" &&
        (e.old?.data as Record<string, string>).v === "1",
    );
    assert.equal(inf.get(`${ns}/one`)?.metadata.resourceVersion, patched.metadata.resourceVersion);

    await client.delete(paths.configMap(ns, "one"));
    await rec.next("delete one", (e) => e.kind === "delete" && e.obj.metadata.name === "one");

    const live = await client.list(paths.configMaps(ns), {
      labelSelector: "test.cocoonstack.io/informer=yes",
    });
    assert.deepEqual(
      inf
        .list()
        .map((o) => `${o.metadata.name}@${o.metadata.resourceVersion}`)
        .sort(),
      live.items.map((o) => `${o.metadata.name}@${o.metadata.resourceVersion}`).sort(),
      "the cache equals the cluster",
    );
    assert.ok(!rec.seen.some((e) => e.obj.metadata.name === "other"));
  });

  test("after the apiserver restarts, the informer recovers and delivers new events", async (t) => {
    const ns = await withNamespace(t, "restart");
    const client = adminClient();
    const inf = new Informer({
      client,
      path: paths.configMaps(ns),
      labelSelector: "test.cocoonstack.io/informer=yes",
      log: quiet,
      maxBackoffMs: 2000,
    });
    t.after(() => inf.stop());
    const rec = recordInformer(inf);
    inf.start();
    await inf.waitForSync();
    await client.create(paths.configMaps(ns), cm("pre", { v: "1" }));
    await rec.next("add pre", (e) => e.kind === "add" && e.obj.metadata.name === "pre");

    let supervisedWhileDown = false;
    const r = await restartApiserver(testClusterDir(), () => {
      supervisedWhileDown = inf.isSupervised();
    });
    assert.notEqual(r.newPid, r.oldPid);
    assert.equal(
      supervisedWhileDown,
      true,
      "the informer keeps retrying while the apiserver is down",
    );

    await client.create(paths.configMaps(ns), cm("post", { v: "1" }));
    await rec.next("add post", (e) => e.kind === "add" && e.obj.metadata.name === "post", 60_000);
    await client.patch(paths.configMap(ns, "pre"), { data: { v: "2" } });
    await rec.next(
      "update pre",
      (e) =>
        e.kind === "update" &&
        e.obj.metadata.name === "pre" &&
        e.obj.data !== undefined &&
        (e.obj.data as Record<string, string>).v === "2",
    );
    assert.ok(inf.relistCount() >= 1, "the informer re-listed after the outage");
    assert.equal(inf.isSupervised(), true);
    assert.equal(inf.lastError(), undefined, "a successful re-list clears the error");
  });

  test("two electors on one Lease: one leads, and release() hands over at once", async (t) => {
    const ns = await withNamespace(t, "lease");
    const client = adminClient();
    const name = `lease-${suffix()}`;
    const leading: string[] = [];
    const started: Record<string, () => void> = {};
    const startedP: Record<string, Promise<void>> = {};
    for (const id of ["alpha", "beta"]) startedP[id] = new Promise((r) => (started[id] = r));
    const make = (id: string) =>
      new LeaderElector({
        client,
        namespace: ns,
        name,
        identity: id,
        // Far longer than the test may run: a takeover can only come from release().
        leaseDurationSeconds: HOUR_S,
        renewIntervalMs: 200,
        retryIntervalMs: 200,
        log: quiet,
        onStartedLeading: () => {
          leading.push(id);
          started[id]();
        },
      });
    const a = make("alpha");
    const b = make("beta");
    t.after(async () => {
      await a.stop();
      await b.stop();
    });
    a.start();
    b.start();
    const first = await Promise.race(["alpha", "beta"].map((id) => startedP[id].then(() => id)));
    const [leader, standby] = first === "alpha" ? [a, b] : [b, a];

    // Watch the leader renew several times; the standby must stay out the whole time.
    let renewals = 0;
    let lastRenew = "";
    const lease = (await waitForObject<Lease>(client, paths.leases(ns), name, (l) => {
      if (!l?.spec?.renewTime || l.spec.renewTime === lastRenew) return false;
      lastRenew = l.spec.renewTime;
      assert.equal(l.spec.holderIdentity, leader.identity, "the holder never changes hands");
      return ++renewals >= 5;
    }))!;
    assert.equal(leader.isLeader(), true);
    assert.equal(standby.isLeader(), false);
    assert.deepEqual(leading, [leader.identity]);
    assert.equal(lease.spec?.leaseDurationSeconds, HOUR_S);
    assert.equal(lease.spec?.leaseTransitions, 0);
    assert.match(lease.spec?.acquireTime ?? "", /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);

    await leader.stop();
    assert.equal(leader.isLeader(), false);
    const released = await client.get<Lease>(paths.lease(ns, name));
    assert.ok(
      // A cleared holder comes back absent: the apiserver omits empty fields.
      (released.spec?.holderIdentity ?? null) === null ||
        released.spec?.holderIdentity === standby.identity,
      "stop() gave the Lease up (or the standby already took it)",
    );
    // The Lease would only expire after an hour: the standby leads because it was released.
    await startedP[standby.identity];
    const after = await client.get<Lease>(paths.lease(ns, name));
    assert.equal(after.spec?.holderIdentity, standby.identity);
    assert.equal(after.spec?.leaseTransitions, 1);
    assert.deepEqual(leading, [leader.identity, standby.identity]);
  });

  test("a leader that sees the Lease taken by someone else steps down", async (t) => {
    const ns = await withNamespace(t, "lease-lost");
    const client = adminClient();
    const name = `lease-${suffix()}`;
    let stopped!: () => void;
    const stoppedP = new Promise<void>((r) => (stopped = r));
    const el = new LeaderElector({
      client,
      namespace: ns,
      name,
      identity: "gamma",
      log: quiet,
      onStoppedLeading: () => stopped(),
    });
    t.after(() => el.stop());
    assert.equal(await el.tryAcquireOrRenew(), true);
    const lease = await client.get<Lease>(paths.lease(ns, name));
    await client.replace(paths.lease(ns, name), {
      ...lease,
      spec: { ...lease.spec, holderIdentity: "intruder" },
    });
    assert.equal(await el.tryAcquireOrRenew(), false);
    await stoppedP;
    assert.equal(el.isLeader(), false);
    await el.release();
    const still = await client.get<Lease>(paths.lease(ns, name));
    assert.equal(still.spec?.holderIdentity, "intruder", "release never clears another holder");
  });

  test("the event recorder creates a real events.k8s.io Event and skips identical repeats", async (t) => {
    const ns = await withNamespace(t, "events");
    const client = adminClient();
    const target = await client.create(paths.configMaps(ns), cm(`target-${suffix()}`, {}));
    const rec = new KubeEventRecorder({ client, identity: "test-instance", log: quiet });
    await rec.event(target, "Warning", "SubAgentDeadLetter", "slot 3 exhausted 4 rebuilds");
    await rec.event(target, "Warning", "SubAgentDeadLetter", "slot 3 exhausted 4 rebuilds");
    await rec.event(target, "Normal", "SubAgentRebuilding", "slot 2 attempt 1/4", "Rebuild");
    const events = await waitForList(client, paths.events(ns), (items) => items.length >= 2, {
      description: "two events",
    });
    assert.equal(events.length, 2, "the identical repeat was skipped");
    const dead = events.find((e) => e.reason === "SubAgentDeadLetter")!;
    assert.equal(dead.type, "Warning");
    assert.equal(dead.note, "slot 3 exhausted 4 rebuilds");
    assert.equal(dead.reportingController, REPORTING_CONTROLLER);
    assert.equal(dead.reportingInstance, "test-instance");
    assert.equal(dead.action, "SubAgentDeadLetter");
    assert.match(String(dead.eventTime), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    assert.deepEqual(dead.regarding, {
      apiVersion: "v1",
      kind: "ConfigMap",
      name: target.metadata.name,
      namespace: ns,
      uid: target.metadata.uid,
      resourceVersion: target.metadata.resourceVersion,
    });
    const rebuild = events.find((e) => e.reason === "SubAgentRebuilding")!;
    assert.equal(rebuild.action, "Rebuild");
    assert.equal(rebuild.type, "Normal");
  });
});

/** Polls an HTTP endpoint until `ok(status, body)`; the probe server has no watch to follow. */
async function untilHttp(
  url: string,
  ok: (status: number, body: string) => boolean,
  timeoutMs = 60_000,
): Promise<{ status: number; body: string }> {
  const deadline = Date.now() + timeoutMs;
  let last = { status: 0, body: "" };
  while (Date.now() < deadline) {
    try {
      const res = await fetch(url);
      last = { status: res.status, body: await res.text() };
      if (ok(last.status, last.body)) return last;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} never satisfied the condition; last ${last.status} ${last.body}`);
}

describe("controller manager with a stand-in reconciler", { timeout: 180_000 }, () => {
  test("CocoonSet and owned-pod changes reach the reconciler; SIGTERM-style stop releases the Lease", async (t) => {
    const ns = await withNamespace(t, "manager");
    const client = adminClient();
    const calls: string[] = [];
    const inFlight = new Set<string>();
    const waiters: { n: number; key: string; resolve: () => void }[] = [];
    let failFirst = true;
    const count = (key: string) => calls.filter((c) => c === key).length;
    const reconciled = (key: string, n: number) =>
      new Promise<void>((resolve) => {
        if (count(key) >= n) return resolve();
        waiters.push({ n, key, resolve });
      });
    const reaped: string[] = [];
    const reconciler = {
      async reconcile(key: ObjectKey, ctx: ReconcileContext) {
        const k = `${key.namespace}/${key.name}`;
        assert.ok(!inFlight.has(k), `${k} reconciled twice at once`);
        inFlight.add(k);
        try {
          await new Promise((r) => setTimeout(r, 20));
          calls.push(k);
          for (const w of waiters.filter((w) => count(w.key) >= w.n)) {
            waiters.splice(waiters.indexOf(w), 1);
            w.resolve();
          }
          ctx.log.debug("stand-in reconcile");
          if (failFirst) {
            failFirst = false;
            throw new Error("first reconcile fails on purpose");
          }
          return {};
        } finally {
          inFlight.delete(k);
        }
      },
    };
    const opts: ControllerOptions = {
      namespaces: [ns],
      concurrency: 2,
      fanoutConcurrency: 8,
      metricsBindAddress: "127.0.0.1:0",
      healthProbeBindAddress: "127.0.0.1:0",
      leaderElect: true,
      leaderElectionNamespace: ns,
      reapIntervalMs: 600_000,
      logLevel: "silent",
    };
    const stop = new AbortController();
    const metrics = new Metrics();
    let ports!: { metrics: number; probes: number };
    let onListening!: () => void;
    const listening = new Promise<void>((r) => (onListening = r));
    const done = runController(
      opts,
      {
        reconciler,
        reap: async (namespace) => {
          reaped.push(namespace);
          return { jobs: 0, pods: 0, configMaps: 0 };
        },
      },
      {
        client,
        metrics,
        signal: stop.signal,
        identity: "manager-test",
        logger: quiet,
        onListening: (p) => {
          ports = p;
          onListening();
        },
      },
    );
    t.after(async () => {
      stop.abort();
      await done;
    });
    await listening;
    const probe = `http://127.0.0.1:${ports.probes}`;

    if (!(await client.getOrUndefined(paths.crd("cocoonsets.cocoonset.cocoonstack.io")))) {
      // Only on a cluster where no other test installed the CRD yet.
      const notReady = await untilHttp(`${probe}/readyz`, (s) => s === 503);
      assert.match(notReady.body, /CRD cocoonsets\.cocoonset\.cocoonstack\.io is not installed/);
      assert.equal(
        (await fetch(`${probe}/healthz`)).status,
        200,
        "alive while waiting for the CRD",
      );
    }
    await ensureCrd(client);
    const ready = await untilHttp(`${probe}/readyz`, (s) => s === 200);
    assert.equal(ready.body.trim(), "ok");
    assert.equal((await fetch(`${probe}/healthz`)).status, 200);

    const lease = await client.get<Lease>(paths.lease(ns, "cocoonset-controller"));
    assert.equal(lease.spec?.holderIdentity, "manager-test");

    const cs = await client.create(`/apis/${COCOONSET_API}/namespaces/${ns}/cocoonsets`, {
      apiVersion: COCOONSET_API,
      kind: "CocoonSet",
      metadata: { name: "fleet" },
      spec: { agent: { image: "registry.invalid/agent:1" } },
    });
    const key = `${ns}/fleet`;
    // The first reconcile throws: the key comes back through the rate limiter.
    await reconciled(key, 2);
    assert.deepEqual(reaped, [ns], "the reaper ran once at start");

    const before = count(key);
    await client.create(paths.pods(ns), {
      apiVersion: "v1",
      kind: "Pod",
      metadata: {
        name: "fleet-0",
        labels: { "app.kubernetes.io/managed-by": "cocoonset" },
        ownerReferences: [
          {
            apiVersion: COCOONSET_API,
            kind: "CocoonSet",
            name: "fleet",
            uid: cs.metadata.uid!,
            controller: true,
            blockOwnerDeletion: true,
          },
        ],
      },
      spec: { containers: [{ name: "agent", image: "registry.invalid/never-pulled" }] },
    });
    await reconciled(key, before + 1);

    const text = await (await fetch(`http://127.0.0.1:${ports.metrics}/metrics`)).text();
    // controller-runtime's and client-go's names, labels and meanings.
    const value = (name: string, labels: Record<string, string> = {}) =>
      metricValue(text, name, labels);
    const cocoonset = { controller: "cocoonset" };
    const queue = { name: "cocoonset", controller: "cocoonset" };
    assert.equal(value("controller_runtime_reconcile_total", { ...cocoonset, result: "error" }), 1);
    assert.ok(
      value("controller_runtime_reconcile_total", { ...cocoonset, result: "success" }) >= 1,
    );
    assert.equal(value("controller_runtime_reconcile_errors_total", cocoonset), 1);
    assert.equal(
      value("controller_runtime_reconcile_time_seconds_count", cocoonset),
      value("controller_runtime_reconcile_total", cocoonset),
      "every reconcile is timed",
    );
    assert.equal(value("controller_runtime_max_concurrent_reconciles", cocoonset), 2);
    assert.match(text, /^controller_runtime_active_workers\{controller="cocoonset"\} \d+$/m);
    // The CocoonSet's add, the pod's add and the error's retry each put the key in the queue.
    assert.ok(value("workqueue_adds_total", queue) >= 3, text);
    assert.equal(value("workqueue_retries_total", queue), 1, "the failed reconcile's retry");
    assert.equal(
      value("workqueue_work_duration_seconds_count", queue),
      value("controller_runtime_reconcile_total", cocoonset),
    );
    assert.ok(value("workqueue_queue_duration_seconds_count", queue) >= 3);
    assert.match(text, /^workqueue_depth\{name="cocoonset",controller="cocoonset"\} \d+$/m);
    assert.match(
      text,
      /^workqueue_unfinished_work_seconds\{name="cocoonset",controller="cocoonset"\} /m,
    );
    assert.match(
      text,
      /^workqueue_longest_running_processor_seconds\{name="cocoonset",controller="cocoonset"\} /m,
    );
    assert.equal(value("leader_election_master_status", { name: "cocoonset-controller" }), 1);
    const host = new URL(client.server).host;
    assert.ok(value("rest_client_requests_total", { code: "200", method: "GET", host }) > 0);
    assert.ok(value("rest_client_requests_total", { code: "201", method: "POST", host }) > 0);
    assert.ok(!/cocoonset_reconcile_total|cocoonset_leader /.test(text), "the old names are gone");

    stop.abort();
    await done;
    const released = await client.get<Lease>(paths.lease(ns, "cocoonset-controller"));
    assert.ok(!released.spec?.holderIdentity, "the Lease is released on shutdown");
    await assert.rejects(fetch(`${probe}/healthz`), "the probe server is closed");
  });
});

describe("cocoonset controller start-up errors", { timeout: 60_000 }, () => {
  test("an unreachable apiserver fails naming its URL and where the kubeconfig came from", async (t) => {
    const dir = mkdtempSync(join(tmpdir(), "cocoonset-kc-"));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const kc = join(dir, "kubeconfig");
    writeFileSync(
      kc,
      [
        "apiVersion: v1",
        "kind: Config",
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}}]",
        "users: [{name: u, user: {token: t}}]",
        "contexts: [{name: x, context: {cluster: c, user: u}}]",
        "current-context: x",
      ].join("\n"),
    );
    const r = await runControllerCli(["--kubeconfig", kc, "--metrics-bind-address", "0"]);
    assert.notEqual(r.exitCode, 0);
    assert.match(r.stderr, /cannot reach the apiserver at https:\/\/127\.0\.0\.1:1/);
    assert.ok(r.stderr.includes(`--kubeconfig ${kc}`), r.stderr);
    assert.equal(r.depsCalled, false);
  });
});
