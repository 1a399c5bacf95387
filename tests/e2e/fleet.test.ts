/**
 * The Fleet and Operator components through the real pulumi CLI on the embedded cluster,
 * with no controller running: the slots resource converges the fleet itself. Every
 * assertion reads the cluster's objects (or the stack's state), not what Pulumi reports.
 */
import type { EngineEvent, Stack } from "@pulumi/pulumi/automation/index.js";
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { ensureCrd } from "../../provider/engine/index.js";
import { ANNOTATIONS, CRD_NAME, LABELS } from "../../provider/fleet/index.js";
import { paths, waitForList, waitForObject, type KubeObject } from "../../provider/kube/index.js";
import { ownerReferenceForPod } from "../../provider/release/index.js";
import { adminClient, isReady, suffix, testKubeconfig, withNamespace } from "../support/cluster.js";
import { removeCrd } from "../support/crd.js";
import { programStack, repoRoot } from "../support/pulumi.js";

const program = join(repoRoot, "tests", "e2e", "programs", "fleet");
const SLOTS_TYPE = "pulumi-nodejs:dynamic/cocoonset:Slots";
/** Pulumi's marker of a secret value in a state file. */
const SECRET_SIG = "4dabf18193072939515e22adb298388d";

/** Runs the steps; when one fails, destroys the stack before the failure is reported. */
async function destroyOnFailure(stack: Stack, steps: () => Promise<void>): Promise<void> {
  try {
    await steps();
  } catch (e) {
    await stack.destroy().catch(() => undefined);
    throw e;
  }
}

/** The Slots resource's step in a preview: its operation and detailed-diff keys. */
interface SlotsStep {
  op: string;
  keys: string[];
  kinds: Record<string, string>;
}

/** Previews with `--diff` and returns the Slots step plus the change summary. */
async function previewSlots(
  stack: Stack,
  opts: { refresh?: boolean } = {},
): Promise<{ step: SlotsStep | undefined; changes: Record<string, number> }> {
  let step: SlotsStep | undefined;
  const result = await stack.preview({
    diff: true,
    refresh: opts.refresh,
    onEvent: (e: EngineEvent) => {
      const md = e.resourcePreEvent?.metadata;
      if (md?.type !== SLOTS_TYPE) return;
      const detailed = md.detailedDiff ?? {};
      step = {
        op: md.op,
        keys: Object.keys(detailed).sort(),
        kinds: Object.fromEntries(Object.entries(detailed).map(([k, v]) => [k, v.diffKind])),
      };
    },
  });
  return { step, changes: result.changeSummary };
}

/** The slot keys (slot numbers) whose whole entry a diff adds or deletes. */
function wholeSlotKeys(step: SlotsStep, kind: "add" | "delete"): number[] {
  return step.keys
    .filter((k) => /^slots\.\d+$/.test(k) && step.kinds[k] === kind)
    .map((k) => Number(k.slice("slots.".length)))
    .sort((a, b) => a - b);
}

const range = (from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => from + i);

/** Non-terminating pods of a fleet, by name. */
async function fleetPods(ns: string, name: string): Promise<KubeObject[]> {
  const list = await adminClient().list(paths.pods(ns), {
    labelSelector: `${LABELS.name}=${name}`,
  });
  return list.items
    .filter((p) => !p.metadata.deletionTimestamp)
    .sort((a, b) => (a.metadata.name ?? "").localeCompare(b.metadata.name ?? ""));
}

/** Waits until the fleet's live pods are exactly `<name>-<slot>` for the given slots and toolboxes. */
async function expectSlots(
  ns: string,
  name: string,
  slots: number[],
  toolboxes: string[] = [],
): Promise<KubeObject[]> {
  const want = [...slots, ...toolboxes].map((s) => `${name}-${s}`).sort();
  const names = (items: KubeObject[]) =>
    items
      .filter((p) => !p.metadata.deletionTimestamp)
      .map((p) => p.metadata.name)
      .sort();
  await waitForList(
    adminClient(),
    paths.pods(ns),
    (items) => JSON.stringify(names(items)) === JSON.stringify(want),
    {
      labelSelector: `${LABELS.name}=${name}`,
      timeoutMs: 30_000,
      description: `pods of ${ns}/${name} to be slots ${slots.join(",")}`,
    },
  );
  const pods = await fleetPods(ns, name);
  assert.deepEqual(
    pods.map((p) => p.metadata.name),
    want,
  );
  return pods;
}

function noChanges(changes: Record<string, number>): string[] {
  return Object.keys(changes).filter((op) => op !== "same");
}

test("an Operator and a 10-slot fleet come up, scale 10→15→12 and change image with per-slot diffs, keep no secret in state, and destroy to nothing", async (t) => {
  const client = adminClient();
  await removeCrd(); // the Operator installs it (it adopts one only when told to)
  const ns = await withNamespace(t, "e2e-fleet");
  const opName = `op-${suffix()}`;
  const opNs = `${opName}-system`;
  const { stack, backend } = await programStack(t, program, {
    namespace: { value: ns },
    replicas: { value: "10" },
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
      range(0, 10)
        .map((s) => `fleet-${s}`)
        .sort(),
    );
    assert.ok(pods.every(isReady), "every agent pod is Ready");

    const again = await stack.preview();
    assert.deepEqual(noChanges(again.changeSummary), [], "a second preview changes nothing");

    // Scale up: exactly slots 11..15 appear in the diff, each as a whole added entry.
    await stack.setConfig("replicas", { value: "15" });
    const up15 = await previewSlots(stack);
    assert.equal(up15.step?.op, "update");
    assert.deepEqual(wholeSlotKeys(up15.step, "add"), range(11, 15));
    assert.deepEqual(wholeSlotKeys(up15.step, "delete"), []);
    await stack.up();
    await expectSlots(ns, "fleet", range(0, 15));

    // Scale down: exactly slots 13..15 leave.
    await stack.setConfig("replicas", { value: "12" });
    const down12 = await previewSlots(stack);
    assert.equal(down12.step?.op, "update");
    assert.deepEqual(wholeSlotKeys(down12.step, "delete"), range(13, 15));
    assert.deepEqual(wholeSlotKeys(down12.step, "add"), []);
    await stack.up();
    await expectSlots(ns, "fleet", range(0, 12));

    // An image change touches every slot, and up rebuilds every pod with the new image.
    await stack.setConfig("image", { value: "agents/coder:2" });
    const image = await previewSlots(stack);
    assert.equal(image.step?.op, "update");
    const changed = image.step.keys
      .filter((k) => /^slots\.\d+\.image$/.test(k))
      .map((k) => Number(k.split(".")[1]))
      .sort((a, b) => a - b);
    assert.deepEqual(changed, range(0, 12));
    await stack.up();
    const rebuilt = await expectSlots(ns, "fleet", range(0, 12));
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

/** A Job and a ConfigMap owned by an agent pod, as a worker in it would create them. */
async function workerObjects(ns: string, pod: { name: string; uid: string }): Promise<void> {
  const client = adminClient();
  const owner = ownerReferenceForPod(pod);
  const labels = { "e2e.cocoonset.cocoonstack.io/worker": pod.name };
  await client.create(paths.jobs(ns), {
    apiVersion: "batch/v1",
    kind: "Job",
    metadata: { name: `${pod.name}-step`, labels, ownerReferences: [owner] },
    spec: {
      backoffLimit: 0,
      template: {
        metadata: { labels },
        spec: {
          restartPolicy: "Never",
          containers: [{ name: "step", image: "registry.invalid/never-pulled:1" }],
        },
      },
    },
  });
  await client.create(paths.configMaps(ns), {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: `${pod.name}-prompt`, labels, ownerReferences: [owner] },
    data: { prompt: "refactor the parser" },
  });
}

test("a slot pod deleted outside Pulumi shows in a refreshing preview and comes back on up; destroy releases the pods' Jobs and ConfigMaps before it returns", async (t) => {
  const client = adminClient();
  await ensureCrd(client);
  const ns = await withNamespace(t, "e2e-drift");
  const { stack } = await programStack(t, program, {
    namespace: { value: ns },
    replicas: { value: "3" },
    toolboxes: { value: JSON.stringify([{ name: "browser", image: "tools/browser:1" }]) },
  });

  await destroyOnFailure(stack, async () => {
    await stack.up();
    await expectSlots(ns, "fleet", range(0, 3), ["browser"]);
    const before = await client.get<KubeObject>(paths.pod(ns, "fleet-2"));

    await client.delete(paths.pod(ns, "fleet-2"));
    await waitForObject(client, paths.pods(ns), "fleet-2", (p) => p === undefined, {
      timeoutMs: 30_000,
      description: "pod fleet-2 to be gone",
    });
    const refreshed = await previewSlots(stack, { refresh: true });
    assert.equal(refreshed.step?.op, "update", "the missing slot makes the Slots resource change");
    assert.deepEqual(wholeSlotKeys(refreshed.step, "add"), [2]);

    await stack.up();
    const restored = await client.get<KubeObject>(paths.pod(ns, "fleet-2"));
    assert.notEqual(restored.metadata.uid, before.metadata.uid, "slot 2 is a new pod");

    for (const name of ["fleet-1", "fleet-2"]) {
      const pod = await client.get<KubeObject>(paths.pod(ns, name));
      await workerObjects(ns, { name, uid: pod.metadata.uid ?? "" });
    }
    // The Job controller has started each Job's pod: the tree is three levels deep.
    await waitForList(client, paths.pods(ns), (items) => items.length === 2, {
      labelSelector: "e2e.cocoonset.cocoonstack.io/worker",
      timeoutMs: 30_000,
      description: "the worker Jobs' pods",
    });
  });

  const destroyed = await stack.destroy();
  assert.equal(destroyed.summary.result, "succeeded");
  // No wait: destroy returns only once the whole tree is gone.
  const pods = await client.list(paths.pods(ns));
  assert.deepEqual(
    pods.items.map((p) => p.metadata.name),
    [],
    "no agent, toolbox or Job pod is left",
  );
  assert.deepEqual((await client.list(paths.jobs(ns))).items, [], "no Job is left");
  const configMaps = await client.list(paths.configMaps(ns));
  assert.deepEqual(
    configMaps.items.map((c) => c.metadata.name).filter((n) => n !== "kube-root-ca.crt"),
    [],
    "no ConfigMap is left",
  );
  assert.deepEqual((await client.list(paths.cocoonSets(ns))).items, [], "no CocoonSet is left");
});

test("bad input fails preview naming the field, and nothing is created", async (t) => {
  const client = adminClient();
  await ensureCrd(client);
  const ns = await withNamespace(t, "e2e-bad");
  const { stack } = await programStack(t, program, { namespace: { value: ns } });

  const cases: [string, Record<string, string>, RegExp][] = [
    ["negative replicas", { replicas: "-1" }, /spec\.agent\.replicas/],
    ["empty image", { image: "" }, /spec\.agent\.image/],
    [
      "numeric toolbox name",
      { toolboxes: JSON.stringify([{ name: "42", image: "tools/x:1" }]) },
      /spec\.toolboxes\[0\]\.name/,
    ],
  ];
  for (const [what, config, message] of cases) {
    await stack.setAllConfig({
      namespace: { value: ns },
      replicas: { value: config.replicas ?? "2" },
      image: { value: config.image ?? "agents/coder:1" },
      toolboxes: { value: config.toolboxes ?? "[]" },
    });
    await assert.rejects(stack.preview(), message, what);
  }

  // up with a negative count also stops before anything exists.
  await stack.setConfig("replicas", { value: "-1" });
  await stack.setConfig("image", { value: "agents/coder:1" });
  await stack.setConfig("toolboxes", { value: "[]" });
  await assert.rejects(stack.up(), /spec\.agent\.replicas/);
  assert.deepEqual((await client.list(paths.cocoonSets(ns))).items, [], "no CocoonSet");
  assert.deepEqual((await client.list(paths.pods(ns))).items, [], "no pod");
});
