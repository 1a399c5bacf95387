/**
 * The Operator and a Fleet through the real pulumi CLI on the embedded cluster, with no
 * controller running: the slots resource converges the fleet itself. Every assertion reads
 * the cluster's objects (or the stack's state), not what Pulumi reports. The Operator
 * installs the CRD and its destroy removes it, so `scripts/test.mjs` runs this file alone.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { ANNOTATIONS, CRD_NAME } from "../../engine/spec/index.js";
import { paths, type KubeObject } from "../../engine/kube/index.js";
import { adminClient, isReady, suffix, testKubeconfig, withNamespace } from "../support/cluster.js";
import { removeCrd } from "../support/crd.js";
import {
  destroyOnFailure,
  expectSlots,
  fleetPods,
  fleetProgram as program,
  previewSlots,
  SLOTS_TYPE,
  range,
  wholeSlotKeys,
} from "../support/fleet-program.js";
import { programStack } from "../support/pulumi.js";

/** Pulumi's marker of a secret value in a state file. */
const SECRET_SIG = "4dabf18193072939515e22adb298388d";

function noChanges(changes: Record<string, number>): string[] {
  return Object.keys(changes).filter((op) => op !== "same");
}

test("an Operator and a 4-slot fleet come up, scale 4→7→5 and change image with per-slot diffs, keep no secret in state, and destroy to nothing", async (t) => {
  const client = adminClient();
  await removeCrd(); // the Operator installs it (it adopts one only when told to)
  const ns = await withNamespace(t, "e2e-fleet");
  const opName = `op-${suffix()}`;
  const opNs = `${opName}-system`;
  const { stack, backend } = await programStack(t, program, {
    namespace: { value: ns },
    replicas: { value: "4" },
    withOperator: { value: "true" },
    operatorName: { value: opName },
    operatorNamespace: { value: opNs },
  });

  const kubeconfig = readFileSync(testKubeconfig(), "utf8");
  const token = /token:\s*(\S+)/.exec(kubeconfig)?.[1];
  assert.ok(token && token.length > 8, "the test kubeconfig carries a token");

  await destroyOnFailure(stack, async () => {
    // With --debug, Pulumi prints every resource's outputs as the engine hands them back to
    // the program: the kubeconfig read from $KUBECONFIG must be among none of them.
    const up = await stack.up({ debug: true });
    assert.equal(up.summary.result, "succeeded");
    assert.match(up.stdout, /RegisterResource RPC finished: resource:fleet-slots/);
    assert.ok(!up.stdout.includes(token), "no resource's outputs print the kubeconfig's token");

    const crd = await client.get<KubeObject>(paths.crd(CRD_NAME));
    assert.equal(crd.metadata.name, "cocoonsets.cocoonset.cocoonstack.io");
    const role = await client.get<KubeObject>(paths.clusterRole(`${opName}-cocoonset-controller`));
    assert.ok(role, "the controller's ClusterRole exists");
    const binding = await client.get<{ subjects: { name: string; namespace: string }[] }>(
      paths.clusterRoleBinding(`${opName}-cocoonset-controller`),
    );
    assert.deepEqual(
      binding.subjects.map((s) => [s.namespace, s.name]),
      [[opNs, `${opName}-controller`]],
    );
    await client.get(`${paths.serviceAccounts(opNs)}/${opName}-controller`);
    const deployment = await client.get<{ status?: { readyReplicas?: number } }>(
      paths.deployment(opNs, `${opName}-controller`),
    );
    assert.equal(deployment.status?.readyReplicas, 1, "the controller Deployment is Ready");

    const pods = await fleetPods(ns, "fleet");
    assert.deepEqual(
      pods.map((p) => p.metadata.name),
      range(0, 4)
        .map((s) => `fleet-${s}`)
        .sort(),
    );
    assert.ok(pods.every(isReady), "every agent pod is Ready");

    const again = await stack.preview();
    assert.deepEqual(noChanges(again.changeSummary), [], "a second preview changes nothing");

    // Scale up: exactly slots 5..7 appear in the diff, each as a whole added entry.
    await stack.setConfig("replicas", { value: "7" });
    const up7 = await previewSlots(stack);
    assert.equal(up7.step?.op, "update");
    assert.deepEqual(wholeSlotKeys(up7.step, "add"), range(5, 7));
    assert.deepEqual(wholeSlotKeys(up7.step, "delete"), []);
    await stack.up();
    await expectSlots(ns, "fleet", range(0, 7));

    // Scale down: exactly slots 6..7 leave.
    await stack.setConfig("replicas", { value: "5" });
    const down5 = await previewSlots(stack);
    assert.equal(down5.step?.op, "update");
    assert.deepEqual(wholeSlotKeys(down5.step, "delete"), range(6, 7));
    assert.deepEqual(wholeSlotKeys(down5.step, "add"), []);
    await stack.up();
    await expectSlots(ns, "fleet", range(0, 5));

    // An image change touches every slot, and up rebuilds every pod with the new image.
    await stack.setConfig("image", { value: "agents/coder:2" });
    const image = await previewSlots(stack);
    assert.equal(image.step?.op, "update");
    const changed = image.step.keys
      .filter((k) => /^slots\.\d+\.image$/.test(k))
      .map((k) => Number(k.split(".")[1]))
      .sort((a, b) => a - b);
    assert.deepEqual(changed, range(0, 5));
    await stack.up();
    const rebuilt = await expectSlots(ns, "fleet", range(0, 5));
    assert.deepEqual(
      rebuilt.map((p) => p.metadata.annotations?.[ANNOTATIONS.image]),
      rebuilt.map(() => "agents/coder:2"),
    );

    // The kubeconfig input is a secret; the outputs keep only the file it was read from
    // (destroy reads it again). The Automation API exports with --show-secrets, so the
    // export only shows the marking; the files on disk must hold neither the token nor any
    // part of the kubeconfig.
    const exported = slotsResource(await stack.exportStack());
    assert.ok(SECRET_SIG in (exported.inputs.kubeconfig as object), "the export marks it secret");
    assert.equal(exported.outputs.kubeconfig, undefined, "no kubeconfig among the outputs");
    assert.equal(exported.outputs.kubeconfigFile, testKubeconfig());
    const files = backendFiles(backend).filter((f) => f.endsWith(".json"));
    const stackFile = files.find((f) => f.includes(`${join(".pulumi", "stacks")}`));
    assert.ok(stackFile, "the backend holds the stack's state file");
    const stored = slotsResource(
      (JSON.parse(readFileSync(stackFile, "utf8")) as { checkpoint: { latest: unknown } })
        .checkpoint.latest,
    );
    const kc = stored.inputs.kubeconfig as Record<string, unknown>;
    assert.ok(SECRET_SIG in kc && typeof kc.ciphertext === "string", "stored encrypted");
    for (const file of files) {
      const text = readFileSync(file, "utf8");
      assert.ok(!text.includes(token), `no token in ${file}`);
      assert.ok(!text.includes("certificate-authority-data"), `no kubeconfig text in ${file}`);
    }
  });

  const destroyed = await stack.destroy();
  assert.equal(destroyed.summary.result, "succeeded");
  assert.equal((await client.list(paths.pods(ns))).items.length, 0, "no pod is left");
  assert.equal(await client.getOrUndefined(paths.crd(CRD_NAME)), undefined, "the CRD is gone");
  assert.equal(
    await client.getOrUndefined(paths.clusterRole(`${opName}-cocoonset-controller`)),
    undefined,
  );
  assert.equal(
    await client.getOrUndefined(paths.deployment(opNs, `${opName}-controller`)),
    undefined,
  );
});

/** The Slots resource of a deployment (an export's `deployment` or a checkpoint's `latest`). */
function slotsResource(deployment: unknown): {
  inputs: Record<string, unknown>;
  outputs: Record<string, unknown>;
} {
  const d = deployment as { deployment?: unknown; resources?: unknown };
  const resources = (d.resources ?? (d.deployment as { resources?: unknown })?.resources) as {
    type: string;
    inputs: Record<string, unknown>;
    outputs: Record<string, unknown>;
  }[];
  const found = resources.find((r) => r.type === SLOTS_TYPE);
  assert.ok(found, "the state holds the Slots resource");
  return found;
}

/** Every file under a folder, recursively. */
function backendFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? backendFiles(p) : [p];
  });
}
