/**
 * The `cocoonset` package from Go: the `cocoonset-go` template's program (an Operator and a
 * Fleet with a toolbox) under Pulumi's Go language host, with
 * `github.com/pulumi/pulumi/sdk/v3` v3.274.1 and the SDK `pulumi package add` generates
 * from this checkout's plugin, through its whole life on the embedded cluster.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import { templateLifecycle, templateProgram } from "../support/language-program.js";

test("a Go program from the template: preview lists the slots, up converges, a scale-up previews exactly its slots, destroy releases everything and leaves a bystander", async (t) => {
  const program = await templateProgram(t, "cocoonset-go", () => undefined);
  // The SDK's module is linked by a replace line; go.sum comes from the module cache.
  const tidy = spawnSync("go", ["mod", "tidy"], {
    cwd: program.dir,
    env: { ...process.env, GOTOOLCHAIN: "local" },
    encoding: "utf8",
  });
  assert.equal(tidy.status, 0, tidy.stderr);
  await templateLifecycle(t, program, "go-fleet");
});
