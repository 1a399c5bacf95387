/**
 * The `cocoonset-dev` command line: the development tooling of a clone of the repository
 * (the toolchain, the embedded cluster, the demo and the controller image). It is not part
 * of the published package; `cocoonset` is the product's command.
 */
import { newProgram } from "../cli/common.js";
import { registerCluster } from "./commands/cluster-command.js";
import { registerDemo } from "./commands/demo-command.js";
import { registerImage } from "./commands/image-command.js";
import { registerToolchain } from "./commands/toolchain-command.js";

const program = newProgram(
  "cocoonset-dev",
  "Development tooling of pulumi-cocoonset: the pinned toolchain, the embedded local cluster, the demo and the controller image",
);
registerToolchain(program);
registerCluster(program);
registerDemo(program);
registerImage(program);

await program.parseAsync(process.argv);
