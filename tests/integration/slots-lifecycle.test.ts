/**
 * What `pulumi up` runs for the lifecycle features other than the retain suspend
 * (docs/behaviour.md §3.16, §3.17, §7.4), against the embedded cluster, the node-agent
 * simulator in an opted-in namespace and the cluster's registry, with no controller: the
 * provider functions are called as the Pulumi engine calls them, after the CocoonSet's own
 * update.
 *
 * - a main-only set with `hibernatePolicy: release`: the suspend returns with phase
 *   Suspended, no pod and the `:hibernate` tag kept; the wake returns with the main agent
 *   restored from it, live, and the tag dropped;
 * - a migration to `spec.nodeName`: the update returns with the main agent live on the new
 *   node, restored from its snapshot, and the tag dropped.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { NODE_AGENT_ENABLED, NODE_AGENT_LABEL } from "../../cluster/node-agent.js";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { create, remove, update, type SlotsOutputs } from "../../provider/dynamic/index.js";
import { API_VERSION } from "../../engine/kube/api-names.js";
import { vmLive } from "../../engine/pods/index.js";
import { vmNameFor } from "../../engine/pods/pod-builder.js";
import {
  ANNOTATIONS,
  KIND,
  SNAPSHOT_TAGS,
  type CocoonSet,
  type CocoonSetSpec,
  type Pod,
} from "../../engine/spec/index.js";
import { paths } from "../../engine/kube/index.js";
import { OciRegistry } from "../../engine/registry/oci.js";
import { adminClient, withNamespace } from "../support/cluster.js";
import {
  registryAddress,
  slotsInputs,
  vmReady,
  waitForPods,
  writeSpec,
} from "../support/lifecycle.js";

const client = adminClient();
const NAME = "fleet";

const inputs = (ns: string, uid: string, spec: CocoonSetSpec) =>
  slotsInputs(ns, NAME, uid, spec, { registry: registryAddress() });

async function pods(ns: string): Promise<Pod[]> {
  const list = await client.list<Pod>(paths.pods(ns), {
    labelSelector: `cocoonset.cocoonstack.io/name=${NAME}`,
  });
  return list.items;
}

/** An opted-in namespace with a CocoonSet of `spec`, created by the slots resource. */
async function fleet(
  t: test.TestContext,
  prefix: string,
  spec: CocoonSetSpec,
): Promise<{ ns: string; uid: string; outs: () => SlotsOutputs; set: (o: SlotsOutputs) => void }> {
  await ensureCrd(client);
  const ns = await withNamespace(t, prefix);
  await client.patch(paths.namespace(ns), {
    metadata: { labels: { [NODE_AGENT_LABEL]: NODE_AGENT_ENABLED } },
  });
  const cs = await client.create<CocoonSet>(paths.cocoonSets(ns), {
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: { name: NAME, namespace: ns },
    spec,
  });
  const uid = cs.metadata.uid ?? "";
  let last = (await create(inputs(ns, uid, spec))).outs;
  t.after(async () => {
    await remove(`${ns}/${NAME}`, last).catch(() => undefined);
  });
  return { ns, uid, outs: () => last, set: (o) => (last = o) };
}

test("the slots resource carries a release suspend and its wake", async (t) => {
  const running: CocoonSetSpec = {
    agent: { replicas: 0, image: "agents/coder:1" },
    hibernatePolicy: "release",
    suspend: false,
  };
  const f = await fleet(t, "slots-release", running);
  const [booted] = await waitForPods(f.ns, NAME, 1, vmReady, "the main agent's VM booted");
  const vm = vmNameFor(f.ns, NAME, 0);
  const reg = new OciRegistry(registryAddress());

  const suspended = { ...running, suspend: true };
  await writeSpec(f.ns, NAME, suspended);
  f.set((await update("", f.outs(), inputs(f.ns, f.uid, suspended))).outs);
  assert.equal(f.outs().phase, "Suspended");
  assert.deepEqual(await pods(f.ns), [], "the seat is freed: no pod");
  assert.deepEqual(await reg.listTags(vm), [SNAPSHOT_TAGS.hibernate]);
  const cs = await client.get<CocoonSet>(paths.cocoonSet(f.ns, NAME));
  assert.equal(
    cs.metadata.annotations?.[ANNOTATIONS.hibernatedOnNode],
    booted.spec?.nodeName,
    "the node hint is the main agent's node",
  );

  await writeSpec(f.ns, NAME, running);
  f.set((await update("", f.outs(), inputs(f.ns, f.uid, running))).outs);
  assert.equal(f.outs().phase, "Running");
  const [main] = await pods(f.ns);
  assert.ok(main && vmLive(main), "the main agent's VM is live when the wake returns");
  assert.equal(main.metadata?.annotations?.[ANNOTATIONS.restoreFromHibernate], "true");
  assert.notEqual(main.metadata?.uid, booted.metadata?.uid, "a new pod");
  assert.deepEqual(await reg.listTags(vm), [], "the snapshot is dropped once the VM runs");
  const woken = await client.get<CocoonSet>(paths.cocoonSet(f.ns, NAME));
  assert.equal(woken.metadata.annotations?.[ANNOTATIONS.hibernatedOnNode], undefined);
});

test("the slots resource carries a migration to spec.nodeName", async (t) => {
  const [from, to] = ["kwok-node-0", "kwok-node-1"];
  const pinned: CocoonSetSpec = { agent: { replicas: 0, image: "agents/coder:1" }, nodeName: from };
  const f = await fleet(t, "slots-migrate", pinned);
  const [before] = await waitForPods(f.ns, NAME, 1, vmReady, `the main agent's VM up on ${from}`);
  assert.equal(before.spec?.nodeName, from);

  const moved = { ...pinned, nodeName: to };
  await writeSpec(f.ns, NAME, moved);
  f.set((await update("", f.outs(), inputs(f.ns, f.uid, moved))).outs);
  const [main] = await pods(f.ns);
  assert.equal(main?.spec?.nodeName, to, "the main agent runs on the new node");
  assert.ok(vmLive(main), "its VM is live when the update returns");
  assert.equal(main.metadata?.annotations?.[ANNOTATIONS.restoreFromHibernate], "true");
  const reg = new OciRegistry(registryAddress());
  assert.deepEqual(await reg.listTags(vmNameFor(f.ns, NAME, 0)), [], "the snapshot is dropped");
});
