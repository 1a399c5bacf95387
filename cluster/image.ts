/**
 * The controller image, built without a Docker daemon.
 *
 * `stageRootfs` writes the image's whole file tree into a folder: the Node binary running this
 * process (at /nodejs/bin/node) and the shared libraries `ldd` lists for it, a package.json,
 * the controller bundled into one module from dist/controller/main.js
 * (cluster/controller-bundle.ts) with the licences of the packages inside it, and the
 * packages it loads lazily together with their own runtime dependencies (never `@types/*`,
 * type declarations, source maps or markdown other than licences). Owners, modes and times are fixed, so the same inputs
 * give the same bytes.
 *
 * `buildImage` stages into a temporary folder and runs `buildah bud` on controller/Dockerfile
 * with that folder as the `build` context: the Dockerfile's final stage (`FROM scratch`,
 * labels, user, entry point) is used as written, and its build stage is replaced by the
 * staging done here, which is the step that stage runs with Docker. The created time is
 * `$SOURCE_DATE_EPOCH`, else the commit time of HEAD, else 0.
 */
import { execFileSync, spawnSync } from "node:child_process";
import {
  chmodSync,
  copyFileSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, posix, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { defaultControllerImage } from "../controller/image.js";
import { bundleController, LAZY_PACKAGES } from "./controller-bundle.js";
import { BrandedError } from "../engine/kube/branded-error.js";
import { dockerConfigPath } from "../engine/registry/keychain.js";

/** The package root (holds package.json, dist/, controller/Dockerfile). */
export const PACKAGE_ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** Path of the Node binary inside the image. */
export const IMAGE_NODE_PATH = "/nodejs/bin/node";
/** Folder of the application inside the image. */
export const IMAGE_APP_DIR = "/app";
/** The entry point, relative to the package root. */
export const CONTROLLER_ENTRY = "dist/controller/main.js";

/** Thrown for a missing tool or a failed step; the message says which and why. */
export class ImageError extends BrandedError {
  constructor(message: string) {
    super(message);
  }
}

/**
 * What controller/Dockerfile's ENTRYPOINT runs: the Node flags between the node binary and the
 * script, and the script as a path under the package root, so a process started outside the
 * image (the controller benchmark) runs as the image does.
 */
export function imageEntrypoint(root = PACKAGE_ROOT): { nodeFlags: string[]; script: string } {
  const dockerfile = readFileSync(join(root, "controller", "Dockerfile"), "utf8");
  const line = /^ENTRYPOINT\s+(\[.*\])\s*$/m.exec(dockerfile);
  if (!line) throw new ImageError("controller/Dockerfile has no ENTRYPOINT in exec form");
  const words = JSON.parse(line[1]) as string[];
  const at = words.findIndex((w) => w.endsWith(".js"));
  if (at < 1) throw new ImageError(`controller/Dockerfile's ENTRYPOINT runs no script: ${line[1]}`);
  return {
    nodeFlags: words.slice(1, at),
    script: join(root, posix.relative(IMAGE_APP_DIR, words[at])),
  };
}

// ---------------------------------------------------------------------------------------------
// The import graph

const STATIC_IMPORT = /(?:^|[;\s}])(?:import|export)\s*(?:[^'";]*?\sfrom\s*)?["']([^"']+)["']/g;
const DYNAMIC_IMPORT = /\bimport\(\s*["']([^"']+)["']\s*\)/g;

/** The specifiers a compiled ES module imports (static, re-exports, literal `import()`). */
export function importSpecifiers(source: string): string[] {
  const out = new Set<string>();
  for (const re of [STATIC_IMPORT, DYNAMIC_IMPORT]) {
    for (const m of source.matchAll(re)) out.add(m[1]);
  }
  return [...out];
}

/** Name of the package a bare specifier names (`@scope/name/sub` → `@scope/name`). */
export function packageName(specifier: string): string {
  const parts = specifier.split("/");
  return specifier.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0];
}

/** What the entry point reaches: project files (absolute) and bare package names. */
export interface ImportGraph {
  files: string[];
  packages: string[];
}

/**
 * Walks the relative imports of the compiled entry `entry` (an absolute path) and collects
 * the files it reaches and the packages they import (`node:` built-ins left out).
 */
export function importGraph(entry: string): ImportGraph {
  const files = new Set<string>();
  const packages = new Set<string>();
  const queue = [entry];
  while (queue.length) {
    const file = queue.pop()!;
    if (files.has(file)) continue;
    if (!existsSync(file)) throw new ImageError(`${file} is imported but missing: run tsc first`);
    files.add(file);
    if (!file.endsWith(".js")) continue;
    for (const spec of importSpecifiers(readFileSync(file, "utf8"))) {
      if (spec.startsWith("node:")) continue;
      if (spec.startsWith(".")) queue.push(join(dirname(file), spec));
      else packages.add(packageName(spec));
    }
  }
  return { files: [...files].sort(), packages: [...packages].sort() };
}

// ---------------------------------------------------------------------------------------------
// Runtime packages

interface PackageJson {
  name?: string;
  version?: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
}

/** Finds the folder of package `name` as Node resolves it from `fromDir`. */
function findPackage(name: string, fromDir: string): string | undefined {
  let dir = fromDir;
  for (;;) {
    const candidate = join(dir, "node_modules", name);
    if (existsSync(join(candidate, "package.json"))) return candidate;
    const up = dirname(dir);
    if (up === dir) return undefined;
    dir = up;
  }
}

/**
 * The folders of `roots` and of every package they depend on at run time (`dependencies`,
 * installed `optionalDependencies` and required `peerDependencies`), resolved from `fromDir`
 * as Node would. `@types/*` packages hold only declarations and are left out.
 */
export function runtimePackages(roots: string[], fromDir: string): string[] {
  const found = new Set<string>();
  const queue = roots.map((name) => ({ name, from: fromDir, optional: false }));
  while (queue.length) {
    const { name, from, optional } = queue.shift()!;
    if (name.startsWith("@types/")) continue;
    const dir = findPackage(name, from);
    if (!dir) {
      if (optional) continue;
      throw new ImageError(`package ${name} (needed at run time) is not installed: run npm ci`);
    }
    if (found.has(dir)) continue;
    found.add(dir);
    const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as PackageJson;
    for (const dep of Object.keys(pkg.dependencies ?? {}))
      queue.push({ name: dep, from: dir, optional: false });
    for (const dep of Object.keys(pkg.optionalDependencies ?? {}))
      queue.push({ name: dep, from: dir, optional: true });
    for (const dep of Object.keys(pkg.peerDependencies ?? {})) {
      const opt = pkg.peerDependenciesMeta?.[dep]?.optional === true;
      queue.push({ name: dep, from: dir, optional: opt });
    }
  }
  return [...found].sort();
}

/** True for package files the image leaves out: type declarations, source maps, markdown. */
export function skippedPackageFile(name: string): boolean {
  if (/\.d\.[mc]?ts$/.test(name) || /\.[mc]?ts$/.test(name) || name.endsWith(".map")) return true;
  if (/\.(md|markdown)$/i.test(name)) return !/licen[cs]e|notice|copying/i.test(name);
  return false;
}

// ---------------------------------------------------------------------------------------------
// Shared libraries

/** Parses `ldd` output into the absolute paths of the libraries (the vDSO left out). */
export function parseLdd(output: string): string[] {
  const libs = new Set<string>();
  for (const line of output.split("\n")) {
    const arrow = /=>\s*(\/\S+)\s*\(/.exec(line);
    if (arrow) libs.add(arrow[1]);
    else {
      const bare = /^\s*(\/\S+)\s*\(/.exec(line);
      if (bare) libs.add(bare[1]);
    }
  }
  return [...libs].sort();
}

/** The shared libraries `binary` loads, as `ldd` lists them; none for a static binary. */
function sharedLibraries(binary: string): string[] {
  const r = spawnSync("ldd", [binary], { encoding: "utf8" });
  if (r.error) throw new ImageError(`cannot run ldd on ${binary}: ${r.error.message}`);
  if (r.status !== 0) {
    if (/not a dynamic executable|statically linked/.test(r.stdout + r.stderr)) return [];
    throw new ImageError(`ldd ${binary} failed: ${(r.stderr || r.stdout).trim()}`);
  }
  return parseLdd(r.stdout);
}

// ---------------------------------------------------------------------------------------------
// Staging

/** Options of {@link stageRootfs}. */
export interface StageOptions {
  /** Empty or missing folder to write the tree into. */
  out: string;
  /** Package root. @default PACKAGE_ROOT */
  root?: string;
  /** Node binary to put in the image. @default the one running this process */
  node?: string;
  /** Time (seconds since the epoch) every entry gets. @default 0 */
  epoch?: number;
}

/** What {@link stageRootfs} wrote. */
export interface StageResult {
  /** Every path in the tree (`/`-rooted, directories end with `/`), sorted. */
  files: string[];
  /** Sum of the file sizes in bytes. */
  bytes: number;
  nodeVersion: string;
  /** The packages copied (name@version), sorted. */
  packages: string[];
}

/** The Node major version the image is built for (the project's runtime). */
const IMAGE_NODE_MAJOR = 24;

function nodeVersionOf(binary: string): string {
  const r = spawnSync(binary, ["--version"], { encoding: "utf8" });
  if (r.status !== 0) throw new ImageError(`cannot run ${binary} --version: ${r.stderr}`);
  return r.stdout.trim();
}

/**
 * Writes the controller image's file tree into `opts.out` (see the module comment). Regular
 * files are copied (symbolic links are followed), so the tree holds no links.
 */
export function stageRootfs(opts: StageOptions): StageResult {
  const root = opts.root ?? PACKAGE_ROOT;
  const node = realpathSync(opts.node ?? process.execPath);
  const epoch = opts.epoch ?? 0;
  const out = opts.out;
  if (existsSync(out) && readdirSync(out).length > 0)
    throw new ImageError(`[--out] ${out} must be empty or missing`);
  const nodeVersion = nodeVersionOf(node);
  if (!nodeVersion.startsWith(`v${IMAGE_NODE_MAJOR}.`))
    throw new ImageError(
      `the image needs Node ${IMAGE_NODE_MAJOR}; ${node} is ${nodeVersion} (run through ./bin/cocoonset, which uses node_modules/.bin/node)`,
    );

  const written = new Set<string>();
  let bytes = 0;
  const put = (imagePath: string, from: string | { text: string }, mode?: number) => {
    const dest = join(out, imagePath);
    mkdirSync(dirname(dest), { recursive: true });
    if (typeof from === "string") {
      copyFileSync(from, dest);
      const executable = (statSync(from).mode & 0o111) !== 0;
      chmodSync(dest, mode ?? (executable ? 0o755 : 0o644));
      bytes += statSync(dest).size;
    } else {
      writeFileSync(dest, from.text);
      chmodSync(dest, mode ?? 0o644);
      bytes += Buffer.byteLength(from.text);
    }
    written.add(imagePath);
  };

  // The runtime: Node and what it links. The libraries keep the paths ldd names, which are
  // where the dynamic loader looks.
  put(IMAGE_NODE_PATH, node, 0o755);
  for (const lib of sharedLibraries(node)) put(lib, realpathSync(lib), 0o755);
  // A passwd entry for the UID the image runs as, so tools that look the user up find it.
  put("/etc/passwd", {
    text: "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n",
  });
  put("/etc/group", { text: "root:x:0:\nnonroot:x:65532:\n" });

  // The application: package.json (ES modules, and the version the CLI prints), the
  // controller bundled into one module (built here from the compiled entry, so it is never
  // stale) with its packages' licences, and the packages it loads lazily.
  const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
    name: string;
    version: string;
    license?: string;
  };
  put(`${IMAGE_APP_DIR}/package.json`, {
    text:
      JSON.stringify(
        { name: pkg.name, version: pkg.version, license: pkg.license, type: "module" },
        null,
        2,
      ) + "\n",
  });
  const bundle = bundleController(root);
  for (const file of [bundle.file, bundle.licenses]) {
    put(posix.join(IMAGE_APP_DIR, relative(root, file).split(sep).join("/")), file);
  }
  const packages: string[] = [];
  for (const dir of runtimePackages(LAZY_PACKAGES, root)) {
    const meta = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as PackageJson;
    packages.push(`${meta.name}@${meta.version}`);
    const rel = relative(root, dir).split(sep).join("/");
    const walk = (from: string, to: string) => {
      for (const name of readdirSync(from).sort()) {
        const src = join(from, name);
        if (name === "node_modules" && from === dir) continue; // nested packages come on their own
        const st = lstatSync(src);
        const real = st.isSymbolicLink() ? statSync(src) : st;
        if (real.isDirectory()) walk(src, posix.join(to, name));
        else if (real.isFile() && !skippedPackageFile(name)) put(posix.join(to, name), src);
      }
    };
    walk(dir, posix.join(IMAGE_APP_DIR, rel));
  }

  // Every directory on the way, with fixed modes; then one time for everything.
  const all = new Set<string>();
  for (const f of written) {
    all.add(f);
    for (let d = posix.dirname(f); d !== "/"; d = posix.dirname(d)) all.add(`${d}/`);
  }
  const files = [...all].sort();
  for (const f of files.filter((p) => p.endsWith("/"))) chmodSync(join(out, f), 0o755);
  for (const f of [...files].reverse()) utimesSync(join(out, f), epoch, epoch);
  utimesSync(out, epoch, epoch);
  return { files, bytes, nodeVersion, packages: packages.sort() };
}

// ---------------------------------------------------------------------------------------------
// Building

/** Options of {@link buildImage}. */
export interface BuildOptions {
  /** Image reference. @default `pulumi-cocoonset/controller:<package version>` */
  tag?: string;
  /** Package root. @default PACKAGE_ROOT */
  root?: string;
  /** `org.opencontainers.image.revision`. @default `git rev-parse HEAD`, else "unknown" */
  revision?: string;
  /** Created time in seconds. @default $SOURCE_DATE_EPOCH, else HEAD's commit time, else 0 */
  epoch?: number;
  /** Receives progress lines. */
  log?: (line: string) => void;
}

/** What {@link buildImage} built. */
export interface BuildResult {
  tag: string;
  /** The image ID (digest of its config). */
  id: string;
  /** Digest of the image manifest as stored locally. */
  digest: string;
  /** Uncompressed size in bytes. */
  size: number;
  /** Size of the layer gzip-compressed, as a registry would store it. */
  compressedSize: number;
  /** Entries in the file tree. */
  files: number;
  created: string;
  nodeVersion: string;
  labels: Record<string, string>;
}

function git(root: string, args: string[]): string | undefined {
  const r = spawnSync("git", ["-C", root, ...args], { encoding: "utf8" });
  return r.status === 0 ? r.stdout.trim() : undefined;
}

/** Where a tool is, or undefined. */
export function which(tool: string): string | undefined {
  for (const dir of (process.env.PATH ?? "").split(":")) {
    if (dir && existsSync(join(dir, tool))) return join(dir, tool);
  }
  return undefined;
}

/**
 * The environment of buildah and podman: without `DOCKER_CONFIG` when that folder holds no
 * `config.json`. buildah (1.28 here) stats the auth file it derives from `DOCKER_CONFIG` and
 * refuses every command, a build too ("checking authfile: stat …/config.json"), where Docker
 * and the controller's keychain read a missing file as no credentials; a push passes the file
 * it found as `--authfile` itself.
 */
function toolEnv(): NodeJS.ProcessEnv {
  const dir = process.env.DOCKER_CONFIG;
  if (!dir || existsSync(join(dir, "config.json"))) return process.env;
  const env = { ...process.env };
  delete env.DOCKER_CONFIG;
  return env;
}

function run(cmd: string, args: string[]): string {
  const r = spawnSync(cmd, args, {
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024,
    env: toolEnv(),
  });
  if (r.error) throw new ImageError(`${cmd} failed to start: ${r.error.message}`);
  if (r.status !== 0)
    throw new ImageError(
      `${cmd} ${args.join(" ")} failed (exit ${r.status}):\n${(r.stderr || r.stdout).trim().split("\n").slice(-20).join("\n")}`,
    );
  return r.stdout;
}

/** The created time of a build: `$SOURCE_DATE_EPOCH`, else HEAD's commit time, else 0. */
function sourceDateEpoch(root: string): number {
  const env = process.env.SOURCE_DATE_EPOCH?.trim();
  if (env) {
    if (!/^\d+$/.test(env)) throw new ImageError(`[SOURCE_DATE_EPOCH] must be seconds, got ${env}`);
    return parseInt(env, 10);
  }
  const ct = git(root, ["log", "-1", "--format=%ct"]);
  return ct && /^\d+$/.test(ct) ? parseInt(ct, 10) : 0;
}

/** Builds the controller image with buildah (see the module comment). */
export function buildImage(opts: BuildOptions = {}): BuildResult {
  const root = opts.root ?? PACKAGE_ROOT;
  const log = opts.log ?? (() => {});
  const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string };
  const tag = opts.tag ?? defaultControllerImage(pkg.version);
  if (!which("buildah"))
    throw new ImageError(
      "buildah is not installed: `apt-get install -y buildah podman runc` (Debian/Ubuntu), or build controller/Dockerfile with Docker",
    );
  const epoch = opts.epoch ?? sourceDateEpoch(root);
  const dirty = git(root, ["status", "--porcelain", "--untracked-files=no"]);
  const revision =
    opts.revision ??
    (() => {
      const head = git(root, ["rev-parse", "HEAD"]);
      if (!head) return "unknown";
      return dirty ? `${head}-dirty` : head;
    })();

  const work = mkdtempSync(join(tmpdir(), "cocoonset-image-"));
  try {
    const t0 = Date.now();
    const staged = stageRootfs({ out: join(work, "rootfs"), root, epoch });
    log(
      `staged ${staged.files.length} entries (${(staged.bytes / 1048576).toFixed(1)} MiB, Node ${staged.nodeVersion}, ${staged.packages.length} packages) in ${((Date.now() - t0) / 1000).toFixed(1)}s`,
    );
    const t1 = Date.now();
    run("buildah", [
      "bud",
      "--format",
      "oci",
      "--timestamp",
      String(epoch),
      "--identity-label=false",
      "--layers=false",
      "--pull=never",
      "--build-context",
      `build=${work}`,
      "--build-arg",
      `VERSION=${pkg.version}`,
      "--build-arg",
      `REVISION=${revision}`,
      "-f",
      join(root, "controller", "Dockerfile"),
      "-t",
      tag,
      join(work, "rootfs"),
    ]);
    log(`buildah bud in ${((Date.now() - t1) / 1000).toFixed(1)}s`);
    const result = inspectImage(tag);
    const layer = join(work, "layer.tar");
    run("buildah", ["push", "--quiet", tag, `oci-archive:${layer}`]);
    return {
      ...result,
      files: staged.files.length,
      nodeVersion: staged.nodeVersion,
      compressedSize: gzippedLayerBytes(layer),
    };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** Options of {@link pushImage}. */
export interface PushOptions {
  /** The local image (as built). */
  source: string;
  /** Where to push it: `registry/repository[:tag]`. */
  ref: string;
  /**
   * The Docker config whose credentials (`auths`, `credHelpers`, `credsStore`) push it.
   * @default `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json` (when it exists)
   */
  authFile?: string;
  /** PEM CA bundle trusted for the registry's https, besides the system's roots. */
  caFile?: string;
  /** Plain http, or https without verifying the certificate. @default false */
  insecure?: boolean;
}

/**
 * Pushes a local image with `buildah push` and returns `REF@sha256:…`, the digest of the
 * manifest as the registry stores it (what a Deployment should name).
 */
export function pushImage(opts: PushOptions): string {
  const work = mkdtempSync(join(tmpdir(), "cocoonset-push-"));
  try {
    const args = ["push", "--quiet", "--digestfile", join(work, "digest")];
    const auth = opts.authFile ?? dockerConfigPath();
    if (existsSync(auth)) args.push("--authfile", auth);
    else if (opts.authFile) throw new ImageError(`[--authfile] no such file: ${opts.authFile}`);
    if (opts.caFile) {
      // buildah reads every *.crt of a folder.
      const certs = join(work, "certs");
      mkdirSync(certs);
      writeFileSync(join(certs, "ca.crt"), readFileSync(opts.caFile));
      args.push("--cert-dir", certs);
    }
    if (opts.insecure) args.push("--tls-verify=false");
    run("buildah", [...args, opts.source, `docker://${opts.ref}`]);
    const digest = readFileSync(join(work, "digest"), "utf8").trim();
    if (!/^sha256:[0-9a-f]{64}$/.test(digest))
      throw new ImageError(`buildah push wrote no digest for ${opts.ref} (got ${digest})`);
    return `${opts.ref}@${digest}`;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** Sum of the gzip-compressed layer sizes in an OCI archive (what a registry stores). */
function gzippedLayerBytes(archive: string): number {
  const dir = `${archive}.d`;
  mkdirSync(dir);
  execFileSync("tar", ["-xf", archive, "-C", dir]);
  const index = JSON.parse(readFileSync(join(dir, "index.json"), "utf8")) as {
    manifests: { digest: string }[];
  };
  const blob = (d: string) => join(dir, "blobs", ...d.split(":"));
  const manifest = JSON.parse(readFileSync(blob(index.manifests[0].digest), "utf8")) as {
    layers: { digest: string; mediaType: string; size: number }[];
  };
  let total = 0;
  for (const l of manifest.layers) {
    if (l.mediaType.endsWith("+gzip")) total += l.size;
    else total += Number(execFileSync("sh", ["-c", `gzip -c < '${blob(l.digest)}' | wc -c`]));
  }
  return total;
}

/** ID, digest, size, created time and labels of a local image. */
function inspectImage(ref: string): Omit<BuildResult, "files" | "nodeVersion" | "compressedSize"> {
  const out = run("buildah", ["inspect", "--type", "image", ref]);
  const info = JSON.parse(out) as {
    FromImageID: string;
    FromImageDigest: string;
    OCIv1: { created?: string; config?: { Labels?: Record<string, string> } };
  };
  const size = Number(
    run("podman", ["image", "inspect", "--format", "{{.Size}}", ref]).trim() || "0",
  );
  return {
    tag: ref,
    id: info.FromImageID,
    digest: info.FromImageDigest,
    size,
    created: info.OCIv1.created ?? "",
    labels: info.OCIv1.config?.Labels ?? {},
  };
}
