/**
 * Benchmark: the project's controller against the Go peer `cocoon-operator` v0.3.3 on the
 * same private embedded cluster, one after the other, never at the same time.
 *
 * Workloads, identical for both: `SxR` is S CocoonSets of R sub-agents each, spread over up
 * to 5 namespaces and created at once. By default three: 50×10, 1×1000 and 200×5; for each,
 * ours runs first and then the peer, each controller a fresh process on a fresh private
 * cluster (a second controller on a cluster the first one filled and emptied measured up
 * to 2× slower). Figures per controller and workload:
 * - time from the first create to every CocoonSet having R+1 Ready pods (pod watch), and the
 *   count of Ready pods over that time,
 * - write requests the controller sent to converge, and per minute once converged (over a
 *   fixed window after a settle period), counted by a loopback proxy that only that
 *   controller talks to (bench/write-counter.ts); reads by verb (GET, LIST, WATCH) the same
 *   way: to converge, in the window, per steady-state pass (a pass made by annotating a
 *   converged pod, which changes nothing) and per rebuild (the failure trials below), with
 *   the passes counted from the controller's `controller_runtime_reconcile_total`,
 * - resident memory right after start-up (`VmRSS` once ready, before any CocoonSet), and at
 *   that size (`VmRSS`, and the peak `VmHWM`),
 * - from a sub-agent driven to Failed to its replacement pod created, and Ready (watch).
 *
 * Usage: `./node_modules/.bin/node dist/bench/controller.js [--workload 50x10,1x1000,200x5]
 * [--no-peer] [--settle-seconds 10] [--window-seconds 30]` (also `$COCOONSET_BENCH_WORKLOADS`,
 * `COCOONSET_BENCH_PEER=0`). Prints a table per workload with the ratio ours/peer and writes
 * bench/results/controller.json and controller.svg (pods Ready over time, one line per
 * controller, one panel per workload). When the peer cannot be built, or its CRDs cannot be
 * installed, or it does not start, our column is still measured and the reason is printed
 * and recorded as that workload's `peerMissing`.
 */
import { get } from "node:http";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { ClusterState } from "../cluster/index.js";
import { bundleController } from "../cluster/controller-bundle.js";
import { imageEntrypoint } from "../cluster/image.js";
import { DEFAULT_CONCURRENCY } from "../controller/options.js";
import { ensureCrd } from "../engine/execute/install-crd.js";
import { isReady } from "../engine/pods/index.js";
import { LABELS, shardBucketOf } from "../engine/spec/index.js";
import { isGone, KubeClient, paths, waitForList, type KubeObject } from "../engine/kube/index.js";
import {
  PEER_MODULE,
  PEER_VERSION,
  applyCrds,
  ensurePeer,
  peerHelp,
  readCrds,
  waitServed,
  type Peer,
} from "./peer.js";
import { lineChart } from "./chart.js";
import {
  benchFlags,
  type Child,
  cpuSeconds,
  machineCpuSeconds,
  freePort,
  loadAverage,
  machine,
  median,
  note,
  rssKiB,
  scrape,
  since,
  startChild,
  CONTROLLER_LOG,
  startRun,
  table,
  withCluster,
  createNamespace,
} from "./support.js";
import {
  delta,
  reads,
  startWriteCounter,
  writes,
  READ_VERBS,
  type Counts,
  type ReadVerb,
} from "./write-counter.js";

/** What `--help` prints. */
const USAGE = `node dist/bench/controller.js [flags]: the project's controller against the Go peer
cocoon-operator v0.3.3, each on a fresh private cluster; figures to bench/results/NAME.json
and a chart to NAME.svg (bench/README.md).

  --workload SxR[,SxR...]  workloads: S CocoonSets of R sub-agents (default 50x10,1x1000,200x5;
                           env COCOONSET_BENCH_WORKLOADS); repeatable
  --no-peer                ours only (env COCOONSET_BENCH_PEER=0)
  --no-ours                the peer (and --shards runs) only
  --shards N[,M...]        also run ours as N processes (--shard I/N), then as M...
  --rounds N               run every side (ours, each --shards count, the peer) N times,
                           the order reversed in even rounds; figures are medians (default 1;
                           env COCOONSET_BENCH_ROUNDS)
  --settle-seconds N       wait after convergence before the steady window (default 10)
  --window-seconds N       the steady window (default 30)
  --name NAME              the results' file name (default controller; env COCOONSET_BENCH_NAME)
  --node-flags="FLAGS"     Node's flags for ours instead of the image ENTRYPOINT's
                           (env COCOONSET_BENCH_NODE_FLAGS)
  --shard-node-flags="FLAGS"
                           Node's flags for each process of the --shards runs instead of
                           --node-flags or the ENTRYPOINT's (env COCOONSET_BENCH_SHARD_NODE_FLAGS)
  --shard-flags="FLAGS"    controller flags for each process of the --shards runs (env
                           COCOONSET_BENCH_SHARD_FLAGS); without --concurrency among them,
                           N shards run --concurrency=(the default / N, at least 1), so that
                           they reconcile as many fleets at once as one process does
  -h, --help               this text`;

/** A workload: `sets` CocoonSets of `replicas` sub-agents in `namespaces` namespaces. */
export interface Workload {
  id: string;
  sets: number;
  replicas: number;
  namespaces: number;
}

/** `SxR` (e.g. `50x10`): S CocoonSets × R sub-agents, over min(S, 5) namespaces. */
export function parseWorkload(id: string): Workload {
  const m = /^(\d+)x(\d+)$/.exec(id.trim());
  if (!m || Number(m[1]) < 1 || Number(m[2]) < 1)
    throw new Error(`workload "${id}" is not SxR (CocoonSets x sub-agents, e.g. 50x10)`);
  const sets = Number(m[1]);
  return { id: id.trim(), sets, replicas: Number(m[2]), namespaces: Math.min(5, sets) };
}

/** The workload of the issue's RSS target and of bench/image.ts. */
export const DEFAULT_WORKLOAD = parseWorkload("50x10");
/** What `bench:controller` runs without `--workload`. */
export const DEFAULT_WORKLOADS = ["50x10", "1x1000", "200x5"];
export const NAMESPACES = DEFAULT_WORKLOAD.namespaces;
export const SETS = DEFAULT_WORKLOAD.sets;
export const REPLICAS = DEFAULT_WORKLOAD.replicas;
let SETTLE_MS = 10_000;
let WINDOW_MS = 30_000;
/** `--node-flags`: Node's flags for our controller instead of the image's ENTRYPOINT's. */
let NODE_FLAGS: string[] | null = null;
/** `--shard-node-flags`: Node's flags for each shard's process instead of {@link NODE_FLAGS}. */
let SHARD_NODE_FLAGS: string[] | null = null;
/** `--shard-flags`: more controller flags for each shard's process. */
let SHARD_FLAGS: string[] = [];
const FAILURE_TRIALS = 5;
/** At most this many points of the Ready-pods timeline are kept per run. */
const TIMELINE_POINTS = 200;
/** The converge deadline: 5 minutes, plus 150 ms per pod past 1,000 (11,000 pods: 30 minutes). */
const convergeTimeoutMs = (pods: number) => 300_000 + Math.max(0, pods - 1000) * 150;
const IMAGE = "ghcr.io/cocoonstack/agent:1";
const SIMULATE = "cocoonset.cocoonstack.io/simulate";
/** An annotation neither controller reads: a pod change that makes a pass and changes nothing. */
const POKE = "bench.cocoonset.cocoonstack.io/poke";
/** Steady-state passes made by poking a pod, one pod per CocoonSet picked as the trials are. */
const POKES = 5;
const ALL_PODS = "/api/v1/pods";

/** The figures of one controller. */
export interface SideFigures {
  /** The 1/5/15-minute load averages when this side's run started. */
  loadAtStart: number[];
  /** `VmRSS` once the controller answered /readyz, before the workload was created. */
  startRssMiB: number;
  convergeMs: number;
  /**
   * Passes of the CocoonSet controller (over every process) from the first create to
   * converged: how often the fleets were reconciled on the way; null without metrics.
   */
  convergePasses?: number | null;
  convergeWrites: number;
  convergeRequests: Counts;
  steadyWritesPerMin: number;
  steadyRequests: Counts;
  /** Reads by verb to converge, and per minute in the steady-state window. */
  convergeReads: Record<ReadVerb, number>;
  steadyReadsPerMin: Record<ReadVerb, number>;
  /**
   * Steady-state passes: a converged pod annotated (nothing to do), {@link POKES} times;
   * null when the controller's metrics could not be read.
   */
  pokePasses: number | null;
  /** Reads by verb per pass over those pokes (null without passes). */
  readsPerSteadyPass: Record<ReadVerb, number> | null;
  /** Passes and reads by verb per rebuild, over the failure trials. */
  passesPerRebuild: number | null;
  readsPerRebuild: Record<ReadVerb, number>;
  rssMiB: number;
  peakRssMiB: number;
  replacementCreatedMs: (number | null)[];
  replacementReadyMs: (number | null)[];
  medianReplacementCreatedMs: number | null;
  medianReplacementReadyMs: number | null;
  /** Ready pods of the workload over time, ms since the first create (thinned). */
  readyTimeline: { ms: number; ready: number }[];
  /**
   * The controller's CPU seconds (user + system, `/proc/<pid>/stat`, summed over its
   * processes): from the first create to converged, and from then to the end of the failure
   * trials (settle, window, pokes, trials). Null where unread.
   */
  cpuToConvergeS?: number | null;
  cpuAfterConvergeS?: number | null;
  /** Per controller process (one per shard; one for an unsharded run). */
  processes?: ProcessFigures[];
  /**
   * The embedded cluster's own processes over the same two spans: CPU seconds, and RSS once
   * converged; their CPU share while converging is CPU seconds over the converge time
   * (cores busy on average; the machine has `machine.cores`).
   */
  clusterProcesses?: Record<string, ClusterProcessFigures>;
  /**
   * While converging, cores busy on average: the whole machine's (`/proc/stat`, everything
   * but idle and iowait), and this benchmark's own process (its request-counting proxy in
   * front of the apiserver, its watch of the pods). Null where unread.
   */
  machineBusyCores?: number | null;
  benchCores?: number | null;
}

/** One controller process: its shard, CPU seconds and RSS. */
export interface ProcessFigures {
  shard: string;
  /** RSS once ready, before the workload: the runtime's own start figure. */
  startRssMiB?: number;
  cpuToConvergeS: number | null;
  cpuAfterConvergeS: number | null;
  rssMiB: number;
  peakRssMiB: number;
}

/** One process of the embedded cluster (kube-apiserver, etcd, kwok, ...). */
export interface ClusterProcessFigures {
  cpuToConvergeS: number | null;
  cpuAfterConvergeS: number | null;
  /** CPU seconds while converging over the converge time: cores busy on average. */
  convergeCores: number | null;
  rssMiB: number;
  peakRssMiB: number;
}

/** Ours as `shards` processes. */
type ShardedFigures = SideFigures & {
  shards: number;
  /** The controller flags each shard ran with beyond its share, its ports and its kubeconfig. */
  shardFlags?: string[];
};

/** One workload's run: both sides' figures, or why a side has none. */
interface WorkloadRun {
  workload: Workload;
  ours?: SideFigures;
  oursMissing?: string;
  peer?: SideFigures;
  peerMissing?: string;
  /**
   * `--shards N[,M…]`: ours again as N processes (then M…), `--shard I/N` each with leader
   * election, in the order of their counts (each the median of its rounds).
   */
  shardedRuns?: ShardedFigures[];
  shardedMissing?: string;
  /**
   * Each round's figures (the record keeps them with `--rounds N` above 1); `ours`, `peer` and
   * each of `shardedRuns` are their medians.
   */
  oursRounds?: SideFigures[];
  peerRounds?: SideFigures[];
  /** Per shard count, each round's figures. */
  shardedRounds?: Record<number, ShardedFigures[]>;
}

/** A side of a workload's run: ours as one process, ours as that many shards, the peer. */
type SideName = "ours" | "peer" | number;

/** Runs one side of a workload (one round of it) and keeps its figures and their medians. */
async function runSide(
  r: WorkloadRun,
  which: SideName,
  label: string,
  run: {
    oursSide: (label: string) => Promise<SideFigures | undefined>;
    peerSide: (label: string) => Promise<SideFigures | undefined>;
    shardedSide: (shards: number, label: string) => Promise<ShardedFigures | undefined>;
  },
): Promise<void> {
  if (which === "ours" || which === "peer") {
    const f = await (which === "ours" ? run.oursSide(label) : run.peerSide(label));
    if (!f) return;
    const rounds = which === "ours" ? (r.oursRounds ??= []) : (r.peerRounds ??= []);
    rounds.push(f);
    r[which] = medianFigures(rounds);
    return;
  }
  const f = await run.shardedSide(which, label);
  if (!f) return;
  const rounds = ((r.shardedRounds ??= {})[which] ??= []);
  rounds.push(f);
  const med = { ...medianFigures(rounds), shards: which, shardFlags: f.shardFlags };
  r.shardedRuns = [...(r.shardedRuns ?? []).filter((s) => s.shards !== which), med].sort(
    (a, b) => a.shards - b.shards,
  );
}

/**
 * The median side of several rounds: every number (and every number of a map of numbers) is
 * the median of the rounds' values; lists and timelines are those of the round whose
 * converge time is the median.
 */
export function medianFigures(rounds: readonly SideFigures[]): SideFigures {
  const byConverge = [...rounds].sort((a, b) => a.convergeMs - b.convergeMs);
  const out = structuredClone(
    byConverge[Math.floor((byConverge.length - 1) / 2)],
  ) as unknown as Record<string, unknown>;
  const numbers = (xs: unknown[]) =>
    xs.filter((x): x is number => typeof x === "number" && Number.isFinite(x));
  for (const key of Object.keys(out)) {
    const values = rounds.map((r) => (r as unknown as Record<string, unknown>)[key]);
    const nums = numbers(values);
    if (nums.length > 0 && nums.length === values.filter((v) => v !== null).length) {
      out[key] = median(nums);
      continue;
    }
    const first = values[0];
    if (first && typeof first === "object" && !Array.isArray(first)) {
      const inner = first as Record<string, unknown>;
      if (!Object.values(inner).every((v) => typeof v === "number")) continue;
      out[key] = Object.fromEntries(
        Object.keys(inner).map((k) => [
          k,
          median(numbers(values.map((v) => (v as Record<string, unknown> | null)?.[k]))),
        ]),
      );
    }
  }
  return out as unknown as SideFigures;
}

/** The embedded cluster's processes whose CPU and memory a run records. */
const CLUSTER_PROCESSES = [
  "kube-apiserver",
  "etcd",
  "kwok",
  "kube-scheduler",
  "kube-controller-manager",
];

const mib = (kib: number | undefined) => (kib === undefined ? NaN : Math.round(kib / 102.4) / 10);
const live = (p: KubeObject) => !p.metadata.deletionTimestamp;
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A controller process, with where its Prometheus metrics are served (when known). */
export type ControllerChild = Child & {
  metricsUrl?: string;
  /** Every process's metrics, when the controller runs as several (shards). */
  metricsUrls?: string[];
  /** `I/N` of a sharded process. */
  shard?: string;
};

/**
 * Sum of `controller_runtime_reconcile_total` of the CocoonSet controller (over every process
 * of a sharded run); null when unread.
 */
async function passesSoFar(child: ControllerChild): Promise<number | null> {
  const urls = child.metricsUrls ?? (child.metricsUrl ? [child.metricsUrl] : []);
  if (urls.length === 0) return null;
  let n = 0;
  for (const url of urls) {
    const text = await new Promise<string | null>((resolve) => {
      const req = get(url, (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (d: string) => (body += d));
        res.on("end", () => resolve(res.statusCode === 200 ? body : null));
      });
      req.on("error", () => resolve(null));
      req.setTimeout(5000, () => req.destroy());
    });
    if (text === null) return null;
    for (const line of text.split("\n"))
      if (
        line.startsWith("controller_runtime_reconcile_total{") &&
        /controller="cocoonset"/.test(line)
      )
        n += Number(line.slice(line.lastIndexOf(" ") + 1)) || 0;
  }
  return n;
}

/**
 * Waits until the controller has made more than `before` passes and then made none for
 * `quietMs` (polled; at most `timeoutMs`), and returns its count. Null without metrics.
 */
async function passesSettled(
  child: ControllerChild,
  before: number | null,
  quietMs = 1500,
  timeoutMs = 30_000,
): Promise<number | null> {
  if (before === null) return null;
  const deadline = Date.now() + timeoutMs;
  let last = before;
  let lastChange = Date.now();
  for (;;) {
    const now = await passesSoFar(child);
    if (now === null) return null;
    if (now !== last) {
      last = now;
      lastChange = Date.now();
    }
    if ((last > before && Date.now() - lastChange >= quietMs) || Date.now() > deadline) return last;
    await pause(100);
  }
}

const perUnit = (r: Record<ReadVerb, number>, n: number): Record<ReadVerb, number> =>
  Object.fromEntries(READ_VERBS.map((v) => [v, Math.round((r[v] / n) * 100) / 100])) as Record<
    ReadVerb,
    number
  >;

/** Polls a probe endpoint until it answers 200 (process start-up only, not a measurement). */
export async function waitReady(child: Child, url: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let exited: string | undefined;
  void child.exited.then((code) => (exited = code));
  for (;;) {
    if (exited !== undefined)
      throw new Error(`exited (${exited}) before ${url} was ready:\n${child.tail()}`);
    const status = await new Promise<number>((resolve) => {
      const req = get(url, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on("error", () => resolve(0));
      req.setTimeout(2000, () => req.destroy());
    });
    if (status === 200) return;
    if (Date.now() > deadline)
      throw new Error(`${url} not ready within ${timeoutMs / 1000} s:\n${child.tail()}`);
    await pause(100);
  }
}

/** `ns/name` of every CocoonSet in the workload. */
function workloadSets(prefix: string, w: Workload): { ns: string; name: string }[] {
  const digits = String(w.sets - 1).length;
  return Array.from({ length: w.sets }, (_, i) => ({
    ns: `${prefix}-${i % w.namespaces}`,
    name: `fleet-${String(i).padStart(Math.max(2, digits), "0")}`,
  }));
}

/** At most `n` points of a timeline, evenly picked, the first and the last kept. */
function thin<T>(points: T[], n: number): T[] {
  if (points.length <= n) return points;
  const out: T[] = [];
  for (let i = 0; i < n; i++) out.push(points[Math.round((i * (points.length - 1)) / (n - 1))]);
  return out;
}

/**
 * Watches the workload's pods until every CocoonSet has `podsPerSet` Ready pods; returns
 * the time since `t0()` and the count of Ready pods over that time. Counts are kept per
 * event (an 11,000-pod workload is not walked again on every event). Events before `t0()`
 * is set (non-zero) are counted but start no timeline.
 */
async function untilConverged(
  admin: KubeClient,
  sets: { ns: string; name: string }[],
  podsPerSet: number,
  t0: () => number,
  timeoutMs: number,
): Promise<{ convergeMs: number; timeline: { ms: number; ready: number }[] }> {
  const wanted = new Set(sets.map((s) => `${s.ns}/${s.name}`));
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), timeoutMs);
  let readyBySet = new Map<string, number>();
  let counted = new Map<string, string>();
  let ready = 0;
  let full = 0;
  const timeline: { ms: number; ready: number }[] = [];
  const add = (set: string, by: number) => {
    const before = readyBySet.get(set) ?? 0;
    const after = before + by;
    readyBySet.set(set, after);
    if (before < podsPerSet && after >= podsPerSet) full++;
    if (before >= podsPerSet && after < podsPerSet) full--;
    ready += by;
  };
  const apply = (type: string, p: KubeObject) => {
    const key = `${p.metadata.namespace}/${p.metadata.name}`;
    const set = `${p.metadata.namespace}/${p.metadata.labels?.[LABELS.name]}`;
    const now = type !== "DELETED" && live(p) && isReady(p) && wanted.has(set) ? set : undefined;
    const before = counted.get(key);
    if (before === now) return;
    if (before) add(before, -1);
    if (now) add(now, 1);
    if (now) counted.set(key, now);
    else counted.delete(key);
    if (t0() !== 0 && ready !== timeline[timeline.length - 1]?.ready)
      timeline.push({ ms: since(t0()), ready });
  };
  const converged = () => t0() !== 0 && full === wanted.size;
  try {
    for (;;) {
      const list = await admin.list(ALL_PODS, { labelSelector: LABELS.name });
      readyBySet = new Map();
      counted = new Map();
      ready = 0;
      full = 0;
      for (const p of list.items) apply("ADDED", p);
      if (converged()) return { convergeMs: since(t0()), timeline };
      let rv = list.metadata.resourceVersion;
      let done = false;
      try {
        while (!done && !abort.signal.aborted) {
          rv = await admin.watch(
            ALL_PODS,
            { labelSelector: LABELS.name, resourceVersion: rv, timeoutSeconds: 60 },
            (ev) => {
              if (ev.type !== "ADDED" && ev.type !== "MODIFIED" && ev.type !== "DELETED") return;
              apply(ev.type, ev.object);
              return (done = converged());
            },
            abort.signal,
          );
        }
      } catch (e) {
        // An expired watch, or a stream the apiserver cut (a reset under load): list again.
        if (!abort.signal.aborted && !isGone(e)) {
          note(`the pod watch broke (${(e as Error).message}); listing again`);
          await pause(500);
        }
      }
      if (done) return { convergeMs: since(t0()), timeline };
      if (abort.signal.aborted)
        throw new Error(
          `timed out after ${timeoutMs} ms waiting for ${sets.length} CocoonSets with ${podsPerSet} Ready pods each (${full} converged, ${ready} pods Ready)`,
        );
    }
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Drives one converged sub-agent to Failed and times its replacement: first a pod of the
 * CocoonSet that was not there before (created), then that pod Ready.
 */
async function failAndReplace(
  admin: KubeClient,
  ns: string,
  name: string,
  nth: number,
): Promise<{ createdMs: number | null; readyMs: number | null }> {
  const selector = `${LABELS.name}=${name}`;
  const before = (await admin.list(paths.pods(ns), { labelSelector: selector })).items.filter(live);
  const known = new Set(before.map((p) => p.metadata.uid));
  const victim = before
    .filter((p) => p.metadata.labels?.[LABELS.role] !== "main")
    .sort((a, b) => a.metadata.name!.localeCompare(b.metadata.name!, "en", { numeric: true }))
    // Another slot on each trial in the same CocoonSet: a slot that fails again is rebuilt
    // after a backoff (1 s, 5 s, 30 s), which is not what this measures.
    .at(nth % Math.max(1, before.length - 1));
  if (!victim) throw new Error(`CocoonSet ${ns}/${name} has no sub-agent pod`);
  let t0 = 0;
  let createdMs: number | null = null;
  let readyMs: number | null = null;
  const watching = waitForList(
    admin,
    paths.pods(ns),
    (items) => {
      if (t0 === 0) return false;
      const fresh = items.filter((p) => live(p) && !known.has(p.metadata.uid));
      if (fresh.length > 0 && createdMs === null) createdMs = since(t0);
      if (fresh.some((p) => isReady(p))) readyMs = since(t0);
      return readyMs !== null;
    },
    { labelSelector: selector, timeoutMs: 60_000, description: `a replacement in ${ns}/${name}` },
  ).catch((e: Error) => note(`no Ready replacement in ${ns}/${name}: ${e.message}`));
  t0 = performance.now();
  await admin.patch(paths.pod(ns, victim.metadata.name!), {
    metadata: { annotations: { [SIMULATE]: "failed" } },
  });
  await watching;
  return { createdMs, readyMs };
}

/**
 * Runs the workload against one controller process, already started by `start` (also used
 * by bench/image.ts for the controller in its container). `side` names the run in messages,
 * namespaces and files.
 */
export async function measure(
  admin: KubeClient,
  kubeconfig: string,
  stateDir: string,
  side: string,
  start: (proxyKubeconfig: string) => Promise<ControllerChild | ControllerChild[]>,
  w: Workload = DEFAULT_WORKLOAD,
  teardown = true,
  /** The embedded cluster's process ids by component name, for their CPU and RSS. */
  clusterPids: Record<string, number> = {},
): Promise<SideFigures> {
  const prefix = `bench-${side}`;
  const sets = workloadSets(prefix, w);
  const podsPerSet = w.replicas + 1;
  for (let i = 0; i < w.namespaces; i++) await createNamespace(admin, `${prefix}-${i}`);
  const counter = await startWriteCounter(kubeconfig, join(stateDir, `${side}.kubeconfig`));
  const ours = (p: KubeObject) => p.metadata.namespace?.startsWith(`${prefix}-`) === true;
  /** Deletes the workload (the controller still runs: finalizers) and waits for it to go. */
  const deleteWorkload = async () => {
    note(`${side}: deleting the CocoonSets and waiting until their pods are gone`);
    await Promise.all(sets.map((s) => admin.delete(paths.cocoonSet(s.ns, s.name))));
    await waitForList(admin, paths.cocoonSets(), (items) => !items.some(ours), {
      timeoutMs: 180_000,
      description: `the ${side} CocoonSets to be gone`,
    });
    await waitForList(admin, ALL_PODS, (items) => !items.some(ours), {
      labelSelector: LABELS.name,
      timeoutMs: 180_000,
      description: `the ${side} CocoonSets' pods to be gone`,
    });
  };
  const loadAtStart = loadAverage();
  let children: ControllerChild[];
  try {
    children = ([] as ControllerChild[]).concat(await start(counter.kubeconfig));
  } catch (e) {
    await counter.close();
    throw e;
  }
  // One process, or one per shard: passes and memory are summed over them.
  const child: ControllerChild = {
    ...children[0],
    metricsUrls: children.every((c) => c.metricsUrl)
      ? children.map((c) => c.metricsUrl!)
      : undefined,
    stop: async (graceMs?: number) => {
      await Promise.all(children.map((c) => c.stop(graceMs)));
    },
  };
  const sumOf = (xs: (number | undefined)[]) =>
    xs.some((x) => x === undefined) ? undefined : xs.reduce<number>((a, x) => a + (x ?? 0), 0);
  const cpus = () => children.map((c) => cpuSeconds(c.pid));
  const clusterCpus = () =>
    Object.fromEntries(Object.entries(clusterPids).map(([k, pid]) => [k, cpuSeconds(pid)]));
  const startEach = children.map((c) => rssKiB(c.pid));
  const startRss = sumOf(startEach);
  note(`${side}: ready; RSS right after start ${mib(startRss)} MiB; load ${loadAtStart.join(" ")}`);
  try {
    note(`${side}: creating ${w.sets} CocoonSets × ${w.replicas} sub-agents at once`);
    const c0 = counter.snapshot();
    let t0 = 0;
    const done = untilConverged(
      admin,
      sets,
      podsPerSet,
      () => t0,
      convergeTimeoutMs(w.sets * podsPerSet),
    );
    // Awaited below; a failure before then must not go unhandled meanwhile.
    done.catch(() => undefined);
    // The watch is listed and open before the first create (a list of the pods so far).
    await pause(500);
    const q0 = await passesSoFar(child);
    const machine0 = machineCpuSeconds();
    const bench0 = process.cpuUsage();
    const cpu0 = cpus();
    const cluster0 = clusterCpus();
    t0 = performance.now();
    await Promise.all(
      sets.map((s) =>
        admin.create(paths.cocoonSets(s.ns), {
          apiVersion: "cocoonset.cocoonstack.io/v1",
          kind: "CocoonSet",
          // Labelled with its shard bucket, as the Fleet writes it (the peer ignores it).
          metadata: {
            name: s.name,
            namespace: s.ns,
            labels: { [LABELS.shardBucket]: String(shardBucketOf(s.ns, s.name)) },
          },
          spec: { agent: { replicas: w.replicas, image: IMAGE } },
        }),
      ),
    );
    const { convergeMs, timeline } = await done;
    timeline.unshift({ ms: 0, ready: 0 });
    const cpu1 = cpus();
    const cluster1 = clusterCpus();
    const machine1 = machineCpuSeconds();
    const bench1 = process.cpuUsage(bench0);
    const q1 = await passesSoFar(child);
    const clusterRss = Object.fromEntries(
      Object.entries(clusterPids).map(([k, pid]) => [k, [rssKiB(pid), rssKiB(pid, "VmHWM")]]),
    );
    const convergeRequests = delta(c0, counter.snapshot());
    note(`${side}: converged in ${convergeMs} ms; settling ${SETTLE_MS / 1000} s`);

    await pause(SETTLE_MS);
    note(`${side}: counting writes over ${WINDOW_MS / 1000} s`);
    const w0 = counter.snapshot();
    await pause(WINDOW_MS);
    const steadyRequests = delta(w0, counter.snapshot());
    const rssEach = children.map((c) => rssKiB(c.pid));
    const peakEach = children.map((c) => rssKiB(c.pid, "VmHWM"));
    const rss = sumOf(rssEach);
    const peak = sumOf(peakEach);

    // Steady-state passes: a converged sub-agent annotated, which neither controller acts on.
    const pick = (i: number) =>
      sets[(Math.floor((i * sets.length) / FAILURE_TRIALS) + i) % sets.length];
    const p0 = await passesSoFar(child);
    const k0 = counter.snapshot();
    for (let i = 0; i < POKES; i++) {
      const s = pick(i);
      const pods = (
        await admin.list(paths.pods(s.ns), { labelSelector: `${LABELS.name}=${s.name}` })
      ).items.filter((p) => live(p) && p.metadata.labels?.[LABELS.role] !== "main");
      const pod = pods[pods.length - 1];
      const before = await passesSoFar(child);
      await admin.patch(paths.pod(s.ns, pod.metadata.name!), {
        metadata: { annotations: { [POKE]: String(i) } },
      });
      await passesSettled(child, before, 300, 10_000);
    }
    const p1 = await passesSettled(child, p0, 1500, 10_000);
    const pokeReads = reads(delta(k0, counter.snapshot()));
    const pokePasses = p0 === null || p1 === null ? null : p1 - p0;
    note(
      `${side}: ${POKES} pods annotated: ${pokePasses ?? "?"} passes, reads ${JSON.stringify(pokeReads)}`,
    );

    const created: (number | null)[] = [];
    const ready: (number | null)[] = [];
    const trialsIn = new Map<string, number>();
    const r0 = await passesSoFar(child);
    const f0 = counter.snapshot();
    for (let i = 0; i < FAILURE_TRIALS; i++) {
      // Spread over the CocoonSets and namespaces (50×10: one per namespace).
      const s = pick(i);
      const key = `${s.ns}/${s.name}`;
      const nth = trialsIn.get(key) ?? 0;
      trialsIn.set(key, nth + 1);
      const r = await failAndReplace(admin, s.ns, s.name, nth);
      note(
        `${side}: failure ${i + 1}/${FAILURE_TRIALS} in ${s.ns}/${s.name}: replacement created ${r.createdMs ?? "never"} ms, Ready ${r.readyMs ?? "never"} ms`,
      );
      created.push(r.createdMs);
      ready.push(r.readyMs);
    }
    // The passes after the last replacement went Ready (its status write) belong to it.
    const r1 = await passesSettled(child, r0, 1500, 15_000);
    const rebuildReads = reads(delta(f0, counter.snapshot()));
    const rebuildPasses = r0 === null || r1 === null ? null : r1 - r0;

    const cpu2 = cpus();
    const cluster2 = clusterCpus();
    const secs = (a: number | undefined, b: number | undefined) =>
      a === undefined || b === undefined ? null : Math.round((b - a) * 100) / 100;
    const total = (xs: (number | null)[]) =>
      xs.some((x) => x === null)
        ? null
        : Math.round(xs.reduce<number>((a, x) => a + x!, 0) * 100) / 100;
    const processes: ProcessFigures[] = children.map((c, i) => ({
      shard: c.shard ?? "0/1",
      startRssMiB: mib(startEach[i]),
      cpuToConvergeS: secs(cpu0[i], cpu1[i]),
      cpuAfterConvergeS: secs(cpu1[i], cpu2[i]),
      rssMiB: mib(rssEach[i]),
      peakRssMiB: mib(peakEach[i]),
    }));
    const clusterProcesses = Object.fromEntries(
      Object.keys(clusterPids).map((k) => {
        const toConverge = secs(cluster0[k], cluster1[k]);
        return [
          k,
          {
            cpuToConvergeS: toConverge,
            cpuAfterConvergeS: secs(cluster1[k], cluster2[k]),
            convergeCores:
              toConverge === null
                ? null
                : Math.round((toConverge / (convergeMs / 1000)) * 100) / 100,
            rssMiB: mib(clusterRss[k][0]),
            peakRssMiB: mib(clusterRss[k][1]),
          } satisfies ClusterProcessFigures,
        ];
      }),
    );

    const valid = (xs: (number | null)[]) => xs.filter((x): x is number => x !== null);
    return {
      cpuToConvergeS: total(processes.map((p) => p.cpuToConvergeS)),
      cpuAfterConvergeS: total(processes.map((p) => p.cpuAfterConvergeS)),
      processes,
      clusterProcesses,
      loadAtStart,
      startRssMiB: mib(startRss),
      convergeMs,
      convergePasses: q0 === null || q1 === null ? null : q1 - q0,
      machineBusyCores:
        machine0 && machine1
          ? Math.round(((machine1.busy - machine0.busy) / (convergeMs / 1000)) * 100) / 100
          : null,
      benchCores:
        Math.round(((bench1.user + bench1.system) / 1e6 / (convergeMs / 1000)) * 100) / 100,
      convergeWrites: writes(convergeRequests),
      convergeRequests,
      steadyWritesPerMin: Math.round((writes(steadyRequests) * 60_000) / WINDOW_MS),
      steadyRequests,
      convergeReads: reads(convergeRequests),
      steadyReadsPerMin: perUnit(reads(steadyRequests), WINDOW_MS / 60_000),
      pokePasses,
      readsPerSteadyPass: pokePasses ? perUnit(pokeReads, pokePasses) : null,
      passesPerRebuild:
        rebuildPasses === null ? null : Math.round((rebuildPasses / FAILURE_TRIALS) * 100) / 100,
      readsPerRebuild: perUnit(rebuildReads, FAILURE_TRIALS),
      rssMiB: mib(rss),
      peakRssMiB: mib(peak),
      replacementCreatedMs: created,
      replacementReadyMs: ready,
      medianReplacementCreatedMs: valid(created).length ? median(valid(created)) : null,
      medianReplacementReadyMs: valid(ready).length ? median(valid(ready)) : null,
      readyTimeline: thin(timeline, TIMELINE_POINTS),
    };
  } finally {
    // Also on failure: the next controller watches every namespace and must find none of these.
    if (teardown)
      await deleteWorkload().catch((e: Error) => note(`${side}: teardown failed: ${e.message}`));
    await child.stop();
    await counter.close();
  }
}

/**
 * Starts the project's controller as its image does (entry point and Node flags) on the proxy
 * kubeconfig and waits for /readyz.
 */
async function startOurs(proxyKubeconfig: string): Promise<ControllerChild> {
  const [metrics, probe] = [await freePort(), await freePort()];
  const image = imageEntrypoint();
  const child = startChild(
    process.execPath,
    [
      ...(NODE_FLAGS ?? image.nodeFlags),
      image.script,
      "controller",
      "--kubeconfig",
      proxyKubeconfig,
      "--leader-elect=false",
      `--metrics-bind-address=127.0.0.1:${metrics}`,
      `--health-probe-bind-address=127.0.0.1:${probe}`,
    ],
    { ...process.env, KUBECONFIG: proxyKubeconfig },
    CONTROLLER_LOG,
  );
  await waitReady(child, `http://127.0.0.1:${probe}/readyz`, 60_000);
  return Object.assign(child, { metricsUrl: `http://127.0.0.1:${metrics}/metrics` });
}

/**
 * The flags each of `shards` processes runs with: {@link SHARD_FLAGS}, and unless they set
 * it, the one process's default `--concurrency` divided among the shards (the comparison is
 * of the same work with the same fleets reconciled at once, divided into processes).
 */
export function shardFlagsFor(shards: number, flags: readonly string[]): string[] {
  if (flags.some((f) => f === "--concurrency" || f.startsWith("--concurrency="))) return [...flags];
  return [...flags, `--concurrency=${Math.max(1, Math.round(DEFAULT_CONCURRENCY / shards))}`];
}

/**
 * Starts the project's controller as `shards` processes, `--shard I/N` each with leader
 * election (a Lease per shard) and {@link shardFlagsFor}, and waits until every one leads
 * its shard.
 */
function startSharded(shards: number) {
  return async (proxyKubeconfig: string): Promise<ControllerChild[]> => {
    const children: ControllerChild[] = [];
    const image = imageEntrypoint();
    try {
      for (let i = 0; i < shards; i++) {
        const [metrics, probe] = [await freePort(), await freePort()];
        const child = startChild(
          process.execPath,
          [
            ...(SHARD_NODE_FLAGS ?? NODE_FLAGS ?? image.nodeFlags),
            image.script,
            "controller",
            "--kubeconfig",
            proxyKubeconfig,
            `--shard=${i}/${shards}`,
            `--metrics-bind-address=127.0.0.1:${metrics}`,
            `--health-probe-bind-address=127.0.0.1:${probe}`,
            ...shardFlagsFor(shards, SHARD_FLAGS),
          ],
          { ...process.env, KUBECONFIG: proxyKubeconfig },
          CONTROLLER_LOG,
        );
        children.push(
          Object.assign(child, {
            metricsUrl: `http://127.0.0.1:${metrics}/metrics`,
            shard: `${i}/${shards}`,
          }),
        );
        await waitReady(child, `http://127.0.0.1:${probe}/readyz`, 60_000);
      }
      // Each shard reconciles only once it holds its Lease: wait for all of them.
      const deadline = Date.now() + 60_000;
      for (const c of children) {
        for (;;) {
          const text = (await scrape(c.metricsUrl!)) ?? "";
          if (/^leader_election_master_status\{[^}]*\} 1$/m.test(text)) break;
          if (Date.now() > deadline) throw new Error(`shard ${c.shard} did not lead within 60 s`);
          await pause(200);
        }
      }
      return children;
    } catch (e) {
      await Promise.all(children.map((c) => c.stop()));
      throw e;
    }
  };
}

/** Starts the peer on the proxy kubeconfig and waits for its /readyz. */
async function startPeer(binary: string, proxyKubeconfig: string): Promise<ControllerChild> {
  const [metrics, probe] = [await freePort(), await freePort()];
  // controller-runtime registers --kubeconfig itself; $KUBECONFIG covers a build without it.
  const takesKubeconfig = /-kubeconfig\b/.test(peerHelp(binary));
  const child = startChild(
    binary,
    [
      ...(takesKubeconfig ? [`--kubeconfig=${proxyKubeconfig}`] : []),
      "--leader-elect=false",
      `--metrics-bind-address=127.0.0.1:${metrics}`,
      `--health-probe-bind-address=127.0.0.1:${probe}`,
    ],
    {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      KUBECONFIG: proxyKubeconfig,
      LEADER_ELECT: "false",
      OCI_REGISTRY: "127.0.0.1:1",
    },
    CONTROLLER_LOG,
  );
  await waitReady(child, `http://127.0.0.1:${probe}/readyz`, 60_000);
  return Object.assign(child, { metricsUrl: `http://127.0.0.1:${metrics}/metrics` });
}

function fmt(v: number | null | undefined, digits = 0): string {
  if (v === null || v === undefined || Number.isNaN(v)) return "—";
  return v.toFixed(digits);
}

/** ours/peer, two decimals; null when a side has no figure or the peer's is 0. */
function ratioOf(ours: number | null | undefined, peer: number | null | undefined): number | null {
  if (ours === null || ours === undefined || peer === null || peer === undefined) return null;
  if (Number.isNaN(ours) || Number.isNaN(peer) || peer === 0) return null;
  return Math.round((ours / peer) * 100) / 100;
}

function ratio(ours: number | null | undefined, peer: number | null | undefined): string {
  if (ours === 0 && peer === 0) return "1.00 (0/0)";
  if (peer === 0 && ours !== null && ours !== undefined) return "inf";
  const r = ratioOf(ours, peer);
  return r === null ? "n/a" : r.toFixed(2);
}

const writeKeys = (c: Counts | undefined) =>
  Object.keys(c ?? {}).filter((k) => writes({ [k]: 1 }) === 1);

const breakdown = (c: Counts) =>
  writeKeys(c)
    .map((k) => `${k}=${c[k]}`)
    .join(", ") || "none";

type Figure = [
  id: string,
  label: (w: Workload) => string,
  digits: number,
  get: (f: SideFigures) => number | null | undefined,
];
const field =
  (k: keyof SideFigures) =>
  (f: SideFigures): number | null | undefined =>
    f[k] as number | null | undefined;
/** Reads of one verb, as a figure (older records have none). */
const readFigures = (
  id: string,
  label: string,
  digits: number,
  get: (f: SideFigures) => Record<ReadVerb, number> | null | undefined,
): Figure[] =>
  READ_VERBS.map((v) => [`${id}.${v}`, () => `${label}: ${v}`, digits, (f) => get(f)?.[v]]);

const readBreakdown = (c: Counts) =>
  Object.keys(c)
    .filter((k) => (READ_VERBS as readonly string[]).includes(k.split(" ")[0]))
    .sort()
    .map((k) => `${k}=${c[k]}`)
    .join(", ") || "none";

/** The headline figures, by id, with the label printed for them. */
const FIGURES: Figure[] = [
  [
    "convergeMs",
    (w) => `converge ${w.sets}×${w.replicas + 1} pods Ready (ms)`,
    0,
    field("convergeMs"),
  ],
  ["convergePasses", () => "passes to converge", 0, field("convergePasses")],
  ["convergeWrites", () => "writes to converge", 0, field("convergeWrites")],
  [
    "steadyWritesPerMin",
    () => `steady-state writes/min (${WINDOW_MS / 1000} s window)`,
    0,
    field("steadyWritesPerMin"),
  ],
  ...readFigures("convergeReads", "reads to converge", 0, (f) => f.convergeReads),
  ...readFigures("steadyReadsPerMin", "steady-state reads/min", 1, (f) => f.steadyReadsPerMin),
  ["pokePasses", () => `steady-state passes (${POKES} pods annotated)`, 0, field("pokePasses")],
  ...readFigures(
    "readsPerSteadyPass",
    "reads per steady-state pass",
    2,
    (f) => f.readsPerSteadyPass,
  ),
  ["passesPerRebuild", () => "passes per rebuild", 2, field("passesPerRebuild")],
  ...readFigures("readsPerRebuild", "reads per rebuild", 2, (f) => f.readsPerRebuild),
  ["startRssMiB", () => "RSS right after start (MiB)", 1, field("startRssMiB")],
  ["rssMiB", (w) => `RSS at ${w.sets * (w.replicas + 1)} pods (MiB)`, 1, field("rssMiB")],
  ["peakRssMiB", () => "peak RSS (MiB)", 1, field("peakRssMiB")],
  [
    "medianReplacementCreatedMs",
    () => `Failed → replacement created (ms, median of ${FAILURE_TRIALS})`,
    0,
    field("medianReplacementCreatedMs"),
  ],
  [
    "medianReplacementReadyMs",
    () => `Failed → replacement Ready (ms, median of ${FAILURE_TRIALS})`,
    0,
    field("medianReplacementReadyMs"),
  ],
  ["cpuToConvergeS", () => "controller CPU to converge (s)", 2, field("cpuToConvergeS")],
  [
    "cpuAfterConvergeS",
    () => "controller CPU from converged to the end of the trials (s)",
    2,
    field("cpuAfterConvergeS"),
  ],
  [
    "machineBusyCores",
    () => "machine CPU while converging, every process (cores)",
    2,
    field("machineBusyCores"),
  ],
  ["benchCores", () => "the benchmark's proxy and watch (cores)", 2, field("benchCores")],
  ...CLUSTER_PROCESSES.slice(0, 3).flatMap((k): Figure[] => [
    [
      `${k}.convergeCores`,
      () => `${k} CPU while converging (cores)`,
      2,
      (f) => f.clusterProcesses?.[k]?.convergeCores,
    ],
    [`${k}.rssMiB`, () => `${k} RSS converged (MiB)`, 0, (f) => f.clusterProcesses?.[k]?.rssMiB],
  ]),
];

/** The ratios ours/peer of one workload, stored in the results. */
function ratios(r: WorkloadRun): Record<string, number | null> {
  const out: Record<string, number | null> = {};
  for (const [id, , , get] of FIGURES)
    out[id] = ratioOf(r.ours ? get(r.ours) : undefined, r.peer ? get(r.peer) : undefined);
  return out;
}

/** The printed table of one workload. */
function workloadTable(r: WorkloadRun): string {
  const { ours: o, peer: p, workload: w } = r;
  const num = (f: SideFigures | undefined, get: Figure[3]) => (f ? get(f) : undefined);
  const rows = [
    [
      `workload ${w.id}: ${w.sets} CocoonSets × ${w.replicas} sub-agents`,
      "ours",
      "peer",
      "ours/peer",
    ],
    ...FIGURES.map(([, label, digits, get]) => [
      label(w),
      fmt(num(o, get), digits),
      fmt(num(p, get), digits),
      ratio(num(o, get), num(p, get)),
    ]),
    ...[...new Set([...writeKeys(o?.convergeRequests), ...writeKeys(p?.convergeRequests)])]
      .sort()
      .map((k) => [
        `  converge writes: ${k}`,
        fmt(o ? (o.convergeRequests[k] ?? 0) : undefined),
        fmt(p ? (p.convergeRequests[k] ?? 0) : undefined),
        ratio(
          o ? (o.convergeRequests[k] ?? 0) : undefined,
          p ? (p.convergeRequests[k] ?? 0) : undefined,
        ),
      ]),
  ];
  return [
    table(rows),
    `writes in the window, ours: ${o ? breakdown(o.steadyRequests) : "—"}; peer: ${p ? breakdown(p.steadyRequests) : "—"}`,
    `reads in the window, ours: ${o ? readBreakdown(o.steadyRequests) : "—"}; peer: ${p ? readBreakdown(p.steadyRequests) : "—"}`,
    `load average (1/5/15 min) at the start, ours: ${o?.loadAtStart.join(" ") ?? "—"}; peer: ${p?.loadAtStart.join(" ") ?? "—"}`,
    ...((r.oursRounds?.length ?? 0) > 1 || (r.peerRounds?.length ?? 0) > 1
      ? [
          `rounds, RSS right after start / converged (MiB), ours: ${(r.oursRounds ?? []).map((f) => `${f.startRssMiB.toFixed(1)}/${f.rssMiB.toFixed(1)}`).join(", ") || "—"}; peer: ${(r.peerRounds ?? []).map((f) => `${f.startRssMiB.toFixed(1)}/${f.rssMiB.toFixed(1)}`).join(", ") || "—"}`,
          `rounds, converge (ms), ours: ${(r.oursRounds ?? []).map((f) => f.convergeMs).join(", ") || "—"}; peer: ${(r.peerRounds ?? []).map((f) => f.convergeMs).join(", ") || "—"}`,
          `rounds, controller CPU to converge (s), ours: ${roundCpu(r.oursRounds)}; peer: ${roundCpu(r.peerRounds)}`,
        ]
      : []),
    ...(r.oursMissing ? [`ours missing: ${r.oursMissing}`] : []),
    ...(r.peerMissing ? [`peer missing: ${r.peerMissing}`] : []),
    ...(r.shardedRuns ?? []).flatMap((s) => ["", shardedTable(r, s)]),
    ...(r.shardedMissing ? [`sharded missing: ${r.shardedMissing}`] : []),
  ].join("\n");
}

/** Each round's controller CPU to converge, as printed. */
function roundCpu(rounds: readonly SideFigures[] | undefined): string {
  return (rounds ?? []).map((f) => fmt(f.cpuToConvergeS, 2)).join(", ") || "—";
}

/** The printed table of a workload's sharded run against the one-process run. */
function shardedTable(r: WorkloadRun, s: ShardedFigures): string {
  const { ours: o, workload: w } = r;
  const n = s?.shards ?? 0;
  const num = (f: SideFigures | undefined, get: Figure[3]) => (f ? get(f) : undefined);
  const rows = [
    [`workload ${w.id}: ours as ${n} shards`, "1 process", `${n} shards`, `${n} shards/1`],
    ...FIGURES.map(([, label, digits, get]) => [
      label(w),
      fmt(num(o, get), digits),
      fmt(num(s, get), digits),
      ratio(num(s, get), num(o, get)),
    ]),
    ...(s?.processes ?? []).map((p) => [
      `  shard ${p.shard}: CPU to converge / after (s), RSS (MiB), above its start`,
      "",
      `${fmt(p.cpuToConvergeS, 2)} / ${fmt(p.cpuAfterConvergeS, 2)}, ${fmt(p.rssMiB, 1)}, ${fmt(p.startRssMiB === undefined ? undefined : p.rssMiB - p.startRssMiB, 1)}`,
      "",
    ]),
  ];
  const rounds = r.shardedRounds?.[n] ?? [];
  return [
    table(rows),
    ...(rounds.length > 1
      ? [
          `rounds, converge (ms), ${n} shards: ${rounds.map((f) => f.convergeMs).join(", ")}; 1 process: ${(r.oursRounds ?? []).map((f) => f.convergeMs).join(", ") || "—"}`,
          `rounds, controller CPU to converge (s), ${n} shards: ${roundCpu(rounds)}; 1 process: ${roundCpu(r.oursRounds)}`,
        ]
      : []),
    `load average (1/5/15 min) at the start of the sharded run${rounds.length > 1 ? " (the median round's)" : ""}: ${s?.loadAtStart.join(" ") ?? "—"}`,
    `each shard's flags: ${s?.shardFlags?.join(" ") || "none"}`,
  ].join("\n");
}

/** The command line: which workloads, whether to run the peer, the steady-state window. */
function options(): {
  workloads: Workload[];
  peer: boolean;
  ours: boolean;
  shards: number[];
  rounds: number;
  name: string;
} {
  const values = benchFlags(USAGE, {
    workload: { type: "string", multiple: true },
    "no-ours": { type: "boolean", default: false },
    "no-peer": { type: "boolean", default: false },
    shards: { type: "string" },
    name: { type: "string" },
    "settle-seconds": { type: "string" },
    "window-seconds": { type: "string" },
    rounds: { type: "string" },
    "node-flags": { type: "string" },
    "shard-flags": { type: "string" },
    "shard-node-flags": { type: "string" },
  });
  const ids =
    (values.workload?.length ? values.workload.join(",") : undefined) ??
    process.env.COCOONSET_BENCH_WORKLOADS ??
    DEFAULT_WORKLOADS.join(",");
  const seconds = (v: string | undefined, name: string, fallback: number) => {
    if (v === undefined) return fallback;
    const n = Number(v);
    if (!Number.isFinite(n) || n < 0) throw new Error(`--${name} must be a number of seconds`);
    return n * 1000;
  };
  SETTLE_MS = seconds(values["settle-seconds"], "settle-seconds", SETTLE_MS);
  WINDOW_MS = seconds(values["window-seconds"], "window-seconds", WINDOW_MS);
  if (WINDOW_MS === 0) throw new Error("--window-seconds must be more than 0");
  const nodeFlags = values["node-flags"] ?? process.env.COCOONSET_BENCH_NODE_FLAGS;
  if (nodeFlags !== undefined) NODE_FLAGS = nodeFlags.split(/\s+/).filter(Boolean);
  const shardNodeFlags = values["shard-node-flags"] ?? process.env.COCOONSET_BENCH_SHARD_NODE_FLAGS;
  if (shardNodeFlags !== undefined) SHARD_NODE_FLAGS = shardNodeFlags.split(/\s+/).filter(Boolean);
  const shardFlags = values["shard-flags"] ?? process.env.COCOONSET_BENCH_SHARD_FLAGS ?? "";
  SHARD_FLAGS = shardFlags.split(/\s+/).filter(Boolean);
  const shards = (values.shards ?? "").split(",").filter(Boolean).map(Number);
  if (shards.some((n) => !Number.isInteger(n) || n < 2))
    throw new Error("--shards must be whole numbers of shards, 2 or more, separated by commas");
  const rounds = Number(values.rounds ?? process.env.COCOONSET_BENCH_ROUNDS ?? 1);
  if (!Number.isInteger(rounds) || rounds < 1)
    throw new Error("--rounds must be a whole number of rounds, 1 or more");
  const name = values.name ?? process.env.COCOONSET_BENCH_NAME ?? "controller";
  if (!/^[a-z0-9][a-z0-9-]*$/.test(name))
    throw new Error("--name must be lowercase letters, digits and dashes (the results' file name)");
  return {
    workloads: ids.split(",").filter(Boolean).map(parseWorkload),
    peer: !values["no-peer"] && process.env.COCOONSET_BENCH_PEER !== "0",
    ours: !values["no-ours"],
    shards,
    rounds,
    name,
  };
}

async function main(): Promise<void> {
  const opts = options();
  const run = startRun(opts.name);
  // Ours runs as the image runs it: the bundle, built now from the compiled controller.
  if (opts.ours || opts.shards.length) note(`bundled ${bundleController().file}`);
  const peer: Peer = opts.peer
    ? await ensurePeer(note)
    : { ok: false, reason: "not run (--no-peer or COCOONSET_BENCH_PEER=0)" };
  if (!peer.ok) note(`peer unavailable: ${peer.reason}`);

  const crds = peer.ok ? readCrds(peer.crdFiles) : [];
  /** One side of one workload on a fresh private cluster; its failure fails that side only. */
  const side = async (
    name: string,
    prepare: (admin: KubeClient) => Promise<void>,
    start: (proxyKubeconfig: string) => Promise<ControllerChild | ControllerChild[]>,
    w: Workload,
  ): Promise<SideFigures> =>
    withCluster(`cocoonset-bench-${name}`, 2, async (cluster: ClusterState) => {
      const admin = new KubeClient({ kubeconfig: cluster.kubeconfig });
      const pids = Object.fromEntries(
        cluster.components
          .filter((c) => CLUSTER_PROCESSES.includes(c.name))
          .map((c) => [c.name, c.pid]),
      );
      try {
        await prepare(admin);
        return await measure(
          admin,
          cluster.kubeconfig,
          cluster.stateDir,
          name,
          start,
          w,
          false,
          pids,
        );
      } finally {
        admin.close();
      }
    });

  const runs: WorkloadRun[] = [];
  /** The record and chart of the runs so far: written after every side, so a run cut short keeps what it measured. */
  const save = async (): Promise<string[]> => {
    const record = {
      date: new Date().toISOString(),
      machine: machine(),
      cluster:
        "a fresh private embedded cluster (2 simulated nodes) for each controller and workload",
      peer: {
        module: PEER_MODULE,
        version: PEER_VERSION,
        available: peer.ok,
        reason: peer.ok ? undefined : peer.reason,
      },
      method: {
        settleMs: SETTLE_MS,
        windowMs: WINDOW_MS,
        failureTrials: FAILURE_TRIALS,
        rounds: opts.rounds,
        order:
          opts.rounds > 1
            ? `per workload, ${opts.rounds} rounds alternating: ours, ours as each --shards count (when asked), then the peer in odd rounds, the other way round in even ones (figures: the rounds' medians, each round under oursRounds/peerRounds/shardedRounds); each on a fresh private cluster; one controller at a time`
            : "per workload: ours, then ours as --shards processes (when asked), then the peer; each on a fresh private cluster; one controller at a time",
      },
      workloads: runs.map((r) => ({
        ...r.workload,
        ratios: ratios(r),
        ours: r.ours,
        oursMissing: r.oursMissing,
        peer: r.peer,
        peerMissing: r.peerMissing,
        shardedRuns: r.shardedRuns,
        shardedMissing: r.shardedMissing,
        ...(opts.rounds > 1
          ? { oursRounds: r.oursRounds, peerRounds: r.peerRounds, shardedRounds: r.shardedRounds }
          : {}),
      })),
    };

    const chart = lineChart({
      title: "Pods Ready from the first create until converged",
      xTitle: "seconds since the first create",
      yTitle: "pods Ready",
      step: true,
      facet: { field: "workload", title: "workload (CocoonSets x sub-agents)", columns: 3 },
      points: runs.flatMap((r) =>
        (
          [
            ["ours", r.ours],
            ["peer", r.peer],
            ...(r.shardedRuns ?? []).map((f) => [`ours, ${f.shards} shards`, f] as const),
          ] as const
        ).flatMap(([series, f]) =>
          (f?.readyTimeline ?? []).map((p) => ({
            workload: r.workload.id,
            series,
            x: p.ms / 1000,
            y: p.ready,
          })),
        ),
      ),
    });
    return run.write(
      { ...record, complete: runs.length === opts.workloads.length && finished },
      chart,
    );
  };
  let finished = false;
  for (const w of opts.workloads) {
    const r: WorkloadRun = { workload: w };
    runs.push(r);
    const oursSide = async (label: string): Promise<SideFigures | undefined> => {
      try {
        note(`workload ${w.id}: ours${label}`);
        return await side(
          `ours-${w.id}`,
          async (admin) => {
            await ensureCrd(admin);
          },
          startOurs,
          w,
        );
      } catch (e) {
        r.oursMissing = `our run failed: ${(e as Error).message}`;
        note(r.oursMissing);
        return undefined;
      }
    };
    const peerSide = async (label: string): Promise<SideFigures | undefined> => {
      if (!peer.ok) {
        r.peerMissing = peer.reason;
        return undefined;
      }
      note(
        `workload ${w.id}: peer${label}, with its CRDs (${crds.map((c) => c.metadata.name).join(", ")})`,
      );
      try {
        return await side(
          `peer-${w.id}`,
          async (admin) => {
            await applyCrds(admin, crds);
            await waitServed(admin, crds);
          },
          (k) => startPeer(peer.binary, k),
          w,
        );
      } catch (e) {
        r.peerMissing = `the peer run failed: ${(e as Error).message}`;
        note(r.peerMissing);
        return undefined;
      }
    };
    if (!opts.ours) r.oursMissing = "not run (--no-ours)";
    const shardCounts = opts.shards.filter((n) => w.sets >= n);
    const shardedSide = async (
      shards: number,
      label: string,
    ): Promise<ShardedFigures | undefined> => {
      note(`workload ${w.id}: ours as ${shards} shards${label}`);
      try {
        return {
          ...(await side(
            `ours-${shards}shards-${w.id}`,
            async (admin) => {
              await ensureCrd(admin);
            },
            startSharded(shards),
            w,
          )),
          shards,
          shardFlags: shardFlagsFor(shards, SHARD_FLAGS),
        };
      } catch (e) {
        r.shardedMissing = `the ${shards}-shard run failed: ${(e as Error).message}`;
        note(r.shardedMissing);
        return undefined;
      }
    };
    // Every side of the workload, in the first round's order: ours, ours as each shard count,
    // the peer. Rounds after the first alternate the order (even rounds run it backwards), so a
    // drift of the machine's load over the run falls on every side alike; with more than one
    // round every figure is the rounds' median.
    const sides: SideName[] = [...(opts.ours ? (["ours"] as const) : []), ...shardCounts, "peer"];
    for (let round = 1; round <= opts.rounds; round++) {
      const label = opts.rounds > 1 ? `, round ${round} of ${opts.rounds}` : "";
      for (const which of round % 2 === 1 ? sides : [...sides].reverse()) {
        await runSide(r, which, label, { oursSide, peerSide, shardedSide });
        await save();
      }
    }
  }

  finished = true;
  const m = machine();
  process.stdout.write(
    [
      `cocoonset controller benchmark — ${new Date().toISOString()}, ${m.cores} cores, node ${m.node}, peer ${PEER_MODULE}@${PEER_VERSION}`,
      ...runs.map((r) => "\n" + workloadTable(r)),
    ].join("\n") + "\n",
  );

  const files = await save();
  process.stdout.write(`written: ${files.join(", ")}\n`);
}

// bench/image.ts imports the workload; only running this file measures.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
