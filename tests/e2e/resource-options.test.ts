/**
 * The standard resource options on the Fleet through the real pulumi CLI on the embedded
 * cluster: `transforms`, `dependsOn` and `ignoreChanges` in one stack's life, `protect` then
 * `retainOnDelete` in another, every assertion on the cluster's objects. The Operator's are
 * resource-options-operator.test.ts; `provider`/`providers` are the subject of
 * kubeconfig.test.ts. How each option maps onto the children is unit-tested
 * (tests/unit/sdk/resource-options.test.ts).
 */
import type { Stack } from "@pulumi/pulumi/automation/index.js";
import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import { deleteFleet } from "../../engine/execute/index.js";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { LABELS, type CocoonSet } from "../../engine/spec/index.js";
import { paths, waitForObject } from "../../engine/kube/index.js";
import { adminClient, suffix, withNamespace } from "../support/cluster.js";
import { programStack, repoRoot, failure } from "../support/pulumi.js";

const program = join(repoRoot, "tests", "e2e", "programs", "options");
const TRANSFORMED = "e2e.cocoonstack.io/transformed";

type Config = Record<string, { value: string }>;
const config = (values: Record<string, string>): Config =>
  Object.fromEntries(Object.entries(values).map(([k, v]) => [k, { value: v }]));

/** The fleet's pods: name → the agent image they run (the annotation the engine writes). */
async function fleetPods(ns: string): Promise<Record<string, string>> {
  const list = await adminClient().list(paths.pods(ns), {
    labelSelector: `${LABELS.name}=fleet`,
  });
  return Object.fromEntries(
    list.items
      .filter((p) => !p.metadata.deletionTimestamp)
      .map((p) => [
        p.metadata.name!,
        p.metadata.annotations?.["cocoonset.cocoonstack.io/image"] ?? "",
      ]),
  );
}

async function cocoonSet(ns: string): Promise<CocoonSet | undefined> {
  return adminClient().getOrUndefined<CocoonSet>(paths.cocoonSet(ns, "fleet"));
}

/** Runs the steps; when one fails, destroys the stack (unprotected) before failing. */
async function cleanOnFailure(stack: Stack, steps: () => Promise<void>): Promise<void> {
  try {
    await steps();
  } catch (e) {
    await stack.setConfig("protect", { value: "false" }).catch(() => undefined);
    await stack.setConfig("operatorProtect", { value: "false" }).catch(() => undefined);
    await stack.up().catch(() => undefined);
    await stack.destroy().catch(() => undefined);
    throw e;
  }
}

test("Fleet transforms, dependsOn and ignoreChanges [spec.agent.image]: the CocoonSet carries the transform's label, a namespace created by a dependency is there first, and a new image is ignored while a replica change goes through", async (t) => {
  await ensureCrd(adminClient());
  // Not created by the test: the program's Namespace resource, in the Fleet's dependsOn only.
  const ns = `e2e-depends-${suffix()}`;
  t.after(() => adminClient().delete(paths.namespace(ns)));
  const { stack } = await programStack(
    t,
    program,
    config({
      namespace: ns,
      createNamespace: "true",
      replicas: "1",
      image: "agents/coder:1",
      ignoreImage: "true",
      label: "yes",
    }),
  );
  await cleanOnFailure(stack, async () => {
    await stack.up();
    const cs = await cocoonSet(ns);
    assert.equal(cs?.metadata.labels?.[TRANSFORMED], "yes", "the transform reached the CocoonSet");
    assert.deepEqual(Object.keys(await fleetPods(ns)).sort(), ["fleet-0", "fleet-1"]);

    await stack.setAllConfig(config({ replicas: "2", image: "agents/coder:2" }));
    await stack.up();
    const changed = await cocoonSet(ns);
    assert.equal(changed?.spec.agent.image, "agents/coder:1", "the CocoonSet keeps the image");
    assert.equal(changed?.spec.agent.replicas, 2, "the replica change went through");
    assert.deepEqual(await fleetPods(ns), {
      "fleet-0": "agents/coder:1",
      "fleet-1": "agents/coder:1",
      "fleet-2": "agents/coder:1",
    });
  });
  assert.equal((await stack.destroy()).summary.result, "succeeded");
  assert.equal(await cocoonSet(ns), undefined);
  await waitForObject(adminClient(), paths.namespaces(), ns, (o) => o === undefined, {
    timeoutMs: 60_000,
    description: `namespace ${ns} (destroyed after the Fleet) to be gone`,
  });
});

test("Fleet protect, then retainOnDelete: destroy is refused and the fleet stays; unprotected and retained, destroy leaves the CocoonSet and its pods in the cluster", async (t) => {
  const client = adminClient();
  await ensureCrd(client);
  const ns = await withNamespace(t, "e2e-protect");
  t.after(async () => {
    await deleteFleet(client, ns, "fleet", { timeoutMs: 60_000 });
  });
  const { stack } = await programStack(t, program, config({ namespace: ns, protect: "true" }));
  let uid: string | undefined;
  await cleanOnFailure(stack, async () => {
    await stack.up();
    uid = (await cocoonSet(ns))?.metadata.uid;
    assert.match(await failure(stack.destroy()), /protect/i);
    assert.equal((await cocoonSet(ns))?.metadata.uid, uid, "the CocoonSet is still there");
    assert.deepEqual(Object.keys(await fleetPods(ns)).sort(), ["fleet-0", "fleet-1"]);
    await stack.setAllConfig(config({ protect: "false", retainOnDelete: "true" }));
    await stack.up();
  });
  assert.equal((await stack.destroy()).summary.result, "succeeded");
  const cs = await cocoonSet(ns);
  assert.equal(cs?.metadata.uid, uid, "the CocoonSet was retained");
  assert.equal(cs?.metadata.deletionTimestamp, undefined);
  assert.deepEqual(Object.keys(await fleetPods(ns)).sort(), ["fleet-0", "fleet-1"]);
});
