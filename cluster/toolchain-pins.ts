/**
 * The toolchain's pins (`cluster/toolchain.json`), the cache folders they key, and where each
 * binary is found: the pinned build in the cache, else one on PATH whose version matches.
 * The layout of the cache is described in toolchain.ts.
 */
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readFileSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { basename, delimiter, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { BrandedError } from "../engine/kube/branded-error.js";

/**
 * Where a binary's project publishes it built (cluster/toolchain-release.ts): an archive, or
 * the bare binary, per platform. Not in any cache key: a binary from its release and one
 * built from the same pins share the group's folder.
 */
export interface ReleaseAsset {
  /** URL template: `{os}` and `{arch}` as Go names them (`linux`, `amd64`), mapped by {@link os}/{@link arch}. */
  url: string;
  /** The binary's path inside the `.tar.gz` (same placeholders); absent for a bare binary. */
  path?: string;
  /** The project's names for Go's architectures (Pulumi's `x64`), when they differ. */
  arch?: Record<string, string>;
  os?: Record<string, string>;
  /**
   * sha256 of the file at {@link url}, by `<os>-<arch>`. A platform without one always builds
   * from source.
   */
  sha256?: Record<string, string>;
}

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
  /**
   * Files shipped with the binaries (scripts a language host runs), by name → path inside
   * the `github.com/pulumi/pulumi/sdk/v3` module of the version in {@link also}.
   */
  companions?: Record<string, string>;
  /**
   * Language (`nodejs`, `python`, `go`) of a Pulumi language host: when the module proxy
   * refuses {@link module}, the host and its companions are built by `build-language-host`
   * from the folder of source archives ({@link langhostsDir}).
   */
  sourceArchive?: string;
  /** Binary name → its official release download, taken instead of a build when verified. */
  release?: Record<string, ReleaseAsset>;
  /**
   * The group whose release ships these files too (`pulumi`: its archive holds Pulumi's
   * language hosts of the same version): a file of this group without a version flag is
   * taken from PATH when it sits beside that group's binary at its pinned version.
   */
  shippedWith?: string;
  /**
   * The Pulumi plugin this group's binary is (`resource-kubernetes`): taken from Pulumi's
   * plugin cache (`$PULUMI_HOME/plugins/<plugin>-v<version>/`), where Pulumi installs a
   * plugin under its version, when the group folder lacks it.
   */
  pulumiPlugin?: string;
}

/** The contents of `cluster/toolchain.json`. */
export interface ToolchainPins {
  go: string;
  groups: Record<string, ToolGroup>;
  /** The `pulumi` package of PyPI for Python programs (cluster/toolchain-python.ts). */
  python?: { pulumi: string };
  /**
   * The groups each command needs (`cluster`, `demo`, `test`), by group name: what
   * `toolchain ensure --for NAME` ensures. Not in any cache key.
   */
  needs?: Record<string, string[]>;
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
  | "pulumi-language-nodejs"
  | "pulumi-resource-pulumi-nodejs"
  | "pulumi-language-python"
  | "pulumi-language-python-exec"
  | "pulumi-resource-pulumi-python"
  | "pulumi-language-go";

/** Thrown when a binary cannot be found or built; names module, version and step. */
export class ToolchainError extends BrandedError {
  constructor(message: string) {
    super(message);
  }
}

const here = dirname(fileURLToPath(import.meta.url));

/** The repository's `cluster/` folder, whether running from source or from `dist/`. */
export function sourceDir(): string {
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
    // Only groups that have them: the keys of the other groups stay what they were.
    ...(g.companions || g.sourceArchive ? [g.companions ?? {}, g.sourceArchive ?? ""] : []),
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

/** Folder holding every binary (links to the group folders). */
export function binDir(pins: ToolchainPins = loadPins()): string {
  return join(cacheDir(pins), "bin");
}

/**
 * Where the group folders live.
 * @default `$COCOONSET_TOOLCHAIN_DIR/groups`, else `<cacheRoot>/toolchain/groups`
 */
function groupsDir(): string {
  if (process.env.COCOONSET_TOOLCHAIN_DIR)
    return join(process.env.COCOONSET_TOOLCHAIN_DIR, "groups");
  return join(cacheRoot(), "toolchain", "groups");
}

/** The folder of one group: `<groupsDir>/<group>-<group key>` (binaries in its `bin`). */
export function groupDir(groupName: string, pins: ToolchainPins = loadPins()): string {
  return join(groupsDir(), `${groupName}-${groupKey(groupName, pins)}`);
}

/** The names a group provides: its binaries, then its companion files. */
export function groupFiles(group: ToolGroup): BinaryName[] {
  return [...Object.keys(group.binaries), ...Object.keys(group.companions ?? {})] as BinaryName[];
}

function groupOf(pins: ToolchainPins, name: string): [string, ToolGroup] | undefined {
  for (const [g, group] of Object.entries(pins.groups))
    if (groupFiles(group).includes(name as BinaryName)) return [g, group];
  return undefined;
}

/** The commands `needs` names (`cluster`, `demo`, `test`). */
export function needsNames(pins: ToolchainPins = loadPins()): string[] {
  return Object.keys(pins.needs ?? {}).filter((k) => !k.startsWith("$"));
}

/**
 * The groups the command `purpose` needs (`needs` of `toolchain.json`), in the pin file's
 * group order.
 * @throws ToolchainError naming the purpose and the valid ones, or a group the pins lack
 */
export function groupsFor(purpose: string, pins: ToolchainPins = loadPins()): string[] {
  const names = needsNames(pins);
  const list = names.includes(purpose) ? pins.needs![purpose] : undefined;
  if (!list)
    throw new ToolchainError(
      `[for] unknown command "${purpose}": choose from ${names.join(", ")} (the needs of toolchain.json)`,
    );
  const unknown = list.filter((g) => !pins.groups[g]);
  if (unknown.length > 0)
    throw new ToolchainError(
      `[needs.${purpose}] names no group of toolchain.json: "${unknown.join('", "')}"`,
    );
  return Object.keys(pins.groups).filter((g) => list.includes(g));
}

/** Every binary name in build order. */
export function allBinaries(pins: ToolchainPins = loadPins()): BinaryName[] {
  return Object.values(pins.groups).flatMap(groupFiles);
}

/**
 * The folder of Pulumi's language-host source archives and their `build-language-host`
 * script, for a module proxy that refuses the hosts' modules: `$COCOONSET_LANGHOSTS_DIR`,
 * else `../shared/langhosts` relative to the repository root (where the peer's archives
 * are found too, see bench/peer.ts). The archives are read where they are.
 */
export function langhostsDir(): string {
  return resolve(
    process.env.COCOONSET_LANGHOSTS_DIR || join(sourceDir(), "..", "..", "shared", "langhosts"),
  );
}

/** Answers of {@link versionOk} in this process, by file (and its size and time) and probe. */
const versionAnswers = new Map<string, boolean>();

/** True when the binary at `path` reports the pinned version (never without a probe). */
export function versionOk(path: string, group: ToolGroup): boolean {
  if (!group.versionMatch) return false;
  const args = group.versionArgsOf?.[basename(path)] ?? group.versionArgs;
  let key: string;
  try {
    const st = statSync(path);
    key = JSON.stringify([path, st.size, st.mtimeMs, st.ino, args, group.versionMatch]);
  } catch {
    return false;
  }
  const known = versionAnswers.get(key);
  if (known !== undefined) return known;
  const r = spawnSync(path, args, { encoding: "utf8", timeout: 20_000 });
  const ok = r.status === 0 && `${r.stdout}${r.stderr}`.includes(group.versionMatch);
  versionAnswers.set(key, ok);
  return ok;
}

/** The first `name` on PATH that reports `group`'s pinned version. */
function onPath(name: string, group: ToolGroup): string | undefined {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (!dir) continue;
    const p = join(dir, name);
    if (existsSync(p) && versionOk(p, group)) return p;
  }
  return undefined;
}

/**
 * A file without a version flag found where its release put it: beside the binary of the
 * group it ships with ({@link ToolGroup.shippedWith}) at that group's pinned version, or in
 * Pulumi's plugin cache under the pinned version ({@link ToolGroup.pulumiPlugin}).
 */
function installedBeside(
  name: BinaryName,
  group: ToolGroup,
  pins: ToolchainPins,
): Pick<Located, "path" | "source"> | undefined {
  const ship = group.shippedWith ? pins.groups[group.shippedWith] : undefined;
  if (ship && ship.version === group.version) {
    for (const b of Object.keys(ship.binaries)) {
      const found = onPath(b, ship);
      const p = found && join(dirname(found), name);
      if (p && existsSync(p)) return { path: p, source: "path" };
    }
  }
  if (group.pulumiPlugin) {
    const home = process.env.PULUMI_HOME || join(homedir(), ".pulumi");
    const version = (group.stamp ?? group.version).replace(/^v/, "");
    const dir = join(home, "plugins", `${group.pulumiPlugin}-v${version}`);
    const p = join(dir, name);
    // Pulumi marks a plugin folder it is still filling with a `.partial` file beside it.
    if (existsSync(p) && !existsSync(`${dir}.partial`))
      return { path: p, source: "pulumi-plugins" };
  }
  return undefined;
}

/** Where a binary was found, and how. */
export interface Located {
  name: BinaryName;
  path?: string;
  source?: "configured" | "kubebuilder-assets" | "cache" | "path" | "pulumi-plugins";
}

/**
 * Finds a binary without building: `$COCOONSET_BIN_DIR`, then `$KUBEBUILDER_ASSETS`
 * (etcd, kube-apiserver, kubectl), then the cache, then `PATH`. Binaries outside the cache
 * are used only when their version output matches the pin; those without a version flag
 * only where their release put them at the pinned version (beside a `pulumi` of the pinned
 * version for Pulumi's language hosts, Pulumi's plugin cache for the Kubernetes provider).
 */
export function locate(name: BinaryName, pins: ToolchainPins = loadPins()): Located {
  const cached = join(binDir(pins), name);
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
  const onPathAt = group.versionMatch ? onPath(name, group) : undefined;
  if (onPathAt) return { name, path: onPathAt, source: "path" };
  const beside = group.versionMatch ? undefined : installedBeside(name, group, pins);
  return beside ? { name, ...beside } : { name };
}

/** Path of a binary, or a ToolchainError saying how to get it. */
export function requireBinary(name: BinaryName, pins: ToolchainPins = loadPins()): string {
  const l = locate(name, pins);
  if (!l.path) {
    throw new ToolchainError(
      `${name} is not built yet: run \`cocoonset-dev toolchain ensure\` (looked in $COCOONSET_BIN_DIR, the cache ${binDir(pins)} and PATH)`,
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
