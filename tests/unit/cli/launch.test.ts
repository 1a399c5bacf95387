/**
 * The package's commands are Node scripts (`#!/usr/bin/env node`, cli/launch.ts): run by a
 * Node >= 22 they run in place; run by the first `node` on a PATH without the project's
 * `node_modules/.bin` (the system's, Node 20 on the development machines and CI) they run on
 * the project's Node. Either way `cocoonset --version` answers, and the plugin the Pulumi
 * engine starts by name prints its port and ends on the engine's SIGTERM.
 */
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join, sep } from "node:path";
import { describe, it } from "node:test";
import {
  CLI_ENTRY,
  CONTROLLER_BUNDLE,
  MIN_NODE_MAJOR,
  entryFor,
  nodeCandidates,
  nodeMajor,
} from "../../../cli/launch.js";
import { repositoryRoot } from "../../../scripts/generate-schema.js";

const root = repositoryRoot();
const version = (
  JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string }
).version;

/** PATH without any `node_modules/.bin`: `#!/usr/bin/env node` finds the machine's node. */
const machinePath = (process.env.PATH ?? "")
  .split(delimiter)
  .filter((p) => !p.includes(`node_modules${sep}.bin`))
  .join(delimiter);

describe("the entry `cocoonset` runs", () => {
  it("runs the controller's bundle for `controller` while it is not older than the compiled controller", () => {
    const dir = mkdtempSync(join(tmpdir(), "cocoonset-entry-"));
    try {
      mkdirSync(join(dir, "dist", "controller"), { recursive: true });
      const source = join(dir, "dist", "controller", "main.js");
      const bundle = join(dir, CONTROLLER_BUNDLE);
      writeFileSync(source, "");
      assert.equal(entryFor(dir, ["controller"]), CLI_ENTRY, "no bundle: the CLI");
      writeFileSync(bundle, "");
      utimesSync(source, 1000, 1000);
      utimesSync(bundle, 2000, 2000);
      assert.equal(entryFor(dir, ["controller", "--help"]), CONTROLLER_BUNDLE);
      assert.equal(entryFor(dir, ["plan"]), CLI_ENTRY, "any other command: the CLI");
      assert.equal(entryFor(dir, []), CLI_ENTRY);
      utimesSync(source, 3000, 3000);
      assert.equal(entryFor(dir, ["controller"]), CLI_ENTRY, "a stale bundle: the CLI");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("the package's Node scripts", () => {
  it("reads Node versions and knows where the project's Node is", () => {
    assert.equal(nodeMajor("v20.20.2"), 20);
    assert.equal(nodeMajor("24.21.0"), 24);
    assert.ok(nodeMajor(process.version) >= MIN_NODE_MAJOR);
    assert.deepEqual(nodeCandidates(join(sep, "p", "node_modules", "pulumi-cocoonset")), [
      join(sep, "p", "node_modules", "pulumi-cocoonset", "node_modules", ".bin", "node"),
      join(sep, "p", "node_modules", ".bin", "node"),
    ]);
  });

  it("runs `cocoonset --version` on this Node", () => {
    const r = spawnSync(process.execPath, [join(root, "bin", "cocoonset"), "--version"], {
      encoding: "utf8",
    });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout.trim(), version);
  });

  it("runs `cocoonset --version` as an executable, with the machine's node first on PATH", () => {
    const r = spawnSync(join(root, "bin", "cocoonset"), ["--version"], {
      encoding: "utf8",
      env: { ...process.env, PATH: machinePath },
    });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout.trim(), version);
  });

  it("starts the plugin as the engine does: it prints its port and ends on SIGTERM", async () => {
    const child = spawn(join(root, "bin", "pulumi-resource-cocoonset"), ["127.0.0.1:1"], {
      env: { ...process.env, PATH: machinePath },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (b: Buffer) => (stderr += b.toString()));
    const closed = new Promise<number | null>((resolve) => child.on("close", resolve));
    const port = await new Promise<string>((resolve, reject) => {
      let out = "";
      child.stdout.on("data", (b: Buffer) => {
        out += b.toString();
        if (out.includes("\n")) resolve(out.split("\n")[0]);
      });
      child.on("close", () => reject(new Error(`the plugin ended before its port:\n${stderr}`)));
    });
    assert.match(port, /^\d+$/);
    child.kill("SIGTERM");
    await closed; // a child the launcher did not pass the signal to would keep it waiting
  });
});
