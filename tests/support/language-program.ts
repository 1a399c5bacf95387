/**
 * Test support for the `cocoonset` package from other languages than TypeScript: a program
 * made by `pulumi new` from one of `templates/`, its SDK added by `pulumi package add` from
 * this checkout's `pulumi-resource-cocoonset`, and the lifecycle every language goes through
 * against the embedded cluster (preview, up, a scale-up preview, destroy).
 *
 * The program's Operator adopts the tier's CRD (`adoptCrd`) and watches only the test's
 * namespace, so these files run beside the tier's others: an adopted CRD is kept when the
 * Operator is destroyed, and namespaced Roles leave no cluster-wide object to share. The
 * Operator installing and deleting the CRD is shown by the serial group's files.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { delimiter, join } from "node:path";
import type { TestContext } from "node:test";
import { CRD_NAME } from "../../engine/spec/index.js";
import { paths, type KubeObject } from "../../engine/kube/index.js";
import { ownerReferenceForPod } from "../../engine/release/index.js";
import { adminClient, withNamespace } from "./cluster.js";
import { expectSlots, range } from "./fleet-program.js";
import { registryAddress } from "./lifecycle.js";
import { pulumiCli, repoRoot, scratchBackend, scratchProject, type CliResult } from "./pulumi.js";

/**
 * The slot keys a `pulumi preview --diff` text shows as added (`+ 3: {`) or removed and
 * changed (`- 3:`, `~ 3:`), one per line, in the Slots resource's block.
 */
export function slotLines(text: string): { added: string[]; other: string[] } {
  const added: string[] = [];
  const other: string[] = [];
  for (const line of text.split("\n")) {
    const m = /^\s*([+\-~])\s+"?(\d+)"?\s*:/.exec(line);
    if (!m) continue;
    (m[1] === "+" ? added : other).push(m[2]);
  }
  return { added: added.sort(), other };
}

/**
 * The slot keys (`0`, `1`, ..., toolboxes by name) of the Slots resource a `pulumi preview
 * --diff` text shows being created: its `slots` property, one key per line.
 */
export function createdSlotKeys(text: string): string[] {
  const lines = text.split("\n");
  const start = lines.findIndex((l) => /cocoonset:index:Slots: \(create\)/.test(l));
  if (start < 0) return [];
  const at = lines.findIndex((l, i) => i > start && /^\s*slots\s*: \{$/.test(l));
  if (at < 0) return [];
  const indent = /^\s*/.exec(lines[at])![0].length;
  const keys: string[] = [];
  for (const line of lines.slice(at + 1)) {
    const depth = /^\s*/.exec(line)![0].length;
    if (depth <= indent) break;
    const m = /^\s*"?([\w-]+)"?\s*: \{$/.exec(line);
    if (m && depth === indent + 4) keys.push(m[1]);
  }
  return keys.sort();
}

/** A Job and a ConfigMap owned by an agent pod, as a worker in it would create them. */
export async function workerObjects(ns: string, pod: { name: string; uid: string }): Promise<void> {
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

/** A program folder made from `templates/<template>`, and the environment to run it in. */
export interface TemplateProgram {
  dir: string;
  /** The scratch backend's environment, with this checkout's `bin` (the plugin) first on PATH. */
  env: Record<string, string>;
  /** Runs `pulumi` in the folder; fails the test on a non-zero exit. */
  run: (...args: string[]) => Promise<CliResult>;
}

/**
 * `pulumi new <template> --generate-only` into a scratch folder (no install, no network),
 * then `prepare` (the language's environment), then `pulumi package add` of this checkout's
 * plugin, which generates the SDK into `sdks/cocoonset` and links it into the program.
 */
export async function templateProgram(
  t: TestContext,
  template: string,
  prepare: (dir: string, env: Record<string, string>) => Promise<void> | void,
): Promise<TemplateProgram> {
  const backend = scratchBackend(t);
  const bin = join(repoRoot, "bin");
  const env = { ...backend, PATH: [bin, backend.PATH].join(delimiter) };
  const dir = scratchProject(t, {}, { linkModules: false });
  const run = async (...args: string[]) => {
    const r = await pulumiCli([...args, "--non-interactive"], { cwd: dir, env });
    assert.equal(r.code, 0, `pulumi ${args.join(" ")}:\n${r.stdout}\n${r.stderr}`);
    return r;
  };
  await run("new", join(repoRoot, "templates", template), "--generate-only", "--yes");
  await prepare(dir, env);
  await run("package", "add", join(bin, "pulumi-resource-cocoonset"));
  return { dir, env, run };
}

/** The template program's file, by the Pulumi runtime that runs it. */
const SOURCES: Record<string, { file: string; operatorArgs: RegExp; add: string }> = {
  python: {
    file: "__main__.py",
    operatorArgs: /(\n {4}oci_registry=oci_registry,\n)(?=\))/,
    add: `    adopt_crd="${CRD_NAME}",\n    watch_namespaces=[namespace],\n`,
  },
  go: {
    file: "main.go",
    operatorArgs: /(\n\t\t\tCreateNamespace: pulumi\.BoolPtr\(createNamespace\),\n)/,
    add: `\t\t\tAdoptCrd: pulumi.StringPtr("${CRD_NAME}"),\n\t\t\tWatchNamespaces: pulumi.StringArray{pulumi.String(namespace)},\n`,
  },
};

/**
 * Gives the template program's Operator `adoptCrd` (the tier's CRD) and `watchNamespaces`
 * (the fleet's namespace): the one change made to the program as `pulumi new` wrote it.
 */
export function adoptTierCrd(dir: string, runtime: keyof typeof SOURCES): void {
  const { file, operatorArgs, add } = SOURCES[runtime];
  const path = join(dir, file);
  const source = readFileSync(path, "utf8");
  assert.match(source, operatorArgs, `the Operator's arguments in the template's ${file}`);
  writeFileSync(
    path,
    source.replace(operatorArgs, (_, args: string) => `${args}${add}`),
  );
}

/**
 * A virtualenv for a Python program at `<dir>/venv` (the template's `virtualenv`) that sees
 * the toolchain's virtualenv (the `pulumi` package from PyPI, pip) through a `.pth` file, so
 * nothing is downloaded and the toolchain's virtualenv is never written to.
 */
export function pythonVenv(dir: string, toolchainVenv: string): void {
  const venv = join(dir, "venv");
  const r = spawnSync("python3", ["-m", "venv", "--without-pip", venv], { encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  const lib = (root: string) => {
    const py = readdirSync(join(root, "lib")).find((d) => d.startsWith("python3"));
    assert.ok(py, `a python3.x folder in ${root}/lib`);
    return join(root, "lib", py, "site-packages");
  };
  writeFileSync(join(lib(venv), "cocoonset-toolchain.pth"), `${lib(toolchainVenv)}\n`);
}

/**
 * The lifecycle of the template's program (an Operator and a Fleet with a browser toolbox)
 * against the embedded cluster: `preview --diff` lists the added slots one per line, `up`
 * converges, a scale-up's preview lists exactly its slots, and `destroy` releases
 * everything (the pods' own Job and ConfigMap too) and leaves a bystander ConfigMap and the
 * adopted CRD (see {@link adoptTierCrd}). The Fleet takes the snapshot registry from its
 * Operator.
 */
export async function templateLifecycle(
  t: TestContext,
  program: TemplateProgram,
  prefix: string,
): Promise<void> {
  const client = adminClient();
  const { run } = program;
  // The tier's CRD, which the Operator adopts: the same object (uid) after the destroy.
  const crd = await client.get<KubeObject>(paths.crd(CRD_NAME));
  const ns = await withNamespace(t, prefix);
  await client.create(paths.configMaps(ns), {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: "bystander" },
    data: { note: "not the stack's" },
  });
  const registry = registryAddress();
  await run("stack", "init", "dev");
  await run("config", "set", "namespace", ns);
  await run("config", "set", "createNamespace", "false");
  await run("config", "set", "ociRegistry", registry);
  // A bad input is refused per property, with no traceback of the language's host.
  // `--` so that -1 is a value, not a flag (after it every word is positional).
  const negative = await pulumiCli(["config", "set", "replicas", "--non-interactive", "--", "-1"], {
    cwd: program.dir,
    env: program.env,
  });
  assert.equal(negative.code, 0, negative.stderr);
  const refused = await pulumiCli(["preview", "--non-interactive"], {
    cwd: program.dir,
    env: program.env,
  });
  const said = `${refused.stdout}\n${refused.stderr}`;
  assert.notEqual(refused.code, 0, said);
  assert.match(said, /spec\.agent\.replicas/, said);
  assert.match(said, /must be >= 0 \(got -1\)/, said);
  assert.doesNotMatch(said, /Traceback|goroutine \d+|panic:|unhandled exception/i, said);
  await run("config", "set", "replicas", "2");
  let destroyed = false;
  t.after(async () => {
    if (!destroyed)
      await pulumiCli(["destroy", "--yes", "--skip-preview", "--non-interactive"], {
        cwd: program.dir,
        env: program.env,
      });
  });

  const first = await run("preview", "--diff");
  assert.deepEqual(createdSlotKeys(first.stdout), ["0", "1", "2", "browser"], first.stdout);

  await run("up", "--yes", "--skip-preview");
  await expectSlots(ns, "agents", range(0, 2), ["browser"]);
  const cs = await client.get<KubeObject>(paths.cocoonSet(ns, "agents"));
  assert.equal((cs.spec as { agent: { replicas: number } }).agent.replicas, 2);
  // The Fleet took the Operator's registry: its slots resource was given it.
  const state = JSON.parse((await run("stack", "export")).stdout) as {
    deployment: { resources: { type: string; inputs?: { registry?: string } }[] };
  };
  const slots = state.deployment.resources.find((r) => r.type === "cocoonset:index:Slots");
  assert.equal(slots?.inputs?.registry, registry, "the Fleet's registry is its Operator's");

  // The controller watches the fleet's namespace only: a Role there, no ClusterRole.
  const roles = await client.list(paths.roles(ns));
  assert.deepEqual(
    roles.items.map((r) => r.metadata.name),
    ["cocoonset-cocoonset-controller"],
    "the controller's Role in the watched namespace",
  );
  const pod = await client.get<KubeObject>(paths.pod(ns, "agents-1"));
  await workerObjects(ns, { name: "agents-1", uid: pod.metadata.uid ?? "" });

  await run("config", "set", "replicas", "4");
  const scale = await run("preview", "--diff");
  assert.deepEqual(slotLines(scale.stdout), { added: ["3", "4"], other: [] }, scale.stdout);

  await run("destroy", "--yes", "--skip-preview");
  destroyed = true;
  const pods = await client.list(paths.pods(ns));
  assert.deepEqual(
    pods.items.map((p) => p.metadata.name),
    [],
    "no agent, toolbox, Job or controller pod is left",
  );
  assert.deepEqual((await client.list(paths.jobs(ns))).items, [], "no Job is left");
  const configMaps = await client.list(paths.configMaps(ns));
  assert.deepEqual(
    configMaps.items.map((c) => c.metadata.name).filter((n) => n !== "kube-root-ca.crt"),
    ["bystander"],
    "the pod's ConfigMap is gone, the bystander is left",
  );
  assert.equal(await client.getOrUndefined(paths.cocoonSet(ns, "agents")), undefined);
  const kept = await client.getOrUndefined<KubeObject>(paths.crd(CRD_NAME));
  assert.equal(kept?.metadata.uid, crd.metadata.uid, "the adopted CRD is kept, not replaced");
  assert.equal(kept?.metadata.deletionTimestamp, undefined, "the adopted CRD is not deleted");
  assert.deepEqual(
    (await client.list(paths.roles(ns))).items.map((r) => r.metadata.name),
    [],
    "the controller's Roles in the watched namespace are gone",
  );
}
