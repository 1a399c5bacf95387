/**
 * The standard resource options on the Operator through the real pulumi CLI on the embedded
 * cluster: `transforms`, `ignoreChanges`, `protect` and `retainOnDelete` in one stack's life,
 * every assertion on the cluster's objects. The Operator installs the CRD, so
 * `scripts/test.mjs` runs this file alone.
 */
import type { Stack } from "@pulumi/pulumi/automation/index.js";
import assert from "node:assert/strict";
import { join } from "node:path";
import { test, type TestContext } from "node:test";
import { CRD_NAME } from "../../engine/spec/index.js";
import { paths, type KubeObject } from "../../engine/kube/index.js";
import { adminClient, suffix } from "../support/cluster.js";
import { removeCrd } from "../support/crd.js";
import { programStack, repoRoot, failure } from "../support/pulumi.js";

const program = join(repoRoot, "tests", "e2e", "programs", "options");
const TRANSFORMED = "e2e.cocoonstack.io/transformed";

type Config = Record<string, { value: string }>;
const config = (values: Record<string, string>): Config =>
  Object.fromEntries(Object.entries(values).map(([k, v]) => [k, { value: v }]));

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

test("Operator transforms, ignoreChanges [replicas], protect and retainOnDelete, through one stack's life", async (t: TestContext) => {
  const client = adminClient();
  await removeCrd();
  t.after(removeCrd);
  const opName = `opt-${suffix()}`;
  const opNs = `${opName}-system`;
  t.after(async () => {
    // What retainOnDelete kept (the CRD goes by removeCrd).
    await client.delete(paths.namespace(opNs));
    await client.delete(paths.clusterRole(`${opName}-cocoonset-controller`));
    await client.delete(paths.clusterRoleBinding(`${opName}-cocoonset-controller`));
  });
  const { stack } = await programStack(
    t,
    program,
    config({
      namespace: opNs,
      withFleet: "false",
      withOperator: "true",
      operatorName: opName,
      operatorNamespace: opNs,
      label: "op",
      operatorIgnoreReplicas: "true",
    }),
  );
  const deployment = () =>
    client.getOrUndefined<KubeObject & { spec?: { replicas?: number } }>(
      paths.deployment(opNs, `${opName}-controller`),
    );
  await cleanOnFailure(stack, async () => {
    await stack.up();
    const first = await deployment();
    assert.equal(first?.metadata.labels?.[TRANSFORMED], "op", "transforms: the label is there");
    assert.equal(first?.spec?.replicas, 1);

    // ignoreChanges: the new replica count never reaches the Deployment.
    await stack.setConfig("operatorReplicas", { value: "2" });
    await stack.up();
    assert.equal((await deployment())?.spec?.replicas, 1, "ignoreChanges: replicas stay 1");

    // protect: destroy is refused, nothing is deleted.
    await stack.setConfig("operatorProtect", { value: "true" });
    await stack.up();
    assert.match(await failure(stack.destroy()), /protect/i);
    assert.equal((await deployment())?.metadata.uid, first?.metadata.uid);

    // retainOnDelete: destroy succeeds and leaves the controller and the CRD.
    await stack.setAllConfig(config({ operatorProtect: "false", operatorRetainOnDelete: "true" }));
    await stack.up();
  });
  const uid = (await deployment())?.metadata.uid;
  assert.equal((await stack.destroy()).summary.result, "succeeded");
  assert.equal((await deployment())?.metadata.uid, uid, "retainOnDelete: the Deployment stays");
  assert.ok(await client.getOrUndefined(paths.crd(CRD_NAME)), "retainOnDelete: the CRD stays");
});
