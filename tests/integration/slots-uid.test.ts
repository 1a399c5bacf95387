/**
 * The slots resource's provider functions (what `pulumi up`/`destroy` run) against the
 * embedded cluster: they act only on the CocoonSet the Fleet created (same uid). A
 * same-named CocoonSet with another uid stands for the one in another cluster that a
 * mismatched kubeconfig reaches: it is neither converged nor released.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import {
  create,
  desiredSlots,
  remove,
  type SlotsInputs,
  type SlotsOutputs,
} from "../../provider/dynamic/index.js";
import { API_VERSION } from "../../engine/kube/api-names.js";
import { KIND, LABELS, type CocoonSetSpec } from "../../engine/spec/index.js";
import { paths, type KubeObject } from "../../engine/kube/index.js";
import { adminClient, testKubeconfig, withNamespace } from "../support/cluster.js";

const spec: CocoonSetSpec = { agent: { replicas: 2, image: "agents/coder:1" } };

function inputs(ns: string, name: string, uid: string): SlotsInputs {
  return {
    kubeconfig: readFileSync(testKubeconfig(), "utf8"),
    namespace: ns,
    name,
    uid,
    spec,
    slots: desiredSlots(ns, name, spec),
    providerVersion: "test",
    fanOut: 8,
    timeoutSeconds: 60,
    releaseTimeoutSeconds: 60,
  };
}

const outputs = (i: SlotsInputs): SlotsOutputs => ({ ...i, pods: {}, mainVmName: "" });

async function fleetPods(ns: string, name: string): Promise<string[]> {
  const list = await adminClient().list(paths.pods(ns), {
    labelSelector: `${LABELS.name}=${name}`,
  });
  return list.items.map((p) => p.metadata.name ?? "").sort();
}

test("the slots resource refuses to converge or release a CocoonSet whose uid is not the Fleet's, and says how to pass the kubeconfig", async (t) => {
  const client = adminClient();
  await ensureCrd(client);
  const ns = await withNamespace(t, "slots-uid");
  const live = await client.create<KubeObject>(paths.cocoonSets(ns), {
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: { name: "fleet", namespace: ns },
    spec,
  });
  const liveUid = live.metadata.uid ?? "";
  const theirs = "0b8a1d9e-0000-4000-8000-000000000001";

  // up: a same-named CocoonSet with another uid is not this Fleet's: nothing is created.
  await assert.rejects(
    create(inputs(ns, "fleet", theirs)),
    (e: Error) =>
      e.message.startsWith("[kubeconfig] cannot create or update the slots") &&
      e.message.includes(`has uid ${liveUid}, not ${theirs}`) &&
      e.message.includes("`provider` option") &&
      e.message.includes("`kubeconfig` argument"),
  );
  assert.deepEqual(await fleetPods(ns, "fleet"), [], "no pod was created");

  // The CocoonSet this Fleet created is not in the reached cluster at all.
  await assert.rejects(
    create(inputs(ns, "elsewhere", theirs)),
    /\[kubeconfig\] cannot create or update the slots: the CocoonSet .*\/elsewhere \(uid .*\) that this Fleet created is not in the cluster the slots resource's kubeconfig reaches \(https?:\/\/127\.0\.0\.1:\d+\)/,
  );

  // The right uid converges the fleet.
  await create(inputs(ns, "fleet", liveUid));
  assert.deepEqual(await fleetPods(ns, "fleet"), ["fleet-0", "fleet-1", "fleet-2"]);

  // destroy: another uid releases nothing.
  await assert.rejects(
    remove(`${ns}/fleet`, outputs(inputs(ns, "fleet", theirs))),
    /\[kubeconfig\] cannot release the fleet: .*nothing was changed/,
  );
  const still = await client.get<KubeObject>(paths.cocoonSet(ns, "fleet"));
  assert.equal(still.metadata.uid, liveUid);
  assert.equal(still.metadata.deletionTimestamp, undefined, "the CocoonSet is not being deleted");
  assert.deepEqual(await fleetPods(ns, "fleet"), ["fleet-0", "fleet-1", "fleet-2"]);

  // A CocoonSet already gone is nothing to release; the right uid releases everything.
  await remove(`${ns}/elsewhere`, outputs(inputs(ns, "elsewhere", theirs)));
  await remove(`${ns}/fleet`, outputs(inputs(ns, "fleet", liveUid)));
  assert.equal(await client.getOrUndefined(paths.cocoonSet(ns, "fleet")), undefined);
  assert.deepEqual(await fleetPods(ns, "fleet"), []);
});
