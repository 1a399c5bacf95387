/**
 * The `cocoonset` command line: plan, release and reap fleets, and run the controller. The
 * development tooling (toolchain, embedded cluster, demo, image) is `cocoonset-dev`, in a
 * clone of the repository only (cluster/dev-cli.ts).
 */
import { Command } from "commander";
import { readFileSync } from "node:fs";
import { registerReleaseAndReap } from "./engine-commands.js";
import { registerController } from "../controller/command.js";
import { registerPlan } from "./plan-command.js";
import {
  cocoonSetControllerDeps,
  reconcilerOptionsOf,
} from "../controller/cocoonset-controller.js";

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
    "Run fleets of AI agents (CocoonSets) on Kubernetes: plan, release, reap, controller",
  )
  .version(pkg.version)
  .showHelpAfterError();
registerReleaseAndReap(program);
registerPlan(program);
registerController(program, async ({ client, options }) =>
  cocoonSetControllerDeps(client, reconcilerOptionsOf(options)),
);

await program.parseAsync(process.argv);
