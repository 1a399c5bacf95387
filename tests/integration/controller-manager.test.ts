/**
 * The manager's controllers on the real controller process: the CocoonSet and the
 * CocoonHibernation controllers each have their own work queue and series, and an event
 * reaches only the controllers whose watches map it to a key.
 *
 * - a CocoonHibernation's changes grow `workqueue_adds_total{name="cocoonhibernation"}` and
 *   its reconciles, and leave the CocoonSet controller's at zero (no fleet in the namespace);
 * - a fleet's events grow the CocoonSet controller's series;
 * - once the CocoonHibernation controller is idle, a pod no CR targets reaches only the
 *   CocoonSet controller, and the pod a CR targets reaches both (the CR's key found through
 *   the shared cache's index of CocoonHibernations by pod).
 *
 * Every wait is on a watch, the controller's log or its metrics.
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
  type LogLine,
} from "../support/controller-process.js";
import { createHibernation } from "../support/lifecycle.js";

const client = adminClient();

before(async () => {
  await ensureCrd(client);
});

type ControllerName = "cocoonset" | "cocoonhibernation";

/** One controller's figures in one scrape of `/metrics`. */
async function figures(proc: ControllerProcess, controller: ControllerName) {
  const text = await proc.metricsText();
  const queue = { name: controller, controller };
  return {
    adds: metricValue(text, "workqueue_adds_total", queue),
    depth: metricValue(text, "workqueue_depth", queue),
    reconciles: metricValue(text, "controller_runtime_reconcile_total", { controller }),
    active: metricValue(text, "controller_runtime_active_workers", { controller }),
    workers: metricValue(text, "controller_runtime_max_concurrent_reconciles", { controller }),
    text,
  };
}

/** The finished reconciles `controller` logged for `ns/name`. */
function reconciles(proc: ControllerProcess, controller: ControllerName, ns: string, name: string) {
  return proc.logs(
    (l) =>
      l.controller === controller &&
      l.namespace === ns &&
      l.name === name &&
      (l.msg === "reconciled" || l.msg === "reconciled; requeue"),
  );
}

const startOf = (l: LogLine) => Date.parse(String(l.time)) - Number(l.seconds ?? 0) * 1000;

/** Waits (on the log) for a reconcile by `controller` of `ns/name` that started after `sinceMs`. */
function reconciledSince(
  proc: ControllerProcess,
  controller: ControllerName,
  ns: string,
  name: string,
  sinceMs: number,
) {
  return proc.waitForLog(`a ${controller} reconcile of ${ns}/${name} after ${sinceMs}`, (l) => {
    if (l.controller !== controller || l.namespace !== ns || l.name !== name) return false;
    if (l.msg !== "reconciled" && l.msg !== "reconciled; requeue") return false;
    return startOf(l) > sinceMs;
  });
}

/**
 * Waits until `controller` has nothing left for `ns/name`: every requeue its reconciles asked
 * for is due (with a second for the timer to fire), and its queue is empty, no worker is
 * busy, and it reconciled as often as keys were added.
 */
async function idle(proc: ControllerProcess, controller: ControllerName, ns: string, name: string) {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const due = Math.max(
      0,
      ...reconciles(proc, controller, ns, name).map(
        (l) => Date.parse(String(l.time)) + Number(l.requeueAfterMs ?? 0),
      ),
    );
    if (Date.now() > due + 1000) {
      const f = await figures(proc, controller);
      if (f.depth === 0 && f.active === 0 && f.adds === f.reconciles) return f;
    }
    if (Date.now() > deadline) assert.fail(`${controller} never idle for ${ns}/${name}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

test(
  "each controller has its own queue and series; events reach the controllers that watch them",
  {
    timeout: 240_000,
  },
  async (t) => {
    const c = new Cleanup(t);
    const ns = await controllerNamespace(c, "ctl-mgr");
    // No --oci-registry: the CR ends Failed (RegistryNotConfigured) without touching its pod.
    const proc = await startController(c, { kubeconfig: testKubeconfig(), namespaces: [ns] });
    await proc.synced();

    // A CR whose pod does not exist yet: only the CocoonHibernation controller works.
    const created = Date.now();
    await createHibernation(ns, "nap", "crew-1", "Hibernate");
    await reconciledSince(proc, "cocoonhibernation", ns, "nap", created);
    const hib0 = await figures(proc, "cocoonhibernation");
    const cs0 = await figures(proc, "cocoonset");
    assert.ok(hib0.adds >= 1 && hib0.reconciles >= 1, hib0.text);
    assert.equal(cs0.adds, 0, "a CR's changes are not the CocoonSet controller's");
    assert.equal(cs0.reconciles, 0);
    assert.ok(cs0.workers >= 1 && hib0.workers >= 1, "each controller has its workers");

    // The fleet: the CocoonSet controller's series grow; its pod crew-1 lets the CR go on.
    await createCocoonSet(ns, "crew", { replicas: 1 });
    await waitForConverged(ns, "crew", { replicas: 1 });
    assert.ok((await figures(proc, "cocoonset")).adds > 0);
    await waitForObject(
      client,
      paths.cocoonHibernations(ns),
      "nap",
      (o) => (o as CocoonHibernation | undefined)?.status?.phase === "Failed",
      { timeoutMs: 60_000, description: "CocoonHibernation nap Failed (no registry)" },
    );

    // A pod no CR targets (the main agent): only the CocoonSet controller.
    const hib1 = await idle(proc, "cocoonhibernation", ns, "nap");
    const cs1 = await figures(proc, "cocoonset");
    const poked0 = Date.now();
    await poke(ns, "crew-0");
    await reconciledSince(proc, "cocoonset", ns, "crew", poked0);
    assert.ok((await figures(proc, "cocoonset")).adds > cs1.adds);
    const hib2 = await idle(proc, "cocoonhibernation", ns, "nap");
    assert.equal(hib2.adds, hib1.adds, "no CR targets crew-0");

    // The pod the CR targets: both, the CR's key found through the index by pod.
    const poked1 = Date.now();
    await poke(ns, "crew-1");
    await reconciledSince(proc, "cocoonset", ns, "crew", poked1);
    await reconciledSince(proc, "cocoonhibernation", ns, "nap", poked1);
    const hib3 = await figures(proc, "cocoonhibernation");
    assert.ok(hib3.adds > hib2.adds, hib3.text);
  },
);
