import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { register } from "prom-client";
import {
  CocoonSetMetrics,
  HibernationPhaseMetrics,
  registerRegistryMetrics,
} from "../../../controller/cocoonset-metrics.js";
import { Metrics, METRIC_NAMES } from "../../../controller/metrics.js";
import { GuardedRegistry } from "../../../engine/registry/guard.js";

describe("controller metrics", () => {
  test("exports exactly the documented names with their labels", async () => {
    const m = new Metrics();
    // What the two controllers register on the manager's registry.
    const cs = new CocoonSetMetrics(m.registry);
    const hib = new HibernationPhaseMetrics(m.registry);
    // With --oci-registry: the registry guard's series.
    const guard = new GuardedRegistry(
      { hasManifest: () => Promise.resolve(true), deleteManifest: () => Promise.resolve() },
      { name: "reg.example" },
    );
    registerRegistryMetrics(m.registry, guard);
    await guard.hasManifest("vm", "hibernate");
    cs.rebuild("ns1", "fleet");
    cs.deadLetter("ns1", "fleet");
    cs.reapDeleted("Pod", "Expired", 2);
    cs.releaseDeleted("Job", 3);
    m.controllerStarted("cocoonset", 4);
    m.controllerStarted("cocoonhibernation", 4);
    m.reconciled("cocoonset", "success", 0.01);
    m.reconciled("cocoonset", "error", 0.2);
    m.reconciled("cocoonset", "requeue_after", 0.02);
    m.reconciled("cocoonhibernation", "requeue", 0.02);
    m.workerActive("cocoonset", 1);
    m.queueAdded("cocoonset");
    m.queueRetried("cocoonset");
    m.queueWaited("cocoonset", 0.5);
    m.queueWorked("cocoonhibernation", 2);
    // Each controller's own queue.
    m.setQueue("cocoonset", {
      queuedKeys: () => ["a/x", "a/y"],
      inFlightSince: () => [
        ["a/w", 1000],
        ["a/v", 4000],
      ],
      now: () => 5000,
    });
    m.setQueue("cocoonhibernation", {
      queuedKeys: () => ["a/z"],
      inFlightSince: () => [],
      now: () => 5000,
    });
    m.setLeader("cocoonset-controller", true);
    m.restClientRequest("200", "GET", "127.0.0.1:6443");
    m.restClientRequest("<error>", "PATCH", "127.0.0.1:6443");
    hib.phaseDuration("hibernate_phase_duration_seconds", "ok", 12);
    hib.phaseDuration("wake_phase_duration_seconds", "timeout", 300);
    cs.slotReleasePodDeleted("ns1", "nap");
    cs.slotReleaseWake("ns1", "nap", "hint-node");
    cs.slotReleaseWakeUnschedulable("ns1", "nap");
    cs.idleHibernated("ns1", "idle", 2);
    cs.wokenOnDemand("ns1", "idle", 1);
    cs.idleHibernatedMembers("ns1", "idle", 1);
    const text = await m.text();
    const expected = [
      'cocoonset_subagent_rebuild_total{namespace="ns1",cocoonset="fleet"} 1',
      'cocoonset_subagent_dead_letter_total{namespace="ns1",cocoonset="fleet"} 1',
      'cocoonset_reap_deleted_total{kind="Pod",reason="Expired"} 2',
      'cocoonset_release_deleted_total{kind="Job"} 3',
      'controller_runtime_reconcile_total{controller="cocoonset",result="success"} 1',
      'controller_runtime_reconcile_total{controller="cocoonset",result="error"} 1',
      'controller_runtime_reconcile_total{controller="cocoonset",result="requeue_after"} 1',
      'controller_runtime_reconcile_total{controller="cocoonhibernation",result="requeue"} 1',
      'controller_runtime_reconcile_errors_total{controller="cocoonset"} 1',
      'controller_runtime_reconcile_errors_total{controller="cocoonhibernation"} 0',
      'controller_runtime_reconcile_time_seconds_count{controller="cocoonset"} 3',
      'controller_runtime_reconcile_time_seconds_bucket{le="0.15",controller="cocoonset"} 2',
      'controller_runtime_max_concurrent_reconciles{controller="cocoonset"} 4',
      'controller_runtime_active_workers{controller="cocoonset"} 1',
      'controller_runtime_active_workers{controller="cocoonhibernation"} 0',
      'workqueue_depth{name="cocoonset",controller="cocoonset"} 2',
      'workqueue_depth{name="cocoonhibernation",controller="cocoonhibernation"} 1',
      'workqueue_adds_total{name="cocoonset",controller="cocoonset"} 1',
      'workqueue_retries_total{name="cocoonset",controller="cocoonset"} 1',
      'workqueue_queue_duration_seconds_bucket{le="1",name="cocoonset",controller="cocoonset"} 1',
      'workqueue_queue_duration_seconds_bucket{le="0.1",name="cocoonset",controller="cocoonset"} 0',
      'workqueue_work_duration_seconds_count{name="cocoonhibernation",controller="cocoonhibernation"} 1',
      'workqueue_unfinished_work_seconds{name="cocoonset",controller="cocoonset"} 5',
      'workqueue_longest_running_processor_seconds{name="cocoonset",controller="cocoonset"} 4',
      'workqueue_longest_running_processor_seconds{name="cocoonhibernation",controller="cocoonhibernation"} 0',
      'leader_election_master_status{name="cocoonset-controller"} 1',
      'rest_client_requests_total{code="200",method="GET",host="127.0.0.1:6443"} 1',
      'rest_client_requests_total{code="<error>",method="PATCH",host="127.0.0.1:6443"} 1',
      'cocoonset_hibernate_phase_duration_seconds_count{result="ok"} 1',
      'cocoonset_wake_phase_duration_seconds_count{result="timeout"} 1',
      'cocoonset_slot_release_pods_deleted_total{namespace="ns1",cocoonset="nap"} 1',
      'cocoonset_slot_release_wake_total{namespace="ns1",cocoonset="nap",placement="hint-node"} 1',
      'cocoonset_slot_release_wake_unschedulable_total{namespace="ns1",cocoonset="nap"} 1',
      'cocoonset_idle_hibernations_total{namespace="ns1",cocoonset="idle"} 2',
      'cocoonset_wakes_on_demand_total{namespace="ns1",cocoonset="idle"} 1',
      'cocoonset_idle_hibernated_members{namespace="ns1",cocoonset="idle"} 1',
      'cocoonset_snapshot_registry_calls_total{result="ok"} 1',
      'cocoonset_snapshot_registry_calls_total{result="refused"} 0',
      "cocoonset_snapshot_registry_unanswered 0",
    ];
    for (const line of expected) assert.ok(text.includes(line), `missing: ${line}\n${text}`);
    const types = new Set(
      [...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((x) => `${x[1]} ${x[2]}`),
    );
    const kind = (name: string) =>
      /_total$/.test(name)
        ? "counter"
        : /_(duration|time)_seconds$/.test(name)
          ? "histogram"
          : "gauge";
    assert.deepEqual(
      [...types].sort(),
      Object.values(METRIC_NAMES)
        .map((n) => `${n} ${kind(n)}`)
        .sort(),
    );
  });

  test("two instances use their own registries, never the global one", async () => {
    const a = new Metrics();
    const b = new Metrics();
    new CocoonSetMetrics(a.registry).rebuild("x", "y");
    new CocoonSetMetrics(b.registry);
    assert.ok(
      (await a.text()).includes('cocoonset_subagent_rebuild_total{namespace="x",cocoonset="y"} 1'),
    );
    assert.ok(!(await b.text()).includes('namespace="x"'));
    assert.equal(register.getSingleMetric(METRIC_NAMES.rebuild), undefined);
  });

  test("a controller's queue gauges read zero once its queue is detached", async () => {
    const m = new Metrics();
    m.controllerStarted("cocoonhibernation", 2);
    m.setQueue("cocoonhibernation", {
      queuedKeys: () => ["a/b"],
      inFlightSince: () => [],
      now: () => 0,
    });
    assert.match(
      await m.text(),
      /^workqueue_depth\{name="cocoonhibernation",controller="cocoonhibernation"\} 1$/m,
    );
    m.setQueue("cocoonhibernation", undefined);
    assert.match(
      await m.text(),
      /^workqueue_depth\{name="cocoonhibernation",controller="cocoonhibernation"\} 0$/m,
    );
  });

  test("no leader series before a Lease is named, and zero counts are not recorded", async () => {
    const m = new Metrics();
    new CocoonSetMetrics(m.registry).reapDeleted("Job", "Expired", 0);
    const text = await m.text();
    assert.ok(!text.includes("leader_election_master_status{"), "no Lease named yet");
    assert.ok(!text.includes('reason="Expired"'));
  });
});
