/**
 * The Node.js language host under the real `pulumi` CLI, with small programs that create
 * no cluster objects: TypeScript as written with `runtime.options`, CommonJS outputs, how
 * program failures and startup problems are reported, Ctrl-C, and `pulumi install`.
 */
import { CommandError } from "@pulumi/pulumi/automation/index.js";
import assert from "node:assert/strict";
import { existsSync, readFileSync, watch } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { suffix } from "../support/cluster.js";
import {
  programStack,
  pulumiCli,
  scratchBackend,
  scratchProject,
  type ProjectFiles,
} from "../support/pulumi.js";

const ESM = JSON.stringify({ name: "langhost-e2e", private: true, type: "module" });

/** A Pulumi.yaml with the given runtime options and `main`. */
function pulumiYaml(options: Record<string, string | boolean>, main?: string): string {
  const lines = ["name: langhost-e2e", "runtime:", "  name: nodejs"];
  if (Object.keys(options).length > 0) lines.push("  options:");
  for (const [k, v] of Object.entries(options)) lines.push(`    ${k}: ${JSON.stringify(v)}`);
  if (main) lines.push(`main: ${main}`);
  return lines.join("\n") + "\n";
}

/** The error a failing preview reports (the CLI's stdout and stderr). */
async function previewError(dir: string, t: Parameters<typeof programStack>[0]): Promise<string> {
  const { stack } = await programStack(t, dir);
  const err = await stack.preview().then(
    () => undefined,
    (e: unknown) => e,
  );
  assert.ok(err instanceof CommandError, "the preview fails");
  return err.message;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

test("a TypeScript program runs as written, with its config, a secret and runtime.options.nodeargs", async (t) => {
  const dir = scratchProject(t, {
    "package.json": ESM,
    "Pulumi.yaml": pulumiYaml(
      { typescript: true, nodeargs: "--max-old-space-size=321" },
      "index.ts",
    ),
    "index.ts": `
import * as pulumi from "@pulumi/pulumi";
import type { Output } from "@pulumi/pulumi";

interface Greeting {
  text: string;
  times: number;
}
const config = new pulumi.Config();
const greeting: Greeting = { text: config.require("text"), times: config.requireNumber("times") };
const token: Output<string> = config.requireSecret("token");

export const text: string = greeting.text.repeat(greeting.times);
export const tokenLength = token.apply((s: string) => s.length);
export const execArgv: string[] = process.execArgv;
export const typescript = process.env.PULUMI_NODEJS_TYPESCRIPT ?? "unset";
`,
  });
  const { stack } = await programStack(t, dir, {
    text: { value: "hi" },
    times: { value: "2" },
    token: { value: "s3cret", secret: true },
  });
  const up = await stack.up();
  assert.equal(up.summary.result, "succeeded");
  assert.equal(up.outputs.text?.value, "hihi");
  assert.equal(up.outputs.tokenLength?.value, 6);
  assert.equal(up.outputs.tokenLength?.secret, true, "derived from a secret, still a secret");
  assert.ok(
    (up.outputs.execArgv?.value as string[]).includes("--max-old-space-size=321"),
    `nodeargs reach node: ${JSON.stringify(up.outputs.execArgv?.value)}`,
  );
  assert.equal(
    up.outputs.typescript?.value,
    "true",
    "typescript: true is passed on as Pulumi does",
  );
});

test("a CommonJS program's exports are its outputs, with no stray `default`", async (t) => {
  const dir = scratchProject(t, {
    "package.json": JSON.stringify({ name: "langhost-cjs", private: true, type: "commonjs" }),
    "Pulumi.yaml": pulumiYaml({ typescript: false }),
    "index.js": 'exports.answer = 42;\nexports.name = "cjs";\n',
  });
  const { stack } = await programStack(t, dir);
  const up = await stack.up();
  assert.deepEqual(Object.fromEntries(Object.entries(up.outputs).map(([k, v]) => [k, v.value])), {
    answer: 42,
    name: "cjs",
  });
});

test("program failures and startup problems are reported as the program's, with what to do", async (t) => {
  const program = (
    main: string,
    files: ProjectFiles,
    options: Record<string, string | boolean> = {},
  ) =>
    scratchProject(t, { "package.json": ESM, "Pulumi.yaml": pulumiYaml(options, main), ...files });

  // process.exit with a code: the program's failure, not a lost connection.
  const exit = await previewError(program("index.ts", { "index.ts": "process.exit(3);\n" }), t);
  assert.match(exit, /Program exited with non-zero exit code: 3/);

  // An uncaught error: its message, from the runner.
  const thrown = await previewError(
    program("index.ts", {
      "index.ts": 'await Promise.resolve();\nthrow new Error("boom from the program");\n',
    }),
    t,
  );
  assert.match(thrown, /boom from the program/);

  // A syntax error names the file.
  const syntax = await previewError(
    program("index.ts", { "index.ts": "export const x: number = ;\n" }),
    t,
  );
  assert.match(syntax, /SyntaxError/);
  assert.match(syntax, /index\.ts/);

  // TypeScript that type stripping cannot run: what to do instead.
  const enumProgram = await previewError(
    program("index.ts", { "index.ts": "enum Mode { A, B }\nexport const mode = Mode.B;\n" }),
    t,
  );
  assert.match(enumProgram, /Node's type stripping cannot run this program \(TypeScript enum/);
  assert.match(enumProgram, /--import tsx/);

  // A missing entry point, and a bad option, before anything runs.
  const missing = await previewError(program("src/main.ts", { "index.ts": "export {};\n" }), t);
  // The CLI itself checks `main` before it starts the host.
  assert.match(missing, /project 'main' could not be read: stat .*src\/main\.ts: no such file/);
  const badOption = await previewError(
    program("index.ts", { "index.ts": "export {};\n" }, { typescript: "yes" }),
    t,
  );
  assert.match(badOption, /\[runtime\.options\.typescript\] must be true or false, got "yes"/);

  // No @pulumi/pulumi next to the program.
  const bare = scratchProject(
    t,
    { "package.json": ESM, "Pulumi.yaml": pulumiYaml({}, "index.ts"), "index.ts": "export {};\n" },
    { linkModules: false },
  );
  assert.match(
    await previewError(bare, t),
    /@pulumi\/pulumi is not installed .* run `pulumi install`/,
  );
});

test("Ctrl-C during `pulumi up` stops the program and the language host, and pulumi exits", async (t) => {
  const env = scratchBackend(t);
  const pidFile = join(scratchProject(t, {}, { linkModules: false }), "pids.json");
  const dir = scratchProject(t, {
    "package.json": ESM,
    "Pulumi.yaml": pulumiYaml({}, "index.ts"),
    "index.ts": `
import * as pulumi from "@pulumi/pulumi";
import { writeFileSync } from "node:fs";

new pulumi.ComponentResource("test:index:Waiter", "waiter");
writeFileSync(${JSON.stringify(pidFile)}, JSON.stringify({ pid: process.pid, ppid: process.ppid }));
// Keeps running until it is stopped.
await new Promise(() => setInterval(() => undefined, 1000));
`,
  });
  const stack = `ctrlc-${suffix()}`;
  const init = await pulumiCli(["stack", "init", stack, "--non-interactive"], { cwd: dir, env });
  assert.equal(init.code, 0, init.stderr);

  const started = new Promise<void>((resolve) => {
    const watcher = watch(join(pidFile, ".."), () => {
      if (!existsSync(pidFile) || readFileSync(pidFile, "utf8") === "") return;
      watcher.close();
      resolve();
    });
  });
  let group = 0;
  const up = pulumiCli(["up", "--yes", "--skip-preview", "--non-interactive", "--stack", stack], {
    cwd: dir,
    env,
    detached: true,
    onSpawn: (child) => (group = child.pid ?? 0),
  });
  await started;
  const { pid, ppid } = JSON.parse(readFileSync(pidFile, "utf8")) as { pid: number; ppid: number };
  // What a terminal does on Ctrl-C: SIGINT to the whole foreground process group.
  process.kill(-group, "SIGINT");
  const result = await up;
  const output = result.stdout + result.stderr;
  assert.notEqual(result.code, 0, output);
  assert.match(output, /cancel|interrupt/i, output);
  assert.equal(alive(pid), false, "the program process is gone");
  assert.equal(alive(ppid), false, "the language host is gone");

  // The stack is usable afterwards.
  const refresh = await pulumiCli(["refresh", "--yes", "--non-interactive", "--stack", stack], {
    cwd: dir,
    env,
  });
  assert.equal(refresh.code, 0, refresh.stdout + refresh.stderr);
  await pulumiCli(["stack", "rm", stack, "--yes", "--force", "--non-interactive"], {
    cwd: dir,
    env,
  });
});

test("`pulumi install` runs the package manager of runtime.options.packagemanager and reports its failure", async (t) => {
  const env = scratchBackend(t);
  const lib = scratchProject(
    t,
    {
      "package.json": JSON.stringify({ name: "local-lib", version: "1.0.0", main: "index.js" }),
      "index.js": "",
    },
    { linkModules: false },
  );
  const project = (deps: Record<string, string>, options: Record<string, string | boolean> = {}) =>
    scratchProject(
      t,
      {
        "package.json": JSON.stringify({ name: "install-e2e", private: true, dependencies: deps }),
        "Pulumi.yaml": pulumiYaml(options),
      },
      { linkModules: false },
    );

  const ok = project({ "local-lib": `file:${lib}` }, { packagemanager: "npm" });
  const installed = await pulumiCli(["install"], { cwd: ok, env });
  assert.equal(installed.code, 0, installed.stdout + installed.stderr);
  const pkg = JSON.parse(
    readFileSync(join(ok, "node_modules", "local-lib", "package.json"), "utf8"),
  ) as {
    name: string;
  };
  assert.equal(pkg.name, "local-lib");
  assert.ok(existsSync(join(ok, "package-lock.json")), "npm wrote its lock file");

  // npm links a missing folder without complaint, but fails on a missing tarball.
  const broken = project({ "local-lib": `file:${join(lib, "missing.tgz")}` });
  const failed = await pulumiCli(["install"], { cwd: broken, env });
  assert.notEqual(failed.code, 0);
  assert.match(
    failed.stdout + failed.stderr,
    /npm install --loglevel=error` in .* failed \(exit code \d+\)/,
  );

  const noYarn = project({}, { packagemanager: "yarn" });
  const yarn = await pulumiCli(["install"], {
    cwd: noYarn,
    env: {
      ...env,
      PATH: env.PATH.split(":")
        .filter((d) => !existsSync(join(d, "yarn")))
        .join(":"),
    },
  });
  assert.notEqual(yarn.code, 0);
  assert.match(yarn.stdout + yarn.stderr, /yarn is not on PATH/);
});
