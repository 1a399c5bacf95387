/**
 * A local npm registry, for installing this package before it is published: it serves the
 * repository, packed with `npm pack`, as `pulumi-cocoonset`; every package version the
 * repository's package-lock.json holds, with the lock's integrity (npm then takes the
 * tarball from its cache, where `npm ci` left it, or fetches it upstream); and redirects
 * any other request to the upstream registry. A project depends on
 * `"pulumi-cocoonset": "^0.1.0"` exactly as it would on the published package; only
 * `npm_config_registry` points elsewhere. Serving the locked versions locally keeps an
 * install at a few seconds instead of minutes of fetching packuments one by one; the names
 * in `upstream` are sent to the upstream registry all the same (every version it serves),
 * for a project that depends on versions the lock does not hold.
 */
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestContext } from "node:test";
import { repoRoot } from "./pulumi.js";

/** The registry npm is configured to use here: everything but the project is sent there. */
const UPSTREAM = execFileSync("npm", ["config", "get", "registry"], { encoding: "utf8" })
  .trim()
  .replace(/\/$/, "");

/** Packs the repository (as built: no scripts run) and serves it; returns the registry URL. */
export async function localRegistry(
  t: TestContext,
  opts: { upstream?: readonly string[] } = {},
): Promise<string> {
  const out = mkdtempSync(join(tmpdir(), "cocoonset-pack-"));
  t.after(() => rmSync(out, { recursive: true, force: true }));
  const packed = JSON.parse(
    execFileSync("npm", ["pack", "--ignore-scripts", "--json", "--pack-destination", out], {
      cwd: repoRoot,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "inherit"],
    }),
  ) as { filename: string }[];
  const tarball = readFileSync(join(out, packed[0].filename));
  const manifest = JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as {
    name: string;
    version: string;
  };
  const tarballPath = `/${manifest.name}/-/${manifest.name}-${manifest.version}.tgz`;
  const locked = lockedVersions();
  for (const name of opts.upstream ?? []) locked.delete(name);

  const server = createServer((req, res) => {
    const url = req.url ?? "/";
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    if (url === `/${manifest.name}`) {
      const version = {
        ...manifest,
        _id: `${manifest.name}@${manifest.version}`,
        dist: {
          tarball: `${base}${tarballPath}`,
          integrity: `sha512-${createHash("sha512").update(tarball).digest("base64")}`,
          shasum: createHash("sha1").update(tarball).digest("hex"),
        },
      };
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          name: manifest.name,
          "dist-tags": { latest: manifest.version },
          versions: { [manifest.version]: version },
        }),
      );
    } else if (locked.has(decodeURIComponent(url.slice(1)))) {
      const name = decodeURIComponent(url.slice(1));
      const versions = locked.get(name)!;
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          name,
          "dist-tags": { latest: Object.keys(versions).sort(compareVersions).at(-1) },
          versions,
        }),
      );
    } else if (url === tarballPath) {
      res.writeHead(200, { "content-type": "application/octet-stream" });
      res.end(tarball);
    } else {
      res.writeHead(302, { location: `${UPSTREAM}${url}` });
      res.end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
}

/** What a package-lock.json v3 entry holds that a packument version needs. */
interface LockEntry {
  version?: string;
  integrity?: string;
  link?: boolean;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, unknown>;
  bin?: Record<string, string>;
  engines?: Record<string, string>;
  os?: string[];
  cpu?: string[];
  license?: string;
}

/** Every package version of the repository's lock file, as packument versions by name. */
function lockedVersions(): Map<string, Record<string, unknown>> {
  const lock = JSON.parse(readFileSync(join(repoRoot, "package-lock.json"), "utf8")) as {
    packages: Record<string, LockEntry>;
  };
  const out = new Map<string, Record<string, unknown>>();
  for (const [path, entry] of Object.entries(lock.packages)) {
    const at = path.lastIndexOf("node_modules/");
    if (at < 0 || entry.link || !entry.version || !entry.integrity) continue;
    const name = path.slice(at + "node_modules/".length);
    const { version, integrity, ...rest } = entry;
    const file = `${name.split("/").at(-1)}-${version}.tgz`;
    const versions = out.get(name) ?? {};
    versions[version] = {
      name,
      version,
      ...rest,
      dist: { integrity, tarball: `${UPSTREAM}/${name}/-/${file}` },
    };
    out.set(name, versions);
  }
  return out;
}

/** Orders plain `x.y.z` versions (pre-releases after their release, which is enough here). */
function compareVersions(a: string, b: string): number {
  const pa = a.split(/[.-]/).map((p) => Number(p));
  const pb = b.split(/[.-]/).map((p) => Number(p));
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? -1) - (pb[i] ?? -1);
    if (d !== 0 && !Number.isNaN(d)) return d;
  }
  return 0;
}
