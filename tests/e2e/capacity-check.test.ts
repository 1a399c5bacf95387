/**
 * The Fleet's `capacityCheck` with the real pulumi CLI: a scale-up whose sub-agents, bound to
 * the main agent's node, do not fit is refused at preview naming the node, the slots and
 * `OutOfcpu`, and nothing is created; `"off"` forecasts nothing; changing `capacityCheck`
 * alone changes no slot; `"warn"` prints the same line and lets `up` go, and the node then
 * refuses those pods (the cluster's kubelet admission: `Failed`, `OutOfcpu`).
 *
 * The fleet runs in a node pool of its own with one simulated node (4 cpu), so the test
 * changes no node another test uses and runs beside them.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { LABELS } from "../../engine/spec/index.js";
import { paths, waitForObject, type KubeObject } from "../../engine/kube/index.js";
import { adminClient, suffix, withNamespace } from "../support/cluster.js";
import { poolNode } from "../support/pool-node.js";
import { programStack, repoRoot, failure } from "../support/pulumi.js";

const program = join(repoRoot, "tests", "e2e", "programs", "fleet");

interface PodObject extends KubeObject {
  status?: { phase?: string; reason?: string };
}

test("capacityCheck: preview refuses a scale-up the node has no room for; off forecasts nothing; warn lets up go and the node refuses the pods", async (t) => {
  const client = adminClient();
  await ensureCrd(client);
  const ns = await withNamespace(t, "e2e-capacity");
  const pool = `cap-${suffix()}`;
  const node = await poolNode(t, pool, { cpu: "4", memory: "16Gi", pods: "20" });
  const { stack } = await programStack(t, program);
  const config = (replicas: number, capacityCheck?: string, skipAwait?: boolean) =>
    stack.setAllConfig({
      namespace: { value: ns },
      replicas: { value: String(replicas) },
      nodePool: { value: pool },
      cpu: { value: "1" },
      ...(capacityCheck ? { capacityCheck: { value: capacityCheck } } : {}),
      ...(skipAwait ? { skipAwait: { value: "true" } } : {}),
    });
  const podNames = async () =>
    (await client.list(paths.pods(ns), { labelSelector: `${LABELS.name}=fleet` })).items
      .map((p) => p.metadata.name ?? "")
      .sort();

  // The main agent and two sub-agents: 3 of the node's 4 cpu (the default, "refuse").
  await config(2);
  await stack.up();
  assert.deepEqual(await podNames(), ["fleet-0", "fleet-1", "fleet-2"]);

  // Five: slots 3-5 are bound to the main agent's node, which has 1 cpu left.
  await config(5);
  const line = `node ${node} has cpu 3 of 4 requested, and the pods this deploy binds to it add 3 (slots 3–5): the kubelet would refuse slots 4–5 (OutOfcpu)`;
  const refused = await failure(stack.preview());
  assert.ok(refused.includes(`[slots.4] ${line}`), refused);
  assert.deepEqual(await podNames(), ["fleet-0", "fleet-1", "fleet-2"], "preview creates nothing");

  // Changing capacityCheck alone changes nothing.
  await config(2, "off");
  const alone = await stack.preview();
  assert.deepEqual(
    [alone.changeSummary.update ?? 0, alone.changeSummary.replace ?? 0],
    [0, 0],
    alone.stdout,
  );

  // "off": no forecast, the preview passes.
  await config(5, "off");
  const off = await stack.preview();
  assert.equal(off.changeSummary.update, 2, "the CocoonSet and its slots");
  assert.ok(!/kubelet would refuse|capacity forecast/.test(off.stdout + off.stderr), off.stdout);

  // "warn": the same line, as a warning, and `up` goes on: it creates slots 3-5. (With
  // skipAwait: `up` would otherwise wait for the two the node refuses, until its timeout.)
  await config(5, "warn", true);
  const warned = await stack.up();
  assert.ok(warned.stdout.includes(`warning: [slots.4] ${line}`), warned.stdout);
  assert.equal(warned.summary.result, "succeeded");
  const outcomes = await Promise.all(
    [3, 4, 5].map((slot) =>
      waitForObject<PodObject>(
        client,
        paths.pods(ns),
        `fleet-${slot}`,
        (p) => p?.status?.phase === "Running" || p?.status?.phase === "Failed",
        { timeoutMs: 60_000, description: `slot ${slot} to run or be refused` },
      ).then((p) => `${p?.status?.phase}/${p?.status?.reason ?? ""}`),
    ),
  );
  assert.deepEqual(outcomes.sort(), ["Failed/OutOfcpu", "Failed/OutOfcpu", "Running/"]);
});
