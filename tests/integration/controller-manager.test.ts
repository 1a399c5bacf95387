/**
 * The manager's controllers on the real controller process: the CocoonSet and the
 * CocoonHibernation controllers each have their own work queue and series, and an event
 * reaches only the controllers whose watches map it to a key. A CocoonHibernation's change
 * grows `workqueue_adds_total{name="cocoonhibernation"}` and not the CocoonSet's; a pod no CR
 * targets reaches only the CocoonSet controller; a pod a CR targets reaches both (through
 * the cache's index of CocoonHibernations by pod). Every wait is on a watch, the log or
 * the metrics.
 */
import assert from "node:assert/strict";
import { before, test } from "node:test";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import type { CocoonHibernation } from "../../engine/spec/index.js";
import { paths, waitForObject } from "../../engine/kube/index.js";
import { adminClient, testKubeconfig } from "../support/cluster.js";
import { createCocoonSet, poke, waitForConverged } from "../support/controller-fleet.js";
import {
  Cleanup,
  controllerNamespace,
  metricValue,
  startController,
  type ControllerProcess,
} from "../support/controller-process.js";
import { createHibernation } from "../support/lifecycle.js";

const client = adminClient();

before(async () => {
  await ensureCrd(client);
});

/** The per-controller figures of one scrape. */
async function scrape(proc: ControllerProcess) {
  const text = await proc.metricsText();
  const of = (controller: string) => ({
    adds: metricValue(text, "workqueue_adds_total", { name: controller, controller }),
    depth: metricValue(text, "workqueue_depth", { name: controller, controller }),
    reconciles: metricValue(text, "controller_runtime_reconcile_total", { controller }),
    active: metricValue(text, "controller_runtime_active_workers", { controller }),
    workers: metricValue(text, "controller_runtime_max_concurrent_reconciles", { controller }),
  });
  return { cocoonset: of("cocoonset"), cocoonhibernation: of("cocoonhibernation"), text };
}

/** Waits (on the log) for a finished reconcile by `controller` of `ns/name` that started after `sinceMs`. */
function reconciledSince(
  proc: ControllerProcess,
  controller: string,
  ns: string,
  name: string,
  sinceMs: number,
) {
  return proc.waitForLog(`a ${controller} reconcile of ${ns}/${name} after ${sinceMs}`, (l) => {
    if (l.controller !== controller || l.namespace !== ns || l.name !== name) return false;
    if (l.msg !== "reconciled" && l.msg !== "reconciled; requeue") return false;
    return Date.parse(String(l.time)) - Number(l.seconds ?? 0) * 1000 > sinceMs;
  });
}

test(
  "each controller has its own queue and series; events reach the controllers that watch them",
  {
    timeout: 180_000,
  },
  async (t) => {
    const c = new Cleanup(t);
    const ns = await controllerNamespace(c, "ctl-mgr");
    // No --oci-registry: a CocoonHibernation is Failed (RegistryNotConfigured) without touching its pod.
    const proc = await startController(c, { kubeconfig: testKubeconfig(), namespaces: [ns] });
    await proc.synced();

    // A converged fleet: the CocoonSet controller's queue moved, the other's did not.
    await createCocoonSet(ns, "crew", { replicas: 1 });
    await waitForConverged(ns, "crew", { replicas: 1 });
    const converged = await proc.reconciledSince(ns, "crew", Date.now());
    assert.equal(converged.msg, "reconciled", "a converged fleet asks for no requeue");
    const s0 = await scrape(proc);
    assert.ok(s0.cocoonset.adds > 0 && s0.cocoonset.reconciles > 0, s0.text);
    assert.equal(s0.cocoonhibernation.adds, 0, "no CR yet: the fleet's pod events are not its");
    assert.equal(s0.cocoonhibernation.reconciles, 0);
    assert.ok(s0.cocoonset.workers >= 1 && s0.cocoonhibernation.workers >= 1, "each its workers");

    // A CocoonHibernation's changes: its controller's queue grows, the CocoonSet's does not.
    const created = Date.now();
    await createHibernation(ns, "nap", "crew-1", "Hibernate");
    await waitForObject(
      client,
      paths.cocoonHibernations(ns),
      "nap",
      (o) => (o as CocoonHibernation | undefined)?.status?.phase === "Failed",
      { timeoutMs: 60_000, description: "CocoonHibernation nap Failed (no registry)" },
    );
    // The Failed status write is an event of its own: a second reconcile, which writes nothing.
    const napReconciled = () =>
      proc.logs(
        (l) => l.controller === "cocoonhibernation" && l.name === "nap" && l.msg === "reconciled",
      );
    await reconciledSince(proc, "cocoonhibernation", ns, "nap", created);
    await proc.waitForLog(
      "the reconcile after the Failed write",
      () => napReconciled().length >= 2,
    );
    const s1 = await scrape(proc);
    assert.ok(s1.cocoonhibernation.adds >= 2, `the CR's add and its status write\n${s1.text}`);
    assert.ok(s1.cocoonhibernation.reconciles >= 2, s1.text);
    assert.equal(s1.cocoonset.adds, s0.cocoonset.adds, "a CR's changes are not the CocoonSet's");
    assert.equal(s1.cocoonset.reconciles, s0.cocoonset.reconciles);

    // A pod no CR targets (the main agent): only the CocoonSet controller.
    const poked0 = Date.now();
    await poke(ns, "crew-0");
    await proc.reconciledSince(ns, "crew", poked0);
    const s2 = await scrape(proc);
    assert.ok(s2.cocoonset.adds > s1.cocoonset.adds, s2.text);
    assert.equal(s2.cocoonhibernation.adds, s1.cocoonhibernation.adds, "no CR targets crew-0");

    // The pod the CR targets: both, the CR's key found through the cache's index by pod.
    const poked1 = Date.now();
    await poke(ns, "crew-1");
    await proc.reconciledSince(ns, "crew", poked1);
    await reconciledSince(proc, "cocoonhibernation", ns, "nap", poked1);
    const s3 = await scrape(proc);
    assert.ok(s3.cocoonset.adds > s2.cocoonset.adds, s3.text);
    assert.ok(s3.cocoonhibernation.adds > s2.cocoonhibernation.adds, s3.text);
    assert.equal(s3.cocoonhibernation.depth, 0);
  },
);
