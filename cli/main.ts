/**
 * The `cocoonset` command line: plan, release and reap fleets, and run the controller. The
 * development tooling (toolchain, embedded cluster, demo, image) is `cocoonset-dev`, in a
 * clone of the repository only (cluster/dev-cli.ts).
 */
import { newProgram } from "./common.js";
import { registerReleaseAndReap } from "./engine-commands.js";
import { registerController } from "../controller/command.js";
import { registerPlan } from "./plan-command.js";
import { registerManifests } from "./manifests-command.js";
import {
  cocoonSetControllerDeps,
  reconcilerOptionsOf,
} from "../controller/cocoonset-controller.js";

const program = newProgram(
  "cocoonset",
  "Run fleets of AI agents (CocoonSets) on Kubernetes: plan, release, reap, controller, manifests",
);
registerReleaseAndReap(program);
registerPlan(program);
registerManifests(program);
registerController(program, async ({ client, options }) =>
  cocoonSetControllerDeps(client, reconcilerOptionsOf(options)),
);

await program.parseAsync(process.argv);
