/**
 * Test support for the e2e tier: the real `pulumi` CLI from the toolchain, driven through
 * the Automation API with a local file backend in a temporary folder.
 */
import { LocalWorkspace, type Stack } from "@pulumi/pulumi/automation/index.js";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import type { TestContext } from "node:test";
import { fileURLToPath } from "node:url";
import { pulumiEnv, toolchainPulumiCommand } from "../../cluster/pulumi.js";
import { suffix, testKubeconfig } from "./cluster.js";

const here = dirname(fileURLToPath(import.meta.url));
/** The repository root (tests run from dist/tests/support). */
export const repoRoot = join(here, "..", "..", "..");

/** A stack of a program folder under the repository, removed (with its backend) after the test. */
export async function programStack(
  t: TestContext,
  programDir: string,
  config: Record<string, { value: string; secret?: boolean }> = {},
  opts: { stackName?: string } = {},
): Promise<{ stack: Stack; backend: string; env: Record<string, string> }> {
  const scratch = mkdtempSync(join(tmpdir(), "cocoonset-e2e-"));
  const backend = join(scratch, "backend");
  const home = join(scratch, "home");
  const env = pulumiEnv(home, backend, testKubeconfig());
  const pulumiCommand = await toolchainPulumiCommand(home);
  mkdirSync(backend, { recursive: true });
  const stack = await LocalWorkspace.createOrSelectStack(
    { stackName: opts.stackName ?? `e2e-${suffix()}`, workDir: programDir },
    { envVars: env, pulumiCommand },
  );
  await stack.setAllConfig(config);
  t.after(async () => {
    try {
      // A scratch project may be gone already; its stack lives in the scratch backend below.
      if (existsSync(programDir)) await stack.workspace.removeStack(stack.name, { force: true });
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  });
  return { stack, backend, env };
}

/** Files of a scratch Pulumi project, by path relative to its folder. */
export type ProjectFiles = Record<string, string>;

/**
 * A scratch project folder outside the repository, removed after the test. With
 * `linkModules` its `node_modules` is a link to the repository's, so `@pulumi/pulumi`
 * resolves as in an installed project.
 */
export function scratchProject(
  t: TestContext,
  files: ProjectFiles,
  opts: { linkModules?: boolean } = {},
): string {
  const dir = mkdtempSync(join(tmpdir(), "cocoonset-e2e-project-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, name)), { recursive: true });
    writeFileSync(join(dir, name), text);
  }
  if (opts.linkModules ?? true)
    symlinkSync(join(repoRoot, "node_modules"), join(dir, "node_modules"));
  return dir;
}

/** The outcome of one `pulumi` command. */
export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs the toolchain's `pulumi` (first on the PATH of `env`, see {@link scratchBackend}). `detached` puts it in a
 * process group of its own, as a terminal does for a foreground job (so a test can send
 * the group a Ctrl-C); `onSpawn` sees the process.
 */
export async function pulumiCli(
  args: string[],
  opts: {
    cwd: string;
    env: Record<string, string>;
    detached?: boolean;
    onSpawn?: (child: ChildProcess) => void;
  },
): Promise<CliResult> {
  const child = spawn("pulumi", args, {
    cwd: opts.cwd,
    env: { ...process.env, ...opts.env },
    stdio: ["ignore", "pipe", "pipe"],
    detached: opts.detached ?? false,
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (b: Buffer) => (stdout += b.toString()));
  child.stderr.on("data", (b: Buffer) => (stderr += b.toString()));
  opts.onSpawn?.(child);
  return new Promise((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

/** A local backend and Pulumi home in a scratch folder, removed after the test. */
export function scratchBackend(t: TestContext): Record<string, string> {
  const scratch = mkdtempSync(join(tmpdir(), "cocoonset-e2e-"));
  t.after(() => rmSync(scratch, { recursive: true, force: true }));
  const backend = join(scratch, "backend");
  mkdirSync(backend, { recursive: true });
  return pulumiEnv(join(scratch, "home"), backend, testKubeconfig());
}

/**
 * The error text of a command that must fail (a preview or an up through the Automation API:
 * the CLI's output is in the error's message); fails the test when it succeeds.
 */
export async function failure(run: Promise<unknown>): Promise<string> {
  try {
    await run;
  } catch (e) {
    return String(e);
  }
  assert.fail("expected the command to fail");
}
