/**
 * Tenant safety through the real pulumi CLI: a CocoonSet made with kubectl is refused until
 * the program adopts it, and a Fleet without an Operator is refused at preview while the CRD
 * is missing. It removes the CRD, so `scripts/test.mjs` runs this file alone.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { API_VERSION } from "../../engine/kube/api-names.js";
import { KIND } from "../../engine/spec/index.js";
import { CREATED_BY } from "../../provider/dynamic/fleet-guard.js";
import { paths, type KubeObject } from "../../engine/kube/index.js";
import { adminClient, withNamespace } from "../support/cluster.js";
import { removeCrd } from "../support/crd.js";
import { fleetProgram as program, podUids, withStacks } from "../support/fleet-program.js";
import { programStack } from "../support/pulumi.js";

const PROJECT = "cocoonset-e2e-fleet";

test("a CocoonSet made with kubectl is refused until the program adopts it; a Fleet without an Operator is refused at preview while the CRD is missing", async (t) => {
  const client = adminClient();
  await removeCrd();
  const ns = await withNamespace(t, "e2e-adopt");
  const { stack } = await programStack(t, program, {
    namespace: { value: ns },
    name: { value: "handmade" },
    replicas: { value: "1" },
  });
  await assert.rejects(
    stack.preview(),
    /\[operator\] the CocoonSet CRD cocoonsets\.cocoonset\.cocoonstack\.io is not installed in the cluster, and this Fleet has no `operator`/,
  );

  await ensureCrd(client);
  const made = await client.create<KubeObject>(paths.cocoonSets(ns), {
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: { name: "handmade", namespace: ns },
    spec: { agent: { replicas: 0, image: "agents/handmade:1" } },
  });
  await withStacks([stack], async () => {
    const refused = /the CocoonSet \S+\/handmade exists and was not created by Pulumi/;
    await assert.rejects(stack.preview(), refused);
    await assert.rejects(stack.up(), refused);
    const still = await client.get<KubeObject>(paths.cocoonSet(ns, "handmade"));
    assert.equal(still.metadata.uid, made.metadata.uid);
    assert.deepEqual(still.spec, made.spec, "the refused up changed nothing");

    await stack.setConfig("adoptCocoonSet", { value: "true" });
    await stack.up();
    const adopted = await client.get<KubeObject>(paths.cocoonSet(ns, "handmade"));
    assert.equal(adopted.metadata.uid, made.metadata.uid, "adopted, not recreated");
    assert.equal(adopted.metadata.annotations?.[CREATED_BY], `${PROJECT}/${stack.name}/handmade`);
    assert.deepEqual(Object.keys(await podUids(ns, "handmade")).sort(), [
      "handmade-0",
      "handmade-1",
    ]);
  });
  assert.equal(
    await client.getOrUndefined(paths.cocoonSet(ns, "handmade")),
    undefined,
    "an adopted CocoonSet is the stack's: destroy deletes it",
  );
});
