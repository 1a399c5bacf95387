/**
 * Official release downloads: a binary of a group is taken from the archive its project
 * publishes (`release` of the group in `toolchain.json`), when that archive's sha256 for this
 * platform is pinned there, instead of being built from Go modules. Anything short of a
 * verified archive (no pinned checksum, a host that does not answer, a 404, a timeout, a
 * checksum or version that does not match) leaves the binary to the build, with one progress
 * line saying why.
 *
 * The archive is streamed to a scratch folder of the group, hashed as it arrives, unpacked
 * there (`tar`) and its binary renamed into the group's `bin` only after the hash and the
 * binary's own version output match, so a refused or interrupted download never leaves a
 * file where the toolchain looks.
 */
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  chmodSync,
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  renameSync,
  rmSync,
  writeSync,
} from "node:fs";
import { join } from "node:path";
import { versionOk, type ReleaseAsset, type ToolGroup } from "./toolchain-pins.js";

/**
 * The platform a checksum is pinned for: `<os>-<arch>` as Go names them (`linux-amd64`,
 * `darwin-arm64`).
 */
export function releasePlatform(): string {
  const arch = ({ x64: "amd64", arm64: "arm64" } as Record<string, string>)[process.arch];
  return `${process.platform}-${arch ?? process.arch}`;
}

/** Environment variable: a mirror of the release hosts, or `none` to build everything. */
const RELEASE_BASE_ENV = "COCOONSET_RELEASE_BASE_URL";

/** Options of {@link fetchReleaseBinaries}. */
export interface ReleaseOptions {
  progress: (line: string) => void;
  /**
   * Where archives are fetched: `none` turns downloads off; a URL is a mirror that serves
   * each archive under `<base>/<host><path>` of its published URL.
   * @default `$COCOONSET_RELEASE_BASE_URL`, else the published URLs
   */
  baseUrl?: string;
  /**
   * How long a host may keep silent: before its answer, and between two chunks of the body.
   * @default 15 s
   */
  timeoutMs?: number;
  /** @default {@link releasePlatform} */
  platform?: string;
  /** Hosts that failed earlier in this run: not asked again (filled in here). */
  unreachable?: Set<string>;
}

/** An asset's URL for this platform, its `{os}`, `{arch}` and `{version}` filled in. */
export function assetUrl(asset: ReleaseAsset, platform: string, template = asset.url): string {
  const [os, arch] = platform.split("-");
  return template
    .replaceAll("{os}", asset.os?.[os] ?? os)
    .replaceAll("{arch}", asset.arch?.[arch] ?? arch);
}

/** The URL fetched for `published`: itself, or its place under the mirror `base`. */
export function mirrored(published: string, base: string | undefined): string {
  if (!base) return published;
  const u = new URL(published);
  return `${base.replace(/\/+$/, "")}/${u.host}${u.pathname}`;
}

/** Why a download was not used; the message is the progress line's reason. */
class Refused extends Error {}

/**
 * Streams `url` to `file`, hashing it; gives up when the host keeps silent for `timeoutMs`.
 * @returns the sha256 of what was written
 */
async function download(url: string, file: string, timeoutMs: number): Promise<string> {
  const abort = new AbortController();
  let timer = setTimeout(() => abort.abort(), timeoutMs);
  const rearm = () => {
    clearTimeout(timer);
    timer = setTimeout(() => abort.abort(), timeoutMs);
  };
  let fd: number | undefined;
  try {
    let res: Response;
    try {
      res = await fetch(url, { signal: abort.signal, redirect: "follow" });
    } catch (e) {
      throw new Refused(abort.signal.aborted ? `no answer in ${timeoutMs / 1000}s` : reason(e));
    }
    if (!res.ok || !res.body) throw new Refused(`HTTP ${res.status}`);
    rearm();
    const hash = createHash("sha256");
    fd = openSync(file, "w");
    try {
      for await (const chunk of res.body as AsyncIterable<Uint8Array>) {
        rearm();
        hash.update(chunk);
        writeSync(fd, chunk);
      }
    } catch (e) {
      throw new Refused(
        abort.signal.aborted
          ? `the download stalled for ${timeoutMs / 1000}s`
          : `the download broke off (${reason(e)})`,
      );
    }
    return hash.digest("hex");
  } finally {
    clearTimeout(timer);
    if (fd !== undefined) closeSync(fd);
  }
}

/** A network error's code (`ENOTFOUND`, `ECONNREFUSED`) or message. */
function reason(e: unknown): string {
  const err = e as { code?: string; message?: string; cause?: { code?: string; message?: string } };
  return err.cause?.code ?? err.cause?.message ?? err.code ?? err.message ?? String(e);
}

/**
 * Takes what it can of `names` (binaries of one group) from their official release archives
 * into `bin`. Each archive is used only when its sha256 for this platform is pinned and
 * matches, and (for binaries with a version probe) the binary reports the pinned version.
 * After the first failure of the group the rest of it is not tried (it is built instead).
 * @returns the names it placed in `bin`, and where each came from
 */
export async function fetchReleaseBinaries(
  groupName: string,
  group: ToolGroup,
  names: string[],
  bin: string,
  opts: ReleaseOptions,
): Promise<Map<string, string>> {
  const placed = new Map<string, string>();
  const base = opts.baseUrl ?? process.env[RELEASE_BASE_ENV] ?? "";
  if (base === "none" || !group.release) return placed;
  const platform = opts.platform ?? releasePlatform();
  const timeoutMs = opts.timeoutMs ?? 15_000;
  const unreachable = opts.unreachable ?? new Set<string>();
  const wanted = names.filter((n) => group.release![n]);
  const unpinned = wanted.filter((n) => !group.release![n].sha256?.[platform]);
  // One progress line for what is left to the build, with every reason.
  const reasons: string[] = [];
  if (unpinned.length > 0)
    reasons.push(
      `no release checksum is pinned for ${unpinned.length === wanted.length ? "" : `${unpinned.join(", ")} on `}${platform}`,
    );
  const scratch = join(bin, "..", `.release-${process.pid}`);
  // Binaries of one archive are unpacked from one download.
  const fetched = new Map<string, { dir: string; archive: string }>();
  try {
    for (const name of wanted.filter((n) => !unpinned.includes(n))) {
      const asset = group.release[name];
      const published = assetUrl(asset, platform);
      const url = mirrored(published, base || undefined);
      const pinned = asset.sha256![platform].toLowerCase();
      const host = new URL(url).host;
      const started = Date.now();
      try {
        if (unreachable.has(host)) throw new Refused(`${host} did not answer earlier in this run`);
        let got = fetched.get(url);
        if (!got) {
          const dir = join(scratch, String(fetched.size));
          mkdirSync(dir, { recursive: true });
          const archive = join(dir, "download");
          let sha: string;
          try {
            sha = await download(url, archive, timeoutMs);
          } catch (e) {
            if (e instanceof Refused && !/^HTTP /.test(e.message)) unreachable.add(host);
            throw e;
          }
          if (sha !== pinned)
            throw new Refused(
              `refused: its sha256 is ${sha}, toolchain.json pins ${pinned} for ${platform}`,
            );
          got = { dir, archive };
          fetched.set(url, got);
        }
        const file = unpack(name, asset, platform, got.dir, got.archive);
        chmodSync(file, 0o755);
        if (group.versionMatch && !versionOk(file, group))
          throw new Refused(`refused: ${name} does not report ${group.versionMatch}`);
        renameSync(file, join(bin, name));
        placed.set(name, published);
        opts.progress(
          `toolchain: ${groupName}: took ${name} from the release archive ${url} (sha256 checked${group.versionMatch ? ", version checked" : ""}) in ${Math.round((Date.now() - started) / 1000)}s`,
        );
      } catch (e) {
        if (!(e instanceof Refused)) throw e;
        reasons.push(`the release archive ${url} was not used: ${e.message}`);
        // The rest of the group is built: a host that failed once is not asked again.
        break;
      }
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
  const rest = wanted.filter((n) => !placed.has(n));
  if (rest.length > 0)
    opts.progress(
      `toolchain: ${groupName}: building ${rest.join(", ")} from source (${reasons.join("; ")})`,
    );
  return placed;
}

/** The binary `name` out of a downloaded archive (or the download itself, for a bare binary). */
function unpack(
  name: string,
  asset: ReleaseAsset,
  platform: string,
  dir: string,
  archive: string,
): string {
  if (!asset.path) {
    const file = join(dir, name);
    renameSync(archive, file);
    return file;
  }
  const member = assetUrl(asset, platform, asset.path);
  const out = join(dir, "unpacked");
  mkdirSync(out, { recursive: true });
  const r = spawnSync("tar", ["-xzf", archive, "-C", out, member], { encoding: "utf8" });
  if (r.error) throw new Refused(`tar could not run to unpack it (${reason(r.error)})`);
  const file = join(out, member);
  if (r.status !== 0 || !existsSync(file))
    throw new Refused(
      `it holds no ${member}${r.stderr ? ` (${r.stderr.trim().split("\n")[0]})` : ""}`,
    );
  return file;
}
