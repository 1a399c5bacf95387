/**
 * The toolchain commands as a user meets them: an `ensure` that finds everything twice in a
 * row, a cache folder whose only binary is a half-built leftover (never taken for a good
 * one), a machine without Go (a clear error before anything is built), and a language host
 * the module proxy refuses, built from a folder of source archives (a stand-in script here)
 * or, without one, a clear error.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
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
  // No release downloads: what is not found is built (and, without Go, fails).
  env.COCOONSET_RELEASE_BASE_URL = "none";
  env.PULUMI_HOME = join(toolchainDir, "pulumi-home");
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
      "pulumi-language-nodejs",
      "pulumi-resource-pulumi-nodejs",
      "pulumi-language-python",
      "pulumi-language-python-exec",
      "pulumi-resource-pulumi-python",
      "pulumi-language-go",
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

/** The environment of an ensure into `toolchainDir`, with Go and the archives of `langhosts`. */
function langhostEnv(toolchainDir: string, langhosts: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, COCOONSET_TOOLCHAIN_DIR: toolchainDir };
  env.COCOONSET_LANGHOSTS_DIR = langhosts;
  delete env.COCOONSET_BIN_DIR;
  return env;
}

test("a language host the module proxy refuses is built from the source archives, which the toolchain names", (t) => {
  const dir = mkdtempSync(join(tmpdir(), "cocoonset-toolchain-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const archives = join(dir, "langhosts");
  mkdirSync(archives);
  // A stand-in for the archives' script: same arguments, same last line.
  writeFileSync(
    join(archives, "build-language-host"),
    `set -e\n[ "$1" = go ] && [ "$3" = v3.274.1 ] || exit 9\nmkdir -p "$2"\nprintf '#!/bin/sh\\necho stand-in\\n' > "$2/pulumi-language-$1"\necho "built $2/pulumi-language-$1 (Pulumi $3, sources stand-in)"\n`,
  );
  const first = cocoonset(
    ["toolchain", "ensure", "--only", "pulumi-language-go", "--json"],
    langhostEnv(dir, archives),
  );
  assert.equal(first.status, 0, first.stderr);
  assert.match(
    first.stderr,
    /the module proxy did not serve github\.com\/pulumi\/pulumi\/sdk\/go\/pulumi-language-go\/v3@v3\.274\.1/,
  );
  assert.match(
    first.stderr,
    /built pulumi-language-go from the source archives in .*langhosts \(Pulumi v3\.274\.1, sources stand-in\)/,
  );
  const [host] = JSON.parse(first.stdout) as Located[];
  assert.equal(host.name, "pulumi-language-go");
  assert.match(readFileSync(host.path ?? "", "utf8"), /stand-in/);

  const status = cocoonset(["toolchain", "status", "--json"], langhostEnv(dir, archives));
  const groups = (JSON.parse(status.stdout) as { groups: { name: string; source?: string }[] })
    .groups;
  assert.match(
    groups.find((g) => g.name === "pulumi-language-go")?.source ?? "",
    /^source archives in .*langhosts/,
  );
  const second = cocoonset(
    ["toolchain", "ensure", "--only", "pulumi-language-go"],
    langhostEnv(dir, archives),
  );
  assert.equal(second.status, 0, second.stderr);
  assert.doesNotMatch(second.stderr, /building/, "the cached build is reused");
});

test("a language host the module proxy refuses, with no source archives, fails naming the folder", (t) => {
  const dir = mkdtempSync(join(tmpdir(), "cocoonset-toolchain-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const r = cocoonset(
    ["toolchain", "ensure", "--only", "pulumi-language-go"],
    langhostEnv(dir, join(dir, "nowhere")),
  );
  assert.notEqual(r.status, 0);
  assert.match(
    r.stderr,
    /there is no build-language-host in .*nowhere \(set COCOONSET_LANGHOSTS_DIR/,
  );
});
