/**
 * The controller image's entry point: `cocoonset` with only the `controller` command, so the
 * process loads the controller, the engine and the Kubernetes client and nothing else (no
 * Pulumi SDK, no toolchain or cluster code). `node dist/controller/main.js controller
 * [flags]` takes the same arguments as `cocoonset controller [flags]`, which is what the
 * Operator's Deployment passes.
 */
import { Command } from "commander";
import { readFileSync } from "node:fs";
import { registerController } from "./command.js";
import { cocoonSetControllerDeps, reconcilerOptionsOf } from "./cocoonset-controller.js";

const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
  version: string;
};

const program = new Command();
program
  .name("cocoonset")
  .description("the CocoonSet controller (the image holds only this command)")
  .version(pkg.version)
  .showHelpAfterError();
registerController(program, async ({ client, options }) =>
  cocoonSetControllerDeps(client, reconcilerOptionsOf(options)),
);

await program.parseAsync(process.argv);
