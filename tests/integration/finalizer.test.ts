/**
 * The engine's one finalizer idiom (engine/execute/finalizer.ts), against the real
 * apiserver: an add keeps another controller's finalizer and refuses to write over a list
 * that moved since it was read; a remove takes only ours, also when the list moved under a
 * stale copy, and an object already gone counts as done. On ConfigMaps: the helper is the
 * same for the CocoonSet and the CocoonHibernation, and the JSON patch semantics are the
 * apiserver's, not the kind's.
 */
import assert from "node:assert/strict";
import { describe, test, type TestContext } from "node:test";
import { addFinalizerTo, removeFinalizerFrom } from "../../engine/execute/finalizer.js";
import { KubeApiError, paths, type KubeObject } from "../../engine/kube/index.js";
import { adminClient, withNamespace } from "../support/cluster.js";

const OURS = "cocoonset.cocoonstack.io/test-finalizer";
const THEIRS = "example.com/another-controller";

async function configMap(t: TestContext, ns: string, finalizers?: string[]): Promise<KubeObject> {
  const client = adminClient();
  const cm = await client.create<KubeObject>(paths.configMaps(ns), {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: "held", ...(finalizers ? { finalizers } : {}) },
  });
  // Whatever a test leaves, the namespace can still go.
  t.after(async () => {
    await client
      .patch(paths.configMap(ns, "held"), { metadata: { finalizers: null } })
      .catch(() => undefined);
  });
  return cm;
}

const live = async (ns: string) =>
  (await adminClient().get<KubeObject>(paths.configMap(ns, "held"))).metadata.finalizers ?? [];

void describe("engine: one finalizer idiom", () => {
  void test("adds ours to an empty list and after another controller's, once", async (t) => {
    const ns = await withNamespace(t, "finalizer-add");
    const client = adminClient();
    const path = paths.configMap(ns, "held");
    const bare = await configMap(t, ns);
    const added = await addFinalizerTo(client, path, bare, OURS);
    assert.deepEqual(added.metadata.finalizers, [OURS]);
    // Read again with ours on it: nothing to do, nothing sent.
    assert.equal(await addFinalizerTo(client, path, added, OURS), added);
    await client.patch(path, { metadata: { finalizers: [THEIRS] } });
    const theirs = await client.get<KubeObject>(path);
    await addFinalizerTo(client, path, theirs, OURS);
    assert.deepEqual(await live(ns), [THEIRS, OURS]);
  });

  void test("an add from a stale copy is refused and the list is left as it is", async (t) => {
    const ns = await withNamespace(t, "finalizer-stale-add");
    const client = adminClient();
    const path = paths.configMap(ns, "held");
    const stale = await configMap(t, ns, [THEIRS]);
    // Another controller rewrites the list after our read.
    await client.patch(path, { metadata: { finalizers: ["example.com/third"] } });
    await assert.rejects(
      addFinalizerTo(client, path, stale, OURS),
      (e) => KubeApiError.isInstance(e) && e.status === 422,
    );
    assert.deepEqual(await live(ns), ["example.com/third"]);
  });

  void test("removes only ours, also when the list moved under a stale copy", async (t) => {
    const ns = await withNamespace(t, "finalizer-remove");
    const client = adminClient();
    const path = paths.configMap(ns, "held");
    const stale = await configMap(t, ns, [OURS, THEIRS]);
    // Another finalizer goes in front of ours after our read: our index moved from 0 to 1.
    await client.patch(path, { metadata: { finalizers: ["example.com/first", OURS, THEIRS] } });
    await removeFinalizerFrom(client, path, stale, OURS);
    assert.deepEqual(await live(ns), ["example.com/first", THEIRS]);
    // A copy read before ours was added is checked against the live object once.
    await client.patch(path, { metadata: { finalizers: [THEIRS, OURS] } });
    const before = { ...stale, metadata: { ...stale.metadata, finalizers: [THEIRS] } };
    await removeFinalizerFrom(client, path, before, OURS);
    assert.deepEqual(await live(ns), [THEIRS]);
  });

  void test("an object already gone, or replaced under its name, counts as done", async (t) => {
    const ns = await withNamespace(t, "finalizer-gone");
    const client = adminClient();
    const path = paths.configMap(ns, "held");
    const first = await configMap(t, ns, [OURS]);
    await client.patch(path, { metadata: { finalizers: null } });
    await client.delete(path);
    await removeFinalizerFrom(client, path, first, OURS);
    // A new object of the same name with our finalizer is not the one we were asked about.
    await configMap(t, ns, [OURS]);
    await removeFinalizerFrom(client, path, first, OURS);
    assert.deepEqual(await live(ns), [OURS], "the new object keeps its finalizer");
    await client.patch(path, { metadata: { finalizers: [THEIRS] } });
    await assert.rejects(
      addFinalizerTo(
        client,
        path,
        { ...first, metadata: { ...first.metadata, finalizers: [THEIRS] } },
        OURS,
      ),
      (e) => KubeApiError.isInstance(e) && e.status === 422,
    );
    assert.deepEqual(await live(ns), [THEIRS], "nor gains ours from a copy of the old one");
  });
});
