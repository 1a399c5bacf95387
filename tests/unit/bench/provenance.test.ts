import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, test } from "node:test";
import { commandLine, repoRoot, startRun } from "../../../bench/support.js";

describe("bench provenance", () => {
  test("the command line names no path of the machine", () => {
    const line = commandLine([
      "/opt/node-24/bin/node",
      join(repoRoot, "dist", "bench", "controller.js"),
      "--workload",
      "5x2",
    ]);
    assert.equal(line, "node dist/bench/controller.js --workload 5x2");
  });

  test("a run records commit, toolchain, machine, dates and load averages", () => {
    const p = startRun("unit").provenance();
    assert.match(p.git.commit, /^[0-9a-f]{40}$/);
    assert.equal(typeof p.git.dirty, "boolean");
    assert.ok(p.git.dirtyFiles.every((f) => !f.startsWith("bench/results/")));
    assert.ok(p.toolchain.goPinned.length > 0);
    assert.ok(Object.keys(p.toolchain.groups).includes("kubernetes"));
    assert.ok(p.machine.cores > 0 && p.machine.memoryGiB > 0 && p.machine.cpuModel);
    assert.equal(p.node, process.version);
    assert.equal(p.loadAverage.start.length, 3);
    assert.equal(p.loadAverage.end.length, 3);
    assert.ok(Date.parse(p.finishedAt) >= Date.parse(p.startedAt));
  });
});
