/**
 * The `cocoonset-dev` command line: the development tooling of a clone of the repository
 * (the toolchain, the embedded cluster, the demo and the controller image). It is not part
 * of the published package; `cocoonset` is the product's command.
 */
import { devProgram } from "./dev-program.js";

await devProgram().parseAsync(process.argv);
