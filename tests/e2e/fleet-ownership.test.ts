/**
 * Tenant safety through the real pulumi CLI: a Fleet creates its CocoonSet or refuses.
 * A second stack declaring the same CocoonSet is refused at preview and at `up`, naming the
 * first stack's Fleet, and its destroy leaves the first stack's fleet as it was. Every
 * assertion reads the cluster's objects. (A CocoonSet made with kubectl, and a Fleet while
 * the CRD is missing: fleet-adopt.test.ts.)
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { CREATED_BY } from "../../provider/dynamic/fleet-guard.js";
import { paths, type KubeObject } from "../../engine/kube/index.js";
import { adminClient, withNamespace } from "../support/cluster.js";
import { fleetProgram as program, podUids, withStacks } from "../support/fleet-program.js";
import { programStack } from "../support/pulumi.js";

const PROJECT = "cocoonset-e2e-fleet";

test("a second stack's Fleet of the same CocoonSet is refused at preview and up, naming the first, and its destroy leaves the first fleet whole", async (t) => {
  const client = adminClient();
  await ensureCrd(client);
  const ns = await withNamespace(t, "e2e-own");
  const config = { namespace: { value: ns }, name: { value: "coder" }, replicas: { value: "2" } };
  const a = await programStack(t, program, config);
  const b = await programStack(t, program, config);

  await withStacks([a.stack, b.stack], async () => {
    await a.stack.up();
    const before = await podUids(ns, "coder");
    assert.deepEqual(Object.keys(before).sort(), ["coder-0", "coder-1", "coder-2"]);
    const cs = await client.get<KubeObject>(paths.cocoonSet(ns, "coder"));
    const ownerA = `${PROJECT}/${a.stack.name}/coder`;
    assert.equal(cs.metadata.annotations?.[CREATED_BY], ownerA, "the CocoonSet names its Fleet");

    const refused = new RegExp(`the CocoonSet ${ns}/coder is held by the Fleet ${ownerA}`);
    await assert.rejects(b.stack.preview(), refused, "preview refuses, naming stack A's Fleet");
    await assert.rejects(b.stack.up(), refused, "up refuses too");
    const destroyed = await b.stack.destroy();
    assert.equal(destroyed.summary.result, "succeeded");

    const after = await client.get<KubeObject>(paths.cocoonSet(ns, "coder"));
    assert.equal(after.metadata.uid, cs.metadata.uid, "stack A's CocoonSet is still there");
    assert.equal(after.metadata.annotations?.[CREATED_BY], ownerA, "and still stack A's");
    assert.deepEqual(after.spec, cs.spec, "its spec untouched");
    assert.deepEqual(await podUids(ns, "coder"), before, "every pod of stack A is the same pod");

    // A replicas edit made with kubectl: a refreshing preview and a refreshing up agree that
    // the program's spec wins (before, the preview failed on a server-side apply conflict
    // while the up set it back).
    await client.patch(`${paths.cocoonSet(ns, "coder")}?fieldManager=kubectl-patch`, {
      spec: { agent: { replicas: 4 } },
    });
    const previewed = await a.stack.preview({ refresh: true });
    assert.equal(previewed.changeSummary.update, 1, "the preview plans the CocoonSet's update");
    await a.stack.up({ refresh: true });
    const reverted = await client.get<{ spec: { agent: { replicas: number } } }>(
      paths.cocoonSet(ns, "coder"),
    );
    assert.equal(reverted.spec.agent.replicas, 2, "up set the program's replicas back");
  });
});
