/**
 * The marker of a passed `toolchain check`: found for the pin set it was written for, not
 * for other pins sharing the folder, and not when it is missing or unreadable.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test, type TestContext } from "node:test";
import {
  checkMarkerPath,
  readCheckMarker,
  writeCheckMarker,
} from "../../../cluster/toolchain-check.js";
import { loadPins, pinsKey, type ToolchainPins } from "../../../cluster/toolchain-pins.js";

/** A toolchain folder of its own (COCOONSET_TOOLCHAIN_DIR), restored after the test. */
function ownToolchainDir(t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), "cocoonset-check-marker-"));
  const before = process.env.COCOONSET_TOOLCHAIN_DIR;
  process.env.COCOONSET_TOOLCHAIN_DIR = dir;
  t.after(() => {
    if (before === undefined) delete process.env.COCOONSET_TOOLCHAIN_DIR;
    else process.env.COCOONSET_TOOLCHAIN_DIR = before;
    rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}

test("a written marker is found for its pin set, in the toolchain's folder", (t) => {
  const dir = ownToolchainDir(t);
  const pins = loadPins();
  assert.equal(readCheckMarker(pins), undefined, "nothing checked yet");
  const at = new Date("2026-01-02T03:04:05.000Z");
  writeCheckMarker(["nodejs", "yaml"], pins, at);
  assert.equal(checkMarkerPath(pins), join(dir, "checked.json"));
  assert.deepEqual(readCheckMarker(pins), {
    key: pinsKey(pins),
    checkedAt: at.toISOString(),
    programs: ["nodejs", "yaml"],
  });
});

test("a marker of other pins, or an unreadable one, does not count", (t) => {
  ownToolchainDir(t);
  const pins = loadPins();
  const bumped: ToolchainPins = structuredClone(pins);
  bumped.groups.pulumi.version = `${bumped.groups.pulumi.version}-next`;
  assert.notEqual(pinsKey(bumped), pinsKey(pins));
  writeCheckMarker(["nodejs", "yaml"], pins);
  // COCOONSET_TOOLCHAIN_DIR: both pin sets share one folder, so the key decides.
  assert.equal(checkMarkerPath(bumped), checkMarkerPath(pins));
  assert.equal(readCheckMarker(bumped), undefined, "another toolchain was checked, not this one");
  writeFileSync(checkMarkerPath(pins), "{ not json");
  assert.equal(readCheckMarker(pins), undefined);
});
