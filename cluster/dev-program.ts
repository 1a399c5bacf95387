/**
 * The `cocoonset-dev` program: its commands registered, not yet run. `cluster/dev-cli.ts` runs
 * it; a test builds it to read the commands and options it really has.
 */
import type { Command } from "commander";
import { newProgram } from "../cli/common.js";
import { registerCluster } from "./commands/cluster-command.js";
import { registerDemo } from "./commands/demo-command.js";
import { registerImage } from "./commands/image-command.js";
import { registerToolchain } from "./commands/toolchain-command.js";

/** The `cocoonset-dev` command line with every command registered. */
export function devProgram(): Command {
  const program = newProgram(
    "cocoonset-dev",
    "Development tooling of pulumi-cocoonset: the pinned toolchain, the embedded local cluster, the demo and the controller image",
  );
  registerToolchain(program);
  registerCluster(program);
  registerDemo(program);
  registerImage(program);
  return program;
}
