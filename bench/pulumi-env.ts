/**
 * The real `pulumi` CLI from the toolchain, driven through the Automation API with a local
 * file backend in a scratch folder: the few lines of setup the Pulumi benchmark needs.
 */
import { LocalWorkspace, type PulumiCommand, type Stack } from "@pulumi/pulumi/automation/index.js";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pulumiEnv, toolchainPulumiCommand } from "../cluster/pulumi.js";

/** A Pulumi workspace for one program folder, with its backend in a scratch folder. */
export class BenchWorkspace {
  private constructor(
    readonly programDir: string,
    readonly env: Record<string, string>,
    private readonly scratch: string,
    private readonly pulumiCommand: PulumiCommand,
  ) {}

  /**
   * Prepares `programDir` (a compiled program: writes its Pulumi.yaml with `main` = the
   * given file) and a scratch backend for it.
   */
  static async open(programDir: string, main: string, kubeconfig: string): Promise<BenchWorkspace> {
    writeFileSync(
      join(programDir, "Pulumi.yaml"),
      [
        "name: cocoonset-bench-fleet",
        "runtime:",
        "  name: nodejs",
        "  options:",
        "    typescript: false",
        `main: ${main}`,
        "",
      ].join("\n"),
    );
    const scratch = mkdtempSync(join(tmpdir(), "cocoonset-bench-pulumi-"));
    const backend = join(scratch, "backend");
    mkdirSync(backend, { recursive: true });
    const env = pulumiEnv(join(scratch, "home"), backend, kubeconfig);
    const pulumiCommand = await toolchainPulumiCommand(join(scratch, "home"));
    return new BenchWorkspace(programDir, env, scratch, pulumiCommand);
  }

  /** A new stack with the given config. */
  async stack(name: string, config: Record<string, string>): Promise<Stack> {
    const stack = await LocalWorkspace.createOrSelectStack(
      { stackName: name, workDir: this.programDir },
      { envVars: this.env, pulumiCommand: this.pulumiCommand },
    );
    await stack.setAllConfig(
      Object.fromEntries(Object.entries(config).map(([k, value]) => [k, { value }])),
    );
    return stack;
  }

  /** Removes the scratch backend. */
  dispose(): void {
    rmSync(this.scratch, { recursive: true, force: true });
  }
}
