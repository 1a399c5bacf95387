/**
 * The `cocoonset-dev` command line: the development tooling of a clone of the repository
 * (the toolchain, the embedded cluster, the demo and the controller image). It is not part
 * of the published package; `cocoonset` is the product's command.
 */
import { Command } from "commander";
import { readFileSync } from "node:fs";
import { registerCluster } from "./commands/cluster-command.js";
import { registerDemo } from "./commands/demo-command.js";
import { registerImage } from "./commands/image-command.js";
import { registerToolchain } from "./commands/toolchain-command.js";

const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
  version: string;
};

// A closed pipe (`cocoonset-dev ... | head`) is not an error worth a stack trace.
process.stdout.on("error", (e: NodeJS.ErrnoException) => {
  if (e.code === "EPIPE") process.exit(0);
  throw e;
});

const program = new Command();
program
  .name("cocoonset-dev")
  .description(
    "Development tooling of pulumi-cocoonset: the pinned toolchain, the embedded local cluster, the demo and the controller image",
  )
  .version(pkg.version)
  .showHelpAfterError();
registerToolchain(program);
registerCluster(program);
registerDemo(program);
registerImage(program);

await program.parseAsync(process.argv);
