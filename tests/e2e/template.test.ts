/**
 * The `cocoonset-typescript` template as a user meets it: `pulumi new <template> --yes` into
 * an empty folder (the language host installs the dependencies with npm), then `pulumi up`
 * and `pulumi destroy` on the embedded cluster, nothing done by hand in between. The
 * template depends on `pulumi-cocoonset` by version, as on the published package; a local
 * registry serves this repository packed under that name (see tests/support/npm-registry.ts).
 * The one change to the program as `pulumi new` wrote it: its Operator adopts the tier's CRD
 * (`adoptCrd`), which its destroy keeps, so this file runs beside the tier's others.
 */
import assert from "node:assert/strict";
import { lstatSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { CRD_NAME, LABELS } from "../../engine/spec/index.js";
import { paths, type KubeObject } from "../../engine/kube/index.js";
import { adminClient, isReady, suffix } from "../support/cluster.js";
import { localRegistry } from "../support/npm-registry.js";
import {
  pulumiCli,
  repoRoot,
  scratchBackend,
  scratchProject,
  type CliResult,
} from "../support/pulumi.js";

const template = join(repoRoot, "templates", "cocoonset-typescript");

function ok(r: CliResult, what: string): void {
  assert.equal(r.code, 0, `${what} failed:\n${r.stdout}\n${r.stderr}`);
}

test("`pulumi new` from the template, then `pulumi up` and `pulumi destroy` on the embedded cluster", async (t) => {
  const client = adminClient();
  const ns = `tmpl-${suffix()}`;
  const env = { ...scratchBackend(t), npm_config_registry: await localRegistry(t) };
  const dir = scratchProject(t, {}, { linkModules: false });
  const cli = (args: string[]) => pulumiCli([...args, "--non-interactive"], { cwd: dir, env });

  const created = await cli([
    "new",
    template,
    "--yes",
    "--name",
    "fleet-from-template",
    "--stack",
    "dev",
    "--config",
    `namespace=${ns}`,
    "--config",
    "replicas=2",
  ]);
  ok(created, "pulumi new");
  // npm installed the packed package from the registry, not a link to this checkout.
  const installed = join(dir, "node_modules", "pulumi-cocoonset");
  assert.equal(lstatSync(installed).isSymbolicLink(), false);
  const pkg = JSON.parse(readFileSync(join(installed, "package.json"), "utf8")) as {
    version: string;
  };
  assert.equal(pkg.version, "0.1.0");
  const project = readFileSync(join(dir, "Pulumi.yaml"), "utf8");
  assert.match(project, /^name: fleet-from-template$/m);
  const stackConfig = readFileSync(join(dir, "Pulumi.dev.yaml"), "utf8");
  assert.match(stackConfig, /fleet-from-template:image: agents\/coder:1/, "the prompt's default");

  const program = join(dir, "index.ts");
  const source = readFileSync(program, "utf8");
  assert.match(source, /new Operator\("cocoonset"\)/);
  writeFileSync(
    program,
    source.replace(
      'new Operator("cocoonset")',
      `new Operator("cocoonset", { adoptCrd: "${CRD_NAME}" })`,
    ),
  );
  const crd = await client.get<KubeObject>(paths.crd(CRD_NAME));
  try {
    ok(await cli(["up", "--yes", "--skip-preview", "--stack", "dev"]), "pulumi up");
    // No wait: `up` returns once every member is Ready.
    const pods = (await client.list(paths.pods(ns), { labelSelector: `${LABELS.name}=agents` }))
      .items;
    assert.deepEqual(
      pods.filter((p) => !isReady(p)).map((p) => p.metadata.name),
      [],
      "every pod is Ready",
    );
    assert.deepEqual(pods.map((p: KubeObject) => p.metadata.name).sort(), [
      "agents-0",
      "agents-1",
      "agents-2",
    ]);
    const outputs = await cli(["stack", "output", "--json", "--stack", "dev"]);
    ok(outputs, "pulumi stack output");
    // `pods` is the fleet's podNames: the pod name of each slot, by slot.
    const out = JSON.parse(outputs.stdout) as { pods: Record<string, string>; readyAgents: number };
    assert.deepEqual(Object.values(out.pods).sort(), ["agents-0", "agents-1", "agents-2"]);
    // `readyAgents` is the Fleet's typed status (the CocoonSet's, as the up left it: Ready).
    assert.equal(out.readyAgents, 3);
  } finally {
    ok(await cli(["destroy", "--yes", "--skip-preview", "--stack", "dev"]), "pulumi destroy");
  }
  const left = await client.list(paths.pods(ns), { labelSelector: `${LABELS.name}=agents` });
  assert.deepEqual(
    left.items.filter((p) => !p.metadata.deletionTimestamp),
    [],
  );
  const namespace = await client.getOrUndefined<KubeObject>(paths.namespace(ns));
  assert.ok(
    namespace === undefined || namespace.metadata.deletionTimestamp,
    "the stack's namespace is deleted",
  );
  const kept = await client.getOrUndefined<KubeObject>(paths.crd(CRD_NAME));
  assert.equal(kept?.metadata.uid, crd.metadata.uid, "the adopted CRD is kept, not replaced");
  assert.equal(kept?.metadata.deletionTimestamp, undefined, "the adopted CRD is not deleted");
  ok(await cli(["stack", "rm", "dev", "--yes", "--force"]), "pulumi stack rm");
});
