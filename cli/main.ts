/** The `cocoonset` command line. */
import { Command } from "commander";
import { readFileSync } from "node:fs";
import { registerCluster } from "./cluster-command.js";
import { registerReleaseAndReap } from "./engine-commands.js";
import { registerController } from "../controller/command.js";
import { registerPlan } from "./plan-command.js";
import { registerDemo } from "./demo-command.js";
import {
  cocoonSetControllerDeps,
  reconcilerOptionsOf,
} from "../controller/cocoonset-controller.js";
import { registerToolchain } from "./toolchain-command.js";
import { registerImage } from "./image-command.js";

const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
  version: string;
};

// A closed pipe (`cocoonset ... | head`) is not an error worth a stack trace.
process.stdout.on("error", (e: NodeJS.ErrnoException) => {
  if (e.code === "EPIPE") process.exit(0);
  throw e;
});

const program = new Command();
program
  .name("cocoonset")
  .description(
    "Run fleets of AI agents (CocoonSets) on Kubernetes: local cluster, engine, controller",
  )
  .version(pkg.version)
  .showHelpAfterError();
registerToolchain(program);
registerCluster(program);
registerReleaseAndReap(program);
registerPlan(program);
registerDemo(program);
registerImage(program);
registerController(program, async ({ client, options }) =>
  cocoonSetControllerDeps(client, reconcilerOptionsOf(options)),
);

await program.parseAsync(process.argv);
