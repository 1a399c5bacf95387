/**
 * The `cocoonset` command line: plan, release and reap fleets, check a cluster, print the
 * Operator's manifests and run the controller. The development tooling (toolchain, embedded
 * cluster, demo, image) is `cocoonset-dev`, in a clone of the repository only
 * (cluster/dev-cli.ts).
 */
import { cocoonsetProgram } from "./program.js";

await cocoonsetProgram().parseAsync(process.argv);
