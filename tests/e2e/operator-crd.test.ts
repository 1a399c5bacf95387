/**
 * What destroying an Operator does to the cluster-wide CocoonSet CRD, through the real
 * pulumi CLI: it never deletes CocoonSets of other stacks (it refuses while any is left,
 * naming them, or keeps the CRD with `retainCrdOnDelete`), and it never takes over a CRD it
 * did not install unless told to by name (`adoptCrd`), which then keeps that CRD on destroy.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { API_VERSION } from "../../engine/kube/api-names.js";
import { CRD_NAME, KIND } from "../../engine/spec/index.js";
import { paths, waitForObject, type KubeObject } from "../../engine/kube/index.js";
import { adminClient, suffix, withNamespace } from "../support/cluster.js";
import { crdStamp, removeCrd } from "../support/crd.js";
import { programStack, repoRoot } from "../support/pulumi.js";

const program = join(repoRoot, "tests", "e2e", "programs", "fleet");

/** The Operator stack's config: a one-slot fleet in `ns` and an Operator named `opName`. */
function operatorConfig(ns: string, opName: string) {
  return {
    namespace: { value: ns },
    replicas: { value: "1" },
    withOperator: { value: "true" },
    operatorName: { value: opName },
    operatorNamespace: { value: `${opName}-system` },
  };
}

test("destroying an Operator while another stack's CocoonSet is left fails naming it and deletes none of the Operator; with retainCrdOnDelete it keeps the CRD and says so", async (t) => {
  const client = adminClient();
  await removeCrd();
  t.after(removeCrd);
  const opName = `op-${suffix()}`;
  const nsA = await withNamespace(t, "crd-mine");
  const nsB = await withNamespace(t, "crd-theirs");
  const op = await programStack(t, program, operatorConfig(nsA, opName));
  const theirs = await programStack(t, program, {
    namespace: { value: nsB },
    name: { value: "theirs" },
    replicas: { value: "1" },
  });

  try {
    await op.stack.up();
    assert.match((await crdStamp()) ?? "", new RegExp(`/${opName}$`), "the Operator installed it");
    await theirs.stack.up();

    // Either the destroy fails (nothing of the Operator deleted), or the CRD deletion starts
    // deleting the other stack's CocoonSet: whichever comes first.
    const watching = new AbortController();
    const deleting = waitForObject(
      client,
      paths.cocoonSets(nsB),
      "theirs",
      (o) => o?.metadata.deletionTimestamp !== undefined,
      { timeoutMs: 600_000, signal: watching.signal },
    ).then(
      () => "the other stack's CocoonSet is being deleted",
      () => "the watch ended",
    );
    const destroying = op.stack.destroy().then(
      () => "the destroy succeeded",
      (e: Error) => e,
    );
    const first = await Promise.race([destroying, deleting]);
    watching.abort();
    assert.ok(first instanceof Error, `the destroy must fail; instead: ${String(first)}`);
    assert.match(
      first.message,
      new RegExp(
        `refusing to delete the CocoonSet CRD ${CRD_NAME.replace(/\./g, "\\.")}: 1 CocoonSet\\(s\\) are left in the cluster \\(${nsB}/theirs\\).*\`retainCrdOnDelete: true\``,
        "s",
      ),
    );
    const cs = await client.get<KubeObject>(paths.cocoonSet(nsB, "theirs"));
    assert.equal(cs.metadata.deletionTimestamp, undefined, "their CocoonSet is untouched");
    assert.ok(await client.getOrUndefined(paths.crd(CRD_NAME)), "the CRD is still there");
    assert.ok(
      await client.getOrUndefined(paths.deployment(`${opName}-system`, `${opName}-controller`)),
      "the controller is still there",
    );

    // Opting in keeps the CRD: the Operator goes, their CocoonSet stays.
    await op.stack.setConfig("retainCrdOnDelete", { value: "true" });
    await op.stack.up();
    const destroyed = await op.stack.destroy();
    assert.equal(destroyed.summary.result, "succeeded");
    assert.match(
      destroyed.stdout,
      new RegExp(
        `keeping the CocoonSet CRD ${CRD_NAME.replace(/\./g, "\\.")} \\(retainCrdOnDelete\\); 1 CocoonSet\\(s\\) are left in the cluster: ${nsB}/theirs`,
      ),
    );
    assert.ok(await client.getOrUndefined(paths.crd(CRD_NAME)), "the CRD is kept");
    assert.equal(
      await client.getOrUndefined(paths.deployment(`${opName}-system`, `${opName}-controller`)),
      undefined,
      "the controller is gone",
    );
    const kept = await client.get<KubeObject>(paths.cocoonSet(nsB, "theirs"));
    assert.equal(kept.metadata.uid, cs.metadata.uid);
    assert.equal(kept.metadata.deletionTimestamp, undefined);

    // With no controller left, their stack still destroys cleanly: the slots release it.
    await theirs.stack.destroy();
    assert.equal(await client.getOrUndefined(paths.cocoonSet(nsB, "theirs")), undefined);
    assert.deepEqual((await client.list(paths.pods(nsB))).items, [], "no pod of theirs is left");
  } catch (e) {
    await theirs.stack.destroy().catch(() => undefined);
    await op.stack.setConfig("retainCrdOnDelete", { value: "true" }).catch(() => undefined);
    await op.stack.up().catch(() => undefined);
    await op.stack.destroy().catch(() => undefined);
    throw e;
  }
});

test("an Operator does not adopt a CRD applied by hand unless adoptCrd names it, and then keeps it, and the CocoonSets in it, on destroy", async (t) => {
  const client = adminClient();
  await removeCrd();
  t.after(removeCrd);
  await ensureCrd(client); // as `kubectl apply -f` of the CRD would: no Operator stamp
  const nsHand = await withNamespace(t, "crd-hand");
  await client.create(paths.cocoonSets(nsHand), {
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: { name: "by-hand", namespace: nsHand },
    spec: { agent: { replicas: 0, image: "agents/coder:1" } },
  });
  const opName = `adopt-${suffix()}`;
  const ns = await withNamespace(t, "crd-adopt");
  const { stack } = await programStack(t, program, operatorConfig(ns, opName));

  try {
    await assert.rejects(
      stack.up(),
      new RegExp(
        `\\[adoptCrd\\] the CocoonSet CRD ${CRD_NAME.replace(/\./g, "\\.")} exists and no Operator installed it.*set \`adoptCrd: "${CRD_NAME.replace(/\./g, "\\.")}"\` on the Operator`,
        "s",
      ),
    );
    assert.equal(await crdStamp(), undefined, "the CRD is not taken over");
    assert.equal(
      await client.getOrUndefined(paths.deployment(`${opName}-system`, `${opName}-controller`)),
      undefined,
      "no controller was deployed",
    );

    await stack.setConfig("adoptCrd", { value: CRD_NAME });
    await stack.up();
    assert.match((await crdStamp()) ?? "", new RegExp(`/${opName}$`), "adopted by name");
    const destroyed = await stack.destroy();
    assert.equal(destroyed.summary.result, "succeeded");
    assert.match(
      destroyed.stdout,
      /keeping the CocoonSet CRD \S+ \(adopted: this Operator did not install it\); 1 CocoonSet\(s\) are left/,
    );
    assert.ok(await client.getOrUndefined(paths.crd(CRD_NAME)), "the adopted CRD is kept");
    const byHand = await client.get<KubeObject>(paths.cocoonSet(nsHand, "by-hand"));
    assert.equal(byHand.metadata.deletionTimestamp, undefined, "the CocoonSet made by hand stays");
  } catch (e) {
    await stack.destroy().catch(() => undefined);
    throw e;
  }
});
