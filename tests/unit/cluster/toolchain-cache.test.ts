/**
 * The toolchain cache, one folder per group: keys that move only with their own group, the
 * migration from the old one-folder-per-pin-set layout (what may be taken, and what never
 * is), and the lock that keeps two `ensure` runs from building one group twice.
 */
import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import {
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
  existsSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { describe, test, type TestContext } from "node:test";
import { fileURLToPath } from "node:url";
import { resolveOnly } from "../../../cluster/toolchain.js";
import { acquireLock, lockOwner, tryLock } from "../../../cluster/toolchain-lock.js";
import {
  knownPinSets,
  migrationVerdict,
  planCacheMigration,
} from "../../../cluster/toolchain-migration.js";
import {
  groupKey,
  loadPins,
  locate,
  pinsKey,
  type ToolchainPins,
} from "../../../cluster/toolchain-pins.js";

const cli = fileURLToPath(new URL("../../../cluster/dev-cli.js", import.meta.url));
const toolchainModule = fileURLToPath(
  new URL("../../../cluster/toolchain-lock.js", import.meta.url),
);

function scratch(t: TestContext): string {
  const d = mkdtempSync(join(tmpdir(), "cocoonset-toolchain-cache-"));
  t.after(() => rmSync(d, { recursive: true, force: true }));
  return d;
}

/** The pin file with `drop` groups left out, as it was before they were added. */
function without(pins: ToolchainPins, ...drop: string[]): ToolchainPins {
  const groups = { ...pins.groups };
  for (const g of drop) delete groups[g];
  return { ...pins, groups };
}

function clone(pins: ToolchainPins): ToolchainPins {
  return JSON.parse(JSON.stringify(pins)) as ToolchainPins;
}

/** The pin file with one more group, `extra`. */
function withExtra(pins: ToolchainPins): ToolchainPins {
  const p = clone(pins);
  p.groups.extra = {
    module: "example.com/extra",
    version: "v1.0.0",
    binaries: { extra: "example.com/extra/cmd/extra" },
    versionArgs: [],
    versionMatch: "",
  };
  return p;
}

/** A shell script that prints `output` and exits 0 whatever it is asked. */
function fakeBinary(path: string, output: string): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, `#!/bin/sh\necho '${output}'\n`, { mode: 0o755 });
}

describe("keys", () => {
  const pins = loadPins();

  test("adding a group leaves every other group's key as it was, and changes the whole key", () => {
    const after = withExtra(pins);
    for (const g of Object.keys(pins.groups))
      assert.equal(groupKey(g, after), groupKey(g, pins), g);
    assert.notEqual(pinsKey(after), pinsKey(pins));
  });

  test("changing one group's version changes that group's key only", () => {
    const changed = clone(pins);
    changed.groups.kwok.version = "v0.8.1";
    for (const g of Object.keys(pins.groups)) {
      if (g === "kwok") assert.notEqual(groupKey(g, changed), groupKey(g, pins));
      else assert.equal(groupKey(g, changed), groupKey(g, pins), g);
    }
  });

  test("each built field moves a group's key; comments and version probes do not", () => {
    const base = groupKey("pulumi", pins);
    const edits: [string, (p: ToolchainPins) => void][] = [
      ["tags", (p) => (p.groups.pulumi.tags = "osusergo")],
      ["also", (p) => (p.groups.pulumi.also = {})],
      ["stamp", (p) => (p.groups.pulumi.stamp = "3.274.1")],
      ["module", (p) => (p.groups.pulumi.module = "example.com/pulumi")],
      ["binaries", (p) => (p.groups.pulumi.binaries = { pulumi: "example.com/cmd/pulumi" })],
      ["go", (p) => (p.go = "1.27.0")],
    ];
    for (const [what, edit] of edits) {
      const p = clone(pins);
      edit(p);
      assert.notEqual(groupKey("pulumi", p), base, what);
    }
    const p = clone(pins);
    p.groups.pulumi.versionMatch = "something else";
    p.groups.pulumi.versionArgs = ["--version"];
    (p.groups.pulumi as unknown as Record<string, unknown>).$comment = "a note";
    assert.equal(groupKey("pulumi", p), base);
  });

  test("--only takes a group's name for its binaries, and names an unknown one", () => {
    assert.deepEqual(resolveOnly(["pulumi-kubernetes"], pins), ["pulumi-resource-kubernetes"]);
    assert.deepEqual(resolveOnly(["kubernetes", "etcd"], pins), [
      "etcd",
      "kube-apiserver",
      "kube-controller-manager",
      "kube-scheduler",
      "kubectl",
    ]);
    assert.throws(
      () => resolveOnly(["pulumi-yml"], pins),
      /\[only\] unknown binary "pulumi-yml": choose from etcd, .*, or a group: etcd, kubernetes, /,
    );
  });
});

describe("migration decision", () => {
  // The pins after a group was added, and the key of the folder the pins before it keyed.
  const oldPins = loadPins();
  const pins = withExtra(oldPins);
  const oldKey = pinsKey(oldPins);

  test("the key of the pin set before new groups were added is recognised", () => {
    const known = knownPinSets(pins);
    assert.ok(known.has(oldKey));
    for (const g of Object.keys(oldPins.groups))
      assert.equal(migrationVerdict(pins, g, oldKey, known), "same-pins", g);
    // That folder never held the new group.
    assert.equal(migrationVerdict(pins, "extra", oldKey, known), "no");
  });

  test("a folder of a known pin set with another version of the group is never taken", () => {
    const older = clone(oldPins);
    older.groups["pulumi-kubernetes"].version = "v4.0.0-20250101000000-000000000000";
    older.groups.etcd.version = "v3.6.12";
    const known = knownPinSets(pins, [older]);
    const key = pinsKey(older);
    assert.equal(migrationVerdict(pins, "pulumi-kubernetes", key, known), "no");
    assert.equal(migrationVerdict(pins, "etcd", key, known), "no");
    assert.equal(migrationVerdict(pins, "kwok", key, known), "same-pins");
  });

  test("a folder of an unknown pin set gives only what reports the pinned version", () => {
    const known = knownPinSets(pins);
    assert.equal(migrationVerdict(pins, "etcd", "0123456789ab", known), "if-version-matches");
    // No version flag: nothing tells what it was built from.
    assert.equal(migrationVerdict(pins, "pulumi-kubernetes", "0123456789ab", known), "no");
    assert.equal(migrationVerdict(pins, "extra", "0123456789ab", known), "no");
  });

  test("the plan checks each file's version and prefers folders of the same pins", (t) => {
    const d = scratch(t);
    const known = knownPinSets(pins);
    const same = { bin: join(d, `toolchain-${oldKey}`, "bin"), key: oldKey };
    const unknown = { bin: join(d, "toolchain-0123456789ab", "bin"), key: "0123456789ab" };
    fakeBinary(join(unknown.bin, "etcd"), "etcd Version: 3.6.13");
    fakeBinary(join(unknown.bin, "pulumi-resource-kubernetes"), "");
    fakeBinary(join(unknown.bin, "kwok"), "kwok version 0.7.0");
    fakeBinary(join(same.bin, "etcd"), "etcd Version: 3.6.13");
    fakeBinary(join(same.bin, "kwok"), "kwok version 0.7.0");

    const etcd = planCacheMigration(pins, "etcd", ["etcd"], [unknown, same], known).take.get(
      "etcd",
    );
    assert.deepEqual(etcd, { path: join(same.bin, "etcd"), verdict: "same-pins" });
    // A version that does not match is refused, even from a folder of the same pins.
    assert.equal(planCacheMigration(pins, "kwok", ["kwok"], [same, unknown], known).take.size, 0);
    assert.equal(
      planCacheMigration(
        pins,
        "pulumi-kubernetes",
        ["pulumi-resource-kubernetes"],
        [unknown],
        known,
      ).take.size,
      0,
    );
    fakeBinary(join(same.bin, "pulumi-resource-kubernetes"), "");
    assert.deepEqual(
      planCacheMigration(
        pins,
        "pulumi-kubernetes",
        ["pulumi-resource-kubernetes"],
        [unknown, same],
        known,
      ).take.get("pulumi-resource-kubernetes")?.verdict,
      "same-pins",
    );
    const fromUnknownOnly = planCacheMigration(pins, "etcd", ["etcd"], [unknown], known);
    assert.equal(fromUnknownOnly.take.get("etcd")?.verdict, "if-version-matches");
  });

  test("kubectl's version is asked with `version --client` (it has no --version flag)", (t) => {
    const d = scratch(t);
    const kubectl = join(d, "kubectl");
    writeFileSync(
      kubectl,
      `#!/bin/sh\nif [ "$1 $2" = "version --client" ]; then echo 'Client Version: v1.36.3'; exit 0; fi\necho 'error: unknown flag: --version' >&2; exit 1\n`,
      { mode: 0o755 },
    );
    const saved = process.env.COCOONSET_BIN_DIR;
    process.env.COCOONSET_BIN_DIR = d;
    t.after(() => {
      if (saved === undefined) delete process.env.COCOONSET_BIN_DIR;
      else process.env.COCOONSET_BIN_DIR = saved;
    });
    assert.deepEqual(locate("kubectl", pins), {
      name: "kubectl",
      path: kubectl,
      source: "configured",
    });
  });
});

describe("ensure takes binaries from the old layout instead of building them", () => {
  const pins = loadPins();
  // A folder of the old layout keyed by the pins as they were before kwok was added.
  const oldKey = pinsKey(without(pins, "kwok"));

  /** A cache root under `d` and an environment without Go (a build would fail at once). */
  function bare(d: string): NodeJS.ProcessEnv {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      PATH: dirname(process.execPath),
      XDG_CACHE_HOME: d,
      // No release downloads: what is not found is built.
      COCOONSET_RELEASE_BASE_URL: "none",
      PULUMI_HOME: join(d, "pulumi-home"),
    };
    delete env.COCOONSET_TOOLCHAIN_DIR;
    delete env.COCOONSET_BIN_DIR;
    delete env.KUBEBUILDER_ASSETS;
    return env;
  }

  function ensure(args: string[], env: NodeJS.ProcessEnv) {
    return spawnSync(process.execPath, [cli, "toolchain", "ensure", ...args], {
      encoding: "utf8",
      env,
      timeout: 120_000,
    });
  }

  test("from a folder of the same pins: linked into the group folder and the bin folder, source untouched", (t) => {
    const d = scratch(t);
    const old = join(d, "pulumi-cocoonset", `toolchain-${oldKey}`, "bin");
    fakeBinary(join(old, "etcd"), "etcd Version: 3.6.13");
    fakeBinary(join(old, "pulumi-resource-kubernetes"), "a provider");
    const before = statSync(join(old, "etcd"));
    const r = ensure(["--only", "etcd", "pulumi-kubernetes", "--json"], bare(d));
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stderr, /etcd: took etcd from .* \(built from the same pins, version checked\)/);
    assert.match(r.stderr, /took pulumi-resource-kubernetes from .* \(built from the same pins\)/);
    assert.doesNotMatch(r.stderr, /building/);
    const located = JSON.parse(r.stdout) as { name: string; path: string }[];
    const binDir = join(d, "pulumi-cocoonset", `toolchain-${pinsKey(pins)}`, "bin");
    assert.deepEqual(
      located.map((l) => l.path),
      [join(binDir, "etcd"), join(binDir, "pulumi-resource-kubernetes")],
    );
    const groupBin = join(
      d,
      "pulumi-cocoonset",
      "toolchain",
      "groups",
      `etcd-${groupKey("etcd", pins)}`,
      "bin",
    );
    for (const p of [join(binDir, "etcd"), join(groupBin, "etcd")])
      assert.equal(statSync(p).ino, before.ino, `${p} is a hard link of the old file`);
    const after = statSync(join(old, "etcd"));
    assert.equal(after.mtimeMs, before.mtimeMs);
    assert.equal(
      readFileSync(join(old, "etcd"), "utf8"),
      "#!/bin/sh\necho 'etcd Version: 3.6.13'\n",
    );
    // No lock is left behind.
    assert.deepEqual(
      existsSync(
        join(d, "pulumi-cocoonset", "toolchain", "groups", `etcd-${groupKey("etcd", pins)}.lock`),
      ),
      false,
    );
  });

  test("a provider of an unknown pin set, or an etcd of another version, is built instead (and without Go, fails)", (t) => {
    const d = scratch(t);
    const old = join(d, "pulumi-cocoonset", "toolchain-0123456789ab", "bin");
    fakeBinary(join(old, "pulumi-resource-kubernetes"), "a provider");
    fakeBinary(join(old, "etcd"), "etcd Version: 3.6.12");
    for (const only of ["pulumi-resource-kubernetes", "etcd"]) {
      const r = ensure(["--only", only], bare(d));
      assert.notEqual(r.status, 0, only);
      assert.doesNotMatch(r.stderr, /took/);
      assert.match(r.stderr, /Go 1\.26\.0 or newer is required to build the toolchain/);
    }
  });
});

describe("the group lock", () => {
  /** A node process that takes the lock, says so, and holds it until told or killed. */
  function holder(path: string): { child: ChildProcess; lines: AsyncIterator<string> } {
    const child = spawn(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        `import { acquireLock } from ${JSON.stringify(toolchainModule)};
         import { createInterface } from "node:readline";
         const lock = await acquireLock(process.argv[1], (pid) => console.log("waiting " + pid), 20);
         console.log("acquired " + (lock.tookOverFrom ?? 0));
         for await (const l of createInterface({ input: process.stdin })) if (l === "release") { lock.release(); console.log("released"); process.exit(0); }`,
        path,
      ],
      { stdio: ["pipe", "pipe", "inherit"] },
    );
    const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
    return { child, lines };
  }

  async function next(lines: AsyncIterator<string>): Promise<string> {
    const r = await lines.next();
    return r.done ? "(closed)" : r.value;
  }

  function exited(child: ChildProcess): Promise<void> {
    return new Promise((r) =>
      child.exitCode !== null || child.signalCode ? r() : child.once("exit", () => r()),
    );
  }

  test("a second taker waits for the holder; the lock names the holder's pid", async (t) => {
    const path = join(scratch(t), "g.lock");
    const a = holder(path);
    t.after(() => a.child.kill("SIGKILL"));
    assert.equal(await next(a.lines), "acquired 0");
    assert.equal(lockOwner(readFileSync(path, "utf8"))?.pid, a.child.pid);
    const attempt = tryLock(path);
    assert.deepEqual(attempt, { acquired: false, holder: a.child.pid });

    const b = holder(path);
    t.after(() => b.child.kill("SIGKILL"));
    assert.equal(await next(b.lines), `waiting ${a.child.pid}`);
    a.child.stdin!.write("release\n");
    assert.equal(await next(a.lines), "released");
    assert.equal(await next(b.lines), "acquired 0");
    assert.equal(lockOwner(readFileSync(path, "utf8"))?.pid, b.child.pid);
    b.child.stdin!.write("release\n");
    assert.equal(await next(b.lines), "released");
    await exited(b.child);
    assert.equal(existsSync(path), false, "released lock is removed");
  });

  test("the lock of a holder that died is taken over", async (t) => {
    const path = join(scratch(t), "g.lock");
    const a = holder(path);
    t.after(() => a.child.kill("SIGKILL"));
    assert.equal(await next(a.lines), "acquired 0");
    const b = holder(path);
    t.after(() => b.child.kill("SIGKILL"));
    assert.equal(await next(b.lines), `waiting ${a.child.pid}`);
    a.child.kill("SIGKILL");
    await exited(a.child);
    assert.equal(await next(b.lines), `acquired ${a.child.pid}`);
  });

  test("ensure waits for the build another process holds the lock for, and then builds nothing", async (t) => {
    const dir = scratch(t);
    const groupBin = join(dir, "groups", `etcd-${groupKey("etcd")}`, "bin");
    const other = holder(`${dirname(groupBin)}.lock`);
    t.after(() => other.child.kill("SIGKILL"));
    assert.equal(await next(other.lines), "acquired 0");

    const env: NodeJS.ProcessEnv = {
      ...process.env,
      PATH: dirname(process.execPath), // no Go: a build would fail at once
      COCOONSET_TOOLCHAIN_DIR: dir,
      COCOONSET_RELEASE_BASE_URL: "none",
    };
    delete env.COCOONSET_BIN_DIR;
    delete env.KUBEBUILDER_ASSETS;
    const ensure = spawn(process.execPath, [cli, "toolchain", "ensure", "--only", "etcd"], {
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    t.after(() => ensure.kill("SIGKILL"));
    let stderr = "";
    const waiting = new Promise<void>((resolve) =>
      ensure.stderr.setEncoding("utf8").on("data", (d: string) => {
        stderr += d;
        if (stderr.includes(`waiting for pid ${other.child.pid}`)) resolve();
      }),
    );
    const done = new Promise<number | null>((r) => ensure.on("close", (code) => r(code)));
    await Promise.race([
      waiting,
      done.then((code) => assert.fail(`ensure ended (${code}) without waiting:\n${stderr}`)),
    ]);
    // The other process finishes its build, then releases the lock.
    fakeBinary(join(groupBin, "etcd"), "etcd Version: 3.6.13");
    other.child.stdin!.write("release\n");
    assert.equal(await done, 0, stderr);
    assert.doesNotMatch(stderr, /building|took/);
    assert.equal(statSync(join(dir, "bin", "etcd")).ino, statSync(join(groupBin, "etcd")).ino);
  });

  test("a reused pid (same number, another start time) does not hold the lock", (t) => {
    const path = join(scratch(t), "g.lock");
    writeFileSync(path, `${process.pid} 1 feedbeef\n`);
    assert.equal(lockOwner(readFileSync(path, "utf8"))?.alive, false);
    const a = tryLock(path);
    assert.equal(a.acquired, true);
    assert.equal(a.acquired && a.tookOverFrom, process.pid);
    if (a.acquired) a.release();
  });

  test("acquireLock tells who holds it and returns once it is released", async (t) => {
    const path = join(scratch(t), "g.lock");
    const first = tryLock(path);
    assert.ok(first.acquired);
    const told: number[] = [];
    const second = await acquireLock(
      path,
      (pid) => {
        told.push(pid);
        if (first.acquired) first.release();
      },
      10,
    );
    assert.deepEqual(told, [process.pid]);
    assert.equal(second.tookOverFrom, undefined);
    second.release();
  });
});
