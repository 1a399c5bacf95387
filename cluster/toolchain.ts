/**
 * The toolchain: the control-plane and Pulumi binaries this project needs, found on the
 * machine or built once from Go modules and cached outside the repository.
 *
 * Guarantees: a binary in the cache was renamed into place only after `go build` exited 0,
 * so an interrupted build is never taken for a good one; the cache folder is keyed by a
 * hash of `toolchain.json`, so changing a pin never reuses a binary of another version.
 *
 * Caveats: builds are slow on 2 cores (tens of minutes cold). Go's own module and build
 * caches make a rebuild after an interruption much cheaper.
 */
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { homedir } from "node:os";
import { delimiter, dirname, join } from "node:path";
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

/**
 * Short hash of what goes into the binaries (modules, versions, tags, packages): the cache
 * key. Comments and version-probe settings do not change it.
 */
export function pinsKey(pins: ToolchainPins = loadPins()): string {
  const built = Object.entries(pins.groups).map(([name, g]) => [
    name,
    g.module,
    g.version,
    g.stagingVersion ?? "",
    g.stamp ?? "",
    g.also ?? {},
    g.tags ?? "",
    g.binaries,
  ]);
  return createHash("sha256")
    .update(JSON.stringify([pins.go, built]))
    .digest("hex")
    .slice(0, 12);
}

/**
 * Root of the toolchain cache.
 * @default `$COCOONSET_TOOLCHAIN_DIR`, else `$XDG_CACHE_HOME/pulumi-cocoonset/toolchain-<key>`,
 *   else `~/.cache/pulumi-cocoonset/toolchain-<key>`
 */
export function cacheDir(pins: ToolchainPins = loadPins()): string {
  if (process.env.COCOONSET_TOOLCHAIN_DIR) return process.env.COCOONSET_TOOLCHAIN_DIR;
  const base = process.env.XDG_CACHE_HOME || join(homedir(), ".cache");
  return join(base, "pulumi-cocoonset", `toolchain-${pinsKey(pins)}`);
}

/** Folder holding the built binaries (and the dynamic-provider shim). */
export function binDir(pins: ToolchainPins = loadPins()): string {
  return join(cacheDir(pins), "bin");
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

function versionOk(path: string, group: ToolGroup): boolean {
  if (!group.versionMatch) return false;
  const r = spawnSync(path, group.versionArgs, { encoding: "utf8", timeout: 20_000 });
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
    case "etcd":
      return "-s -w";
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
  writeFileSync(`${p}.tmp`, text, { mode: 0o755 });
  renameSync(`${p}.tmp`, p);
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
  writeFileSync(`${p}.tmp`, text, { mode: 0o755 });
  renameSync(`${p}.tmp`, p);
  return p;
}

/** Options of {@link ensureToolchain}. */
export interface EnsureOptions {
  /** Only these binaries (and nothing else) are found or built. @default all */
  only?: BinaryName[];
  progress?: Progress;
}

/**
 * Finds or builds every pinned binary. Idempotent: a second call finds everything and
 * builds nothing. Returns where each binary is.
 */
export async function ensureToolchain(opts: EnsureOptions = {}): Promise<Located[]> {
  const pins = loadPins();
  const progress = opts.progress ?? ((l: string) => process.stderr.write(l + "\n"));
  const known = allBinaries(pins);
  const unknown = (opts.only ?? []).filter((n) => !known.includes(n));
  if (unknown.length > 0)
    throw new ToolchainError(
      `[only] unknown binary ${unknown.map((n) => `"${n}"`).join(", ")}: choose from ${known.join(", ")}`,
    );
  const wanted = new Set(opts.only ?? known);
  const out = join(binDir(pins), "");
  mkdirSync(out, { recursive: true });
  const logs = join(cacheDir(pins), "logs");
  mkdirSync(logs, { recursive: true });
  const result: Located[] = [];
  let goChecked = false;
  for (const [groupName, group] of Object.entries(pins.groups)) {
    const names = Object.keys(group.binaries).filter((n) =>
      wanted.has(n as BinaryName),
    ) as BinaryName[];
    const missing = names.filter((n) => !locate(n, pins).path);
    if (missing.length > 0) {
      if (!goChecked) {
        checkGo(pins);
        goChecked = true;
      }
      const what = `${group.module}@${group.version}`;
      const started = Date.now();
      progress(`toolchain: building ${missing.join(", ")} from ${what}`);
      const env = goEnv();
      const log = join(logs, `${groupName}.log`);
      const wrapper = join(cacheDir(pins), "src", groupName);
      const pkgs = await prepareWrapper(groupName, group, wrapper, { env, log, progress, pins });
      for (const name of missing) {
        const t0 = Date.now();
        const partial = join(out, `.${name}.partial-${process.pid}`);
        const args = ["build", "-trimpath", "-o", partial, "-ldflags", ldflags(groupName, group)];
        if (group.tags) args.push("-tags", group.tags);
        args.push(pkgs[name]);
        try {
          await run(`go build ${name}`, "go", args, { cwd: wrapper, env, log, progress, what });
        } catch (e) {
          rmSync(partial, { force: true });
          throw e;
        }
        renameSync(partial, join(out, name));
        progress(`toolchain: built ${name} in ${fmtElapsed(Date.now() - t0)}`);
      }
      progress(`toolchain: ${groupName} done in ${fmtElapsed(Date.now() - started)}`);
    }
    for (const n of names) result.push(locate(n, pins));
  }
  // Shims are rewritten every time: they are tiny and must follow the current checkout.
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

/** Where every binary is right now, without building anything. */
export function toolchainStatus(): { cacheDir: string; binaries: Located[] } {
  const pins = loadPins();
  return { cacheDir: cacheDir(pins), binaries: allBinaries(pins).map((n) => locate(n, pins)) };
}
