/**
 * The slots resource's `diff` (what `pulumi preview` and `up` run) after the controller's idle
 * policy acted, against the embedded cluster and the node-agent simulator with no controller
 * (the policy's status is written here as the controller writes it): a member's pod missing
 * from a fleet suspended for being idle (`status.idleSuspendedSince`) is no drift, so `up`
 * shows no diff and wakes nothing, while the same missing pod without it is; and the state's
 * own status, which the controller changed meanwhile, is not compared.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { create, diff, remove, type SlotsOutputs } from "../../provider/dynamic/index.js";
import { API_VERSION } from "../../engine/kube/api-names.js";
import { PatchType, paths } from "../../engine/kube/index.js";
import { KIND, type CocoonSet, type CocoonSetSpec } from "../../engine/spec/index.js";
import { adminClient, withNamespace } from "../support/cluster.js";
import {
  optInNodeAgent,
  registryAddress,
  slotsInputs,
  vmReady,
  waitForPods,
} from "../support/lifecycle.js";

const client = adminClient();
const NAME = "idler";

test("a slot missing from an idle-suspended fleet is no drift for diff; without the policy's status it is", async (t) => {
  await ensureCrd(client);
  const ns = await withNamespace(t, "slots-idle-diff");
  await optInNodeAgent(ns);
  const spec: CocoonSetSpec = {
    agent: { replicas: 1, image: "agents/coder:1" },
    idle: { after: "30m" },
  };
  const cs = await client.create<CocoonSet>(paths.cocoonSets(ns), {
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: { name: NAME, namespace: ns },
    spec,
  });
  const uid = cs.metadata.uid ?? "";
  const inputs = slotsInputs(ns, NAME, uid, spec, { registry: registryAddress() });
  const first = await create(inputs);
  const last: SlotsOutputs = first.outs;
  t.after(async () => {
    await remove(`${ns}/${NAME}`, last).catch(() => undefined);
  });
  await waitForPods(ns, NAME, 2, vmReady, "both VMs booted");
  assert.deepEqual(await diff("", last, inputs), { changes: false }, "converged");

  // A member's pod gone: drift while nothing says why.
  await client.delete(paths.pod(ns, `${NAME}-1`));
  await waitForPods(ns, NAME, 1, () => true, `${NAME}-1 gone`);
  assert.deepEqual(await diff("", last, inputs), { changes: true }, "a missing pod is drift");

  // The controller's idle policy suspended the fleet: it says so in the status only.
  await client.patch(
    paths.cocoonSetStatus(ns, NAME),
    { status: { idleSuspendedSince: new Date().toISOString(), phase: "Suspended" } },
    PatchType.merge,
  );
  assert.deepEqual(
    await diff("", last, inputs),
    { changes: false },
    "suspended for being idle: nothing to repair, nothing to wake",
  );
  // The state's status is the one `up` left, not the live one: it is not compared either.
  const withStatus: SlotsOutputs = {
    ...last,
    phase: "Suspended",
    status: {
      ...(last.status ?? {
        readyAgents: 0,
        desiredAgents: 0,
        readyToolboxes: 0,
        desiredToolboxes: 0,
      }),
      idleSuspendedSince: new Date().toISOString(),
    },
  };
  assert.deepEqual(await diff("", withStatus, inputs), { changes: false });
});
