/**
 * The `cocoonset` package from Go: the `cocoonset-go` template's program (an Operator and a
 * Fleet with a toolbox) under Pulumi's Go language host, with
 * `github.com/pulumi/pulumi/sdk/v3` v3.274.1 and the SDK `pulumi package add` generates
 * from this checkout's plugin, through its whole life on the embedded cluster (its Operator
 * adopts the tier's CRD, so it runs beside the tier's other files).
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { adoptTierCrd, templateLifecycle, templateProgram } from "../support/language-program.js";

test("a Go program from the template: a bad input is refused per property, preview lists the slots, up converges, a scale-up previews exactly its slots, destroy releases everything and leaves a bystander, a misspelt spec field does not compile", async (t) => {
  const program = await templateProgram(t, "cocoonset-go", (dir) => adoptTierCrd(dir, "go"));
  // The SDK's module is linked by a replace line; go.sum comes from the module cache.
  const tidy = spawnSync("go", ["mod", "tidy"], {
    cwd: program.dir,
    env: { ...process.env, GOTOOLCHAIN: "local" },
    encoding: "utf8",
  });
  assert.equal(tidy.status, 0, tidy.stderr);
  await templateLifecycle(t, program, "go-fleet");

  // The spec is typed: a misspelt field is a compile error, not a surprise at `up`.
  const main = join(program.dir, "main.go");
  const source = readFileSync(main, "utf8");
  assert.match(source, /Replicas: /);
  writeFileSync(main, source.replace("Replicas: ", "Replicaz: "));
  const build = spawnSync("go", ["build", "-o", "/dev/null", "."], {
    cwd: program.dir,
    env: { ...process.env, GOTOOLCHAIN: "local" },
    encoding: "utf8",
  });
  assert.notEqual(build.status, 0, "the misspelt program does not compile");
  assert.match(build.stderr, /unknown field Replicaz/, build.stderr);
});
