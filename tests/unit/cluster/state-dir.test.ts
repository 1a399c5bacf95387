/**
 * The embedded cluster's guards, before anything starts: a state directory that is not the
 * cluster's own is never reused or removed (by the library or the CLI, by flag or env var),
 * flags are checked, and another OS is refused at once.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test, type TestContext } from "node:test";
import { fileURLToPath } from "node:url";
import {
  clusterDown,
  clusterUp,
  STATE_MARKER,
  stateDirKind,
} from "../../../cluster/local-cluster.js";

const cli = fileURLToPath(new URL("../../../cluster/dev-cli.js", import.meta.url));

function scratch(t: TestContext): string {
  const d = mkdtempSync(join(tmpdir(), "cocoonset-statedir-"));
  t.after(() => rmSync(d, { recursive: true, force: true }));
  return d;
}

/** A folder that looks like a user's: a file and a sub-folder with a file. */
function foreignDir(root: string): string {
  const d = join(root, "home");
  mkdirSync(join(d, "projects"), { recursive: true });
  writeFileSync(join(d, "notes.txt"), "mine");
  writeFileSync(join(d, "projects", "a.txt"), "mine too");
  return d;
}

function run(args: string[], env: NodeJS.ProcessEnv = {}) {
  const r = spawnSync(process.execPath, [cli, ...args], {
    encoding: "utf8",
    env: { ...process.env, COCOONSET_CLUSTER_DIR: "", ...env },
    timeout: 60_000,
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe("cluster state directory", () => {
  test("classifies absent, empty, own, legacy and foreign folders", (t) => {
    const root = scratch(t);
    assert.equal(stateDirKind(join(root, "nope")), "absent");
    const empty = join(root, "empty");
    mkdirSync(empty);
    assert.equal(stateDirKind(empty), "empty");
    const own = join(root, "own");
    mkdirSync(join(own, "logs"), { recursive: true });
    writeFileSync(join(own, STATE_MARKER), "");
    writeFileSync(join(own, "whatever"), "");
    assert.equal(stateDirKind(own), "cluster");
    const legacy = join(root, "legacy");
    mkdirSync(join(legacy, "pki"), { recursive: true });
    writeFileSync(join(legacy, "state.json"), JSON.stringify({ version: 1, components: [] }));
    assert.equal(stateDirKind(legacy), "cluster", "a pre-marker cluster folder is still ours");
    writeFileSync(join(legacy, "thesis.tex"), "");
    assert.equal(stateDirKind(legacy), "foreign", "not with a file of someone else in it");
    assert.equal(stateDirKind(foreignDir(root)), "foreign");
    writeFileSync(join(root, "file"), "");
    assert.equal(stateDirKind(join(root, "file")), "not-a-directory");
  });

  test("clusterDown refuses a foreign folder, naming it, and touches nothing", async (t) => {
    const d = foreignDir(scratch(t));
    await assert.rejects(clusterDown(d), (e: Error) => {
      assert.match(e.message, /\[state-dir\]/);
      assert.ok(e.message.includes(d), e.message);
      assert.match(e.message, /nothing was touched/);
      return true;
    });
    assert.deepEqual(readdirSync(d).sort(), ["notes.txt", "projects"]);
  });

  test("clusterUp refuses a foreign folder before starting anything", async (t) => {
    const d = foreignDir(scratch(t));
    await assert.rejects(
      clusterUp({ stateDir: d, platform: "linux", progress: () => undefined }),
      (e: Error) => e.message.includes(d) && /not empty/.test(e.message),
    );
    assert.deepEqual(readdirSync(d).sort(), ["notes.txt", "projects"]);
  });

  test("clusterDown removes an empty folder and the cluster's own, and ignores an absent one", async (t) => {
    const root = scratch(t);
    const empty = join(root, "empty");
    mkdirSync(empty);
    assert.deepEqual(await clusterDown(empty), { stopped: [] });
    assert.equal(existsSync(empty), false);
    const own = join(root, "own");
    mkdirSync(join(own, "logs"), { recursive: true });
    writeFileSync(join(own, STATE_MARKER), "");
    await clusterDown(own);
    assert.equal(existsSync(own), false);
    assert.deepEqual(await clusterDown(join(root, "absent")), { stopped: [] });
  });

  test("the CLI refuses a foreign folder from --state-dir, $COCOONSET_CLUSTER_DIR and a file", (t) => {
    const root = scratch(t);
    const d = foreignDir(root);
    for (const [args, env] of [
      [["cluster", "down", "--state-dir", d], {}],
      [["cluster", "down"], { COCOONSET_CLUSTER_DIR: d }],
      [["cluster", "up", "--state-dir", d], {}],
    ] as [string[], NodeJS.ProcessEnv][]) {
      const r = run(args, env);
      assert.equal(r.status, 1, `${args.join(" ")}: ${r.stderr}`);
      assert.match(
        r.stderr,
        /^cocoonset: \[state-dir\] .* not empty and has no \.cocoonset-cluster marker/,
      );
      assert.ok(r.stderr.includes(d), r.stderr);
      assert.deepEqual(readdirSync(d).sort(), ["notes.txt", "projects"], args.join(" "));
    }
    writeFileSync(join(root, "afile"), "keep");
    const f = run(["cluster", "down", "--state-dir", join(root, "afile")]);
    assert.equal(f.status, 1);
    assert.match(f.stderr, /is not a directory/);
    assert.equal(existsSync(join(root, "afile")), true);
  });

  test("an empty --state-dir is refused, not taken as the current folder", (t) => {
    const cwd = scratch(t);
    writeFileSync(join(cwd, "keep.txt"), "");
    for (const sub of ["up", "down", "status", "env"]) {
      const r = spawnSync(process.execPath, [cli, "cluster", sub, "--state-dir", ""], {
        cwd,
        encoding: "utf8",
        env: { ...process.env, COCOONSET_CLUSTER_DIR: "" },
      });
      assert.equal(r.status, 1, r.stderr);
      assert.match(r.stderr, /\[state-dir\] must not be empty/);
    }
    assert.deepEqual(readdirSync(cwd), ["keep.txt"]);
  });
});

describe("cluster up guards", () => {
  test("another OS is refused at once, touching nothing", async (t) => {
    const root = scratch(t);
    const d = join(root, "state");
    for (const platform of ["darwin", "win32", "freebsd"] as NodeJS.Platform[]) {
      await assert.rejects(
        clusterUp({ stateDir: d, platform, progress: () => undefined }),
        (e: Error) =>
          e.message.includes("Linux only") &&
          e.message.includes(platform) &&
          /\/proc/.test(e.message),
      );
    }
    assert.equal(existsSync(d), false, "no state directory was created");
  });

  test("--nodes and --apiserver-arg are checked before anything starts", async (t) => {
    const d = join(scratch(t), "state");
    await assert.rejects(
      clusterUp({ stateDir: d, nodes: 5000, platform: "linux" }),
      /\[nodes\] must be an integer from 1 to 100/,
    );
    await assert.rejects(
      clusterUp({ stateDir: d, apiserverArgs: ["feature-gates=Foo=true"], platform: "linux" }),
      /\[apiserver-arg\] "feature-gates=Foo=true" is not a kube-apiserver flag/,
    );
    assert.equal(existsSync(d), false);
    const r = run(["cluster", "up", "--state-dir", d, "--nodes", "0"]);
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /must be an integer >= 1/);
  });
});
