/**
 * The toolchain commands as a user meets them: an `ensure` that finds everything twice in a
 * row, a cache folder whose only binary is a half-built leftover (never taken for a good
 * one), and a machine without Go (a clear error before anything is built).
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { groupKey } from "../../cluster/toolchain-pins.js";
import { repoRoot } from "../support/pulumi.js";

const cli = join(repoRoot, "dist", "cluster", "dev-cli.js");

interface Located {
  name: string;
  path?: string;
  source?: string;
}

function cocoonset(args: string[], env: NodeJS.ProcessEnv = process.env) {
  return spawnSync(process.execPath, [cli, ...args], { encoding: "utf8", env, timeout: 120_000 });
}

/** An environment whose PATH holds only this Node: no go, no pulumi, no kubectl. */
function bareEnv(toolchainDir: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, PATH: dirname(process.execPath) };
  env.COCOONSET_TOOLCHAIN_DIR = toolchainDir;
  delete env.COCOONSET_BIN_DIR;
  delete env.KUBEBUILDER_ASSETS;
  return env;
}

test("ensure is idempotent: a second run finds every binary where the first left it", () => {
  const first = cocoonset(["toolchain", "ensure", "--json"]);
  assert.equal(first.status, 0, first.stderr);
  const second = cocoonset(["toolchain", "ensure", "--json"]);
  assert.equal(second.status, 0, second.stderr);
  const a = JSON.parse(first.stdout) as Located[];
  const b = JSON.parse(second.stdout) as Located[];
  assert.deepEqual(b, a);
  assert.deepEqual(
    a.map((l) => l.name),
    [
      "etcd",
      "kube-apiserver",
      "kube-controller-manager",
      "kube-scheduler",
      "kubectl",
      "kwok",
      "pulumi",
      "pulumi-resource-kubernetes",
      "registry",
      "distribution-registry",
      "pulumi-language-yaml",
      "pulumi-resource-pulumi-nodejs",
      "pulumi-language-nodejs",
    ],
  );
  assert.ok(
    a.every((l) => l.path),
    "every binary is found",
  );
  assert.doesNotMatch(second.stderr, /building/, "nothing is built the second time");
});

test("a half-built binary left by an interrupted build is never taken for a good one", (t) => {
  const dir = mkdtempSync(join(tmpdir(), "cocoonset-toolchain-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  mkdirSync(join(dir, "bin"), { recursive: true });
  writeFileSync(join(dir, "bin", ".etcd.partial-4242"), "truncated", { mode: 0o755 });
  // The group folder a build writes into, with the same leftover.
  const groupBin = join(dir, "groups", `etcd-${groupKey("etcd")}`, "bin");
  mkdirSync(groupBin, { recursive: true });
  writeFileSync(join(groupBin, ".etcd.partial-4242"), "truncated", { mode: 0o755 });
  const status = cocoonset(["toolchain", "status", "--json"], bareEnv(dir));
  assert.equal(status.status, 1, "status exits 1 while a binary is missing");
  const st = JSON.parse(status.stdout) as { cacheDir: string; binaries: Located[] };
  assert.equal(st.cacheDir, dir);
  assert.deepEqual(
    st.binaries.find((l) => l.name === "etcd"),
    { name: "etcd" },
  );
  // ensure does not link it into place either: with no Go it can only fail.
  const r = cocoonset(["toolchain", "ensure", "--only", "etcd"], bareEnv(dir));
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /Go 1\.26\.0 or newer is required/);
});

test("without Go, ensure says which version it needs and builds nothing", (t) => {
  const dir = mkdtempSync(join(tmpdir(), "cocoonset-toolchain-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const r = cocoonset(["toolchain", "ensure", "--only", "etcd"], bareEnv(dir));
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /Go 1\.26\.0 or newer is required to build the toolchain/);
  assert.match(r.stderr, /`go` was not found on PATH/);
  const st = JSON.parse(cocoonset(["toolchain", "status", "--json"], bareEnv(dir)).stdout) as {
    binaries: Located[];
  };
  assert.equal(st.binaries.find((l) => l.name === "etcd")?.path, undefined);
});
