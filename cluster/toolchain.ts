/**
 * The toolchain: the control-plane and Pulumi binaries this project needs, found on the
 * machine or built once from Go modules and cached outside the repository.
 *
 * Layout of the cache (under `~/.cache/pulumi-cocoonset/`):
 * - `toolchain/groups/<group>-<group key>/bin/`: the binaries of one group of
 *   `toolchain.json`, keyed by what goes into them (Go version, module, versions, tags,
 *   packages). Changing or adding one group builds that group only.
 * - `toolchain-<pins key>/bin/`: the folder the rest of the code uses ({@link binDir}),
 *   keyed by the whole pin set and assembled from hard links to the group folders, plus the
 *   shims the toolchain writes.
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
import { createHash, randomBytes } from "node:crypto";
import {
  chmodSync,
  copyFileSync,
  cpSync,
  existsSync,
  linkSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { homedir } from "node:os";
import { basename, delimiter, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { BrandedError } from "../provider/kube/branded-error.js";

/** One wrapper module and the binaries built from it. */
export interface ToolGroup {
  module: string;
  version: string;
  /** Published version of k8s.io staging modules (kubernetes only). */
  stagingVersion?: string;
  /** Version stamped into the binary when the module version is a pseudo-version. */
  stamp?: string;
  /** Extra modules required at an exact version. */
  also?: Record<string, string>;
  tags?: string;
  /** Binary name → Go package path. */
  binaries: Record<string, string>;
  versionArgs: string[];
  /** Version arguments of binaries that take others than {@link versionArgs}. */
  versionArgsOf?: Record<string, string[]>;
  /**
   * Substring the binary's version output must contain to be used as is; empty when the
   * binary cannot report its version.
   */
  versionMatch: string;
}

/** The contents of `cluster/toolchain.json`. */
export interface ToolchainPins {
  go: string;
  groups: Record<string, ToolGroup>;
}

/** Names of every binary the project uses, in build order. */
export type BinaryName =
  | "etcd"
  | "kube-apiserver"
  | "kube-controller-manager"
  | "kube-scheduler"
  | "kubectl"
  | "kwok"
  | "pulumi"
  | "pulumi-resource-kubernetes"
  | "registry"
  | "distribution-registry"
  | "pulumi-language-yaml"
  | "pulumi-resource-pulumi-nodejs"
  | "pulumi-language-nodejs";

/** Shell shims the toolchain writes itself (they are not built from Go modules). */
const SHIMS: BinaryName[] = ["pulumi-resource-pulumi-nodejs", "pulumi-language-nodejs"];

/** Thrown when a binary cannot be found or built; names module, version and step. */
export class ToolchainError extends BrandedError {
  constructor(message: string) {
    super(message);
  }
}

const here = dirname(fileURLToPath(import.meta.url));

/** The repository's `cluster/` folder, whether running from source or from `dist/`. */
function sourceDir(): string {
  const candidates = [here, join(here, "..", "..", "cluster")];
  for (const c of candidates) if (existsSync(join(c, "toolchain.json"))) return c;
  throw new ToolchainError(`toolchain.json not found next to ${here}`);
}

/** Reads the pin file. */
export function loadPins(): ToolchainPins {
  return JSON.parse(readFileSync(join(sourceDir(), "toolchain.json"), "utf8")) as ToolchainPins;
}

/** What of a group goes into its binaries: comments and version probes are left out. */
function builtFields(g: ToolGroup): unknown[] {
  return [
    g.module,
    g.version,
    g.stagingVersion ?? "",
    g.stamp ?? "",
    g.also ?? {},
    g.tags ?? "",
    g.binaries,
  ];
}

function shortHash(value: unknown): string {
  return createHash("sha256").update(JSON.stringify(value)).digest("hex").slice(0, 12);
}

/**
 * Short hash of what goes into all the binaries (modules, versions, tags, packages): the key
 * of the assembled {@link binDir}. Comments and version-probe settings do not change it.
 */
export function pinsKey(pins: ToolchainPins = loadPins()): string {
  const built = Object.entries(pins.groups).map(([name, g]) => [name, ...builtFields(g)]);
  return shortHash([pins.go, built]);
}

/**
 * Short hash of what goes into one group's binaries (the Go version and the group's module,
 * versions, stamp, extra modules, tags and packages): the key of its folder. Another
 * group's pins do not change it.
 * @throws ToolchainError for a group `pins` does not have
 */
export function groupKey(groupName: string, pins: ToolchainPins = loadPins()): string {
  const g = pins.groups[groupName];
  if (!g) throw new ToolchainError(`unknown toolchain group ${groupName}`);
  return shortHash([pins.go, ...builtFields(g)]);
}

/**
 * The folder every toolchain cache lives in.
 * @default `$XDG_CACHE_HOME/pulumi-cocoonset`, else `~/.cache/pulumi-cocoonset`
 */
export function cacheRoot(): string {
  const base = process.env.XDG_CACHE_HOME || join(homedir(), ".cache");
  return join(base, "pulumi-cocoonset");
}

/**
 * The assembled toolchain folder of this pin set (its `bin` holds every binary).
 * @default `$COCOONSET_TOOLCHAIN_DIR`, else `<cacheRoot>/toolchain-<pins key>`
 */
export function cacheDir(pins: ToolchainPins = loadPins()): string {
  if (process.env.COCOONSET_TOOLCHAIN_DIR) return process.env.COCOONSET_TOOLCHAIN_DIR;
  return join(cacheRoot(), `toolchain-${pinsKey(pins)}`);
}

/** Folder holding every binary (links to the group folders) and the shims. */
export function binDir(pins: ToolchainPins = loadPins()): string {
  return join(cacheDir(pins), "bin");
}

/**
 * Where the group folders live.
 * @default `$COCOONSET_TOOLCHAIN_DIR/groups`, else `<cacheRoot>/toolchain/groups`
 */
export function groupsDir(): string {
  if (process.env.COCOONSET_TOOLCHAIN_DIR)
    return join(process.env.COCOONSET_TOOLCHAIN_DIR, "groups");
  return join(cacheRoot(), "toolchain", "groups");
}

/** The folder of one group: `<groupsDir>/<group>-<group key>` (binaries in its `bin`). */
export function groupDir(groupName: string, pins: ToolchainPins = loadPins()): string {
  return join(groupsDir(), `${groupName}-${groupKey(groupName, pins)}`);
}

function groupOf(pins: ToolchainPins, name: string): [string, ToolGroup] | undefined {
  for (const [g, group] of Object.entries(pins.groups))
    if (name in group.binaries) return [g, group];
  return undefined;
}

/** Every binary name in build order. */
export function allBinaries(pins: ToolchainPins = loadPins()): BinaryName[] {
  const names: string[] = [];
  for (const g of Object.values(pins.groups)) names.push(...Object.keys(g.binaries));
  return [...(names as BinaryName[]), ...SHIMS];
}

/** True when the binary at `path` reports the pinned version (never without a probe). */
function versionOk(path: string, group: ToolGroup): boolean {
  if (!group.versionMatch) return false;
  const args = group.versionArgsOf?.[basename(path)] ?? group.versionArgs;
  const r = spawnSync(path, args, { encoding: "utf8", timeout: 20_000 });
  return r.status === 0 && `${r.stdout}${r.stderr}`.includes(group.versionMatch);
}

/** Where a binary was found, and how. */
export interface Located {
  name: BinaryName;
  path?: string;
  source?: "configured" | "kubebuilder-assets" | "cache" | "path";
}

/**
 * Finds a binary without building: `$COCOONSET_BIN_DIR`, then `$KUBEBUILDER_ASSETS`
 * (etcd, kube-apiserver, kubectl), then the cache, then `PATH`. Binaries outside the cache
 * are used only when their version output matches the pin.
 */
export function locate(name: BinaryName, pins: ToolchainPins = loadPins()): Located {
  const cached = join(binDir(pins), name);
  if (SHIMS.includes(name)) {
    return existsSync(cached) ? { name, path: cached, source: "cache" } : { name };
  }
  const found = groupOf(pins, name);
  if (!found) throw new ToolchainError(`unknown binary ${name}`);
  const group = found[1];
  const dirs: [string, Located["source"]][] = [];
  if (process.env.COCOONSET_BIN_DIR) dirs.push([process.env.COCOONSET_BIN_DIR, "configured"]);
  if (process.env.KUBEBUILDER_ASSETS && ["etcd", "kube-apiserver", "kubectl"].includes(name)) {
    dirs.push([process.env.KUBEBUILDER_ASSETS, "kubebuilder-assets"]);
  }
  for (const [dir, source] of dirs) {
    const p = join(dir, name);
    // A binary that cannot report its version is trusted only in the configured folder.
    const trusted = source === "configured" && !group.versionMatch;
    if (existsSync(p) && (trusted || versionOk(p, group))) return { name, path: p, source };
  }
  if (existsSync(cached)) return { name, path: cached, source: "cache" };
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (!dir) continue;
    const p = join(dir, name);
    if (existsSync(p) && versionOk(p, group)) return { name, path: p, source: "path" };
  }
  return { name };
}

/** Path of a binary, or a ToolchainError saying how to get it. */
export function requireBinary(name: BinaryName, pins: ToolchainPins = loadPins()): string {
  const l = locate(name, pins);
  if (!l.path) {
    throw new ToolchainError(
      `${name} is not built yet: run \`cocoonset toolchain ensure\` (looked in $COCOONSET_BIN_DIR, the cache ${binDir(pins)} and PATH)`,
    );
  }
  return l.path;
}

/**
 * A PATH value that puts the toolchain binaries first (so `pulumi` finds its plugins) and
 * keeps the Node that runs this process ahead of any older system Node.
 */
export function toolchainPath(pins: ToolchainPins = loadPins()): string {
  const dirs = new Set<string>();
  for (const name of allBinaries(pins)) {
    const l = locate(name, pins);
    if (l.path) dirs.add(dirname(l.path));
  }
  dirs.add(dirname(process.execPath));
  return [...dirs, process.env.PATH ?? ""].join(delimiter);
}

/**
 * Every pin set whose key can be told: `pins` with any of its groups left out (what the pin
 * file was before those groups were added), and each of `history` as it is. Maps the
 * {@link pinsKey} of each to it.
 */
export function knownPinSets(
  pins: ToolchainPins,
  history: ToolchainPins[] = [],
): Map<string, ToolchainPins> {
  const known = new Map<string, ToolchainPins>();
  const names = Object.keys(pins.groups);
  // 2^n subsets; a pin file has a handful of groups, so cap it rather than explode.
  const subsets = names.length <= 12 ? 1 << names.length : 1;
  for (let mask = subsets - 1; mask >= 0; mask--) {
    const groups: Record<string, ToolGroup> = {};
    names.forEach((n, i) => {
      if (mask & (1 << i)) groups[n] = pins.groups[n];
    });
    const subset = { ...pins, groups };
    known.set(pinsKey(subset), subset);
  }
  for (const h of history) if (!known.has(pinsKey(h))) known.set(pinsKey(h), h);
  return known;
}

/**
 * The earlier versions of `toolchain.json` in the git history of the checkout, newest
 * first; none outside a git checkout.
 */
export function pinHistory(): ToolchainPins[] {
  const cwd = sourceDir();
  const git = (args: string[]) =>
    spawnSync("git", args, { cwd, encoding: "utf8", timeout: 10_000, maxBuffer: 1 << 24 });
  const log = git(["log", "--format=%H", "-n", "100", "--", "toolchain.json"]);
  if (log.error || log.status !== 0) return [];
  const out: ToolchainPins[] = [];
  for (const commit of log.stdout.split("\n").filter(Boolean)) {
    const show = git(["show", `${commit}:./toolchain.json`]);
    if (show.status !== 0) continue;
    try {
      out.push(JSON.parse(show.stdout) as ToolchainPins);
    } catch {
      // an unreadable old version is no source
    }
  }
  return out;
}

/**
 * May a binary of `groupName` in a folder of the old layout keyed `folderKey` be taken
 * instead of building it?
 * - `same-pins`: the folder's whole pin set is known and held this very group (same Go
 *   version, module, versions, tags, packages): yes (its version output is still checked
 *   when the group has a version probe).
 * - `if-version-matches`: the folder's pin set is unknown: only a binary whose version
 *   output matches the pin.
 * - `no`: the folder's pin set is known and built this group otherwise or not at all, or it
 *   is unknown and the group's binaries cannot report their version.
 */
export function migrationVerdict(
  pins: ToolchainPins,
  groupName: string,
  folderKey: string,
  known: Map<string, ToolchainPins>,
): "same-pins" | "if-version-matches" | "no" {
  const theirs = known.get(folderKey);
  if (theirs) {
    if (!theirs.groups[groupName]) return "no";
    return groupKey(groupName, theirs) === groupKey(groupName, pins) ? "same-pins" : "no";
  }
  return pins.groups[groupName]?.versionMatch ? "if-version-matches" : "no";
}

/** A `bin` folder of the old layout, `<cacheRoot>/toolchain-<key>/bin`, and its key. */
export interface OldBinFolder {
  bin: string;
  key: string;
}

/**
 * The old-layout folders migration may take binaries from; none when
 * `$COCOONSET_TOOLCHAIN_DIR` names the toolchain folder (it is self-contained then).
 */
export function oldBinFolders(): OldBinFolder[] {
  if (process.env.COCOONSET_TOOLCHAIN_DIR) return [];
  let entries: string[];
  try {
    entries = readdirSync(cacheRoot());
  } catch {
    return [];
  }
  const out: OldBinFolder[] = [];
  for (const e of entries.sort()) {
    const m = /^toolchain-([0-9a-f]{12})$/.exec(e);
    if (m) out.push({ bin: join(cacheRoot(), e, "bin"), key: m[1] });
  }
  return out;
}

function isFile(p: string): boolean {
  try {
    return statSync(p).isFile();
  } catch {
    return false;
  }
}

/** Where each binary of a group can be taken from, without building. */
export interface MigrationPlan {
  /** Binary name → the file to link. */
  take: Map<string, { path: string; verdict: "same-pins" | "if-version-matches" }>;
}

/**
 * Picks, for each of `names` (binaries of `groupName`), a file in `folders` that may be
 * taken instead of a build (see {@link migrationVerdict}); folders of the same pins first.
 * `probe` checks a binary's version output (injectable for tests).
 */
export function planMigration(
  pins: ToolchainPins,
  groupName: string,
  names: string[],
  folders: OldBinFolder[],
  known: Map<string, ToolchainPins>,
  probe: (path: string, group: ToolGroup) => boolean = versionOk,
): MigrationPlan {
  const group = pins.groups[groupName];
  const take: MigrationPlan["take"] = new Map();
  const ranked = folders
    .map((f) => ({ ...f, verdict: migrationVerdict(pins, groupName, f.key, known) }))
    .filter(
      (f): f is OldBinFolder & { verdict: "same-pins" | "if-version-matches" } =>
        f.verdict !== "no",
    )
    .sort((a, b) => (a.verdict === b.verdict ? 0 : a.verdict === "same-pins" ? -1 : 1));
  for (const name of names) {
    for (const f of ranked) {
      const p = join(f.bin, name);
      if (!isFile(p)) continue;
      if (group.versionMatch && !probe(p, group)) continue;
      take.set(name, { path: p, verdict: f.verdict });
      break;
    }
  }
  return { take };
}

/**
 * Puts `src` at `dst` as a hard link (a copy across file systems), atomically: `dst` is
 * either absent or whole. `src` itself is never written to.
 */
export function placeLink(src: string, dst: string): void {
  const real = realpathSync(src);
  try {
    const a = statSync(real);
    const b = statSync(dst);
    if (a.ino === b.ino && a.dev === b.dev) return;
  } catch {
    // dst is missing
  }
  const tmp = `${dst}.link-${process.pid}`;
  rmSync(tmp, { force: true });
  try {
    linkSync(real, tmp);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code !== "EXDEV" && code !== "EPERM" && code !== "EMLINK") throw e;
    copyFileSync(real, tmp);
    chmodSync(tmp, 0o755);
  }
  renameSync(tmp, dst);
}

/** Start time of a process (field 22 of /proc/<pid>/stat), to tell a reused pid apart. */
function procStartTicks(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
  } catch {
    return undefined;
  }
}

/** The text of a lock this process holds: its pid and, where /proc has it, its start time. */
function lockText(): string {
  return `${process.pid} ${procStartTicks(process.pid) ?? "-"} ${randomBytes(4).toString("hex")}\n`;
}

/** The pid in a lock's text, and whether that process still runs (same start time). */
export function lockOwner(text: string): { pid: number; alive: boolean } | undefined {
  const [pidText, ticks] = text.trim().split(/\s+/);
  const pid = Number(pidText);
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  let alive: boolean;
  try {
    process.kill(pid, 0);
    alive = true;
  } catch (e) {
    alive = (e as NodeJS.ErrnoException).code === "EPERM";
  }
  if (alive && ticks && ticks !== "-") {
    const now = procStartTicks(pid);
    if (now !== undefined && now !== ticks) alive = false;
  }
  return { pid, alive };
}

function readText(p: string): string | undefined {
  try {
    return readFileSync(p, "utf8");
  } catch {
    return undefined;
  }
}

/** Outcome of one {@link tryLock}. */
export type LockAttempt =
  | { acquired: true; release: () => void; tookOverFrom?: number }
  | { acquired: false; holder: number };

/**
 * One attempt at the lock file `path`: created holding this process's pid when absent;
 * taken over when it names a process that no longer runs; else the live holder's pid.
 */
export function tryLock(path: string): LockAttempt {
  mkdirSync(dirname(path), { recursive: true });
  let tookOverFrom: number | undefined;
  for (let round = 0; round < 10; round++) {
    const mine = lockText();
    const tmp = `${path}.new-${process.pid}-${randomBytes(4).toString("hex")}`;
    writeFileSync(tmp, mine);
    try {
      // link() fails when the lock exists, so the lock appears whole, with its pid.
      linkSync(tmp, path);
      rmSync(tmp, { force: true });
      const release = () => {
        if (readText(path) === mine) rmSync(path, { force: true });
      };
      return { acquired: true, release, tookOverFrom };
    } catch (e) {
      rmSync(tmp, { force: true });
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
    }
    const text = readText(path);
    if (text === undefined) continue; // released meanwhile: try again
    const owner = lockOwner(text);
    if (owner?.alive) return { acquired: false, holder: owner.pid };
    // Stale (or unreadable): move it aside. Only one process can move a given file; if
    // what was moved is not the stale lock seen above, it is a live one: put it back.
    const aside = `${path}.stale-${process.pid}-${randomBytes(4).toString("hex")}`;
    try {
      renameSync(path, aside);
    } catch {
      continue;
    }
    if (readText(aside) === text) tookOverFrom = owner?.pid;
    else {
      try {
        linkSync(aside, path);
      } catch {
        // another process holds a newer lock; it wins
      }
    }
    rmSync(aside, { force: true });
  }
  const text = readText(path);
  return { acquired: false, holder: (text && lockOwner(text)?.pid) || 0 };
}

/**
 * Waits for the lock file `path` (see {@link tryLock}); `onWait` is told the holder's pid
 * once per holder. Returns the function that releases it.
 */
export async function acquireLock(
  path: string,
  onWait: (holder: number) => void = () => {},
  pollMs = 1000,
): Promise<{ release: () => void; tookOverFrom?: number }> {
  let told: number | undefined;
  for (;;) {
    const a = tryLock(path);
    if (a.acquired) return a;
    if (a.holder !== told) {
      told = a.holder;
      onWait(a.holder);
    }
    await new Promise((r) => setTimeout(r, pollMs));
  }
}

/** Progress callback: a line of text for the terminal. */
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
export function checkGo(pins: ToolchainPins = loadPins()): string {
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
export function compareVersions(a: string, b: string): number {
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

/** Writes `text` to `p` (mode 0755) unless it already holds exactly that. */
function writeIfChanged(p: string, text: string): void {
  if (readText(p) === text) return;
  writeFileSync(`${p}.tmp`, text, { mode: 0o755 });
  renameSync(`${p}.tmp`, p);
}

/** Writes the dynamic-provider plugin shim next to the other binaries. */
export function writeDynamicProviderShim(dir: string): string {
  mkdirSync(dir, { recursive: true });
  const p = join(dir, "pulumi-resource-pulumi-nodejs");
  const text = `#!/bin/sh
# Pulumi's plugin for Node dynamic providers: run @pulumi/pulumi's provider host, resolved
# from the program's folder (the working directory), with the node found on PATH.
set -e
host=$(node -p 'require.resolve("@pulumi/pulumi/cmd/dynamic-provider/index.js", { paths: [process.cwd()] })')
exec node "$host" "$@"
`;
  writeIfChanged(p, text);
  return p;
}

/**
 * Writes the Node.js language host shim: it runs `cluster/pulumi-language-host.cjs` from the
 * program's copy of this package when it has one, else from the checkout that wrote it.
 */
export function writeLanguageHostShim(dir: string): string {
  mkdirSync(dir, { recursive: true });
  const p = join(dir, "pulumi-language-nodejs");
  const fallback = join(sourceDir(), "pulumi-language-host.cjs");
  const text = `#!/bin/sh
# Pulumi's Node.js language host (see cluster/pulumi-language-host.cjs in pulumi-cocoonset).
host=$(node -e 'try { console.log(require.resolve("pulumi-cocoonset/cluster/pulumi-language-host.cjs", { paths: [process.cwd()] })) } catch { console.log(process.argv[1]) }' '${fallback}')
exec node "$host" "$@"
`;
  writeIfChanged(p, text);
  return p;
}

/** Options of {@link ensureToolchain}. */
export interface EnsureOptions {
  /**
   * Only these binaries, or the binaries of these groups of `toolchain.json` (and nothing
   * else), are found or built. @default all
   */
  only?: string[];
  progress?: Progress;
}

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
    else for (const b of Object.keys(pins.groups[n].binaries)) wanted.add(b);
  }
  return known.filter((n) => wanted.has(n));
}

/** Context of one group's fill. */
interface GroupCtx {
  pins: ToolchainPins;
  progress: Progress;
  /** Old-layout folders and the pin sets whose keys are known, computed once when needed. */
  sources: () => { folders: OldBinFolder[]; known: Map<string, ToolchainPins> };
  goChecked: { done: boolean };
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

    // Migration: every binary of the group the old layout already holds for these pins.
    const { folders, known } = ctx.sources();
    const plan = planMigration(
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
 * Finds or builds every pinned binary. Idempotent: a second call finds everything and
 * builds nothing. Returns where each binary is.
 */
export async function ensureToolchain(opts: EnsureOptions = {}): Promise<Located[]> {
  const pins = loadPins();
  const progress = opts.progress ?? ((l: string) => process.stderr.write(l + "\n"));
  const wanted = new Set(resolveOnly(opts.only, pins));
  const out = binDir(pins);
  mkdirSync(out, { recursive: true });
  let sources: ReturnType<GroupCtx["sources"]> | undefined;
  const ctx: GroupCtx = {
    pins,
    progress,
    sources: () =>
      (sources ??= { folders: oldBinFolders(), known: knownPinSets(pins, pinHistory()) }),
    goChecked: { done: false },
  };
  const result: Located[] = [];
  for (const groupName of Object.keys(pins.groups)) {
    const names = Object.keys(pins.groups[groupName].binaries).filter((n) =>
      wanted.has(n as BinaryName),
    ) as BinaryName[];
    const missing = names.filter((n) => !locate(n, pins).path);
    if (missing.length > 0) {
      const bin = await ensureGroup(groupName, missing, ctx);
      for (const n of missing) placeLink(join(bin, n), join(out, n));
    }
    for (const n of names) result.push(locate(n, pins));
  }
  // Shims follow the current checkout; they are rewritten only when their text changes.
  if (wanted.has("pulumi-resource-pulumi-nodejs")) {
    writeDynamicProviderShim(out);
    result.push(locate("pulumi-resource-pulumi-nodejs", pins));
  }
  if (wanted.has("pulumi-language-nodejs")) {
    writeLanguageHostShim(out);
    result.push(locate("pulumi-language-nodejs", pins));
  }
  return result;
}

/** One group of `toolchain.json` as `status` reports it. */
export interface GroupStatus {
  name: string;
  key: string;
  dir: string;
  /** Binaries of the group present in its folder. */
  built: string[];
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
      built: Object.keys(g.binaries).filter((b) => isFile(join(dir, "bin", b))),
    };
  });
  return {
    cacheDir: cacheDir(pins),
    binaries: allBinaries(pins).map((n) => locate(n, pins)),
    groups,
  };
}
