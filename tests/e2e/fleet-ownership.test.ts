/**
 * Tenant safety through the real pulumi CLI: a Fleet creates its CocoonSet or refuses.
 * A second stack declaring the same CocoonSet is refused at preview and at `up`, naming the
 * first stack's Fleet, and its destroy leaves the first stack's fleet as it was; a CocoonSet
 * made with kubectl is refused until the program adopts it. Every assertion reads the
 * cluster's objects.
 */
import type { Stack } from "@pulumi/pulumi/automation/index.js";
import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import { ensureCrd } from "../../provider/engine/index.js";
import { API_VERSION, KIND, LABELS } from "../../provider/fleet/index.js";
import { CREATED_BY } from "../../provider/dynamic/fleet-guard.js";
import { paths, type KubeObject } from "../../provider/kube/index.js";
import { adminClient, withNamespace } from "../support/cluster.js";
import { removeCrd } from "../support/crd.js";
import { programStack, repoRoot } from "../support/pulumi.js";

const program = join(repoRoot, "tests", "e2e", "programs", "fleet");
const PROJECT = "cocoonset-e2e-fleet";

/** uid of each pod of the fleet, by pod name. */
async function podUids(ns: string, name: string): Promise<Record<string, string>> {
  const pods = await adminClient().list(paths.pods(ns), {
    labelSelector: `${LABELS.name}=${name}`,
  });
  return Object.fromEntries(
    pods.items.map((p): [string, string] => [p.metadata.name ?? "", p.metadata.uid ?? ""]),
  );
}

/** Runs the steps; whatever happens, destroys the stacks after. */
async function withStacks(stacks: Stack[], steps: () => Promise<void>): Promise<void> {
  try {
    await steps();
  } finally {
    for (const s of stacks.reverse()) await s.destroy().catch(() => undefined);
  }
}

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
