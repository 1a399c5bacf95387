/**
 * The `cocoonset` package from Python: the `cocoonset-python` template's program (an
 * Operator and a Fleet with a toolbox) under Pulumi's Python language host, with `pulumi`
 * 3.272.0 from PyPI (the toolchain's virtualenv) and the SDK `pulumi package add` generates
 * from this checkout's plugin, through its whole life on the embedded cluster (its Operator
 * adopts the tier's CRD, so it runs beside the tier's other files).
 */
import { test } from "node:test";
import { requirePythonVenv } from "../../cluster/toolchain-python.js";
import {
  adoptTierCrd,
  pythonVenv,
  templateLifecycle,
  templateProgram,
} from "../support/language-program.js";

test("a Python program from the template with typed spec arguments: a bad input is refused per property, preview lists the slots, up converges, a scale-up previews exactly its slots, destroy releases everything and leaves a bystander", async (t) => {
  const toolchainVenv = requirePythonVenv();
  const program = await templateProgram(t, "cocoonset-python", (dir) => {
    adoptTierCrd(dir, "python");
    pythonVenv(dir, toolchainVenv);
  });
  await templateLifecycle(t, program, "py-fleet");
});
