/**
 * `bench:controller` starts ours as the controller image does: `imageEntrypoint` reads the
 * Node flags and the script from controller/Dockerfile's ENTRYPOINT.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { repoRoot } from "../../../bench/support.js";
import { imageEntrypoint } from "../../../cluster/image.js";

test("the image's Node flags and its script, as a file of this checkout", () => {
  const { nodeFlags, script } = imageEntrypoint();
  assert.deepEqual(nodeFlags, ["--max-semi-space-size=2", "--lite-mode"]);
  assert.equal(script, join(repoRoot, "dist", "controller", "main.bundle.js"));
  assert.ok(existsSync(script), `${script} is built`);
});
