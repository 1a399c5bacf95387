/**
 * Filling the cache's group folders from folders of the old layout (`toolchain-<key>/bin`,
 * one folder per whole pin set) that hold binaries built from the same pins, by hard links
 * instead of a rebuild.
 */
import { spawnSync } from "node:child_process";
import {
  chmodSync,
  copyFileSync,
  linkSync,
  readdirSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
} from "node:fs";
import { join } from "node:path";
import {
  ToolGroup,
  ToolchainPins,
  cacheRoot,
  groupKey,
  pinsKey,
  sourceDir,
  versionOk,
} from "./toolchain-pins.js";

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

export function isFile(p: string): boolean {
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
export function planCacheMigration(
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
