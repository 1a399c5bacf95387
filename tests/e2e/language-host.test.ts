/**
 * Pulumi's own Node.js language host (`pulumi-language-nodejs`, built by the toolchain)
 * under the real `pulumi` CLI, with small programs that create no cluster objects: a
 * TypeScript program with `runtime.options`, what `pulumi about` and `pulumi plugin ls`
 * say about it (the test environment links the toolchain's hosts in as installed plugins), and `pulumi install` with `runtime.options.packagemanager`.
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { requireBinary } from "../../cluster/toolchain-pins.js";
import { programStack, pulumiCli, scratchBackend, scratchProject } from "../support/pulumi.js";

const ESM = JSON.stringify({ name: "langhost-e2e", private: true, type: "module" });

/** A Pulumi.yaml with the given runtime options and `main`. */
function pulumiYaml(options: Record<string, string | boolean>, main?: string): string {
  const lines = ["name: langhost-e2e", "runtime:", "  name: nodejs"];
  if (Object.keys(options).length > 0) lines.push("  options:");
  for (const [k, v] of Object.entries(options)) lines.push(`    ${k}: ${JSON.stringify(v)}`);
  if (main) lines.push(`main: ${main}`);
  return lines.join("\n") + "\n";
}

test("a TypeScript program runs under Pulumi's Node.js host, which `pulumi about` and `pulumi plugin ls` name", async (t) => {
  const dir = scratchProject(t, {
    "package.json": ESM,
    "Pulumi.yaml": pulumiYaml(
      { typescript: true, nodeargs: "--max-old-space-size=321", packagemanager: "npm" },
      "index.ts",
    ),
    "index.ts": `
import * as pulumi from "@pulumi/pulumi";
import { statSync } from "node:fs";

interface Greeting {
  text: string;
  times: number;
}
class Greeter extends pulumi.ComponentResource {
  readonly text: pulumi.Output<string>;
  constructor(name: string, greeting: Greeting) {
    super("test:index:Greeter", name);
    this.text = pulumi.output(greeting.text.repeat(greeting.times));
    this.registerOutputs({ text: this.text });
  }
}
const config = new pulumi.Config();
const token: pulumi.Output<string> = config.requireSecret("token");
const greeter = new Greeter("greeter", { text: config.require("text"), times: config.requireNumber("times") });

export const text = greeter.text;
export const tokenLength = token.apply((s: string) => s.length);
export const execArgv: string[] = process.execArgv;
export const typescript = process.env.PULUMI_NODEJS_TYPESCRIPT ?? "unset";
export const nodeVersion = process.version;
// The process that started this program: the language host.
export const hostInode = statSync("/proc/" + process.ppid + "/exe").ino;
`,
  });
  const { stack, env } = await programStack(t, dir, {
    text: { value: "hi" },
    times: { value: "2" },
    token: { value: "s3cret", secret: true },
  });
  const up = await stack.up();
  assert.equal(up.summary.result, "succeeded");
  assert.equal(up.outputs.text?.value, "hihi", "a component's Output");
  assert.equal(up.outputs.tokenLength?.value, 6);
  assert.equal(up.outputs.tokenLength?.secret, true, "derived from a secret, still a secret");
  assert.ok(
    (up.outputs.execArgv?.value as string[]).includes("--max-old-space-size=321"),
    `nodeargs reach node: ${JSON.stringify(up.outputs.execArgv?.value)}`,
  );
  assert.equal(up.outputs.typescript?.value, "true");
  assert.equal(up.outputs.nodeVersion?.value, process.version, "the Node first on PATH");
  assert.equal(
    up.outputs.hostInode?.value,
    statSync(requireBinary("pulumi-language-nodejs")).ino,
    "the program's parent is the toolchain's pulumi-language-nodejs",
  );

  const stackArgs = ["--stack", stack.name, "--non-interactive"];
  const about = await pulumiCli(["about", "--json", ...stackArgs], { cwd: dir, env });
  assert.equal(about.code, 0, about.stderr);
  const info = JSON.parse(about.stdout) as {
    plugins: { name: string; kind: string; version: string }[];
    runtime: { language: string; executable: string; packagemanager: string };
  };
  assert.deepEqual(
    info.plugins.find((p) => p.kind === "language"),
    { name: "nodejs", kind: "language", version: "3.274.1" },
    "the host reports the Pulumi version it was built as",
  );
  assert.equal(info.runtime.language, "nodejs");
  assert.equal(info.runtime.executable, process.execPath);
  assert.equal(info.runtime.packagemanager, "npm");

  const plugins = await pulumiCli(["plugin", "ls", "--json"], { cwd: dir, env });
  assert.equal(plugins.code, 0, plugins.stderr);
  const listed = JSON.parse(plugins.stdout) as {
    name: string;
    kind: string;
    version: string;
    size: number;
  }[];
  const nodejs = listed.find((p) => p.kind === "language" && p.name === "nodejs");
  assert.equal(nodejs?.version, "3.274.1", plugins.stdout);
  assert.equal(
    nodejs?.size,
    statSync(requireBinary("pulumi-language-nodejs")).size,
    "the installed nodejs plugin is the toolchain's host",
  );
});

test("`pulumi install` runs the package manager of runtime.options.packagemanager", async (t) => {
  const env = scratchBackend(t);
  const lib = scratchProject(
    t,
    {
      "package.json": JSON.stringify({ name: "local-lib", version: "1.0.0", main: "index.js" }),
      "index.js": "",
    },
    { linkModules: false },
  );
  const dir = scratchProject(
    t,
    {
      "package.json": JSON.stringify({
        name: "install-e2e",
        private: true,
        dependencies: { "local-lib": `file:${lib}` },
      }),
      "Pulumi.yaml": pulumiYaml({ packagemanager: "npm" }),
    },
    { linkModules: false },
  );
  const installed = await pulumiCli(["install"], { cwd: dir, env });
  assert.equal(installed.code, 0, installed.stdout + installed.stderr);
  const pkg = JSON.parse(
    readFileSync(join(dir, "node_modules", "local-lib", "package.json"), "utf8"),
  ) as { name: string };
  assert.equal(pkg.name, "local-lib");
  assert.ok(existsSync(join(dir, "package-lock.json")), "npm wrote its lock file");
});
