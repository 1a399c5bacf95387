/**
 * The slots resource's suspend and wake (what `pulumi up` runs, docs/behaviour.md §7.4)
 * against the embedded cluster, the node-agent simulator in an opted-in namespace and the
 * cluster's registry, with no controller: the provider functions are called as the Pulumi
 * engine calls them, after the CocoonSet's own update (as the Fleet's CocoonSet resource
 * writes it first).
 *
 * - without a registry, `suspend: true` is stored: the update returns and no pod is asked
 *   to hibernate;
 * - a registry that does not answer holds the suspend until `suspendTimeoutSeconds`, and
 *   the failure names every pod and the registry's error;
 * - a wake the simulator holds in `creating` fails after the timeout naming that pod only,
 *   and the next update, given time, returns with every VM up;
 * - while suspended, a pod deleted outside Pulumi is no drift for `diff` (nothing is
 *   created while suspended), unless no registry is given.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { SIM_ANNOTATIONS, NODE_AGENT_ENABLED, NODE_AGENT_LABEL } from "../../cluster/node-agent.js";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import {
  create,
  diff,
  remove,
  update,
  type SlotsInputs,
  type SlotsOutputs,
} from "../../provider/dynamic/index.js";
import { API_VERSION } from "../../engine/kube/api-names.js";
import {
  ANNOTATIONS,
  KIND,
  type CocoonSet,
  type CocoonSetSpec,
  type Pod,
} from "../../engine/spec/index.js";
import { paths } from "../../engine/kube/index.js";
import { adminClient, withNamespace } from "../support/cluster.js";
import {
  registryAddress,
  slotsInputs,
  vmReady,
  waitForPods,
  writeSpec,
} from "../support/lifecycle.js";

const client = adminClient();
const NAME = "fleet";

const inputs = (ns: string, uid: string, spec: CocoonSetSpec, extra: Partial<SlotsInputs>) =>
  slotsInputs(ns, NAME, uid, spec, extra);

const asked = (p: Pod) => p.metadata?.annotations?.[ANNOTATIONS.hibernate] === "true";

test("the slots resource's suspend and wake: no registry, a silent registry, a wake held past its timeout", async (t) => {
  await ensureCrd(client);
  const ns = await withNamespace(t, "slots-suspend");
  await client.patch(paths.namespace(ns), {
    metadata: { labels: { [NODE_AGENT_LABEL]: NODE_AGENT_ENABLED } },
  });
  const running: CocoonSetSpec = {
    agent: { replicas: 1, image: "agents/coder:1" },
    suspend: false,
  };
  const suspended: CocoonSetSpec = { ...running, suspend: true };
  const cs = await client.create<CocoonSet>(paths.cocoonSets(ns), {
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: { name: NAME, namespace: ns },
    spec: running,
  });
  const uid = cs.metadata.uid ?? "";
  const registry = registryAddress();
  const first = await create(inputs(ns, uid, running, { registry }));
  let last: SlotsOutputs = first.outs;
  t.after(async () => {
    await remove(`${ns}/${NAME}`, last).catch(() => undefined);
  });
  await waitForPods(ns, NAME, 2, vmReady, "both VMs booted");

  // No registry: stored, not acted on.
  await writeSpec(ns, NAME, suspended);
  last = (await update("", last, inputs(ns, uid, suspended, {}))).outs;
  const untouched = (
    await client.list<Pod>(paths.pods(ns), {
      labelSelector: `cocoonset.cocoonstack.io/name=${NAME}`,
    })
  ).items;
  assert.equal(untouched.length, 2);
  assert.ok(!untouched.some(asked), "no pod asked to hibernate without a registry");

  // A registry that does not answer: the gate cannot tell, up fails after its timeout.
  const silent = "127.0.0.1:1";
  await assert.rejects(
    update("", last, inputs(ns, uid, suspended, { registry: silent, suspendTimeoutSeconds: 3 })),
    (e: Error) => {
      assert.match(
        e.message,
        new RegExp(
          `^suspend of fleet ${ns}/${NAME} did not finish within 3s \\(suspendTimeoutSeconds\\): phase Suspending; pods that did not hibernate: fleet-0 \\(lifecycle state \\w+\\), fleet-1 \\(lifecycle state \\w+\\); \\[spec\\.suspend\\] cannot tell which VMs have hibernated: the snapshot registry did not answer: probe hibernate snapshot vk-${ns}-fleet-\\d: `,
        ),
      );
      return true;
    },
  );

  // The real registry: Suspended.
  last = (await update("", last, inputs(ns, uid, suspended, { registry }))).outs;
  assert.equal(last.phase, "Suspended");

  // A wake the simulator holds in `creating` for fleet-1.
  await client.patch(paths.pod(ns, "fleet-1"), {
    metadata: { annotations: { [SIM_ANNOTATIONS.wakeDelayMs]: "6000" } },
  });
  await writeSpec(ns, NAME, running);
  await assert.rejects(
    update("", last, inputs(ns, uid, running, { registry, suspendTimeoutSeconds: 2 })),
    (e: Error) => {
      assert.match(
        e.message,
        new RegExp(
          `^wake of fleet ${ns}/${NAME} did not finish within 2s \\(suspendTimeoutSeconds\\): phase Running; pods whose VM is not up again: fleet-1 \\(lifecycle state creating\\)\\.`,
        ),
      );
      return true;
    },
  );
  // The failed update was not recorded: Pulumi runs it again with the same old state.
  last = (await update("", last, inputs(ns, uid, running, { registry }))).outs;
  assert.equal(last.phase, "Running");
  const awake = await waitForPods(ns, NAME, 2, vmReady, "both VMs up", 1000);
  assert.ok(!awake.some(asked), "no hibernate request left");

  // Suspended again, a pod deleted outside Pulumi is no drift: nothing is created while
  // suspended, so preview shows no change (a running fleet's would, and `up` recreates it).
  await writeSpec(ns, NAME, suspended);
  last = (await update("", last, inputs(ns, uid, suspended, { registry }))).outs;
  assert.equal(last.phase, "Suspended");
  const same = inputs(ns, uid, suspended, { registry });
  assert.deepEqual(await diff("", last, same), { changes: false });
  await client.delete(paths.pod(ns, "fleet-1"));
  await waitForPods(ns, NAME, 1, asked, "fleet-1 gone, fleet-0 still asked to hibernate");
  assert.deepEqual(await diff("", last, same), { changes: false }, "no drift while suspended");
  const noRegistry = inputs(ns, uid, suspended, {});
  assert.deepEqual(
    await diff("", { ...last, registry: undefined }, noRegistry),
    { changes: true },
    "without a registry the suspend is not acted on: the missing slot is drift",
  );
});
