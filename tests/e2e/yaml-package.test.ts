/**
 * The `cocoonset` component package from Pulumi YAML: a YAML program (`runtime: yaml`, the
 * toolchain's `pulumi-language-yaml`) declares `cocoonset:index:Operator` and
 * `cocoonset:index:Fleet`, served by this checkout's `pulumi-resource-cocoonset` through the
 * real pulumi CLI, against the embedded cluster: `up` brings the fleet up, a scale-up's
 * `pulumi preview --diff` lists exactly the added slots, a change of the typed `idle`
 * argument alone lists no slot and replaces no pod, `destroy` leaves nothing.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { CRD_NAME, LABELS } from "../../engine/spec/index.js";
import { paths, waitForList, type KubeObject } from "../../engine/kube/index.js";
import { adminClient, isReady, suffix, testKubeconfig, withNamespace } from "../support/cluster.js";
import { removeCrd } from "../support/crd.js";
import { slotLines } from "../support/language-program.js";
import { pulumiCli, repoRoot, scratchBackend, scratchProject } from "../support/pulumi.js";

/** The program: one Operator, one Fleet whose size is stack config. */
const program = (pluginDir: string) => `name: yaml-package
runtime: yaml
description: the cocoonset component package from Pulumi YAML
plugins:
  providers:
    - name: cocoonset
      path: ${pluginDir}
config:
  namespace:
    type: string
  operatorNamespace:
    type: string
  replicas:
    type: integer
  idleAfter:
    type: string
  kubeconfig:
    type: string
    secret: true
resources:
  operator:
    type: cocoonset:index:Operator
    properties:
      namespace: \${operatorNamespace}
      kubeconfig: \${kubeconfig}
  fleet:
    type: cocoonset:index:Fleet
    properties:
      namespace: \${namespace}
      operator: \${operator}
      kubeconfig: \${kubeconfig}
      spec:
        agent:
          replicas: \${replicas}
          image: agents/coder:1
      idle:
        after: \${idleAfter}
outputs:
  podNames: \${fleet.podNames}
  crdName: \${operator.crdName}
`;

/** Every file under a folder. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? filesUnder(p) : [p];
  });
}

/** Waits until the fleet's live pods are exactly slots 0..last, all Ready. */
async function expectSlots(ns: string, name: string, last: number): Promise<void> {
  const want = Array.from({ length: last + 1 }, (_, s) => `${name}-${s}`).sort();
  const live = (items: KubeObject[]) =>
    items.filter((p) => !p.metadata.deletionTimestamp && isReady(p));
  await waitForList(
    adminClient(),
    paths.pods(ns),
    (items) =>
      JSON.stringify(
        live(items)
          .map((p) => p.metadata.name)
          .sort(),
      ) === JSON.stringify(want),
    {
      labelSelector: `${LABELS.name}=${name}`,
      timeoutMs: 60_000,
      description: `Ready pods of ${ns}/${name} to be slots 0..${last}`,
    },
  );
}

test("a Pulumi YAML program declares the Operator and a Fleet: up, a scale-up preview listing the added slots, destroy", async (t) => {
  const client = adminClient();
  await removeCrd(); // the Operator installs it
  const ns = await withNamespace(t, "yaml-pkg");
  const opNs = `yaml-pkg-${suffix()}-system`;
  const dir = scratchProject(
    t,
    { "Pulumi.yaml": program(join(repoRoot, "bin")) },
    {
      linkModules: false,
    },
  );
  const env = scratchBackend(t);
  const run = async (...args: string[]) => {
    const started = Date.now();
    const r = await pulumiCli(args, { cwd: dir, env });
    // Each step's time in the report: one run of this test once took ten times its usual.
    t.diagnostic(`pulumi ${args.slice(0, 2).join(" ")}: ${Date.now() - started} ms`);
    assert.equal(r.code, 0, `pulumi ${args.join(" ")}:\n${r.stdout}\n${r.stderr}`);
    return r;
  };
  const kubeconfig = readFileSync(testKubeconfig(), "utf8");

  await run("stack", "init", "dev");
  await run("config", "set", "namespace", ns);
  await run("config", "set", "operatorNamespace", opNs);
  await run("config", "set", "replicas", "2");
  await run("config", "set", "idleAfter", "30m");
  await run("config", "set", "--secret", "kubeconfig", "--", kubeconfig);
  let destroyed = false;
  t.after(async () => {
    if (!destroyed) await pulumiCli(["destroy", "--yes", "--skip-preview"], { cwd: dir, env });
  });

  await run("up", "--yes", "--skip-preview");
  await expectSlots(ns, "fleet", 2);
  const cs = await client.get<KubeObject>(paths.cocoonSet(ns, "fleet"));
  assert.equal(
    (cs.spec as { agent: { replicas: number } }).agent.replicas,
    2,
    "the CocoonSet has the program's spec",
  );
  const crd = await client.get<KubeObject>(paths.crd(CRD_NAME));
  assert.equal(
    crd.metadata.annotations?.["cocoonset.cocoonstack.io/installed-by"],
    "yaml-package/dev/operator",
    "the Operator installed the CRD",
  );
  const outputs = JSON.parse((await run("stack", "output", "--json")).stdout) as {
    podNames: Record<string, string>;
    crdName: string;
  };
  assert.deepEqual(outputs.podNames, { "0": "fleet-0", "1": "fleet-1", "2": "fleet-2" });
  assert.equal(outputs.crdName, CRD_NAME);

  // The package's custom resources, not dynamic ones, and the kubeconfig stays a secret.
  const state = (await run("stack", "export")).stdout;
  const types = (
    JSON.parse(state) as { deployment: { resources: { type: string }[] } }
  ).deployment.resources.map((r) => r.type);
  for (const type of ["Slots", "OperatorGuard", "ControllerRollout", "CrdGuard"]) {
    assert.ok(
      types.includes(`cocoonset:index:${type}`),
      `a cocoonset:index:${type} in ${types.join(", ")}`,
    );
  }
  assert.ok(!types.some((x) => x.startsWith("pulumi-nodejs:dynamic")), "no dynamic resource");
  const token = /token:\s*(\S+)/.exec(kubeconfig)?.[1];
  assert.ok(token && token.length > 8, "the test kubeconfig carries a token");
  for (const file of filesUnder(env.PULUMI_BACKEND_URL.slice("file://".length))) {
    assert.ok(!readFileSync(file, "utf8").includes(token), `no kubeconfig token in ${file}`);
  }

  // Scale up: the preview names slots 3 and 4 as added, and no other slot.
  await run("config", "set", "replicas", "4");
  const preview = await run("preview", "--diff");
  const slots = slotLines(preview.stdout);
  assert.deepEqual(slots, { added: ["3", "4"], other: [] }, preview.stdout);
  await run("up", "--yes", "--skip-preview");
  await expectSlots(ns, "fleet", 4);

  // The idle policy alone: an update of the spec, no slot listed, no pod replaced.
  const podUids = async () =>
    (await client.list(paths.pods(ns), { labelSelector: `${LABELS.name}=fleet` })).items
      .map((p) => `${p.metadata.name}=${p.metadata.uid}`)
      .sort();
  const before = await podUids();
  await run("config", "set", "idleAfter", "45m");
  const idlePreview = await run("preview", "--diff");
  assert.deepEqual(slotLines(idlePreview.stdout), { added: [], other: [] }, idlePreview.stdout);
  assert.match(idlePreview.stdout, /after\s*:\s*"30m"\s*=>\s*"45m"/, idlePreview.stdout);
  assert.doesNotMatch(idlePreview.stdout, /replace/, idlePreview.stdout);
  await run("up", "--yes", "--skip-preview");
  const idled = await client.get<KubeObject>(paths.cocoonSet(ns, "fleet"));
  assert.deepEqual((idled.spec as { idle?: unknown }).idle, { after: "45m" });
  assert.deepEqual(await podUids(), before, "the same pods");

  await run("destroy", "--yes", "--skip-preview");
  destroyed = true;
  assert.equal(await client.getOrUndefined(paths.cocoonSet(ns, "fleet")), undefined);
  const left = await client.list(paths.pods(ns), { labelSelector: `${LABELS.name}=fleet` });
  assert.deepEqual(
    left.items.map((p) => p.metadata.name),
    [],
    "no pod of the fleet is left",
  );
  assert.equal(await client.getOrUndefined(paths.crd(CRD_NAME)), undefined, "the CRD is gone");
  assert.equal(
    await client.getOrUndefined(paths.deployment(opNs, "operator-controller")),
    undefined,
    "the controller is gone",
  );
});
