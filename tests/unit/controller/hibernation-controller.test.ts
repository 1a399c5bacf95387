// The CocoonHibernation controller's wiring: its keys share the CocoonSet queue under a
// prefix no Kubernetes name holds, a pod change fans out to the CRs targeting the pod, a
// CR change to the other CRs of its pod, and keys are dispatched to their reconciler.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  cocoonSetController,
  controllerSockets,
  MANAGED_POD_SELECTOR,
} from "../../../controller/cocoonset-controller.js";
import {
  hibernationChangeMatters,
  hibernationKey,
  hibernationOfKey,
  PodRefIndex,
} from "../../../controller/hibernation-controller.js";
import { formatKey, parseKey, type ObjectKey, type Reconciler } from "../../../controller/types.js";
import type { KubeObject } from "../../../engine/kube/index.js";

const cr = (
  name: string,
  pod: string,
  extra: Partial<KubeObject["metadata"]> = {},
): KubeObject => ({
  apiVersion: "cocoonset.cocoonstack.io/v1",
  kind: "CocoonHibernation",
  metadata: { name, namespace: "team", generation: 1, ...extra },
  spec: { podRef: { name: pod }, desire: "Hibernate" },
});
const pod = (name: string): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: {
    name,
    namespace: "team",
    labels: {
      "app.kubernetes.io/managed-by": "cocoonset",
      "cocoonset.cocoonstack.io/name": "crew",
    },
  },
});

describe("CocoonHibernation keys", () => {
  test("round-trip through the queue's text form and never read as a CocoonSet", () => {
    const key = hibernationKey("team", "nap");
    assert.deepEqual(hibernationOfKey(parseKey(formatKey(key))), {
      namespace: "team",
      name: "nap",
    });
    assert.equal(hibernationOfKey({ namespace: "team", name: "crew" }), undefined);
  });

  test("the pod index maps a pod to its CRs and forgets deleted ones", () => {
    const index = new PodRefIndex();
    index.note(cr("b", "crew-1"));
    index.note(cr("a", "crew-1"));
    index.note(cr("c", "crew-2"));
    assert.deepEqual(index.keysFor("team", "crew-1").map(hibernationOfKey), [
      { namespace: "team", name: "a" },
      { namespace: "team", name: "b" },
    ]);
    index.forget("team", "a");
    assert.deepEqual(index.keysFor("team", "crew-1").length, 1);
    assert.deepEqual(index.keysFor("other", "crew-1"), []);
  });

  test("a CR update matters for spec, finalizers, deletion and phase; not for other status", () => {
    const a = cr("nap", "crew-1");
    const withStatus = (phase: string, vmName = "vm") => ({ ...a, status: { phase, vmName } });
    assert.equal(
      hibernationChangeMatters(withStatus("Hibernating"), withStatus("Hibernated")),
      true,
    );
    assert.equal(
      hibernationChangeMatters(withStatus("Hibernating"), withStatus("Hibernating", "x")),
      false,
    );
    assert.equal(hibernationChangeMatters(a, cr("nap", "crew-1", { generation: 2 })), true);
    assert.equal(hibernationChangeMatters(a, cr("nap", "crew-1", { finalizers: ["f"] })), true);
  });
});

describe("the controller definition with the CocoonHibernation controller", () => {
  const seen: string[] = [];
  const recorder = (label: string): Reconciler => ({
    async reconcile(key: ObjectKey) {
      seen.push(`${label} ${formatKey(key)}`);
      return {};
    },
  });
  const def = cocoonSetController(
    { reconciler: recorder("cocoonset"), hibernation: recorder("hibernation") },
    { reapIntervalMs: 1000 },
  );
  const crs = def.owns.find((w) => w.path("team").endsWith("/cocoonhibernations"))!;
  const pods = def.owns.find((w) => w.labelSelector === MANAGED_POD_SELECTOR)!;

  test("watches the CRs and still the managed pods once", () => {
    assert.ok(crs, "a CR watch");
    assert.equal(def.owns.filter((w) => w.labelSelector === MANAGED_POD_SELECTOR).length, 1);
  });

  test("a pod change enqueues its CocoonSet and the CRs targeting it", () => {
    assert.deepEqual(crs.keyOf(cr("nap", "crew-1")), hibernationKey("team", "nap"));
    crs.keyOf(cr("dup", "crew-1"));
    assert.deepEqual(pods.keyOf(pod("crew-1")), { namespace: "team", name: "crew" });
    assert.deepEqual(pods.extraKeys?.(pod("crew-1")), [
      hibernationKey("team", "dup"),
      hibernationKey("team", "nap"),
    ]);
    assert.deepEqual(crs.extraKeys?.(cr("nap", "crew-1")), [hibernationKey("team", "dup")]);
  });

  test("keys go to their reconciler", async () => {
    const ctx = {} as Parameters<Reconciler["reconcile"]>[1];
    await def.reconciler.reconcile({ namespace: "team", name: "crew" }, ctx);
    await def.reconciler.reconcile(hibernationKey("team", "nap"), ctx);
    assert.deepEqual(seen, ["cocoonset team/crew", "hibernation team/nap"]);
  });
});

describe("the controller client's socket pool", () => {
  test("holds every watch and still leaves the default room for requests", () => {
    assert.equal(controllerSockets(0), 3 + 32, "all namespaces: one watch per kind");
    assert.equal(
      controllerSockets(11),
      33 + 32,
      "11 namespaces: 33 watches, none starves a request",
    );
  });
});
