/**
 * The toolchain: the control-plane and Pulumi binaries this project needs, found on the
 * machine or built once from Go modules and cached outside the repository.
 *
 * Layout of the cache (under `~/.cache/pulumi-cocoonset/`):
 * - `toolchain/groups/<group>-<group key>/bin/`: the binaries of one group of
 *   `toolchain.json`, keyed by what goes into them (Go version, module, versions, tags,
 *   packages). Changing or adding one group builds that group only.
 * - `toolchain-<pins key>/bin/`: the folder the rest of the code uses ({@link binDir}),
 *   keyed by the whole pin set and assembled from hard links to the group folders.
 *
 * Guarantees: a binary in a group folder was renamed into place only after `go build`
 * exited 0, so an interrupted build is never taken for a good one; a group folder is never
 * reused for other pins; two `ensure` runs never build the same group at once (a lock file
 * holding the builder's pid; the lock of a dead process is taken over). A group folder
 * that is missing is first filled from a folder of the old layout
 * (`toolchain-<key>/bin`, one folder per whole pin set) that holds binaries built from the
 * same pins, by hard links, instead of a rebuild.
 *
 * Caveats: builds are slow on 2 cores (tens of minutes cold). Go's own module and build
 * caches make a rebuild after an interruption much cheaper.
 */
import { spawn, spawnSync } from "node:child_process";
import {
  chmodSync,
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { dirname, join } from "node:path";
import {
  BinaryName,
  Located,
  ToolGroup,
  ToolchainError,
  ToolchainPins,
  allBinaries,
  binDir,
  cacheDir,
  groupDir,
  groupFiles,
  groupKey,
  groupsFor,
  langhostsDir,
  loadPins,
  locate,
} from "./toolchain-pins.js";
import {
  OldBinFolder,
  isFile,
  knownPinSets,
  oldBinFolders,
  pinHistory,
  placeLink,
  planCacheMigration,
} from "./toolchain-migration.js";
import { acquireLock, readText } from "./toolchain-lock.js";
import { ensurePythonVenv } from "./toolchain-python.js";
import { fetchReleaseBinaries, type ReleaseOptions } from "./toolchain-release.js";

export type Progress = (line: string) => void;

function fmtElapsed(ms: number): string {
  const s = Math.round(ms / 1000);
  return s < 60 ? `${s}s` : `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
}

/** Runs a command; on failure throws a ToolchainError naming the step. */
async function run(
  step: string,
  cmd: string,
  args: string[],
  opts: { cwd: string; env: NodeJS.ProcessEnv; log: string; progress: Progress; what: string },
): Promise<string> {
  const started = Date.now();
  const ticker = setInterval(
    () => opts.progress(`  ${opts.what}: ${step} … ${fmtElapsed(Date.now() - started)}`),
    30_000,
  );
  try {
    return await new Promise<string>((resolve, reject) => {
      const child = spawn(cmd, args, {
        cwd: opts.cwd,
        env: opts.env,
        stdio: ["ignore", "pipe", "pipe"],
      });
      let out = "";
      child.stdout.on("data", (d: Buffer) => (out += d.toString()));
      child.stderr.on("data", (d: Buffer) => (out += d.toString()));
      child.on("error", (e) =>
        reject(new ToolchainError(`${opts.what}: ${step} could not start ${cmd}: ${e.message}`)),
      );
      child.on("close", (code, signal) => {
        writeFileSync(opts.log, `$ ${cmd} ${args.join(" ")}\n${out}\n`, { flag: "a" });
        if (code === 0) return resolve(out);
        const tail = out.trim().split("\n").slice(-15).join("\n");
        reject(
          new ToolchainError(
            `${opts.what}: step "${step}" failed (${signal ?? `exit ${code}`}); log ${opts.log}\n${tail}`,
          ),
        );
      });
    });
  } finally {
    clearInterval(ticker);
  }
}

/** Checks that Go is installed and new enough; returns its version. */
function checkGo(pins: ToolchainPins = loadPins()): string {
  const r = spawnSync("go", ["env", "GOVERSION"], { encoding: "utf8" });
  if (r.error || r.status !== 0) {
    throw new ToolchainError(
      `Go ${pins.go} or newer is required to build the toolchain, and \`go\` was not found on PATH`,
    );
  }
  const v = r.stdout.trim().replace(/^go/, "");
  if (compareVersions(v, pins.go) < 0) {
    throw new ToolchainError(
      `Go ${pins.go} or newer is required to build the toolchain; found go${v}`,
    );
  }
  return v;
}

/** Compares dotted numeric versions (prefix `v` and suffixes ignored). */
function compareVersions(a: string, b: string): number {
  const pa = a
    .replace(/^v/, "")
    .split(/[.-]/)
    .map((x) => parseInt(x, 10) || 0);
  const pb = b
    .replace(/^v/, "")
    .split(/[.-]/)
    .map((x) => parseInt(x, 10) || 0);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

function goEnv(): NodeJS.ProcessEnv {
  return { ...process.env, GOTOOLCHAIN: "local", CGO_ENABLED: "0", GOFLAGS: "-mod=mod" };
}

function ldflags(groupName: string, group: ToolGroup): string {
  const x = (k: string, v: string) => `-X ${k}=${v}`;
  switch (groupName) {
    case "kubernetes": {
      const [major, minor] = group.version.replace(/^v/, "").split(".");
      const flags: string[] = ["-s", "-w"];
      for (const pkg of ["k8s.io/component-base/version", "k8s.io/client-go/pkg/version"]) {
        flags.push(
          x(`${pkg}.gitVersion`, group.version),
          x(`${pkg}.gitMajor`, major),
          x(`${pkg}.gitMinor`, minor),
          x(`${pkg}.gitTreeState`, "clean"),
          x(`${pkg}.buildDate`, "2026-01-01T00:00:00Z"),
        );
      }
      return flags.join(" ");
    }
    case "pulumi":
    case "pulumi-language-nodejs":
    case "pulumi-language-python":
    case "pulumi-language-go":
      return `-s -w ${x("github.com/pulumi/pulumi/sdk/v3/go/common/version.Version", group.version)}`;
    case "pulumi-kubernetes":
      return `-s -w ${x("github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version", group.stamp ?? group.version)}`;
    case "pulumi-yaml":
      return `-s -w ${x("github.com/pulumi/pulumi-yaml/pkg/version.Version", group.version)}`;
    case "distribution":
      return `-s -w ${x("github.com/distribution/distribution/v3/version.version", group.version)}`;
    default:
      return "-s -w";
  }
}

/** Writes the wrapper module for a group and returns the package paths to build. */
async function prepareWrapper(
  groupName: string,
  group: ToolGroup,
  dir: string,
  ctx: { env: NodeJS.ProcessEnv; log: string; progress: Progress; pins: ToolchainPins },
): Promise<Record<string, string>> {
  mkdirSync(dir, { recursive: true });
  const what = `${group.module}@${group.version}`;
  const opts = { cwd: dir, env: ctx.env, log: ctx.log, progress: ctx.progress, what };
  const lines = [`module cocoonset.local/toolchain/${groupName}`, "", `go ${ctx.pins.go}`, ""];
  const pkgs: Record<string, string> = { ...group.binaries };
  if (groupName === "kubernetes") {
    // k8s.io/kubernetes requires every staging module at v0.0.0 through replace lines;
    // map each one to its published version, read from the module's own go.mod.
    const info = JSON.parse(
      await run(
        "download k8s.io/kubernetes go.mod",
        "go",
        ["mod", "download", "-json", `${group.module}@${group.version}`],
        opts,
      ),
    ) as { GoMod: string };
    const gomod = readFileSync(info.GoMod, "utf8");
    const godebug = gomod.match(/^godebug .*$/m);
    if (godebug) lines.push(godebug[0], "");
    const staging = [...gomod.matchAll(/^\s*(k8s\.io\/[\w.-]+)\s+=>\s+\.\/staging\//gm)].map(
      (m) => m[1],
    );
    if (staging.length === 0) {
      throw new ToolchainError(`${what}: no staging replace lines found in ${info.GoMod}`);
    }
    for (const m of staging) lines.push(`replace ${m} => ${m} ${group.stagingVersion}`);
    lines.push("");
  }
  lines.push(`require ${group.module} ${group.version}`);
  for (const [m, v] of Object.entries(group.also ?? {})) lines.push(`require ${m} ${v}`);
  writeFileSync(join(dir, "go.mod"), lines.join("\n") + "\n");

  if (groupName === "pulumi-kubernetes") {
    // Its main package embeds two generated files that the module zip lacks: copy the
    // command into the wrapper and generate them here.
    const info = JSON.parse(
      await run(
        "download provider module",
        "go",
        ["mod", "download", "-json", `${group.module}@${group.version}`],
        opts,
      ),
    ) as { Dir: string };
    const cmdSrc = join(info.Dir, "cmd", "pulumi-resource-kubernetes");
    const cmdDst = join(dir, "cmd", "pulumi-resource-kubernetes");
    rmSync(cmdDst, { recursive: true, force: true });
    cpSync(cmdSrc, cmdDst, { recursive: true });
    // Module cache files are read-only; the copy must be writable for the next refresh.
    chmodSync(cmdDst, 0o755);
    rmSync(join(cmdDst, "generate.go"), { force: true });
    const schema = JSON.parse(readFileSync(join(cmdSrc, "schema.json"), "utf8")) as Record<
      string,
      unknown
    >;
    schema.version = group.stamp ?? group.version;
    writeFileSync(join(cmdDst, "schema-embed.json"), JSON.stringify(schema));
    const mapping = JSON.parse(
      readFileSync(join(cmdSrc, "terraform-mapping.json"), "utf8"),
    ) as unknown;
    writeFileSync(join(cmdDst, "terraform-mapping-embed.json"), JSON.stringify(mapping));
    pkgs["pulumi-resource-kubernetes"] = "./cmd/pulumi-resource-kubernetes";
  } else {
    const imports = Object.values(group.binaries).map((p) => `\t_ "${p}"`);
    writeFileSync(
      join(dir, "tools.go"),
      `//go:build tools\n\n// Package tools pins the commands this wrapper builds.\npackage tools\n\nimport (\n${imports.join("\n")}\n)\n`,
    );
  }
  await run("resolve modules (go mod tidy)", "go", ["mod", "tidy"], opts);
  return pkgs;
}

/** Options of {@link ensureToolchain}. */
export interface EnsureOptions {
  /**
   * Only these binaries, or the binaries of these groups of `toolchain.json` (and nothing
   * else), are found or built. @default all
   */
  only?: string[];
  /**
   * The groups this command needs (`needs` of `toolchain.json`: `cluster`, `demo`, `test`),
   * added to {@link only}; progress then names the command and the groups it lacks.
   */
  for?: string;
  progress?: Progress;
  /** The release downloads' mirror and timeout (tests). */
  release?: Partial<Omit<ReleaseOptions, "progress">>;
  /** @default the pins of `toolchain.json` (tests give others) */
  pins?: ToolchainPins;
}

/** How the progress lines name the command of {@link EnsureOptions.for}. */
const PURPOSE_TITLES: Record<string, string> = {
  cluster: "the embedded cluster needs",
  demo: "the demo needs",
  test: "the tests need",
};

/** The binaries `only` names (binary or group names), in build order. */
export function resolveOnly(only: string[] | undefined, pins: ToolchainPins): BinaryName[] {
  const known = allBinaries(pins);
  if (!only) return known;
  const groups = Object.keys(pins.groups);
  const unknown = only.filter((n) => !known.includes(n as BinaryName) && !groups.includes(n));
  if (unknown.length > 0)
    throw new ToolchainError(
      `[only] unknown binary "${unknown.join('", "')}": choose from ${known.join(", ")}, or a group: ${groups.join(", ")}`,
    );
  const wanted = new Set<string>();
  for (const n of only) {
    if (known.includes(n as BinaryName)) wanted.add(n);
    else for (const b of groupFiles(pins.groups[n])) wanted.add(b);
  }
  // A language host comes with the scripts it runs.
  for (const g of Object.values(pins.groups))
    if (Object.keys(g.binaries).some((b) => wanted.has(b)))
      for (const c of Object.keys(g.companions ?? {})) wanted.add(c);
  return known.filter((n) => wanted.has(n));
}

/** Context of one group's fill. */
interface GroupCtx {
  pins: ToolchainPins;
  progress: Progress;
  /** Old-layout folders and the pin sets whose keys are known, computed once when needed. */
  sources: () => { folders: OldBinFolder[]; known: Map<string, ToolchainPins> };
  goChecked: { done: boolean };
  /** Options of the release downloads, one set of unreachable hosts for the whole run. */
  release: ReleaseOptions;
}

/**
 * Makes the group folder hold `names`: as they are, else linked from an old-layout folder
 * of the same pins, else built. Holds the group's lock meanwhile.
 */
async function ensureGroup(groupName: string, names: string[], ctx: GroupCtx): Promise<string> {
  const { pins, progress } = ctx;
  const group = pins.groups[groupName];
  const dir = groupDir(groupName, pins);
  const bin = join(dir, "bin");
  const absent = (list: string[]) => list.filter((n) => !isFile(join(bin, n)));
  if (absent(names).length === 0) return bin;
  const lockPath = `${dir}.lock`;
  const lock = await acquireLock(lockPath, (pid) =>
    progress(`toolchain: ${groupName}: waiting for pid ${pid}, which holds ${lockPath}`),
  );
  try {
    if (lock.tookOverFrom)
      progress(
        `toolchain: ${groupName}: took over the lock of pid ${lock.tookOverFrom}, which no longer runs`,
      );
    // Another run may have filled it while this one waited.
    if (absent(names).length === 0) return bin;
    mkdirSync(bin, { recursive: true });

    if (group.sourceArchive) {
      // Never in the old layout (which held shims of these names): the release, else built.
      const files = groupFiles(group);
      const fromRelease = await fetchReleaseBinaries(groupName, group, files, bin, ctx.release);
      if (fromRelease.size === files.length) {
        recordRelease(dir, fromRelease, true);
        return bin;
      }
      if (!ctx.goChecked.done) {
        checkGo(pins);
        ctx.goChecked.done = true;
      }
      await buildLanguageHost(groupName, group, dir, ctx);
      return bin;
    }
    // Migration: every binary of the group the old layout already holds for these pins.
    const { folders, known } = ctx.sources();
    const plan = planCacheMigration(
      pins,
      groupName,
      absent(Object.keys(group.binaries)),
      folders,
      known,
    );
    for (const [name, { path, verdict }] of plan.take) {
      placeLink(path, join(bin, name));
      progress(
        `toolchain: ${groupName}: took ${name} from ${dirname(path)} (${verdict === "same-pins" ? "built from the same pins" : "its version matches the pin"}${group.versionMatch ? ", version checked" : ""})`,
      );
    }

    // The official release archives, where their checksums are pinned.
    const fromRelease = await fetchReleaseBinaries(
      groupName,
      group,
      absent(names),
      bin,
      ctx.release,
    );
    if (fromRelease.size > 0) recordRelease(dir, fromRelease, false);

    const missing = absent(names);
    if (missing.length === 0) return bin;
    if (!ctx.goChecked.done) {
      checkGo(pins);
      ctx.goChecked.done = true;
    }
    const what = `${group.module}@${group.version}`;
    const started = Date.now();
    progress(`toolchain: building ${missing.join(", ")} from ${what}`);
    const env = goEnv();
    const log = join(dir, "build.log");
    const wrapper = join(dir, "src");
    const pkgs = await prepareWrapper(groupName, group, wrapper, { env, log, progress, pins });
    for (const name of missing) {
      const t0 = Date.now();
      const partial = join(bin, `.${name}.partial-${process.pid}`);
      const args = ["build", "-trimpath", "-o", partial, "-ldflags", ldflags(groupName, group)];
      if (group.tags) args.push("-tags", group.tags);
      args.push(pkgs[name]);
      try {
        await run(`go build ${name}`, "go", args, { cwd: wrapper, env, log, progress, what });
      } catch (e) {
        rmSync(partial, { force: true });
        throw e;
      }
      renameSync(partial, join(bin, name));
      progress(`toolchain: built ${name} in ${fmtElapsed(Date.now() - t0)}`);
    }
    progress(`toolchain: ${groupName} done in ${fmtElapsed(Date.now() - started)}`);
    return bin;
  } finally {
    lock.release();
  }
}

/**
 * The file in a group folder that says where its binaries came from: a language host's
 * build, or the release archives binaries were taken from.
 */
const SOURCE_FILE = "source";

/** Notes in the group's `source` file the release archive each binary came from. */
function recordRelease(dir: string, from: Map<string, string>, whole: boolean): void {
  const lines = [...from].map(([name, url]) => `${name}: release archive ${url}\n`).join("");
  writeFileSync(join(dir, SOURCE_FILE), lines, { flag: whole ? "w" : "a" });
}

/** Where a language host's build came from (`module proxy` or the archives), if known. */
function builtFrom(groupName: string, pins: ToolchainPins = loadPins()): string | undefined {
  return readText(join(groupDir(groupName, pins), SOURCE_FILE))?.trim() || undefined;
}

/**
 * Builds one of Pulumi's language hosts (and its companion scripts) into its group folder:
 * from the module proxy, else, when the proxy refuses the module, with the
 * `build-language-host` script of the source archives ({@link langhostsDir}). Says which it
 * used, and records it in the group folder's `source` file.
 */
async function buildLanguageHost(
  groupName: string,
  group: ToolGroup,
  dir: string,
  ctx: GroupCtx,
): Promise<void> {
  const { pins, progress } = ctx;
  const bin = join(dir, "bin");
  const what = `${group.module}@${group.version}`;
  const sdkVersion = group.also?.["github.com/pulumi/pulumi/sdk/v3"] ?? group.version;
  const env = goEnv();
  const log = join(dir, "build.log");
  const started = Date.now();
  const files = groupFiles(group);
  const partial = join(dir, `.partial-${process.pid}`);
  rmSync(partial, { recursive: true, force: true });
  mkdirSync(partial, { recursive: true });
  let source: string;
  try {
    progress(`toolchain: building ${files.join(", ")} from ${what}`);
    let refused: string | undefined;
    let pkgs: Record<string, string> = {};
    const wrapper = join(dir, "src");
    try {
      pkgs = await prepareWrapper(groupName, group, wrapper, { env, log, progress, pins });
    } catch (e) {
      if (!(e instanceof ToolchainError)) throw e;
      refused = e.message;
    }
    if (refused === undefined) {
      const opts = { cwd: wrapper, env, log, progress, what };
      for (const [name, pkg] of Object.entries(pkgs)) {
        const args = ["build", "-trimpath", "-o", join(partial, name)];
        await run(
          `go build ${name}`,
          "go",
          [...args, "-ldflags", ldflags(groupName, group), pkg],
          opts,
        );
      }
      const sdk = JSON.parse(
        await run(
          "download the sdk/v3 module (companion scripts)",
          "go",
          ["mod", "download", "-json", `github.com/pulumi/pulumi/sdk/v3@${sdkVersion}`],
          opts,
        ),
      ) as { Dir: string };
      for (const [name, path] of Object.entries(group.companions ?? {}))
        copyFileSync(join(sdk.Dir, path), join(partial, name));
      source = `module proxy (${what})`;
    } else {
      const archives = langhostsDir();
      const script = join(archives, "build-language-host");
      const status = refused.match(/: (\d{3} [A-Za-z ]+)/)?.[1];
      progress(
        `toolchain: ${groupName}: the module proxy did not serve ${what}${status ? ` (${status.trim()})` : ""}; building from the source archives in ${archives}`,
      );
      if (!existsSync(script))
        throw new ToolchainError(
          `${what}: the module proxy did not serve it, and there is no build-language-host in ${archives} (set COCOONSET_LANGHOSTS_DIR to the folder of Pulumi's language-host source archives)\n${refused}`,
        );
      const out = await run(
        "build-language-host",
        "bash",
        [script, group.sourceArchive!, partial, sdkVersion],
        { cwd: dir, env, log, progress, what },
      );
      const built = out.trim().split("\n").pop() ?? "";
      const from = built.match(/\((.*)\)\s*$/)?.[1];
      source = `source archives in ${archives}${from ? ` (${from})` : ""}`;
    }
    for (const name of files) {
      const p = join(partial, name);
      if (!existsSync(p)) throw new ToolchainError(`${what}: the build wrote no ${name}`);
      chmodSync(p, 0o755);
    }
    // Renamed into place only once every file is there.
    for (const name of files) renameSync(join(partial, name), join(bin, name));
    writeFileSync(join(dir, SOURCE_FILE), `${source}\n`);
  } finally {
    rmSync(partial, { recursive: true, force: true });
  }
  progress(
    `toolchain: built ${files.join(", ")} from the ${source} in ${fmtElapsed(Date.now() - started)}`,
  );
}

/**
 * Finds or builds every pinned binary. Idempotent: a second call finds everything and
 * builds nothing. Returns where each binary is.
 */
export async function ensureToolchain(opts: EnsureOptions = {}): Promise<Located[]> {
  return (await ensureToolchainReport(opts)).located;
}

/** What {@link ensureToolchainReport} found, and what it had to build (or take from the old layout). */
export interface EnsureReport {
  located: Located[];
  /** Binaries that were missing from the toolchain's folder and are there now. */
  placed: BinaryName[];
}

/** {@link ensureToolchain}, saying also which binaries it placed. */
export async function ensureToolchainReport(opts: EnsureOptions = {}): Promise<EnsureReport> {
  const pins = opts.pins ?? loadPins();
  const progress = opts.progress ?? ((l: string) => process.stderr.write(l + "\n"));
  const only =
    opts.for === undefined ? opts.only : [...groupsFor(opts.for, pins), ...(opts.only ?? [])];
  const wanted = new Set(resolveOnly(only, pins));
  const out = binDir(pins);
  mkdirSync(out, { recursive: true });
  let sources: ReturnType<GroupCtx["sources"]> | undefined;
  const ctx: GroupCtx = {
    pins,
    progress,
    sources: () =>
      (sources ??= { folders: oldBinFolders(), known: knownPinSets(pins, pinHistory()) }),
    goChecked: { done: false },
    release: { progress, unreachable: new Set(), ...opts.release },
  };
  const located: Located[] = [];
  const placed: BinaryName[] = [];
  const missingOf = (groupName: string) =>
    groupFiles(pins.groups[groupName])
      .filter((n) => wanted.has(n))
      .filter((n) => !locate(n, pins).path);
  if (opts.for !== undefined) {
    const needed = groupsFor(opts.for, pins);
    const lacking = needed.filter((g) => missingOf(g).length > 0);
    if (lacking.length > 0)
      progress(
        `toolchain: ${PURPOSE_TITLES[opts.for] ?? `${opts.for} needs`} ${needed.length} groups; ${needed.length - lacking.length} ready, ${lacking.length} to fetch or build: ${lacking.join(", ")}`,
      );
  }
  for (const groupName of Object.keys(pins.groups)) {
    const names = groupFiles(pins.groups[groupName]).filter((n) => wanted.has(n));
    const missing = missingOf(groupName);
    if (missing.length > 0) {
      const bin = await ensureGroup(groupName, missing, ctx);
      for (const n of missing) placeLink(join(bin, n), join(out, n));
      placed.push(...missing);
    }
    for (const n of names) located.push(locate(n, pins));
  }
  // Python programs need the `pulumi` package next to the host.
  if (wanted.has("pulumi-language-python")) ensurePythonVenv(progress);
  return { located, placed };
}

/** One group of `toolchain.json` as `status` reports it. */
export interface GroupStatus {
  name: string;
  key: string;
  dir: string;
  /** Binaries of the group present in its folder. */
  built: string[];
  /** Where a language host's build came from: `module proxy (…)` or `source archives in …`. */
  source?: string;
}

/** Where every binary is right now, without building anything. */
export function toolchainStatus(): {
  cacheDir: string;
  binaries: Located[];
  groups: GroupStatus[];
} {
  const pins = loadPins();
  const groups = Object.entries(pins.groups).map(([name, g]) => {
    const dir = groupDir(name, pins);
    return {
      name,
      key: groupKey(name, pins),
      dir,
      built: groupFiles(g).filter((b) => isFile(join(dir, "bin", b))),
      ...(g.sourceArchive || g.release ? { source: builtFrom(name, pins) } : {}),
    };
  });
  return {
    cacheDir: cacheDir(pins),
    binaries: allBinaries(pins).map((n) => locate(n, pins)),
    groups,
  };
}
