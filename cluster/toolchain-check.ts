/**
 * `cocoonset-dev toolchain check`: proof that the toolchain's binaries work together (the
 * `pulumi` CLI, the pulumi-kubernetes provider plugin, Pulumi's Node.js and YAML language
 * hosts). Two small programs of `cluster/check-programs/` run against a cluster, and the
 * objects they make are read back from the apiserver:
 *
 * - `nodejs` (TypeScript, `@pulumi/kubernetes`): a ConfigMap and a Deployment awaited until
 *   its 2 pods are Ready, a second preview with no changes, a config change that is exactly
 *   one update, then destroy, after which the objects and the pods are gone;
 * - `yaml` (`runtime: yaml`): a ConfigMap whose uid is the stack's output, then destroy.
 *
 * Each program runs from a scratch copy with a scratch backend and Pulumi home, in a
 * namespace of its own that is deleted afterwards, pass or fail. A full check that passes
 * leaves a marker in the toolchain's cache folder ({@link checkMarkerPath}) for the current
 * pin set, so the next `check` says it was already done.
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KubeClient, paths, waitForList, type KubeObject } from "../engine/kube/index.js";
import { clusterDown, clusterUp } from "./local-cluster.js";
import { pulumiEnv } from "./pulumi.js";
import {
  ToolchainError,
  cacheDir,
  loadPins,
  pinsKey,
  requireBinary,
  sourceDir,
  type BinaryName,
  type ToolchainPins,
} from "./toolchain-pins.js";

/** The check's programs, in the order they run. */
export const CHECK_PROGRAMS = ["nodejs", "yaml"] as const;
export type CheckProgram = (typeof CHECK_PROGRAMS)[number];

/** The binaries the check runs. */
export const CHECK_BINARIES: BinaryName[] = [
  "pulumi",
  "pulumi-resource-kubernetes",
  "pulumi-language-nodejs",
  "pulumi-language-yaml",
];

/** Options of {@link runToolchainCheck}. */
export interface CheckOptions {
  kubeconfig: string;
  /** @default every program of {@link CHECK_PROGRAMS} */
  programs?: CheckProgram[];
  progress?: (line: string) => void;
  /**
   * Called after each program's first `pulumi up`, before the check reads the objects back
   * (a test's hook to look at them, or to change them and see the check fail).
   */
  afterUp?: (program: CheckProgram, namespace: string) => Promise<void>;
}

/** What one program of the check did. */
export interface CheckedProgram {
  program: CheckProgram;
  namespace: string;
  seconds: number;
}

/** Thrown when a program of the check does not do what it should; says which and why. */
export class ToolchainCheckError extends ToolchainError {}

/** The success marker of the check: the pin set it was for and when. */
export interface CheckMarker {
  key: string;
  checkedAt: string;
  programs: CheckProgram[];
}

/** Where the check's success marker lives: the toolchain's cache folder of this pin set. */
export function checkMarkerPath(pins: ToolchainPins = loadPins()): string {
  return join(cacheDir(pins), "checked.json");
}

/** The marker of a passed check of this pin set, if there is one (a marker of other pins is not). */
export function readCheckMarker(pins: ToolchainPins = loadPins()): CheckMarker | undefined {
  let marker: Partial<CheckMarker>;
  try {
    marker = JSON.parse(readFileSync(checkMarkerPath(pins), "utf8")) as Partial<CheckMarker>;
  } catch {
    // Absent or unreadable: not checked.
    return undefined;
  }
  if (marker.key !== pinsKey(pins) || typeof marker.checkedAt !== "string") return undefined;
  return marker as CheckMarker;
}

/** Records that the check passed for this pin set. */
export function writeCheckMarker(
  programs: CheckProgram[],
  pins: ToolchainPins = loadPins(),
  now: Date = new Date(),
): CheckMarker {
  const marker: CheckMarker = { key: pinsKey(pins), checkedAt: now.toISOString(), programs };
  mkdirSync(cacheDir(pins), { recursive: true });
  writeFileSync(checkMarkerPath(pins), JSON.stringify(marker, null, 2) + "\n");
  return marker;
}

function fail(program: CheckProgram, what: string): never {
  throw new ToolchainCheckError(`toolchain check: ${program} program: ${what}`);
}

/** A scratch project, backend and Pulumi home for one program, and `pulumi` run in it. */
function scratch(program: CheckProgram, kubeconfig: string) {
  const root = mkdtempSync(join(tmpdir(), `cocoonset-check-${program}-`));
  const dir = join(root, "project");
  cpSync(join(sourceDir(), "check-programs", program), dir, { recursive: true });
  if (program === "nodejs") {
    // As in the repository: ES modules, with the repository's @pulumi packages.
    writeFileSync(join(dir, "package.json"), '{ "private": true, "type": "module" }\n');
    symlinkSync(join(sourceDir(), "..", "node_modules"), join(dir, "node_modules"));
  }
  const backend = join(root, "backend");
  mkdirSync(backend, { recursive: true });
  const env = { ...process.env, ...pulumiEnv(join(root, "home"), backend, kubeconfig) };
  const pulumi = (...args: string[]) =>
    new Promise<string>((resolve, reject) => {
      const child = spawn("pulumi", args, { cwd: dir, env, stdio: ["ignore", "pipe", "pipe"] });
      let out = "";
      let err = "";
      child.stdout.on("data", (b: Buffer) => (out += b.toString()));
      child.stderr.on("data", (b: Buffer) => (err += b.toString()));
      child.on("error", reject);
      child.on("close", (code) => {
        if (code === 0) return resolve(out);
        const tail = `${out}\n${err}`.trim().split("\n").slice(-30).join("\n");
        reject(
          new ToolchainCheckError(
            `toolchain check: ${program} program: \`pulumi ${args.join(" ")}\` exited ${code}:\n${tail}`,
          ),
        );
      });
    });
  return { pulumi, cleanup: () => rmSync(root, { recursive: true, force: true }) };
}

type Pulumi = ReturnType<typeof scratch>["pulumi"];

/** The kinds of change a `pulumi preview --json` plans, `same` left out. */
async function previewChanges(pulumi: Pulumi): Promise<Record<string, number>> {
  const preview = JSON.parse(await pulumi("preview", "--json")) as {
    changeSummary?: Record<string, number>;
  };
  return Object.fromEntries(
    Object.entries(preview.changeSummary ?? {}).filter(([op]) => op !== "same"),
  );
}

function isReady(pod: KubeObject): boolean {
  const conds = (pod.status as { conditions?: { type: string; status: string }[] } | undefined)
    ?.conditions;
  return conds?.some((c) => c.type === "Ready" && c.status === "True") ?? false;
}

async function checkNodejs(
  client: KubeClient,
  ns: string,
  pulumi: Pulumi,
  say: (l: string) => void,
  afterUp: CheckOptions["afterUp"],
): Promise<void> {
  const program = "nodejs";
  await pulumi("up", "--yes", "--skip-preview");
  await afterUp?.(program, ns);
  const outputs = JSON.parse(await pulumi("stack", "output", "--json")) as {
    readyReplicas?: number;
  };
  if (outputs.readyReplicas !== 2)
    fail(program, `the Deployment's readyReplicas output is ${outputs.readyReplicas}, not 2`);
  const cm = await client.getOrUndefined<{ data?: Record<string, string> }>(
    paths.configMap(ns, "settings"),
  );
  if (cm?.data?.purpose !== "smoke")
    fail(program, `ConfigMap ${ns}/settings ${cm ? "lacks purpose=smoke" : "was not created"}`);
  const pods = await client.list(paths.pods(ns), { labelSelector: "app=smoke" });
  const ready = pods.items.filter(isReady).length;
  if (ready !== 2) fail(program, `${ready} of the Deployment's pods are Ready, not 2`);
  say("    up: ConfigMap settings (purpose=smoke), Deployment web with 2 Ready pods");

  const again = await previewChanges(pulumi);
  if (Object.keys(again).length > 0)
    fail(program, `a second preview plans changes: ${JSON.stringify(again)}`);
  say("    a second preview: no changes");

  await pulumi("config", "set", "greeting", "bonjour");
  const changes = await previewChanges(pulumi);
  if (JSON.stringify(changes) !== JSON.stringify({ update: 1 }))
    fail(program, `a config change plans ${JSON.stringify(changes)}, not exactly one update`);
  await pulumi("up", "--yes", "--skip-preview");
  const web = await client.getOrUndefined(paths.deployment(ns, "web"));
  if (web?.metadata.annotations?.greeting !== "bonjour")
    fail(program, "the update did not set the Deployment's greeting annotation to bonjour");
  say("    a config change: exactly one update, applied");

  await pulumi("destroy", "--yes", "--skip-preview");
  for (const path of [paths.configMap(ns, "settings"), paths.deployment(ns, "web")])
    if (await client.getOrUndefined(path)) fail(program, `${path} is still there after destroy`);
  // Foreground deletion: the Deployment is gone only after its ReplicaSet and pods.
  await waitForList(client, paths.pods(ns), (items) => items.length === 0, {
    labelSelector: "app=smoke",
    timeoutMs: 30_000,
    description: "the Deployment's pods to be gone after destroy",
  });
  say("    destroy: the ConfigMap, the Deployment and its pods are gone");
}

async function checkYaml(
  client: KubeClient,
  ns: string,
  pulumi: Pulumi,
  say: (l: string) => void,
  afterUp: CheckOptions["afterUp"],
): Promise<void> {
  const program = "yaml";
  await pulumi("up", "--yes", "--skip-preview");
  await afterUp?.(program, ns);
  const cm = await client.getOrUndefined<{
    metadata: { uid: string; labels?: Record<string, string> };
    data?: Record<string, string>;
  }>(paths.configMap(ns, "settings"));
  if (!cm) fail(program, `ConfigMap ${ns}/settings was not created`);
  if (JSON.stringify(cm.data) !== JSON.stringify({ purpose: "yaml-smoke" }))
    fail(program, `ConfigMap ${ns}/settings holds ${JSON.stringify(cm.data)}`);
  if (cm.metadata.labels?.["app.kubernetes.io/managed-by"] !== "pulumi")
    fail(program, `ConfigMap ${ns}/settings lacks its managed-by label`);
  const outputs = JSON.parse(await pulumi("stack", "output", "--json")) as { uid?: string };
  if (outputs.uid !== cm.metadata.uid)
    fail(
      program,
      `the stack's uid output ${outputs.uid} is not the ConfigMap's ${cm.metadata.uid}`,
    );
  say("    up: ConfigMap settings (purpose=yaml-smoke), its uid the stack's output");

  await pulumi("destroy", "--yes", "--skip-preview");
  if (await client.getOrUndefined(paths.configMap(ns, "settings")))
    fail(program, `ConfigMap ${ns}/settings is still there after destroy`);
  say("    destroy: the ConfigMap is gone");
}

/**
 * Runs the check's programs against the cluster of `kubeconfig`, one after the other.
 * Writes no marker (see {@link writeCheckMarker}).
 * @throws ToolchainCheckError naming the program and what it did wrong, or the
 *   ToolchainError of a binary that is not built
 */
export async function runToolchainCheck(opts: CheckOptions): Promise<CheckedProgram[]> {
  const say = opts.progress ?? ((l: string) => process.stderr.write(l + "\n"));
  for (const b of CHECK_BINARIES) requireBinary(b);
  const client = new KubeClient({ kubeconfig: opts.kubeconfig });
  const done: CheckedProgram[] = [];
  try {
    for (const program of opts.programs ?? CHECK_PROGRAMS) {
      const t0 = Date.now();
      const ns = `toolchain-check-${program}-${randomBytes(3).toString("hex")}`;
      say(`toolchain check: ${program} program in namespace ${ns}`);
      await client.create(paths.namespaces(), {
        apiVersion: "v1",
        kind: "Namespace",
        metadata: { name: ns },
      });
      const { pulumi, cleanup } = scratch(program, opts.kubeconfig);
      try {
        await pulumi("stack", "init", "check");
        await pulumi("config", "set", "namespace", ns);
        const run = program === "nodejs" ? checkNodejs : checkYaml;
        await run(client, ns, pulumi, say, opts.afterUp);
      } finally {
        cleanup();
        await client.delete(paths.namespace(ns));
      }
      const seconds = (Date.now() - t0) / 1000;
      say(`toolchain check: ${program} program passed in ${seconds.toFixed(1)}s`);
      done.push({ program, namespace: ns, seconds });
    }
  } finally {
    client.close();
  }
  return done;
}

/** Options of {@link checkToolchain}. */
export interface CheckToolchainOptions {
  /** The cluster to run against. @default a throwaway embedded cluster, stopped afterwards */
  kubeconfig?: string;
  /** Run even when this pin set was checked already. */
  force?: boolean;
  progress?: (line: string) => void;
}

/**
 * The `check` command: unless this pin set was checked already (and not `force`), runs
 * every program of the check against `kubeconfig` or a throwaway embedded cluster, then
 * records the marker. Returns the marker, and whether it ran now.
 */
export async function checkToolchain(
  opts: CheckToolchainOptions = {},
): Promise<{ marker: CheckMarker; ran: boolean }> {
  const say = opts.progress ?? ((l: string) => process.stderr.write(l + "\n"));
  const pins = loadPins();
  const before = opts.force ? undefined : readCheckMarker(pins);
  if (before) {
    say(
      `toolchain check: already checked at ${before.checkedAt} for this toolchain (${checkMarkerPath(pins)}); --force runs it again`,
    );
    return { marker: before, ran: false };
  }
  for (const b of CHECK_BINARIES) requireBinary(b, pins);
  let kubeconfig = opts.kubeconfig;
  let scratchDir: string | undefined;
  try {
    if (!kubeconfig) {
      scratchDir = mkdtempSync(join(tmpdir(), "cocoonset-check-cluster-"));
      const stateDir = join(scratchDir, "cluster");
      say("toolchain check: starting a throwaway embedded cluster");
      kubeconfig = (await clusterUp({ stateDir, progress: (l) => say(`    ${l}`) })).kubeconfig;
    }
    const t0 = Date.now();
    await runToolchainCheck({ kubeconfig, progress: say });
    const marker = writeCheckMarker([...CHECK_PROGRAMS], pins);
    say(
      `toolchain check: passed in ${((Date.now() - t0) / 1000).toFixed(1)}s; recorded in ${checkMarkerPath(pins)}`,
    );
    return { marker, ran: true };
  } finally {
    if (scratchDir) {
      say("toolchain check: stopping the throwaway cluster");
      await clusterDown(join(scratchDir, "cluster"));
      rmSync(scratchDir, { recursive: true, force: true });
    }
  }
}
