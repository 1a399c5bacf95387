/**
 * Test support for the e2e tier: the real `pulumi` CLI from the toolchain, driven through
 * the Automation API with a local file backend in a temporary folder.
 */
import { LocalWorkspace, type Stack } from "@pulumi/pulumi/automation/index.js";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
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
): Promise<{ stack: Stack; backend: string; env: Record<string, string> }> {
  const scratch = mkdtempSync(join(tmpdir(), "cocoonset-e2e-"));
  const backend = join(scratch, "backend");
  const home = join(scratch, "home");
  const env = pulumiEnv(home, backend, testKubeconfig());
  const pulumiCommand = await toolchainPulumiCommand();
  mkdirSync(backend, { recursive: true });
  const stack = await LocalWorkspace.createOrSelectStack(
    { stackName: `e2e-${suffix()}`, workDir: programDir },
    { envVars: env, pulumiCommand },
  );
  await stack.setAllConfig(config);
  t.after(async () => {
    try {
      await stack.workspace.removeStack(stack.name, { force: true });
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  });
  return { stack, backend, env };
}
