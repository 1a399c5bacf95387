/**
 * The Go peer of the controller benchmark and of the differential tests,
 * `github.com/cocoonstack/cocoon-operator`: built once into the toolchain cache folder (next
 * to the toolchain builds) and reused, with its CRDs copied next to it at build time.
 *
 * Two ways to build it, tried in order:
 * 1. `go install` of the module from the Go module proxy;
 * 2. a folder of source archives with a `build-cocoon-operator OUT --crds DIR` script (for a
 *    proxy that refuses the module): `$COCOONSET_PEERS_DIR`, else `../shared/peers` next to
 *    the repository root. The archives are read where they are, never copied here.
 */
import { spawn, spawnSync } from "node:child_process";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";
import { cacheDir } from "../cluster/index.js";
import {
  isNotFound,
  paths,
  waitForObject,
  type KubeClient,
  type KubeObject,
} from "../engine/kube/index.js";

/** The peer's module. */
export const PEER_MODULE = "github.com/cocoonstack/cocoon-operator";
/** The peer's version. */
export const PEER_VERSION = "v0.3.3";

/** A usable peer build, or the reason there is none. */
export type Peer =
  { ok: true; binary: string; crdFiles: string[]; reused: boolean } | { ok: false; reason: string };

/**
 * A failure reason with registry addresses replaced by `$GOPROXY`: the reason is printed and
 * recorded in bench/results/, which name no host.
 */
function missing(reason: string): Peer {
  return { ok: false, reason: reason.replace(/\bhttps?:\/\/[^/\s]+/g, "$GOPROXY") };
}

/** The repository root (this file runs from dist/bench). */
const repoRoot = fileURLToPath(new URL("../../", import.meta.url));

/**
 * The folder of the peer's source archives and build script: `$COCOONSET_PEERS_DIR`, else
 * `../shared/peers` relative to the repository root.
 */
export function peersDir(): string {
  return resolve(process.env.COCOONSET_PEERS_DIR || join(repoRoot, "..", "shared", "peers"));
}

/** The build script in {@link peersDir}. */
export const PEER_BUILD_SCRIPT = "build-cocoon-operator";

/** Where the peer lives: `<toolchain cache root>/peer/cocoon-operator-<version>/`. */
export function peerDir(): string {
  return join(dirname(cacheDir()), "peer", `cocoon-operator-${PEER_VERSION}`);
}

const goEnv = (extra: Record<string, string> = {}): NodeJS.ProcessEnv => ({
  ...process.env,
  GOTOOLCHAIN: "local",
  CGO_ENABLED: "0",
  ...extra,
});

function crdFilesIn(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith(".yaml") || f.endsWith(".yml"))
    .sort()
    .map((f) => join(dir, f));
}

/** The package path of the module's `main` package, looked up in the downloaded module. */
function mainPackage(moduleDir: string): string | undefined {
  const isMain = (file: string) =>
    existsSync(file) && /^package main\b/m.test(readFileSync(file, "utf8"));
  if (isMain(join(moduleDir, "main.go"))) return PEER_MODULE;
  const cmd = join(moduleDir, "cmd");
  if (!existsSync(cmd)) return undefined;
  for (const d of readdirSync(cmd).sort())
    if (isMain(join(cmd, d, "main.go"))) return `${PEER_MODULE}/cmd/${d}`;
  return undefined;
}

/** Runs a command with its output relayed as progress; resolves with the exit status. */
function run(
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  label: string,
  progress: (l: string) => void,
): Promise<{ code: number; tail: string }> {
  return new Promise((resolve) => {
    const tail: string[] = [];
    const child = spawn(command, args, { env, cwd: tmpdir(), stdio: ["ignore", "pipe", "pipe"] });
    let lines = 0;
    const onData = (chunk: Buffer) => {
      for (const line of chunk.toString("utf8").split("\n").filter(Boolean)) {
        tail.push(line);
        if (tail.length > 20) tail.shift();
        lines++;
        if (lines % 50 === 0) progress(`peer: ${label}: ${lines} lines so far (${line})`);
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.on("error", (e) => resolve({ code: -1, tail: e.message }));
    child.on("exit", (code) => resolve({ code: code ?? -1, tail: tail.join("\n") }));
  });
}

/** Way 1: `go install` from the module proxy. Undefined on success, else the reason. */
async function buildWithGoInstall(
  dir: string,
  binary: string,
  crdDir: string,
  progress: (l: string) => void,
): Promise<string | undefined> {
  progress(`peer: downloading ${PEER_MODULE}@${PEER_VERSION}`);
  // Run outside any module so the download is not tied to the project's files.
  const scratch = mkdtempSync(join(tmpdir(), "cocoonset-peer-"));
  try {
    const dl = spawnSync("go", ["mod", "download", "-json", `${PEER_MODULE}@${PEER_VERSION}`], {
      env: goEnv(),
      cwd: scratch,
      encoding: "utf8",
    });
    let info: { Dir?: string; Error?: string } = {};
    try {
      info = JSON.parse(dl.stdout) as typeof info;
    } catch {
      info = { Error: (dl.stderr || dl.stdout).trim() };
    }
    if (info.Error || !info.Dir)
      return `go mod download failed: ${info.Error ?? "no module folder"}`;
    const pkg = mainPackage(info.Dir);
    if (!pkg) return `no main package found in ${info.Dir}`;
    const crdSource = join(info.Dir, "config", "crd", "bases");
    const crds = crdFilesIn(crdSource);
    if (crds.length === 0) return `no CRD files in ${crdSource}`;

    progress(`peer: go install ${pkg}@${PEER_VERSION} into ${join(dir, "bin")} (slow when cold)`);
    mkdirSync(join(dir, "bin"), { recursive: true });
    const built = await run(
      "go",
      ["install", "-v", "-trimpath", `${pkg}@${PEER_VERSION}`],
      goEnv({ GOBIN: join(dir, "bin") }),
      "go install",
      progress,
    );
    if (built.code !== 0) return `go install exited ${built.code}:\n${built.tail}`;
    const name = pkg.split("/").pop()!;
    if (join(dir, "bin", name) !== binary) copyFileSync(join(dir, "bin", name), binary);
    mkdirSync(crdDir, { recursive: true });
    for (const f of crds) copyFileSync(f, join(crdDir, f.split("/").pop()!));
    return undefined;
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** Way 2: the source archives and their build script. Undefined on success, else the reason. */
async function buildFromArchives(
  binary: string,
  crdDir: string,
  progress: (l: string) => void,
): Promise<string | undefined> {
  const script = join(peersDir(), PEER_BUILD_SCRIPT);
  if (!existsSync(script))
    return `no ${PEER_BUILD_SCRIPT} in ${peersDir()} (set COCOONSET_PEERS_DIR to the folder of the peer's source archives)`;
  progress(`peer: building from the archives with ${script} (about 5 minutes when cold)`);
  mkdirSync(dirname(binary), { recursive: true });
  const built = await run(
    "bash",
    [script, binary, "--crds", crdDir],
    goEnv(),
    PEER_BUILD_SCRIPT,
    progress,
  );
  if (built.code !== 0) return `${PEER_BUILD_SCRIPT} exited ${built.code}:\n${built.tail}`;
  if (!existsSync(binary)) return `${PEER_BUILD_SCRIPT} succeeded but wrote no ${binary}`;
  if (crdFilesIn(crdDir).length === 0) return `${PEER_BUILD_SCRIPT} copied no CRDs to ${crdDir}`;
  return undefined;
}

/**
 * Finds or builds the peer: the cached build, else `go install`, else the source archives.
 * Never throws: a peer that cannot be had comes back with the reasons of every way tried.
 */
export async function ensurePeer(progress: (l: string) => void): Promise<Peer> {
  const dir = peerDir();
  const binary = join(dir, "bin", "cocoon-operator");
  const crdDir = join(dir, "crd");
  if (existsSync(binary) && crdFilesIn(crdDir).length > 0) {
    progress(`peer: reusing ${binary}`);
    return { ok: true, binary, crdFiles: crdFilesIn(crdDir), reused: true };
  }
  const go = spawnSync("go", ["version"], { env: goEnv(), encoding: "utf8" });
  if (go.status !== 0) return missing(`go is not usable: ${go.error?.message ?? go.stderr.trim()}`);
  progress(`peer: ${go.stdout.trim()}`);
  const t0 = Date.now();
  const viaInstall = await buildWithGoInstall(dir, binary, crdDir, progress);
  if (viaInstall === undefined) {
    progress(`peer: built with go install in ${Math.round((Date.now() - t0) / 1000)} s`);
    return { ok: true, binary, crdFiles: crdFilesIn(crdDir), reused: false };
  }
  progress(`peer: go install did not work: ${viaInstall.split("\n")[0]}`);
  const viaArchives = await buildFromArchives(binary, crdDir, progress);
  if (viaArchives === undefined) {
    progress(`peer: built from the archives in ${Math.round((Date.now() - t0) / 1000)} s`);
    return { ok: true, binary, crdFiles: crdFilesIn(crdDir), reused: false };
  }
  return missing(`${viaInstall}\nand from the archives: ${viaArchives}`);
}

/** The peer's `--help` text (stdout and stderr), to see which flags it takes. */
export function peerHelp(binary: string): string {
  const r = spawnSync(binary, ["--help"], { encoding: "utf8", timeout: 20_000 });
  return `${r.stdout ?? ""}${r.stderr ?? ""}${r.error ? r.error.message : ""}`;
}

/** CRD manifests of the given files. */
export function readCrds(files: string[]): KubeObject[] {
  return files.flatMap((f) =>
    parseAllDocuments(readFileSync(f, "utf8"))
      .map((d) => d.toJSON() as KubeObject | null)
      .filter((o): o is KubeObject => o?.kind === "CustomResourceDefinition"),
  );
}

const isEstablished = (o: KubeObject | undefined) =>
  (
    (o?.status as { conditions?: { type: string; status: string }[] } | undefined)?.conditions ?? []
  ).some((c) => c.type === "Established" && c.status === "True");

interface CrdSpec {
  group: string;
  names: { kind: string; plural: string };
  versions: { name: string; served?: boolean }[];
}

/**
 * Waits until discovery serves every kind of `crds` (`/apis/<group>/<version>` lists it, for
 * each served version). Established alone is not enough: a controller that builds its REST
 * mapper right after may still miss the kind and exit.
 */
export async function waitServed(
  admin: KubeClient,
  crds: KubeObject[],
  timeoutMs = 60_000,
): Promise<void> {
  const wanted = new Map<string, Set<string>>();
  for (const crd of crds) {
    const spec = crd.spec as CrdSpec;
    for (const v of spec.versions.filter((x) => x.served !== false)) {
      const gv = `${spec.group}/${v.name}`;
      wanted.set(gv, (wanted.get(gv) ?? new Set()).add(spec.names.kind));
    }
  }
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const missing: string[] = [];
    for (const [gv, kinds] of wanted) {
      const list = await admin
        .get<{ resources?: { kind: string; name: string }[] }>(`/apis/${gv}`)
        .catch(() => ({ resources: [] }));
      const served = new Set((list.resources ?? []).map((r) => r.kind));
      for (const k of kinds) if (!served.has(k)) missing.push(`${k} (${gv})`);
    }
    if (missing.length === 0) return;
    if (Date.now() > deadline)
      throw new Error(`discovery did not serve ${missing.join(", ")} within ${timeoutMs / 1000} s`);
    // Discovery has no watch; start-up only, not a measurement.
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Creates or replaces each CRD and waits until it is Established. */
export async function applyCrds(admin: KubeClient, crds: KubeObject[]): Promise<void> {
  for (const crd of crds) {
    const name = crd.metadata.name!;
    const live = await admin.getOrUndefined<KubeObject>(paths.crd(name));
    if (live) {
      await admin.replace(paths.crd(name), {
        ...crd,
        metadata: { ...crd.metadata, resourceVersion: live.metadata.resourceVersion },
      });
    } else {
      await admin.create(paths.crds(), crd);
    }
    await waitForObject(admin, paths.crds(), name, isEstablished, {
      timeoutMs: 60_000,
      description: `CRD ${name} to be Established`,
    });
  }
}

/** Deletes a CRD by name (NotFound is fine). */
export async function deleteCrd(admin: KubeClient, name: string): Promise<void> {
  try {
    await admin.delete(paths.crd(name));
  } catch (e) {
    if (!isNotFound(e)) throw e;
  }
}
