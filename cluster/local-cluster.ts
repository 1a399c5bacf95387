/**
 * The embedded local cluster: etcd, kube-apiserver (RBAC on), kube-controller-manager,
 * kube-scheduler and kwok with simulated nodes, and a small OCI registry (a test fixture),
 * all on loopback and free ports, in a state directory of their own.
 *
 * Guarantees: processes survive the CLI that started them; a supervisor process restarts
 * a component that dies, with the same flags and ports; `up` on a cluster that is partly
 * stopped restarts what stopped and keeps etcd's data (it starts over only when etcd's data
 * cannot be used, or when asked with `reset`); `down` stops exactly the processes recorded
 * in the state file (by pid, after checking the pid still runs the binary it recorded) and
 * removes the state; a failed `up` stops whatever it started.
 *
 * Caveats: pods never run anything — kwok moves them through their lifecycle (see
 * `kwok-stages.yaml` for the annotations tests use to drive a pod to Failed), and the
 * node-agent simulator (`node-agent.ts`) plays the VM's part for namespaces that opt in.
 */
import { spawn } from "node:child_process";
import { generateKeyPairSync, randomBytes } from "node:crypto";
import {
  closeSync,
  existsSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { homedir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { stringify as toYaml } from "yaml";
import { rawRequest } from "./http.js";
import { createClientCa, type CertificateAuthority } from "./pki.js";
import { freePort, portFree } from "./ports.js";
import { requireBinary, type BinaryName } from "./toolchain-pins.js";
import { BrandedError, errorMessage } from "../engine/kube/branded-error.js";
import { sleep } from "../engine/kube/sleep.js";
import { parseQuantity } from "../engine/spec/quantity.js";

/** Label and annotation that mark a node as simulated by this cluster's kwok. */
export const FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node";
/** The line the pod finaliser process logs once it watches every pod; `up` waits for it. */
export const POD_FINALISER_SYNCED = "pod-finaliser: synced";
/** The line the node-agent simulator logs once it watches every pod; `up` waits for it. */
export const NODE_AGENT_SYNCED = "node-agent: synced";
/** Pool label the engine's nodeSelector targets. */
export const POOL_LABEL = "cocoonstack.io/pool";

/** One supervised process as recorded in the state file. */
export interface ComponentRecord {
  name: string;
  pid: number;
  binary: string;
  log: string;
  /** Start time of the process (field 22 of /proc/<pid>/stat), to detect pid reuse. */
  startTicks: string;
  /**
   * The arguments it was started with, and the environment variables set on top of the
   * caller's, so that it can be restarted the same way (same ports, same data). Absent in a
   * state written before restarts existed.
   */
  args?: string[];
  env?: Record<string, string>;
}

/** The name of the supervisor process among the components. */
export const SUPERVISOR = "supervisor";

/** The state file of a running cluster. */
export interface ClusterState {
  version: 1;
  stateDir: string;
  kubeconfig: string;
  server: string;
  token: string;
  startedAt: string;
  nodes: string[];
  components: ComponentRecord[];
  /**
   * `127.0.0.1:<port>` of the cluster's OCI registry (plain HTTP, no auth); absent for a
   * cluster started before the registry was part of it.
   */
  registry?: string;
}

/** Options of {@link clusterUp}. */
export interface UpOptions {
  /** @default {@link defaultStateDir} */
  stateDir?: string;
  /** Number of simulated nodes. @default 2 */
  nodes?: number;
  /** Progress lines. @default stderr */
  progress?: (line: string) => void;
  /** Overall bring-up timeout. @default 180000 */
  timeoutMs?: number;
  /** Extra kube-apiserver flags (e.g. `--feature-gates=...`), appended last so they win. */
  apiserverArgs?: string[];
  /** The operating system (tests inject another). @default process.platform */
  platform?: NodeJS.Platform;
  /**
   * Start a new cluster even when the state directory holds one that could be restarted:
   * its processes are stopped and its data (every namespace and object) is deleted.
   * @default false
   */
  reset?: boolean;
  /**
   * Allocatable (and capacity) of the simulated nodes, per node name, `*` for every node:
   * resource name → quantity, merged over the default (`cpu: 1000`, `memory: 1Ti`,
   * `pods: 10000`, `ephemeral-storage: 10Ti`). Set on a running cluster too. The cluster's
   * kubelet admission refuses a pod bound over it (cluster/node-admission.ts).
   */
  nodeAllocatable?: NodeAllocatable;
}

/** Allocatable by node name (`*`: every node), resource name → quantity. */
export type NodeAllocatable = Record<string, Record<string, string>>;

/**
 * Reads `--node-allocatable` values: `[NODE:]RESOURCE=QUANTITY[,RESOURCE=QUANTITY...]`,
 * e.g. `cpu=4,memory=8Gi,pods=20` (every node) or `kwok-node-1:cpu=2`. Later values add to
 * earlier ones.
 */
export function parseNodeAllocatable(values: readonly string[]): NodeAllocatable {
  const out: NodeAllocatable = {};
  for (const value of values) {
    const m = /^(?:([a-z0-9][a-z0-9.-]*):)?(.+)$/.exec(value.trim());
    const node = m?.[1] ?? "*";
    const entry = (out[node] ??= {});
    for (const pair of (m?.[2] ?? "").split(",")) {
      const [name, quantity, extra] = pair.split("=");
      if (
        extra !== undefined ||
        !name ||
        !/^([a-z0-9.-]+\/)?[a-zA-Z0-9][a-zA-Z0-9._-]*$/.test(name) ||
        !quantity ||
        !parseQuantity(quantity)
      )
        throw new ClusterError(
          `[node-allocatable] "${value}": write [NODE:]RESOURCE=QUANTITY[,RESOURCE=QUANTITY...], e.g. kwok-node-0:cpu=4,memory=8Gi,pods=20`,
        );
      entry[name] = quantity;
    }
  }
  return out;
}

/** Most simulated nodes `up` creates. */
const MAX_NODES = 100;

/** Thrown when the cluster cannot be started or is not in the expected state. */
class ClusterError extends BrandedError {
  constructor(message: string) {
    super(message);
  }
}

const here = dirname(fileURLToPath(import.meta.url));

/** The compiled entry point of the pod finaliser process (next to this module in dist/). */
function podFinaliserScript(): string {
  const p = join(here, "pod-finaliser-main.js");
  if (!existsSync(p)) throw new ClusterError(`pod-finaliser-main.js not found next to ${here}`);
  return p;
}

/** The compiled entry point of the supervisor (next to this module in dist/). */
function supervisorScript(): string {
  const p = join(here, "supervisor-main.js");
  if (!existsSync(p)) throw new ClusterError(`supervisor-main.js not found next to ${here}`);
  return p;
}

/** Starts the process that restarts the components that die (cluster/supervisor.ts). */
function startSupervisor(stateDir: string): ComponentRecord {
  return startProcess(stateDir, SUPERVISOR, process.execPath, [
    supervisorScript(),
    "--state-dir",
    stateDir,
  ]);
}

/** The compiled entry point of the node-agent simulator (next to this module in dist/). */
function nodeAgentScript(): string {
  const p = join(here, "node-agent-main.js");
  if (!existsSync(p)) throw new ClusterError(`node-agent-main.js not found next to ${here}`);
  return p;
}

function stagesFile(): string {
  for (const c of [here, join(here, "..", "..", "cluster")]) {
    const p = join(c, "kwok-stages.yaml");
    if (existsSync(p)) return p;
  }
  throw new ClusterError(`kwok-stages.yaml not found next to ${here}`);
}

/**
 * Where the cluster keeps its state.
 * @default `$COCOONSET_CLUSTER_DIR`, else `$XDG_STATE_HOME/pulumi-cocoonset/cluster`, else
 *   `~/.local/state/pulumi-cocoonset/cluster`
 */
export function defaultStateDir(): string {
  if (process.env.COCOONSET_CLUSTER_DIR) return process.env.COCOONSET_CLUSTER_DIR;
  const base = process.env.XDG_STATE_HOME || join(homedir(), ".local", "state");
  return join(base, "pulumi-cocoonset", "cluster");
}

/**
 * The file `up` writes first into a state directory it uses. Only a folder that is empty
 * or holds this file is ever reused or removed, so a mistyped `--state-dir ~` touches nothing.
 */
export const STATE_MARKER = ".cocoonset-cluster";

/** What a state directory holds, as far as deleting or reusing it goes. */
export type StateDirKind = "absent" | "empty" | "cluster" | "foreign" | "not-a-directory";

/** Entries a cluster creates; a folder holding only these and a state file is one of ours. */
const CLUSTER_ENTRIES = new Set([
  STATE_MARKER,
  "state.json",
  "state.json.tmp",
  "kubeconfig",
  "logs",
  "pki",
  "etcd",
  "kwok-home",
]);

/** Classifies `dir`: only `absent`, `empty` and `cluster` may be used or removed. */
export function stateDirKind(dir: string): StateDirKind {
  let st;
  try {
    st = lstatSync(dir);
  } catch {
    return "absent";
  }
  if (!st.isDirectory()) return "not-a-directory";
  const entries = readdirSync(dir);
  if (entries.length === 0) return "empty";
  if (entries.includes(STATE_MARKER)) return "cluster";
  // A cluster started before the marker existed: nothing but its own entries and a state file.
  if (
    entries.includes("state.json") &&
    entries.every((e) => CLUSTER_ENTRIES.has(e)) &&
    readState(dir)?.version === 1
  )
    return "cluster";
  return "foreign";
}

/**
 * Refuses a state directory that is not the cluster's own.
 * @throws ClusterError naming the folder; nothing is touched
 */
export function assertOwnStateDir(dir: string): void {
  const kind = stateDirKind(dir);
  if (kind === "not-a-directory")
    throw new ClusterError(
      `[state-dir] ${dir} is not a directory: refusing to use it as the cluster's state directory; nothing was touched`,
    );
  if (kind === "foreign")
    throw new ClusterError(
      `[state-dir] ${dir} is not empty and has no ${STATE_MARKER} marker, so it is not a folder \`cocoonset-dev cluster up\` created: refusing to use or remove it; nothing was touched (pick a new or empty folder)`,
    );
}

/**
 * Normalises a state directory: absolute, and not empty.
 * @throws ClusterError for an empty path
 */
export function resolveStateDir(dir: string): string {
  if (dir.trim() === "")
    throw new ClusterError("[state-dir] must not be empty (it would mean the current folder)");
  return resolve(dir);
}

/**
 * The embedded cluster reads `/proc` to supervise its processes: Linux only.
 * @throws ClusterError on any other platform, before anything starts
 */
export function assertSupportedPlatform(platform: NodeJS.Platform = process.platform): void {
  if (platform !== "linux")
    throw new ClusterError(
      `the embedded cluster runs on Linux only (it supervises its processes through /proc); this is ${platform}. Use an existing cluster with --kubeconfig instead`,
    );
}

function statePath(stateDir: string): string {
  return join(stateDir, "state.json");
}

/** Reads the state file, or undefined when there is none. */
export function readState(stateDir = defaultStateDir()): ClusterState | undefined {
  const p = statePath(stateDir);
  if (!existsSync(p)) return undefined;
  try {
    return JSON.parse(readFileSync(p, "utf8")) as ClusterState;
  } catch {
    return undefined;
  }
}

function procStartTicks(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name may contain spaces; fields are counted after its closing paren.
    const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // A process that exited and was not reaped yet (state Z or X) has not run for a while.
    if (rest[0] === "Z" || rest[0] === "X") return undefined;
    return rest[19];
  } catch {
    return undefined;
  }
}

/** True when the recorded process is still the one that was started. */
export function isAlive(c: ComponentRecord): boolean {
  const ticks = procStartTicks(c.pid);
  return ticks !== undefined && ticks === c.startTicks;
}

function tail(path: string, lines = 20): string {
  try {
    return readFileSync(path, "utf8").trim().split("\n").slice(-lines).join("\n");
  } catch {
    return "(no log)";
  }
}

function startComponent(
  stateDir: string,
  name: string,
  binary: BinaryName,
  args: string[],
  env: Record<string, string> = {},
): ComponentRecord {
  return startProcess(stateDir, name, requireBinary(binary), args, env);
}

/**
 * Starts a process in its own process group, its output appended to `logs/<name>.log`.
 * @param env variables set on top of this process's environment (recorded for restarts)
 */
export function startProcess(
  stateDir: string,
  name: string,
  path: string,
  args: string[],
  env: Record<string, string> = {},
): ComponentRecord {
  const log = join(stateDir, "logs", `${name}.log`);
  const fd = openSync(log, "a");
  try {
    const child = spawn(path, args, {
      detached: true,
      stdio: ["ignore", fd, fd],
      env: { ...process.env, ...env },
      cwd: stateDir,
    });
    child.unref();
    if (child.pid === undefined) throw new ClusterError(`${name} did not start (${path})`);
    return {
      name,
      pid: child.pid,
      binary: path,
      log,
      startTicks: procStartTicks(child.pid) ?? "",
      args,
      ...(Object.keys(env).length > 0 ? { env } : {}),
    };
  } finally {
    closeSync(fd);
  }
}

/** Starts a recorded component again, the same way (same binary, flags, ports, data). */
export function restartComponent(stateDir: string, c: ComponentRecord): ComponentRecord {
  if (!c.args) throw new ClusterError(`${c.name}: the state file does not say how it was started`);
  return startProcess(stateDir, c.name, c.binary, c.args, c.env ?? {});
}

/** Waits for `check` to return true, failing early when the component dies. */
async function waitFor(
  what: string,
  component: ComponentRecord | undefined,
  deadline: number,
  check: () => Promise<boolean>,
): Promise<void> {
  let delay = 100;
  for (;;) {
    if (component && !isAlive(component)) {
      throw new ClusterError(
        `${component.name} exited during start-up; last lines of ${component.log}:\n${tail(component.log)}`,
      );
    }
    try {
      if (await check()) return;
    } catch {
      // not answering yet
    }
    if (Date.now() > deadline) {
      const where = component ? `; last lines of ${component.log}:\n${tail(component.log)}` : "";
      throw new ClusterError(`timed out waiting for ${what}${where}`);
    }
    await sleep(delay);
    delay = Math.min(delay * 2, 1000);
  }
}

function writeKubeconfig(path: string, server: string, ca: string, token: string): void {
  const doc = {
    apiVersion: "v1",
    kind: "Config",
    clusters: [
      {
        name: "cocoonset-local",
        cluster: { server, "certificate-authority-data": Buffer.from(ca).toString("base64") },
      },
    ],
    users: [{ name: "cocoonset-admin", user: { token } }],
    contexts: [
      { name: "cocoonset-local", context: { cluster: "cocoonset-local", user: "cocoonset-admin" } },
    ],
    "current-context": "cocoonset-local",
  };
  writeFileSync(path, toYaml(doc), { mode: 0o600 });
}

/** Stops processes in reverse start order: SIGTERM to the group, then SIGKILL. */
export async function stopComponents(components: ComponentRecord[]): Promise<void> {
  for (const c of [...components].reverse()) {
    if (!isAlive(c)) continue;
    try {
      process.kill(-c.pid, "SIGTERM");
    } catch {
      try {
        process.kill(c.pid, "SIGTERM");
      } catch {
        continue;
      }
    }
    const deadline = Date.now() + 10_000;
    while (isAlive(c) && Date.now() < deadline) await sleep(50);
    if (isAlive(c)) {
      try {
        process.kill(-c.pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
  }
}

/** What `status` reports. */
export interface ClusterStatus {
  running: boolean;
  stateDir: string;
  kubeconfig?: string;
  server?: string;
  healthy?: boolean;
  /** `127.0.0.1:<port>` of the cluster's OCI registry. */
  registry?: string;
  components: { name: string; pid: number; alive: boolean; log: string }[];
}

/** Reports what runs, and whether the apiserver answers. */
export async function clusterStatus(stateDir = defaultStateDir()): Promise<ClusterStatus> {
  const st = readState(stateDir);
  if (!st) return { running: false, stateDir, components: [] };
  const components = st.components.map((c) => ({
    name: c.name,
    pid: c.pid,
    alive: isAlive(c),
    log: c.log,
  }));
  let healthy: boolean;
  try {
    const r = await rawRequest(`${st.server}/readyz`, { token: st.token, ca: readCa(st.stateDir) });
    healthy = r.status === 200;
  } catch {
    healthy = false;
  }
  return {
    running: components.every((c) => c.alive),
    stateDir,
    kubeconfig: st.kubeconfig,
    server: st.server,
    healthy,
    registry: st.registry,
    components,
  };
}

function readCa(stateDir: string): string {
  return readFileSync(join(stateDir, "pki", "apiserver.crt"), "utf8");
}

/** What {@link clusterUp} returns. */
export type UpResult = ClusterState & {
  /** The cluster was there already (running, or restarted with its data). */
  reused: boolean;
  /** The components that had stopped and were started again, keeping etcd's data. */
  restarted: string[];
};

/** How long `up` waits for the whole cluster before it gives up. */
const DEFAULT_UP_TIMEOUT_MS = 180_000;

/** What the steps of one bring-up share. */
interface Bringup {
  stateDir: string;
  deadline: number;
  /** Every process started so far: a failed `up` stops them all. */
  started: ComponentRecord[];
  progress: (line: string) => void;
  /** Seconds since the bring-up began, for progress lines. */
  stamp: () => string;
}

/**
 * Starts the cluster, or reports the one already running in `stateDir`, or restarts the
 * components of that one that stopped (keeping etcd's data). Returns when the default
 * namespace exists and every simulated node is Ready.
 */
export async function clusterUp(opts: UpOptions = {}): Promise<UpResult> {
  assertSupportedPlatform(opts.platform);
  const stateDir = resolveStateDir(opts.stateDir ?? defaultStateDir());
  const progress = opts.progress ?? ((l: string) => process.stderr.write(l + "\n"));
  const nodeCount = checkUpOptions(opts);
  assertOwnStateDir(stateDir);
  const timeoutMs = opts.timeoutMs ?? DEFAULT_UP_TIMEOUT_MS;
  const resumed = await resumeOrStop(stateDir, opts.reset === true, timeoutMs, progress);
  if (resumed) {
    const { server, token, nodes } = resumed;
    await setNodeAllocatable({ server, token, ca: readCa(stateDir) }, nodes, opts.nodeAllocatable);
    return resumed;
  }
  freshStateDir(stateDir);

  const t0 = Date.now();
  const b: Bringup = {
    stateDir,
    deadline: t0 + timeoutMs,
    started: [],
    progress,
    stamp: () => `${((Date.now() - t0) / 1000).toFixed(1)}s`,
  };
  try {
    const token = writeCredentials(stateDir);
    const plane = await startControlPlane(b, token, opts.apiserverArgs ?? []);
    startControllers(b, plane.kubeconfig);
    await startSimulators(b, plane);
    const ca = readCa(stateDir);
    const { server } = plane;
    await waitFor("the default namespace", undefined, b.deadline, async () => {
      const r = await rawRequest(`${server}/api/v1/namespaces/default`, { token, ca });
      return r.status === 200;
    });
    const nodes = await createNodes({ server, token, ca }, nodeCount);
    const kwok = b.started.find((c) => c.name === "kwok");
    await waitForNodes({ server, token, ca, count: nodeCount, kwok, deadline: b.deadline });
    await setNodeAllocatable({ server, token, ca }, nodes, opts.nodeAllocatable);
    b.started.push(startSupervisor(stateDir));
    for (const c of b.started) {
      if (!isAlive(c))
        throw new ClusterError(
          `${c.name} exited during start-up; last lines of ${c.log}:\n${tail(c.log)}`,
        );
    }
    const state = clusterState(plane, b.started, nodes);
    writeState(stateDir, state);
    progress(`cluster: ${nodeCount} simulated node(s) Ready; cluster up in ${b.stamp()}`);
    return { ...state, reused: false, restarted: [] };
  } catch (e) {
    await stopComponents(b.started);
    if (!process.env.COCOONSET_KEEP_FAILED_CLUSTER) {
      // Keep the logs for the report, drop everything else.
      for (const d of ["etcd", "pki", "kwok-home", "state.json", "kubeconfig"]) {
        rmSync(join(stateDir, d), { recursive: true, force: true });
      }
    }
    throw e;
  }
}

/** Refuses bad options by name; returns the number of nodes to create. */
function checkUpOptions(opts: UpOptions): number {
  const nodeCount = opts.nodes ?? 2;
  if (!Number.isInteger(nodeCount) || nodeCount < 1 || nodeCount > MAX_NODES)
    throw new ClusterError(`[nodes] must be an integer from 1 to ${MAX_NODES}, got ${nodeCount}`);
  for (const a of opts.apiserverArgs ?? [])
    if (!/^--[a-z0-9]/.test(a))
      throw new ClusterError(
        `[apiserver-arg] "${a}" is not a kube-apiserver flag (write it as --name=value)`,
      );
  return nodeCount;
}

/**
 * The cluster already recorded in `stateDir`: reported when it runs, restarted when parts of
 * it stopped and its data can be used (the result), otherwise stopped (undefined: the caller
 * starts a new one).
 */
async function resumeOrStop(
  stateDir: string,
  reset: boolean,
  timeoutMs: number,
  progress: (line: string) => void,
): Promise<UpResult | undefined> {
  const existing = readState(stateDir);
  if (!existing) return undefined;
  if (reset) {
    progress(
      `cluster: --reset: stopping the cluster in ${stateDir} and deleting its data; starting a new one`,
    );
    await stopRecorded(stateDir, existing);
    return undefined;
  }
  const status = await clusterStatus(stateDir);
  if (status.running && status.healthy) return { ...existing, reused: true, restarted: [] };
  const why = cannotRestart(existing);
  if (why === undefined) {
    try {
      return await restartCluster(existing, progress, Date.now() + timeoutMs);
    } catch (e) {
      if (!EtcdDataUnusable.isInstance(e)) throw e;
      progress(
        `cluster: etcd's data in ${join(stateDir, "etcd")} cannot be used (${e.message}); starting a new cluster: its namespaces and objects are lost`,
      );
    }
  } else {
    progress(
      `cluster: the cluster in ${stateDir} cannot be restarted (${why}); starting a new one: its namespaces and objects are lost`,
    );
  }
  await stopRecorded(stateDir, readState(stateDir) ?? existing);
  return undefined;
}

/** Empties `stateDir` and lays out its folders and marker. */
function freshStateDir(stateDir: string): void {
  rmSync(stateDir, { recursive: true, force: true });
  mkdirSync(stateDir, { recursive: true });
  writeFileSync(
    join(stateDir, STATE_MARKER),
    "This folder is the state of a cocoonset embedded cluster; `cocoonset-dev cluster down` removes it.\n",
  );
  for (const d of ["logs", "pki", "etcd", "kwok-home"])
    mkdirSync(join(stateDir, d), { recursive: true });
}

/**
 * Writes the cluster's credentials into `pki/`: a static admin token (system:masters, the
 * returned value), the service-account signing key, and a client CA so that kubeconfigs with
 * client certificates work too (see clientCa()).
 */
function writeCredentials(stateDir: string): string {
  const token = randomBytes(24).toString("hex");
  writeFileSync(
    join(stateDir, "pki", "tokens.csv"),
    `${token},cocoonset-admin,cocoonset-admin,"system:masters"\n`,
    { mode: 0o600 },
  );
  const { publicKey, privateKey } = generateKeyPairSync("rsa", {
    modulusLength: 2048,
    publicKeyEncoding: { type: "spki", format: "pem" },
    privateKeyEncoding: { type: "pkcs8", format: "pem" },
  });
  writeFileSync(join(stateDir, "pki", "sa.pub"), publicKey);
  writeFileSync(join(stateDir, "pki", "sa.key"), privateKey, { mode: 0o600 });
  const clientCa = createClientCa("cocoonset-local-client-ca");
  writeFileSync(join(stateDir, "pki", "client-ca.crt"), clientCa.certPem);
  writeFileSync(join(stateDir, "pki", "client-ca.key"), clientCa.keyPem, { mode: 0o600 });
  return token;
}

/** Where the started control plane answers. */
interface ControlPlane {
  stateDir: string;
  server: string;
  token: string;
  kubeconfig: string;
  /** `127.0.0.1:<port>` of the OCI registry. */
  registry: string;
}

/** Starts the registry, etcd and kube-apiserver, waits until they answer, writes the kubeconfig. */
async function startControlPlane(
  b: Bringup,
  token: string,
  apiserverArgs: readonly string[],
): Promise<ControlPlane> {
  const { stateDir, deadline } = b;
  const [etcdClient, etcdPeer, apiPort, registryPort] = [
    await freePort(),
    await freePort(),
    await freePort(),
    await freePort(),
  ];
  // The OCI registry (go-containerregistry's cmd/registry) binds localhost, which Go
  // listens on as 127.0.0.1. It keeps what is pushed in memory (the command has no
  // storage option), so it holds nothing in the state directory but its log. Started
  // first: it is ready long before the apiserver.
  const registry = `127.0.0.1:${registryPort}`;
  const registryProc = startComponent(stateDir, "registry", "registry", [`--port=${registryPort}`]);
  b.started.push(registryProc);
  b.progress("cluster: starting etcd");
  const etcd = startComponent(stateDir, "etcd", "etcd", [
    "--name=cocoonset",
    `--data-dir=${join(stateDir, "etcd")}`,
    `--listen-client-urls=http://127.0.0.1:${etcdClient}`,
    `--advertise-client-urls=http://127.0.0.1:${etcdClient}`,
    `--listen-peer-urls=http://127.0.0.1:${etcdPeer}`,
    `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeer}`,
    `--initial-cluster=cocoonset=http://127.0.0.1:${etcdPeer}`,
    "--unsafe-no-fsync=true",
    "--log-level=warn",
  ]);
  b.started.push(etcd);
  await waitFor("etcd /health", etcd, deadline, async () => {
    const r = await rawRequest(`http://127.0.0.1:${etcdClient}/health`);
    return r.status === 200 && r.body.includes("true");
  });
  b.progress(`cluster: etcd ready (${b.stamp()}); starting kube-apiserver`);

  const server = `https://127.0.0.1:${apiPort}`;
  const apiserver = startComponent(stateDir, "kube-apiserver", "kube-apiserver", [
    `--etcd-servers=http://127.0.0.1:${etcdClient}`,
    `--cert-dir=${join(stateDir, "pki")}`,
    `--secure-port=${apiPort}`,
    "--bind-address=127.0.0.1",
    "--advertise-address=127.0.0.1",
    "--service-cluster-ip-range=10.0.0.0/24",
    "--allow-privileged=true",
    "--authorization-mode=RBAC",
    `--token-auth-file=${join(stateDir, "pki", "tokens.csv")}`,
    `--client-ca-file=${join(stateDir, "pki", "client-ca.crt")}`,
    "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
    `--service-account-key-file=${join(stateDir, "pki", "sa.pub")}`,
    `--service-account-signing-key-file=${join(stateDir, "pki", "sa.key")}`,
    // No kubelet mounts tokens, and no node-lifecycle controller lifts the not-ready taint.
    "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
    // As hardened clusters do: setting blockOwnerDeletion on an owner needs the right to
    // update its finalizers, so RBAC tests see that rule at work.
    "--enable-admission-plugins=OwnerReferencesPermissionEnforcement",
    "--enable-priority-and-fairness=false",
    "--profiling=false",
    ...apiserverArgs,
  ]);
  b.started.push(apiserver);
  await waitFor("kube-apiserver /readyz", apiserver, deadline, async () => {
    if (!existsSync(join(stateDir, "pki", "apiserver.crt"))) return false;
    const r = await rawRequest(`${server}/readyz`, { token, ca: readCa(stateDir) });
    return r.status === 200;
  });
  const kubeconfig = join(stateDir, "kubeconfig");
  writeKubeconfig(kubeconfig, server, readCa(stateDir), token);
  await waitFor("the registry's /v2/", registryProc, deadline, async () => {
    const r = await rawRequest(`http://${registry}/v2/`);
    return r.status === 200;
  });
  b.progress(
    `cluster: kube-apiserver ready at ${server}, registry at ${registry} (${b.stamp()}); starting controllers`,
  );
  return { stateDir, server, token, kubeconfig, registry };
}

/** Starts kube-controller-manager, kube-scheduler and kwok (they need no wait of their own). */
function startControllers(b: Bringup, kubeconfig: string): void {
  const { stateDir } = b;
  b.started.push(
    startComponent(stateDir, "kube-controller-manager", "kube-controller-manager", [
      `--kubeconfig=${kubeconfig}`,
      "--leader-elect=false",
      "--use-service-account-credentials=false",
      "--secure-port=0",
      // resourcequota-controller: a ResourceQuota is enforced only once this controller has
      // measured its usage (its status), as on a real cluster.
      "--controllers=garbage-collector-controller,namespace-controller,deployment-controller,replicaset-controller,job-controller,pod-garbage-collector-controller,serviceaccount-controller,resourcequota-controller",
      "--concurrent-gc-syncs=10",
    ]),
  );
  b.started.push(
    startComponent(stateDir, "kube-scheduler", "kube-scheduler", [
      `--kubeconfig=${kubeconfig}`,
      "--leader-elect=false",
      "--bind-address=127.0.0.1",
      "--secure-port=0",
    ]),
  );
  b.started.push(
    startComponent(
      stateDir,
      "kwok",
      "kwok",
      [
        `--kubeconfig=${kubeconfig}`,
        `--config=${stagesFile()}`,
        "--manage-all-nodes=false",
        `--manage-nodes-with-annotation-selector=${FAKE_NODE_ANNOTATION}=fake`,
        "--node-ip=10.0.0.1",
        "--cidr=10.0.128.0/17",
        "--node-lease-duration-seconds=40",
        "--server-address=",
      ],
      { HOME: join(stateDir, "kwok-home") },
    ),
  );
}

/**
 * Starts the pod finaliser and the node-agent simulator, records the state so far (so that
 * `down` stops them even if this `up` dies), and waits until both watch every pod.
 */
async function startSimulators(b: Bringup, plane: ControlPlane): Promise<void> {
  const { stateDir, deadline } = b;
  // kwok's own delete is name-only (a stale one kills a recreated pod of the same name),
  // so the final delete of a terminating pod is this process's, by uid.
  const finaliser = startProcess(stateDir, "pod-finaliser", process.execPath, [
    podFinaliserScript(),
    "--kubeconfig",
    plane.kubeconfig,
  ]);
  b.started.push(finaliser);
  // The VM side of the node agent's contract (lifecycle annotations, snapshots in the
  // registry), for the pods of namespaces that opt in; see cluster/node-agent.ts.
  const nodeAgent = startProcess(stateDir, "node-agent", process.execPath, [
    nodeAgentScript(),
    "--kubeconfig",
    plane.kubeconfig,
    "--registry",
    plane.registry,
  ]);
  b.started.push(nodeAgent);
  writeState(stateDir, clusterState(plane, b.started, []));
  await waitFor("the pod finaliser to sync", finaliser, deadline, () =>
    Promise.resolve(readFileSync(finaliser.log, "utf8").includes(POD_FINALISER_SYNCED)),
  );
  await waitFor("the node-agent simulator to sync", nodeAgent, deadline, () =>
    Promise.resolve(readFileSync(nodeAgent.log, "utf8").includes(NODE_AGENT_SYNCED)),
  );
}

/** The state file's record of a cluster started by this `up`. */
function clusterState(
  plane: ControlPlane,
  components: ComponentRecord[],
  nodes: string[],
): ClusterState {
  const { stateDir, kubeconfig, server, token, registry } = plane;
  return {
    version: 1,
    stateDir,
    kubeconfig,
    server,
    token,
    startedAt: new Date().toISOString(),
    nodes,
    components: [...components],
    registry,
  };
}

/** Creates the simulated nodes `kwok-node-<i>` (kwok manages them by their annotation). */
async function createNodes(
  api: { server: string; token: string; ca: string },
  count: number,
): Promise<string[]> {
  const nodes: string[] = [];
  for (let i = 0; i < count; i++) {
    const name = `kwok-node-${i}`;
    nodes.push(name);
    const r = await rawRequest(`${api.server}/api/v1/nodes`, {
      method: "POST",
      token: api.token,
      ca: api.ca,
      body: {
        apiVersion: "v1",
        kind: "Node",
        metadata: {
          name,
          annotations: { [FAKE_NODE_ANNOTATION]: "fake", "node.alpha.kubernetes.io/ttl": "0" },
          labels: {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            type: "kwok",
            [POOL_LABEL]: "default",
          },
        },
        spec: {},
      },
    });
    if (r.status !== 201 && r.status !== 409)
      throw new ClusterError(`creating node ${name}: HTTP ${r.status} ${r.body}`);
  }
  return nodes;
}

/**
 * Sets the allocatable and capacity of Ready simulated nodes (a status patch, merged into
 * what kwok set; kwok's stages write them only while a node is not Ready yet).
 */
async function setNodeAllocatable(
  api: { server: string; token: string; ca: string },
  nodes: readonly string[],
  spec: NodeAllocatable | undefined,
): Promise<void> {
  for (const name of Object.keys(spec ?? {}))
    if (name !== "*" && !nodes.includes(name))
      throw new ClusterError(
        `[node-allocatable] names node ${name}, but the cluster's nodes are ${nodes.join(", ")}`,
      );
  for (const node of nodes) {
    const values = { ...spec?.["*"], ...spec?.[node] };
    if (Object.keys(values).length === 0) continue;
    const r = await rawRequest(`${api.server}/api/v1/nodes/${node}/status`, {
      method: "PATCH",
      token: api.token,
      ca: api.ca,
      contentType: "application/merge-patch+json",
      body: { status: { allocatable: values, capacity: values } },
    });
    if (r.status !== 200)
      throw new ClusterError(`setting the allocatable of node ${node}: HTTP ${r.status} ${r.body}`);
  }
}

/** Waits until `count` simulated nodes are Ready. */
async function waitForNodes(o: {
  server: string;
  token: string;
  ca: string;
  count: number;
  kwok: ComponentRecord | undefined;
  deadline: number;
}): Promise<void> {
  await waitFor("simulated nodes to be Ready", o.kwok, o.deadline, async () => {
    const r = await rawRequest(`${o.server}/api/v1/nodes?labelSelector=type%3Dkwok`, {
      token: o.token,
      ca: o.ca,
    });
    if (r.status !== 200) return false;
    const list = JSON.parse(r.body) as {
      items: {
        metadata: { name: string };
        status?: { conditions?: { type: string; status: string }[] };
      }[];
    };
    const ready = list.items.filter((n) =>
      n.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True"),
    );
    return ready.length >= o.count;
  });
}

/** etcd did not come back on its data: the one case where `up` starts over by itself. */
class EtcdDataUnusable extends BrandedError {}

/**
 * Why a recorded cluster cannot be restarted in place, or undefined when it can: every
 * component says how it was started, and etcd's data, the certificates and the kubeconfig
 * are still there.
 */
export function cannotRestart(st: ClusterState): string | undefined {
  const unknown = st.components.filter((c) => c.name !== SUPERVISOR && !c.args);
  if (unknown.length > 0)
    return `it was started by an earlier version, which did not record how to start ${unknown.map((c) => c.name).join(", ")} again`;
  if (!existsSync(join(st.stateDir, "etcd", "member")))
    return `etcd's data folder ${join(st.stateDir, "etcd", "member")} is missing`;
  for (const f of [join("pki", "apiserver.crt"), join("pki", "tokens.csv"), "kubeconfig"])
    if (!existsSync(join(st.stateDir, f))) return `${join(st.stateDir, f)} is missing`;
  return undefined;
}

/** The value of `--flag=value` among a component's recorded arguments. */
function flagValue(c: ComponentRecord | undefined, flag: string): string | undefined {
  const a = c?.args?.find((x) => x.startsWith(`${flag}=`));
  return a?.slice(flag.length + 1);
}

function logSize(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}

/** Whether `line` was logged to `path` after byte `offset`. */
function loggedSince(path: string, offset: number, line: string): boolean {
  try {
    return readFileSync(path).subarray(offset).toString("utf8").includes(line);
  } catch {
    return false;
  }
}

/**
 * Starts again, with the flags and ports they were started with, the components of a
 * recorded cluster that stopped; etcd restarts on its data, so every namespace and object
 * is still there. The supervisor is stopped first (it would restart the same processes)
 * and started again last.
 * @throws EtcdDataUnusable when etcd exits or does not answer on its data
 */
async function restartCluster(
  existing: ClusterState,
  progress: (line: string) => void,
  deadline: number,
): Promise<UpResult> {
  const { stateDir, server, token } = existing;
  const supervisor = existing.components.find((c) => c.name === SUPERVISOR);
  if (supervisor) await stopComponents([supervisor]);
  // Read again: the supervisor may have restarted something since the caller read the file.
  const components = [...(readState(stateDir) ?? existing).components];
  const save = () => writeState(stateDir, { ...existing, components });
  const stopped = components.filter((c) => c.name !== SUPERVISOR && !isAlive(c));
  progress(
    stopped.length > 0
      ? `cluster: ${stopped.map((c) => c.name).join(", ")} stopped in ${stateDir}; starting ${stopped.length === 1 ? "it" : "them"} again on the same ports, with etcd's data`
      : `cluster: the cluster in ${stateDir} runs but does not answer yet, or its supervisor stopped; waiting for it`,
  );
  const ca = readCa(stateDir);
  for (let i = 0; i < components.length; i++) {
    const old = components[i];
    if (old.name === SUPERVISOR || isAlive(old)) continue;
    const clientUrl = old.name === "etcd" ? flagValue(old, "--listen-client-urls") : undefined;
    if (clientUrl !== undefined) {
      const port = Number(new URL(clientUrl).port);
      if (!(await portFree(port)))
        throw new ClusterError(
          `etcd cannot start again: its port ${port} is taken by another process (stop that process, or run \`cocoonset-dev cluster up --reset\` to start a new cluster on new ports; its data is lost)`,
        );
    }
    const offset = logSize(old.log);
    const c = restartComponent(stateDir, old);
    components[i] = c;
    save();
    if (clientUrl !== undefined) {
      try {
        await waitFor("etcd /health", c, deadline, async () => {
          const r = await rawRequest(`${clientUrl}/health`);
          return r.status === 200 && r.body.includes("true");
        });
      } catch (e) {
        throw new EtcdDataUnusable(errorMessage(e));
      }
    } else if (c.name === "kube-apiserver") {
      await waitFor("kube-apiserver /readyz", c, deadline, async () => {
        const r = await rawRequest(`${server}/readyz`, { token, ca });
        return r.status === 200;
      });
    } else if (c.name === "registry" && existing.registry) {
      await waitFor("the registry's /v2/", c, deadline, async () => {
        const r = await rawRequest(`http://${existing.registry}/v2/`);
        return r.status === 200;
      });
    } else if (c.name === "pod-finaliser" || c.name === "node-agent") {
      const line = c.name === "pod-finaliser" ? POD_FINALISER_SYNCED : NODE_AGENT_SYNCED;
      await waitFor(`${c.name} to sync`, c, deadline, () =>
        Promise.resolve(loggedSince(c.log, offset, line)),
      );
    }
  }
  const apiserver = components.find((c) => c.name === "kube-apiserver");
  await waitFor("kube-apiserver /readyz", apiserver, deadline, async () => {
    const r = await rawRequest(`${server}/readyz`, { token, ca });
    return r.status === 200;
  });
  const kwok = components.find((c) => c.name === "kwok");
  await waitForNodes({ server, token, ca, count: existing.nodes.length, kwok, deadline });
  const sup = startSupervisor(stateDir);
  const at = components.findIndex((c) => c.name === SUPERVISOR);
  if (at >= 0) components[at] = sup;
  else components.push(sup);
  save();
  const restarted = stopped.map((c) => c.name);
  progress(
    `cluster: ${restarted.length > 0 ? `restarted ${restarted.join(", ")}` : "nothing to restart"}; the cluster is up with its data`,
  );
  return { ...existing, components, reused: true, restarted };
}

/**
 * Stops every recorded process: the supervisor first (it would start the others again),
 * then, from the state file as it is after that, the rest.
 */
async function stopRecorded(stateDir: string, st: ClusterState): Promise<void> {
  const supervisor = st.components.find((c) => c.name === SUPERVISOR);
  if (supervisor) await stopComponents([supervisor]);
  await stopComponents((readState(stateDir) ?? st).components);
}

/** Writes the state file atomically (the supervisor rewrites it while the cluster runs). */
export function writeState(stateDir: string, state: ClusterState): void {
  const p = statePath(stateDir);
  writeFileSync(`${p}.tmp`, JSON.stringify(state, null, 2), { mode: 0o600 });
  renameSync(`${p}.tmp`, p);
}

/**
 * The cluster's client CA: a certificate it signs is accepted by the apiserver as the user
 * in its CN, with its O entries as groups.
 */
export function clientCa(stateDir = defaultStateDir()): CertificateAuthority {
  return {
    certPem: readFileSync(join(stateDir, "pki", "client-ca.crt"), "utf8"),
    keyPem: readFileSync(join(stateDir, "pki", "client-ca.key"), "utf8"),
  };
}

/**
 * Stops every process the cluster started and removes its state directory.
 * @throws ClusterError when the folder is not a cluster's own (nothing is touched)
 */
export async function clusterDown(dir: string = defaultStateDir()): Promise<{ stopped: string[] }> {
  const stateDir = resolveStateDir(dir);
  if (stateDirKind(stateDir) === "absent") return { stopped: [] };
  assertOwnStateDir(stateDir);
  const st = readState(stateDir);
  const stopped: string[] = [];
  if (st) {
    for (const c of st.components) if (isAlive(c)) stopped.push(c.name);
    await stopRecorded(stateDir, st);
  }
  rmSync(stateDir, { recursive: true, force: true });
  return { stopped };
}
