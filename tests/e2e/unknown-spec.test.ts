/**
 * A Fleet whose spec holds a value known only during `up` (a replica count from a resource
 * the same deploy creates), through the real pulumi CLI on the embedded cluster: preview
 * says the slots are unknown until apply, and says nothing of the kind when the spec is
 * known (plain values, or Outputs of resources that exist); `up` creates the pods and
 * `destroy` leaves none. A namespace known only during `up` that does not exist fails `up`
 * at once, naming the field.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { LABELS } from "../../engine/spec/index.js";
import { paths, waitForList } from "../../engine/kube/index.js";
import { SLOTS_UNKNOWN_MESSAGE } from "../../sdk/fleet.js";
import { adminClient, isReady, suffix, withNamespace } from "../support/cluster.js";
import { programStack, repoRoot } from "../support/pulumi.js";

const program = join(repoRoot, "tests", "e2e", "programs", "options");
const UNKNOWN = "slots unknown until apply";

/** Names of the fleet's pods that are not being deleted. */
async function fleetPods(ns: string): Promise<string[]> {
  const list = await adminClient().list(paths.pods(ns), { labelSelector: `${LABELS.name}=fleet` });
  return list.items
    .filter((p) => !p.metadata.deletionTimestamp)
    .map((p) => p.metadata.name!)
    .sort();
}

test("preview says 'slots unknown until apply' only when the spec holds a value unknown until up; up creates the pods, destroy leaves none", async (t) => {
  assert.ok(SLOTS_UNKNOWN_MESSAGE.startsWith(UNKNOWN));
  await ensureCrd(adminClient());
  const ns = await withNamespace(t, "e2e-unknown");
  const { stack } = await programStack(t, program, {
    namespace: { value: ns },
    replicas: { value: "2" },
  });
  let destroyed = false;
  t.after(async () => {
    if (!destroyed) await stack.destroy().catch(() => undefined);
  });

  // Known spec (plain values): the slots are listed, no such message.
  const known = await stack.preview({ diff: true });
  assert.doesNotMatch(known.stdout + known.stderr, new RegExp(UNKNOWN), known.stdout);
  assert.match(known.stdout, /pod\s*:\s*"fleet-2"/, "the known preview lists slot 2");

  // The replica count from a resource this deploy creates: unknown at preview.
  await stack.setConfig("replicasAfterApply", { value: "2" });
  // `--diff` prints diagnostics on stderr; the progress display lists them on stdout.
  const unknown = await stack.preview({ diff: true });
  assert.match(unknown.stderr, new RegExp(UNKNOWN), `${unknown.stdout}\n${unknown.stderr}`);
  assert.match(unknown.stdout, /slots\s*:\s*\[unknown\]/, unknown.stdout);
  const progress = await stack.preview();
  assert.match(
    progress.stdout,
    new RegExp(`Diagnostics:[\\s\\S]*cocoonset:index:Fleet \\(fleet\\):\\s+${UNKNOWN}`),
    progress.stdout,
  );
  assert.deepEqual(await fleetPods(ns), [], "preview created no pod");

  await stack.up();
  await waitForList(
    adminClient(),
    paths.pods(ns),
    (items) =>
      JSON.stringify(
        items
          .filter((p) => !p.metadata.deletionTimestamp && isReady(p))
          .map((p) => p.metadata.name)
          .sort(),
      ) === JSON.stringify(["fleet-0", "fleet-1", "fleet-2"]),
    {
      labelSelector: `${LABELS.name}=fleet`,
      timeoutMs: 60_000,
      description: `Ready pods of ${ns}/fleet to be slots 0..2`,
    },
  );

  // The same Output, now of a resource that exists: known, so no message.
  const again = await stack.preview({ diff: true });
  assert.doesNotMatch(again.stdout + again.stderr, new RegExp(UNKNOWN), again.stdout);

  assert.equal((await stack.destroy()).summary.result, "succeeded");
  destroyed = true;
  assert.deepEqual(await fleetPods(ns), [], "no pod of the fleet is left");
  assert.equal(
    await adminClient().getOrUndefined(paths.cocoonSet(ns, "fleet")),
    undefined,
    "the CocoonSet is gone",
  );
});

test("a namespace given as an Output, unknown at preview, that does not exist fails up at once naming [namespace], and no CocoonSet is written", async (t) => {
  await ensureCrd(adminClient());
  // Never created.
  const ns = `e2e-no-ns-${suffix()}`;
  const { stack } = await programStack(t, program, {
    namespace: { value: ns },
    namespaceAfterApply: { value: "true" },
  });
  t.after(async () => {
    await stack.destroy().catch(() => undefined);
  });
  const started = Date.now();
  let failed = "";
  try {
    await stack.up();
  } catch (e) {
    failed = String(e);
  }
  const seconds = (Date.now() - started) / 1000;
  assert.match(
    failed,
    new RegExp(`\\[namespace\\] namespace "${ns}" does not exist in the cluster; create it first`),
    failed,
  );
  assert.doesNotMatch(failed, /Retry #/, "no retries of the CocoonSet's apply");
  // The CocoonSet's apply retried for about 63 s before; `up` itself takes a few seconds.
  t.diagnostic(`up failed after ${seconds.toFixed(1)} s`);
  assert.ok(seconds < 45, `up failed after ${seconds} s`);
  assert.equal(await adminClient().getOrUndefined(paths.cocoonSet(ns, "fleet")), undefined);
});
