// The manager's shared cache and how events become keys: the indexes the cache keeps on its
// own events (pods by CocoonSet, CocoonHibernations by pod), and, per controller, the keys an
// add, update or delete of each watched kind enqueues. Tables over a fake informer (a pure
// unit: the real informer is tested in informer.test.ts and on the cluster).
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { KindCache, mergeKinds, type CacheReader } from "../../../controller/cache.js";
import {
  cocoonSetController,
  cocoonSetKind,
  controllerSockets,
  podChangeMatters,
  podKind,
} from "../../../controller/cocoonset-controller.js";
import { PODS_BY_COCOONSET } from "../../../controller/fleet-cache.js";
import {
  HIBERNATIONS_BY_POD,
  hibernationChangeMatters,
  hibernationController,
  hibernationKind,
} from "../../../controller/hibernation-controller.js";
import type { InformerHandlers } from "../../../controller/informer.js";
import { keysFor, type Controller } from "../../../controller/runtime.js";
import { formatKey, type Reconciler } from "../../../controller/types.js";
import type { KubeObject } from "../../../engine/kube/index.js";

/** An informer's store and handlers, driven by hand. */
class FakeInformer {
  private readonly store = new Map<string, KubeObject>();
  private readonly handlers: InformerHandlers[] = [];
  addHandlers(h: InformerHandlers): void {
    this.handlers.push(h);
    for (const o of this.store.values()) h.onAdd?.(o);
  }
  get(key: string) {
    return this.store.get(key);
  }
  list() {
    return [...this.store.values()];
  }
  hasSynced() {
    return true;
  }
  isSupervised() {
    return true;
  }
  /** Applies an event as the informer would: the store first, then the handlers. */
  apply(ev: Event): void {
    const key = `${ev.obj.metadata.namespace}/${ev.obj.metadata.name}`;
    const old = this.store.get(key);
    if (ev.type === "delete") {
      this.store.delete(key);
      for (const h of this.handlers) h.onDelete?.(old ?? ev.obj);
      return;
    }
    this.store.set(key, ev.obj);
    for (const h of this.handlers)
      if (old) h.onUpdate?.(old, ev.obj);
      else h.onAdd?.(ev.obj);
  }
}

interface Event {
  type: "set" | "delete";
  obj: KubeObject;
}

const pod = (
  name: string,
  opts: { fleet?: string; owner?: string; phase?: string; ns?: string } = {},
): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: {
    name,
    namespace: opts.ns ?? "team",
    uid: `uid-${name}`,
    labels: {
      "app.kubernetes.io/managed-by": "cocoonset",
      ...(opts.fleet && { "cocoonset.cocoonstack.io/name": opts.fleet }),
    },
    ...(opts.owner && {
      ownerReferences: [
        { apiVersion: "x/v1", kind: "CocoonSet", name: opts.owner, uid: "u", controller: true },
      ],
    }),
  },
  status: { phase: opts.phase ?? "Running" },
});
const cr = (name: string, podName: string, extra: Partial<KubeObject["metadata"]> = {}) =>
  ({
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonHibernation",
    metadata: { name, namespace: "team", generation: 1, ...extra },
    spec: { podRef: { name: podName }, desire: "Hibernate" },
  }) as KubeObject;
const cs = (name: string, extra: Partial<KubeObject["metadata"]> = {}) =>
  ({
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonSet",
    metadata: { name, namespace: "team", generation: 1, ...extra },
  }) as KubeObject;

const names = (objs: KubeObject[]) => objs.map((o) => o.metadata.name ?? "").sort();

/** A cache of the three kinds, with the indexes the controllers declare, on fake informers. */
function fakeCache() {
  const informers = new Map<string, FakeInformer>();
  const kinds = new Map<string, KindCache>();
  for (const k of mergeKinds([cocoonSetKind, podKind, hibernationKind])) {
    const inf = new FakeInformer();
    informers.set(k.name, inf);
    kinds.set(k.name, new KindCache([inf], false, k.indexes));
  }
  const reader: CacheReader = { kind: (n) => kinds.get(n)! };
  return { reader, apply: (kind: string, ev: Event) => informers.get(kind)!.apply(ev), kinds };
}

describe("the shared cache's indexes", () => {
  const cases: {
    name: string;
    kind: string;
    index: string;
    events: Event[];
    expect: Record<string, string[]>;
  }[] = [
    {
      name: "pods by CocoonSet: added under their fleet label",
      kind: "pods",
      index: PODS_BY_COCOONSET,
      events: [
        { type: "set", obj: pod("crew-0", { fleet: "crew" }) },
        { type: "set", obj: pod("crew-1", { fleet: "crew" }) },
        { type: "set", obj: pod("solo-0", { fleet: "solo" }) },
        { type: "set", obj: pod("stray") },
      ],
      expect: { "team/crew": ["crew-0", "crew-1"], "team/solo": ["solo-0"], "other/crew": [] },
    },
    {
      name: "pods by CocoonSet: a relabelled pod moves, a deleted one goes",
      kind: "pods",
      index: PODS_BY_COCOONSET,
      events: [
        { type: "set", obj: pod("a", { fleet: "crew" }) },
        { type: "set", obj: pod("b", { fleet: "crew" }) },
        { type: "set", obj: pod("b", { fleet: "solo" }) },
        { type: "delete", obj: pod("a", { fleet: "crew" }) },
      ],
      expect: { "team/crew": [], "team/solo": ["b"] },
    },
    {
      name: "pods by CocoonSet: namespaces are apart",
      kind: "pods",
      index: PODS_BY_COCOONSET,
      events: [
        { type: "set", obj: pod("a", { fleet: "crew" }) },
        { type: "set", obj: pod("a", { fleet: "crew", ns: "other" }) },
      ],
      expect: { "team/crew": ["a"], "other/crew": ["a"] },
    },
    {
      name: "CocoonHibernations by pod: several CRs on one pod, a deleted CR goes",
      kind: "cocoonhibernations",
      index: HIBERNATIONS_BY_POD,
      events: [
        { type: "set", obj: cr("b", "crew-1") },
        { type: "set", obj: cr("a", "crew-1") },
        { type: "set", obj: cr("c", "crew-2") },
        { type: "set", obj: cr("a", "crew-1", { generation: 2 }) },
        { type: "delete", obj: cr("b", "crew-1") },
      ],
      expect: { "team/crew-1": ["a"], "team/crew-2": ["c"], "team/crew-3": [] },
    },
  ];
  for (const c of cases) {
    test(c.name, () => {
      const cache = fakeCache();
      for (const ev of c.events) cache.apply(c.kind, ev);
      for (const [value, want] of Object.entries(c.expect))
        assert.deepEqual(names(cache.reader.kind(c.kind).byIndex(c.index, value)), want, value);
    });
  }

  test("an index is current when the other handlers of the same event run", () => {
    const inf = new FakeInformer();
    const kc = new KindCache([inf], false, hibernationKind.indexes);
    const seen: string[][] = [];
    kc.addHandlers({
      onAdd: () => seen.push(names(kc.byIndex(HIBERNATIONS_BY_POD, "team/p"))),
      onDelete: () => seen.push(names(kc.byIndex(HIBERNATIONS_BY_POD, "team/p"))),
    });
    inf.apply({ type: "set", obj: cr("x", "p") });
    inf.apply({ type: "delete", obj: cr("x", "p") });
    assert.deepEqual(seen, [["x"], []]);
  });

  test("kinds of one name merge their indexes; two watches under one name are refused", () => {
    const merged = mergeKinds([
      { ...podKind, indexes: { a: () => [] } },
      { ...podKind, indexes: { b: () => [] } },
    ]);
    assert.equal(merged.length, 1);
    assert.deepEqual(Object.keys(merged[0].indexes ?? {}).sort(), ["a", "b"]);
    assert.throws(() => mergeKinds([podKind, { ...podKind, labelSelector: "x=y" }]), /pods/);
  });
});

describe("events to keys, per controller", () => {
  const noop: Reconciler = { reconcile: async () => ({}) };
  const cocoonset = cocoonSetController({ reconciler: noop }, { reapIntervalMs: 1000 });
  const hibernation = hibernationController(noop, {
    kind: podKind,
    updateMatters: podChangeMatters,
  });
  const controllers: Record<string, Pick<Controller, "for" | "updateMatters" | "watches">> = {
    cocoonset,
    hibernation,
  };

  // The cache holds, before each case: CRs nap and dup on pod crew-1, rest on crew-2.
  const seed: [string, KubeObject][] = [
    ["cocoonhibernations", cr("nap", "crew-1")],
    ["cocoonhibernations", cr("dup", "crew-1")],
    ["cocoonhibernations", cr("rest", "crew-2")],
  ];

  const cases: {
    name: string;
    kind: string;
    /** The event: an add (`obj`), an update (`old` → `obj`) or a delete. */
    event: { type: "add" | "update" | "delete"; obj: KubeObject; old?: KubeObject };
    expect: { cocoonset: string[]; hibernation: string[] };
  }[] = [
    {
      name: "a CocoonSet added: its own key, for the CocoonSet controller only",
      kind: "cocoonsets",
      event: { type: "add", obj: cs("crew") },
      expect: { cocoonset: ["team/crew"], hibernation: [] },
    },
    {
      name: "a CocoonSet's status write (same generation): nothing",
      kind: "cocoonsets",
      event: { type: "update", old: cs("crew"), obj: cs("crew", { resourceVersion: "9" }) },
      expect: { cocoonset: [], hibernation: [] },
    },
    {
      name: "a CocoonSet's spec change: its key",
      kind: "cocoonsets",
      event: { type: "update", old: cs("crew"), obj: cs("crew", { generation: 2 }) },
      expect: { cocoonset: ["team/crew"], hibernation: [] },
    },
    {
      name: "a pod with an owner reference: the owner's key, and the CRs targeting the pod",
      kind: "pods",
      event: { type: "add", obj: pod("crew-1", { owner: "crew", fleet: "other" }) },
      expect: { cocoonset: ["team/crew"], hibernation: ["team/dup", "team/nap"] },
    },
    {
      name: "a pod with only the fleet label: that CocoonSet's key",
      kind: "pods",
      event: { type: "delete", obj: pod("crew-2", { fleet: "crew" }) },
      expect: { cocoonset: ["team/crew"], hibernation: ["team/rest"] },
    },
    {
      name: "a pod turning Failed: both controllers",
      kind: "pods",
      event: {
        type: "update",
        old: pod("crew-1", { fleet: "crew" }),
        obj: pod("crew-1", { fleet: "crew", phase: "Failed" }),
      },
      expect: { cocoonset: ["team/crew"], hibernation: ["team/dup", "team/nap"] },
    },
    {
      name: "a pod update that changes nothing watched: nothing",
      kind: "pods",
      event: {
        type: "update",
        old: pod("crew-1", { fleet: "crew" }),
        obj: { ...pod("crew-1", { fleet: "crew" }), spec: { nodeName: "n" } },
      },
      expect: { cocoonset: [], hibernation: [] },
    },
    {
      name: "a pod no CR targets and no CocoonSet owns: nothing",
      kind: "pods",
      event: { type: "add", obj: pod("stray") },
      expect: { cocoonset: [], hibernation: [] },
    },
    {
      name: "a CR added: its own key and the other CRs of its pod",
      kind: "cocoonhibernations",
      event: { type: "add", obj: cr("late", "crew-1") },
      expect: { cocoonset: [], hibernation: ["team/dup", "team/late", "team/nap"] },
    },
    {
      name: "a CR deleted: its key (found gone) and the CRs left on its pod",
      kind: "cocoonhibernations",
      event: { type: "delete", obj: cr("nap", "crew-1") },
      expect: { cocoonset: [], hibernation: ["team/dup", "team/nap"] },
    },
    {
      // The controller's own write: the pass that wrote it asked for what comes next.
      name: "a CR's phase write: its pod's other CRs, not its own key",
      kind: "cocoonhibernations",
      event: {
        type: "update",
        old: cr("rest", "crew-2"),
        obj: { ...cr("rest", "crew-2"), status: { phase: "Hibernated" } },
      },
      expect: { cocoonset: [], hibernation: [] },
    },
    {
      name: "a CR's phase turned Failed: its own key (retried at once, as upstream)",
      kind: "cocoonhibernations",
      event: {
        type: "update",
        old: { ...cr("rest", "crew-2"), status: { phase: "Hibernating" } },
        obj: { ...cr("rest", "crew-2"), status: { phase: "Failed" } },
      },
      expect: { cocoonset: [], hibernation: ["team/rest"] },
    },
    {
      name: "a CR's status write that keeps the phase: nothing",
      kind: "cocoonhibernations",
      event: {
        type: "update",
        old: { ...cr("nap", "crew-1"), status: { phase: "Hibernating" } },
        obj: { ...cr("nap", "crew-1"), status: { phase: "Hibernating", vmName: "vm" } },
      },
      expect: { cocoonset: [], hibernation: [] },
    },
  ];
  for (const c of cases) {
    test(c.name, () => {
      const cache = fakeCache();
      for (const [kind, obj] of seed) cache.apply(kind, { type: "set", obj });
      // The cache applies the event (its indexes first), then the controllers map it.
      if (c.event.type === "delete") cache.apply(c.kind, { type: "delete", obj: c.event.obj });
      else {
        if (c.event.old) cache.apply(c.kind, { type: "set", obj: c.event.old });
        cache.apply(c.kind, { type: "set", obj: c.event.obj });
      }
      for (const [label, def] of Object.entries(controllers)) {
        const keys = keysFor(def, cache.reader, c.kind, c.event.obj, c.event.old).map(formatKey);
        assert.deepEqual(keys.sort(), c.expect[label as "cocoonset"], label);
      }
    });
  }

  test("each controller has its own name and metrics; only the CocoonSets are resynced", () => {
    assert.equal(cocoonset.name, "cocoonset");
    assert.equal(hibernation.name, "cocoonhibernation");
    assert.notEqual(cocoonset.resync, false);
    assert.equal(hibernation.resync, false);
    assert.equal(typeof cocoonset.metrics, "function");
    assert.equal(typeof hibernation.metrics, "function");
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

describe("the controller client's socket pool", () => {
  test("holds every watch and still leaves the default room for requests", () => {
    // Per scope: four kinds, the labeller's three unlabelled kinds, and (sharded or namespaced)
    // the names, one watch in all.
    assert.equal(controllerSockets(0), 8 + 32, "all namespaces: one watch per kind");
    assert.equal(
      controllerSockets(11),
      88 + 32,
      "11 namespaces: 88 watches, none starves a request",
    );
  });
});
