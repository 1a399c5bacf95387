/**
 * The packed package installed as a Pulumi user installs it: a TypeScript program with its
 * own `@pulumi/pulumi` and `@pulumi/kubernetes` (a newer Kubernetes SDK than the one this
 * repository builds with) adds `pulumi-cocoonset` from a registry, with npm. The package takes
 * both SDKs as peer dependencies, so the program has one copy of each (`npm ls`), and its
 * objects are the program's own: a Kubernetes provider of the program's SDK goes into a
 * Fleet's options and the Fleet's CocoonSet is a CustomResource of that SDK. The program's
 * tsconfig is the one `pulumi new typescript` writes (CommonJS, `moduleResolution: node`,
 * declaration files checked), and it type-checks against the packed declarations, the typed
 * `status` of the Fleet included.
 *
 * The registry is tests/support/npm-registry.ts: this repository packed, the lock file's
 * versions, and the public registry for the newer SDK and what it needs.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { localRegistry } from "../../support/npm-registry.js";
import { repoRoot } from "../../support/pulumi.js";

/** The program's Kubernetes SDK: the newest the registry serves, not the repository's 4.25.0. */
const USER_KUBERNETES = "4.34.2";
const USER_PULUMI = "3.276.0";
/** Taken from the public registry: the newer SDK and the dependencies it needs beyond the lock. */
const UPSTREAM = [
  "@pulumi/kubernetes",
  "glob",
  "jackspeak",
  "minimatch",
  "path-scurry",
  "lru-cache",
  "@isaacs/cliui",
  "brace-expansion",
  "balanced-match",
];

/** The tsconfig.json `pulumi new typescript` writes. */
const PULUMI_NEW_TSCONFIG = {
  compilerOptions: {
    strict: true,
    outDir: "bin",
    target: "es2020",
    module: "commonjs",
    moduleResolution: "node",
    sourceMap: true,
    experimentalDecorators: true,
    pretty: true,
    noFallthroughCasesInSwitch: true,
    noImplicitReturns: true,
    forceConsistentCasingInFileNames: true,
  },
  files: ["index.ts"],
};

/** A program that hands the package objects of its own SDKs and reads the typed outputs. */
const PROGRAM = `import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { Fleet, Operator, type CocoonSetStatus } from "pulumi-cocoonset";

const provider = new k8s.Provider("cluster", {});
const ns = new k8s.core.v1.Namespace("agents", {}, { provider });
const operator = new Operator("cocoonset", {}, { provider });
const fleet = new Fleet(
  "agents",
  {
    namespace: ns.metadata.name,
    operator,
    spec: { agent: { image: "agents/coder:1", replicas: 2 } },
  },
  { provider },
);

// The Fleet's CocoonSet is a resource of this program's Kubernetes SDK.
const cocoonSet: k8s.apiextensions.CustomResource = fleet.cocoonSet;
const status: pulumi.Output<CocoonSetStatus> = fleet.status;

export const ready = status.apply((s) => \`\${s.readyAgents}/\${s.desiredAgents}\`);
export const vms = fleet.status.apply((s) => (s.agents ?? []).map((a) => a.vmName ?? ""));
export const namespace: pulumi.Output<string> = fleet.namespace;
export const replicas = fleet.spec.apply((s) => s.agent.replicas ?? 0);
export const cocoonSetKind = cocoonSet.kind;
`;

/**
 * Runs a command to its end without blocking this process (whose event loop serves the
 * registry npm talks to).
 */
function run(
  cmd: string,
  args: string[],
  cwd: string,
  env: Record<string, string> = {},
): Promise<{ code: number | null; out: string; stdout: string }> {
  const child = spawn(cmd, args, { cwd, env: { ...process.env, ...env } });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (b: Buffer) => (stdout += b.toString()));
  child.stderr.on("data", (b: Buffer) => (stderr += b.toString()));
  return new Promise((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, out: `${stdout}${stderr}`, stdout }));
  });
}

test("a TypeScript program with its own Pulumi SDKs installs the packed package", async (t) => {
  const registry = await localRegistry(t, { upstream: UPSTREAM });
  const dir = mkdtempSync(join(tmpdir(), "cocoonset-install-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const lock = JSON.parse(readFileSync(join(repoRoot, "package-lock.json"), "utf8")) as {
    packages: Record<string, { version: string }>;
  };
  writeFileSync(
    join(dir, "package.json"),
    JSON.stringify({
      name: "fleet-program",
      private: true,
      main: "index.ts",
      dependencies: {
        "@pulumi/kubernetes": USER_KUBERNETES,
        "@pulumi/pulumi": USER_PULUMI,
        "pulumi-cocoonset": "^0.1.0",
      },
      devDependencies: {
        "@types/node": lock.packages["node_modules/@types/node"].version,
        typescript: lock.packages["node_modules/typescript"].version,
      },
    }),
  );
  writeFileSync(join(dir, "tsconfig.json"), JSON.stringify(PULUMI_NEW_TSCONFIG));
  writeFileSync(join(dir, "index.ts"), PROGRAM);

  const installed = await run("npm", ["install", "--no-audit", "--no-fund"], dir, {
    npm_config_registry: registry,
  });
  assert.equal(installed.code, 0, `npm install failed:\n${installed.out}`);

  await t.test("one copy of each Pulumi SDK, the program's (`npm ls`)", async () => {
    for (const [name, version] of [
      ["@pulumi/kubernetes", USER_KUBERNETES],
      ["@pulumi/pulumi", USER_PULUMI],
    ]) {
      const ls = await run("npm", ["ls", name, "--all", "--parseable", "--long"], dir);
      assert.equal(ls.code, 0, `npm ls ${name} reports a problem:\n${ls.out}`);
      const copies = [...new Set(ls.stdout.split("\n").filter((l) => l.includes(`:${name}@`)))];
      assert.deepEqual(copies, [`${join(dir, "node_modules", name)}:${name}@${version}`]);
    }
    // The tree as npm shows it: pulumi-cocoonset's SDK is the program's, deduplicated.
    const tree = JSON.parse(
      (await run("npm", ["ls", "@pulumi/kubernetes", "--json"], dir)).stdout,
    ) as {
      dependencies: Record<string, { version: string; dependencies?: Record<string, unknown> }>;
    };
    assert.equal(tree.dependencies["@pulumi/kubernetes"].version, USER_KUBERNETES);
    assert.ok(tree.dependencies["pulumi-cocoonset"].dependencies?.["@pulumi/kubernetes"]);
    assert.equal(
      existsSync(join(dir, "node_modules", "pulumi-cocoonset", "node_modules", "@pulumi")),
      false,
      "pulumi-cocoonset has a nested copy of a Pulumi SDK",
    );
  });

  await t.test(
    "the program type-checks with the tsconfig `pulumi new typescript` writes",
    async () => {
      const tsc = join(dir, "node_modules", "typescript", "bin", "tsc");
      const checked = await run(process.execPath, [tsc, "-p", "tsconfig.json", "--noEmit"], dir);
      assert.equal(checked.code, 0, `tsc failed:\n${checked.out}`);
    },
  );
});
