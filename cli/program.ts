/**
 * The `cocoonset` program: its commands registered, not yet run. `cli/main.ts` runs it; a test
 * builds it to read the commands and options it really has.
 */
import type { Command } from "commander";
import { newProgram } from "./common.js";
import { registerReleaseAndReap } from "./engine-commands.js";
import { registerController } from "../controller/command.js";
import { registerPlan } from "./plan-command.js";
import { registerManifests } from "./manifests-command.js";
import { registerDoctor } from "./doctor-command.js";
import { registerWake } from "./wake-command.js";
import {
  cocoonSetControllerDeps,
  reconcilerOptionsOf,
} from "../controller/cocoonset-controller.js";

/** The `cocoonset` command line with every command registered. */
export function cocoonsetProgram(): Command {
  const program = newProgram(
    "cocoonset",
    "Run fleets of AI agents (CocoonSets) on Kubernetes: plan, wake, release, reap, controller, manifests, doctor",
  );
  registerReleaseAndReap(program);
  registerPlan(program);
  registerWake(program);
  registerManifests(program);
  registerDoctor(program);
  registerController(program, async ({ client, options }) =>
    cocoonSetControllerDeps(client, reconcilerOptionsOf(options)),
  );
  return program;
}
