// Every benchmark answers --help with its usage and refuses a flag it does not take, naming
// it, before it starts a cluster or a controller (bench/support.ts, benchFlags).
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { promisify } from "node:util";
import { shardFlagsFor } from "../../../bench/controller.js";
import { repoRoot } from "../../../bench/support.js";

const run = promisify(execFile);
const dir = join(repoRoot, "dist", "bench");
/** The scripts run from the command line: those bench/README.md names as `dist/bench/<name>.js`. */
const scripts = readdirSync(join(repoRoot, "bench"))
  .filter((f) => f.endsWith(".ts"))
  .map((f) => f.slice(0, -3))
  .filter((name) => readFileSync(join(repoRoot, "bench", `${name}.ts`), "utf8").includes("USAGE"));

describe("bench flags", () => {
  test("the benchmarks that take flags are the ones found", () => {
    for (const name of ["controller", "idle", "suspend", "churn", "fanout", "image", "pulumi"])
      assert.ok(scripts.includes(name), `${name} has a usage`);
  });

  for (const name of scripts) {
    test(`${name}: --help prints its usage`, async () => {
      const help = await run(process.execPath, [join(dir, `${name}.js`), "--help"]);
      assert.match(help.stdout, new RegExp(`^node dist/bench/${name}\\.js`));
      assert.match(help.stdout, /-h, --help +this text\n$/);
    });
  }

  test("an unknown flag is refused, naming it, with the usage", async () => {
    const bad = await run(process.execPath, [join(dir, "plan-cpu.js"), "--no-such-flag"]).then(
      () => assert.fail("--no-such-flag was taken"),
      (e: { code: number; stderr: string }) => e,
    );
    assert.equal(bad.code, 2);
    assert.match(
      bad.stderr,
      /^Unknown option '--no-such-flag'.*\n\nnode dist\/bench\/plan-cpu\.js/s,
    );
  });
});

describe("bench:controller's shard flags", () => {
  test("N shards divide one process's default concurrency unless told otherwise", () => {
    assert.deepEqual(shardFlagsFor(4, []), ["--concurrency=1"]);
    assert.deepEqual(shardFlagsFor(2, []), ["--concurrency=2"]);
    assert.deepEqual(shardFlagsFor(8, ["--fanout-concurrency=4"]), [
      "--fanout-concurrency=4",
      "--concurrency=1",
    ]);
    assert.deepEqual(shardFlagsFor(4, ["--concurrency=4"]), ["--concurrency=4"]);
    assert.deepEqual(shardFlagsFor(4, ["--concurrency", "3"]), ["--concurrency", "3"]);
  });
});
