/**
 * Flags that used to pass unchecked: timeouts a Node timer cannot wait (they fire at once),
 * and toolchain names that do not exist (silently ignored). Each is refused by name.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { parseTimeout } from "../../../cli/common.js";
import { resolveControllerOptions } from "../../../controller/options.js";

const cli = fileURLToPath(new URL("../../../cli/main.js", import.meta.url));
const devCli = fileURLToPath(new URL("../../../cluster/dev-cli.js", import.meta.url));

function run(args: string[], entry = cli) {
  return spawnSync(process.execPath, [entry, ...args], { encoding: "utf8", timeout: 60_000 });
}

test("a timeout must be above zero and short enough for a timer", () => {
  assert.equal(parseTimeout("90s"), 90_000);
  assert.throws(() => parseTimeout("0"), /"0" must be longer than 0/);
  assert.throws(() => parseTimeout("0s"), /must be longer than 0/);
  assert.throws(() => parseTimeout("1000h"), /"1000h" is too long \(at most 596h\)/);
});

test("release --timeout 0 and 1000h are refused before anything is asked of a cluster", () => {
  for (const t of ["0", "1000h"]) {
    const r = run([
      "release",
      "--namespace",
      "n",
      "--owner-kind",
      "Pod",
      "--owner-name",
      "p",
      "--owner-uid",
      "u",
      "--timeout",
      t,
      "--kubeconfig",
      "/nonexistent",
    ]);
    assert.equal(r.status, 1, r.stderr);
    assert.match(
      r.stderr,
      /option '--timeout <duration>' argument .* (must be longer than 0|is too long)/,
    );
  }
});

test("--reap-interval beyond what a timer can wait is refused (the reaper would spin)", () => {
  assert.throws(
    () => resolveControllerOptions({ reapInterval: "1000h" }, {}, undefined),
    /\[--reap-interval\] must be at most 596h/,
  );
  assert.equal(
    resolveControllerOptions({ reapInterval: "596h" }, {}, undefined).reapIntervalMs,
    596 * 3_600_000,
  );
});

test("toolchain ensure --only with an unknown name is refused, naming it and the valid ones", () => {
  const r = run(["toolchain", "ensure", "--only", "kube-apiserver", "etcdd"], devCli);
  assert.equal(r.status, 1, r.stderr);
  assert.match(
    r.stderr,
    /^cocoonset: \[only\] unknown binary "etcdd": choose from etcd, kube-apiserver, /,
  );
});

test("toolchain ensure --for an unknown command is refused, naming the valid ones", () => {
  const r = run(["toolchain", "ensure", "--for", "demos"], devCli);
  assert.equal(r.status, 1, r.stderr);
  assert.equal(
    r.stderr,
    'cocoonset: [for] unknown command "demos": choose from cluster, demo, test (the needs of toolchain.json)\n',
  );
});

test("plan -f names what is wrong with the file itself, before any cluster is asked", (t) => {
  const dir = mkdtempSync(join(tmpdir(), "cocoonset-plan-file-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const bomb = join(dir, "bomb.yaml");
  // Each line multiplies the one before by nine: fully expanded it would be 2 * 9^4 entries.
  writeFileSync(
    bomb,
    [
      "a: &a [1, 2]",
      "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]",
      "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]",
      "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]",
      "e: [*d, *d, *d, *d, *d, *d, *d, *d, *d]",
    ].join("\n"),
  );
  const cases: [string, RegExp][] = [
    [join(dir, "missing.yaml"), /^cocoonset: \[-f\] cannot read .*missing\.yaml: no such file\n$/],
    [dir, /^cocoonset: \[-f\] cannot read .*: it is a directory\n$/],
    [bomb, /^cocoonset: .*bomb\.yaml: not valid YAML: Excessive alias count/],
  ];
  for (const [file, want] of cases) {
    const r = run(["plan", "-f", file, "--kubeconfig", "/nonexistent"]);
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, want);
    assert.equal(r.stdout, "");
  }
});
