import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { register } from "prom-client";
import { Metrics, METRIC_NAMES } from "../../../controller/metrics.js";

describe("controller metrics", () => {
  test("exports exactly the documented names with their labels", async () => {
    const m = new Metrics();
    m.rebuild("ns1", "fleet");
    m.deadLetter("ns1", "fleet");
    m.reapDeleted("Pod", "Expired", 2);
    m.releaseDeleted("Job", 3);
    m.reconciled("success", 0.01);
    m.reconciled("error", 0.2);
    m.reconciled("requeue", 0.02);
    m.setQueueDepthSource(() => 5);
    m.setLeader(true);
    m.phaseDuration("hibernate_phase_duration_seconds", "ok", 12);
    m.phaseDuration("wake_phase_duration_seconds", "timeout", 300);
    m.slotReleasePodDeleted("ns1", "nap");
    m.slotReleaseWake("ns1", "nap", "hint-node");
    m.slotReleaseWakeUnschedulable("ns1", "nap");
    const text = await m.text();
    const expected = [
      'cocoonset_subagent_rebuild_total{namespace="ns1",cocoonset="fleet"} 1',
      'cocoonset_subagent_dead_letter_total{namespace="ns1",cocoonset="fleet"} 1',
      'cocoonset_reap_deleted_total{kind="Pod",reason="Expired"} 2',
      'cocoonset_release_deleted_total{kind="Job"} 3',
      'cocoonset_reconcile_total{result="success"} 1',
      'cocoonset_reconcile_total{result="error"} 1',
      'cocoonset_reconcile_total{result="requeue"} 1',
      "cocoonset_reconcile_errors_total 1",
      'cocoonset_reconcile_duration_seconds_count{result="error"} 1',
      "cocoonset_workqueue_depth 5",
      "cocoonset_leader 1",
      'cocoonset_hibernate_phase_duration_seconds_count{result="ok"} 1',
      'cocoonset_wake_phase_duration_seconds_count{result="timeout"} 1',
      'cocoonset_slot_release_pods_deleted_total{namespace="ns1",cocoonset="nap"} 1',
      'cocoonset_slot_release_wake_total{namespace="ns1",cocoonset="nap",placement="hint-node"} 1',
      'cocoonset_slot_release_wake_unschedulable_total{namespace="ns1",cocoonset="nap"} 1',
    ];
    for (const line of expected) assert.ok(text.includes(line), `missing: ${line}\n${text}`);
    const names = new Set(
      [...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((x) => `${x[1]} ${x[2]}`),
    );
    assert.deepEqual(
      [...names].sort(),
      [
        `${METRIC_NAMES.deadLetter} counter`,
        `${METRIC_NAMES.hibernatePhase} histogram`,
        `${METRIC_NAMES.wakePhase} histogram`,
        `${METRIC_NAMES.leader} gauge`,
        `${METRIC_NAMES.queueDepth} gauge`,
        `${METRIC_NAMES.reapDeleted} counter`,
        `${METRIC_NAMES.rebuild} counter`,
        `${METRIC_NAMES.reconcileDuration} histogram`,
        `${METRIC_NAMES.reconcileErrors} counter`,
        `${METRIC_NAMES.slotReleasePodsDeleted} counter`,
        `${METRIC_NAMES.slotReleaseWake} counter`,
        `${METRIC_NAMES.slotReleaseWakeUnschedulable} counter`,
        `${METRIC_NAMES.reconcile} counter`,
        `${METRIC_NAMES.releaseDeleted} counter`,
      ].sort(),
    );
  });

  test("two instances use their own registries, never the global one", async () => {
    const a = new Metrics();
    const b = new Metrics();
    a.rebuild("x", "y");
    assert.ok(
      (await a.text()).includes('cocoonset_subagent_rebuild_total{namespace="x",cocoonset="y"} 1'),
    );
    assert.ok(!(await b.text()).includes('namespace="x"'));
    assert.equal(register.getSingleMetric(METRIC_NAMES.rebuild), undefined);
  });

  test("the leader gauge starts at 0 and zero counts are not recorded", async () => {
    const m = new Metrics();
    m.reapDeleted("Job", "Expired", 0);
    const text = await m.text();
    assert.ok(text.includes("cocoonset_leader 0"));
    assert.ok(!text.includes('reason="Expired"'));
  });
});
