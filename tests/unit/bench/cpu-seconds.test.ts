/**
 * The benchmarks' CPU figure: `cpuSeconds` reads a process's user + system time from
 * `/proc/<pid>/stat`, the command name (which may hold spaces and parentheses) skipped; and
 * `machineCpuSeconds`, the whole machine's busy and total seconds from `/proc/stat`.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { cpuSeconds, machineCpuSeconds } from "../../../bench/support.js";

describe("cpuSeconds", () => {
  test("grows with the work this process does, as process.cpuUsage() does", () => {
    const before = cpuSeconds(process.pid);
    const usage = process.cpuUsage();
    assert.ok(before !== undefined && before > 0, `read: ${before}`);
    const until = Date.now() + 300;
    let x = 0;
    while (Date.now() < until) x += Math.sqrt(x + 1);
    assert.ok(x > 0);
    const after = cpuSeconds(process.pid)!;
    const spent = process.cpuUsage(usage);
    const expected = (spent.user + spent.system) / 1e6;
    // Clock ticks are 10 ms: the two agree within a few ticks.
    assert.ok(Math.abs(after - before - expected) < 0.05, `${after - before} vs ${expected}`);
  });

  test("undefined for a process that does not exist", () => {
    assert.equal(cpuSeconds(2 ** 22 + 1), undefined);
  });
});

describe("machineCpuSeconds", () => {
  test("the machine's busy time grows at least by what this process spends, and stays within the total", () => {
    const before = machineCpuSeconds();
    const usage = process.cpuUsage();
    const until = Date.now() + 300;
    let x = 0;
    while (Date.now() < until) x += Math.sqrt(x + 1);
    assert.ok(x > 0);
    const after = machineCpuSeconds();
    const spent = process.cpuUsage(usage);
    assert.ok(before && after, "read");
    const busy = after.busy - before.busy;
    assert.ok(busy >= (spent.user + spent.system) / 1e6 - 0.05, `busy ${busy}`);
    assert.ok(busy <= after.total - before.total + 0.05, "busy within the total");
  });
});
