import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Informer } from "../../../controller/informer.js";
import {
  KubeApiError,
  type KubeClient,
  type KubeList,
  type KubeObject,
  type WatchEvent,
} from "../../../engine/kube/index.js";

const obj = (name: string, rv: string): KubeObject => ({
  metadata: { name, namespace: "ns", resourceVersion: rv },
});

type Script = (onEvent: (ev: WatchEvent) => unknown, signal?: AbortSignal) => Promise<string>;

/** A stand-in for the two KubeClient calls an informer makes, driven by scripts. */
function fakeClient(lists: KubeList[], watches: Script[]) {
  const calls: string[] = [];
  const client = {
    async list(): Promise<KubeList> {
      calls.push("list");
      const l = lists.shift();
      if (!l) throw new Error("no more lists scripted");
      return l;
    },
    async watch(
      _path: string,
      q: { resourceVersion?: string },
      onEvent: (ev: WatchEvent) => unknown,
      signal?: AbortSignal,
    ): Promise<string | undefined> {
      calls.push(`watch@${q.resourceVersion}`);
      const w = watches.shift();
      if (w) return w(onEvent, signal);
      // Nothing left to say: hold the watch open until the informer stops.
      return new Promise((resolve) => {
        if (signal?.aborted) return resolve(q.resourceVersion);
        signal?.addEventListener("abort", () => resolve(q.resourceVersion));
      });
    },
  };
  return { client: client as unknown as KubeClient, calls };
}

function recorder(inf: Informer) {
  const seen: string[] = [];
  let notify: () => void = () => {};
  inf.addHandlers({
    onAdd: (o) => (seen.push(`add ${o.metadata.name}@${o.metadata.resourceVersion}`), notify()),
    onUpdate: (a, b) => (
      seen.push(
        `update ${a.metadata.name}@${a.metadata.resourceVersion}->${b.metadata.resourceVersion}`,
      ),
      notify()
    ),
    onDelete: (o) => (seen.push(`delete ${o.metadata.name}`), notify()),
  });
  const waitFor = (n: number) =>
    new Promise<void>((resolve) => {
      notify = () => {
        if (seen.length >= n) resolve();
      };
      notify();
    });
  return { seen, waitFor };
}

describe("informer (scripted client)", { timeout: 10_000 }, () => {
  test("a 410 re-lists at once and diffs the new list against the cache", async () => {
    const gone = new KubeApiError("expired", 410, "Expired", "GET", "/x");
    const { client, calls } = fakeClient(
      [
        {
          metadata: { resourceVersion: "10" },
          items: [obj("a", "1"), obj("b", "2"), obj("c", "3")],
        },
        {
          metadata: { resourceVersion: "20" },
          items: [obj("b", "2"), obj("c", "7"), obj("d", "8")],
        },
      ],
      [async () => Promise.reject(gone)],
    );
    const inf = new Informer({ client, path: "/api/v1/namespaces/ns/configmaps" });
    const r = recorder(inf);
    inf.start();
    await r.waitFor(6);
    await inf.stop();
    assert.deepEqual(r.seen, [
      "add a@1",
      "add b@2",
      "add c@3",
      "update c@3->7",
      "add d@8",
      "delete a",
    ]);
    assert.deepEqual(calls.slice(0, 4), ["list", "watch@10", "list", "watch@20"]);
    assert.deepEqual(
      inf
        .list()
        .map((o) => o.metadata.name)
        .sort(),
      ["b", "c", "d"],
    );
    assert.equal(inf.relistCount(), 1);
    assert.equal(inf.isSupervised(), false, "stopped");
  });

  test("listed and watched objects are cached without managedFields", async () => {
    const withFields = (name: string, rv: string): KubeObject => {
      const metadata = {
        ...obj(name, rv).metadata,
        labels: { keep: "me" },
        managedFields: [{ manager: "kubectl", operation: "Apply", fieldsV1: { "f:spec": {} } }],
      };
      return { metadata };
    };
    const { client } = fakeClient(
      [{ metadata: { resourceVersion: "5" }, items: [withFields("a", "1")] }],
      [
        async (on) => {
          on({ type: "ADDED", object: withFields("b", "6") });
          return "6";
        },
      ],
    );
    const inf = new Informer({ client, path: "/p", initialBackoffMs: 1 });
    const handed: KubeObject[] = [];
    inf.addHandlers({ onAdd: (o) => handed.push(o) });
    inf.start();
    while (handed.length < 2) await new Promise((res) => setImmediate(res));
    await inf.stop();
    for (const o of [...inf.list(), ...handed]) {
      assert.equal("managedFields" in o.metadata, false, JSON.stringify(o));
      assert.deepEqual(o.metadata.labels, { keep: "me" });
    }
    assert.equal(inf.list().length, 2);
  });

  test("a transform given in the options replaces the default trim", async () => {
    const { client } = fakeClient(
      [{ metadata: { resourceVersion: "5" }, items: [obj("a", "1")] }],
      [],
    );
    const inf = new Informer({
      client,
      path: "/p",
      transform: (o) => ({ ...o, metadata: { ...o.metadata, labels: { seen: "yes" } } }),
    });
    inf.start();
    await inf.waitForSync();
    await inf.stop();
    assert.deepEqual(inf.get("ns/a")?.metadata.labels, { seen: "yes" });
  });

  test("watch events update the cache and a normal end resumes from the last resourceVersion", async () => {
    const { client, calls } = fakeClient(
      [{ metadata: { resourceVersion: "5" }, items: [obj("a", "1")] }],
      [
        async (on) => {
          on({ type: "ADDED", object: obj("b", "6") });
          on({ type: "MODIFIED", object: obj("a", "7") });
          on({ type: "DELETED", object: obj("b", "8") });
          return "8";
        },
      ],
    );
    const inf = new Informer({ client, path: "/p", initialBackoffMs: 1 });
    const r = recorder(inf);
    inf.start();
    await inf.waitForSync();
    assert.equal(inf.hasSynced(), true);
    await r.waitFor(4);
    // The second watch starts only after the first ended; wait until it is open.
    while (calls.length < 3) await new Promise((res) => setImmediate(res));
    await inf.stop();
    assert.deepEqual(r.seen, ["add a@1", "add b@6", "update a@1->7", "delete b"]);
    assert.deepEqual(calls, ["list", "watch@5", "watch@8"]);
    assert.equal(inf.get("ns/a")?.metadata.resourceVersion, "7");
  });

  test("a handler that throws does not stop the informer", async () => {
    const { client } = fakeClient(
      [{ metadata: { resourceVersion: "1" }, items: [obj("a", "1"), obj("b", "1")] }],
      [],
    );
    const inf = new Informer({ client, path: "/p" });
    inf.addHandlers({
      onAdd: () => {
        throw new Error("boom");
      },
    });
    const r = recorder(inf);
    inf.start();
    await r.waitFor(2);
    assert.equal(inf.isSupervised(), true);
    await inf.stop();
    assert.deepEqual(r.seen, ["add a@1", "add b@1"]);
  });
});
