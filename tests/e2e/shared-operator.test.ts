/**
 * The shared-operator example through the real pulumi CLI: one Operator, two Fleets in two
 * namespaces the program creates; up converges both, destroy leaves nothing behind.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import { CRD_NAME, LABELS } from "../../engine/spec/index.js";
import { paths, type KubeObject } from "../../engine/kube/index.js";
import { adminClient, isReady, suffix } from "../support/cluster.js";
import { removeCrd } from "../support/crd.js";
import { programStack, repoRoot } from "../support/pulumi.js";

const example = join(repoRoot, "examples", "shared-operator");
const fleetProgram = join(repoRoot, "tests", "e2e", "programs", "fleet");

test("the shared-operator example brings up two fleets on one operator and destroys them all", async (t) => {
  const client = adminClient();
  await removeCrd(); // the Operator installs it (it adopts one only when told to)
  const id = suffix();
  const [opNs, nsA, nsB] = [`shared-${id}-system`, `shared-${id}-a`, `shared-${id}-b`];
  const { stack } = await programStack(t, example, {
    operatorNamespace: { value: opNs },
    namespaceA: { value: nsA },
    namespaceB: { value: nsB },
    replicasA: { value: "3" },
    replicasB: { value: "2" },
  });

  try {
    const up = await stack.up();
    assert.equal(up.summary.result, "succeeded");
    const controller = await client.get<{ status?: { readyReplicas?: number } }>(
      paths.deployment(opNs, "cocoonset-controller"),
    );
    assert.equal(controller.status?.readyReplicas, 1, "one controller for both fleets");
    for (const [ns, name, slots] of [
      [nsA, "team-a", 3],
      [nsB, "team-b", 2],
    ] as const) {
      const cs = await client.get<KubeObject>(paths.cocoonSet(ns, name));
      assert.equal(cs.metadata.name, name);
      const pods = (await client.list(paths.pods(ns), { labelSelector: `${LABELS.name}=${name}` }))
        .items;
      assert.deepEqual(
        pods.map((p) => p.metadata.name).sort(),
        Array.from({ length: slots + 1 }, (_, s) => `${name}-${s}`).sort(),
      );
      assert.ok(pods.every(isReady), `every pod of ${name} is Ready`);
    }

    // A second Operator (another stack) in the same cluster is refused by name.
    const intruderNs = `intruder-${id}`;
    await client.create(paths.namespaces(), {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: intruderNs },
    });
    const intruder = await programStack(t, fleetProgram, {
      namespace: { value: intruderNs },
      replicas: { value: "1" },
      withOperator: { value: "true" },
      operatorName: { value: "intruder" },
      operatorNamespace: { value: `${intruderNs}-system` },
    });
    await assert.rejects(intruder.stack.up(), /already installed by the Operator .*\/cocoonset/s);
    const crd = await client.get<KubeObject>(paths.crd(CRD_NAME));
    assert.match(
      crd.metadata.annotations?.["cocoonset.cocoonstack.io/installed-by"] ?? "",
      /\/cocoonset$/,
      "the CRD still belongs to the first Operator",
    );
    assert.equal(
      await client.getOrUndefined(paths.deployment(`${intruderNs}-system`, "intruder-controller")),
      undefined,
      "no second controller was deployed",
    );
    await intruder.stack.destroy();
    await client.delete(paths.namespace(intruderNs));
  } catch (e) {
    await stack.destroy().catch(() => undefined);
    throw e;
  }

  const destroyed = await stack.destroy();
  assert.equal(destroyed.summary.result, "succeeded");
  for (const ns of [nsA, nsB, opNs]) {
    assert.equal(await client.getOrUndefined(paths.namespace(ns)), undefined, `${ns} is gone`);
    assert.deepEqual((await client.list(paths.pods(ns))).items, [], `no pod in ${ns}`);
  }
  assert.equal(await client.getOrUndefined(paths.crd(CRD_NAME)), undefined, "the CRD is gone");
  assert.equal(
    await client.getOrUndefined(paths.clusterRole("cocoonset-cocoonset-controller")),
    undefined,
  );
});
