/**
 * Benchmark: the project's controller against the Go peer `cocoon-operator` v0.3.3 on the
 * same private embedded cluster, one after the other, never at the same time.
 *
 * Workload, identical for both: 50 CocoonSets × 10 sub-agents spread over 5 namespaces,
 * created at once. Figures per controller:
 * - time from the first create to all 50 CocoonSets having 11 Ready pods (pod watch),
 * - write requests the controller sent to converge, and per minute once converged (over a
 *   fixed window after a settle period), counted by a loopback proxy that only that
 *   controller talks to (bench/write-counter.ts),
 * - resident memory (`VmRSS`, and the peak `VmHWM`) at that size,
 * - from a sub-agent driven to Failed to its replacement pod created, and Ready (watch).
 *
 * Usage: `./node_modules/.bin/node dist/bench/controller.js`. Prints a table with the ratio
 * ours/peer and writes bench/results/controller.json. When the peer cannot be built or run,
 * our column is still measured and the reason is printed.
 */
import { get } from "node:http";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { ensureCrd } from "../provider/engine/index.js";
import { LABELS, isReady } from "../provider/fleet/index.js";
import { KubeClient, paths, waitForList, type KubeObject } from "../provider/kube/index.js";
import {
  PEER_MODULE,
  PEER_VERSION,
  applyCrds,
  deleteCrd,
  ensurePeer,
  peerHelp,
  readCrds,
  type Peer,
} from "./peer.js";
import {
  freePort,
  machine,
  median,
  note,
  repoRoot,
  rssKiB,
  since,
  startChild,
  table,
  withCluster,
  writeResults,
  type Child,
} from "./support.js";
import { delta, startWriteCounter, writes, type Counts } from "./write-counter.js";

export const NAMESPACES = 5;
export const SETS = 50;
export const REPLICAS = 10;
const PODS_PER_SET = REPLICAS + 1;
const SETTLE_MS = 10_000;
const WINDOW_MS = 30_000;
const FAILURE_TRIALS = 5;
const CONVERGE_TIMEOUT_MS = 300_000;
const IMAGE = "ghcr.io/cocoonstack/agent:1";
const SIMULATE = "cocoonset.cocoonstack.io/simulate";
const ALL_PODS = "/api/v1/pods";

/** The figures of one controller. */
export interface SideFigures {
  convergeMs: number;
  convergeWrites: number;
  convergeRequests: Counts;
  steadyWritesPerMin: number;
  steadyRequests: Counts;
  rssMiB: number;
  peakRssMiB: number;
  replacementCreatedMs: (number | null)[];
  replacementReadyMs: (number | null)[];
  medianReplacementCreatedMs: number | null;
  medianReplacementReadyMs: number | null;
}

type Side = { name: "ours" | "peer"; figures?: SideFigures; missing?: string };

const mib = (kib: number | undefined) => (kib === undefined ? NaN : Math.round(kib / 102.4) / 10);
const live = (p: KubeObject) => !p.metadata.deletionTimestamp;
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

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
function workload(prefix: string): { ns: string; name: string }[] {
  return Array.from({ length: SETS }, (_, i) => ({
    ns: `${prefix}-${i % NAMESPACES}`,
    name: `fleet-${String(i).padStart(2, "0")}`,
  }));
}

/** True when every CocoonSet of the workload has all its pods Ready. */
function converged(sets: { ns: string; name: string }[], pods: KubeObject[]): boolean {
  const ready = new Map<string, number>();
  for (const p of pods) {
    if (!live(p) || !isReady(p)) continue;
    const key = `${p.metadata.namespace}/${p.metadata.labels?.[LABELS.name]}`;
    ready.set(key, (ready.get(key) ?? 0) + 1);
  }
  return sets.every((s) => (ready.get(`${s.ns}/${s.name}`) ?? 0) >= PODS_PER_SET);
}

/**
 * Drives one converged sub-agent to Failed and times its replacement: first a pod of the
 * CocoonSet that was not there before (created), then that pod Ready.
 */
async function failAndReplace(
  admin: KubeClient,
  ns: string,
  name: string,
): Promise<{ createdMs: number | null; readyMs: number | null }> {
  const selector = `${LABELS.name}=${name}`;
  const before = (await admin.list(paths.pods(ns), { labelSelector: selector })).items.filter(live);
  const known = new Set(before.map((p) => p.metadata.uid));
  const victim = before
    .filter((p) => p.metadata.labels?.[LABELS.role] !== "main")
    .sort((a, b) => a.metadata.name!.localeCompare(b.metadata.name!, "en", { numeric: true }))[0];
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
  start: (proxyKubeconfig: string) => Promise<Child>,
): Promise<SideFigures> {
  const prefix = `bench-${side}`;
  const sets = workload(prefix);
  for (let i = 0; i < NAMESPACES; i++)
    await admin.create(paths.namespaces(), {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: `${prefix}-${i}` },
    });
  const counter = await startWriteCounter(kubeconfig, join(stateDir, `${side}.kubeconfig`));
  const ours = (p: KubeObject) => p.metadata.namespace?.startsWith(`${prefix}-`) === true;
  /** Deletes the workload (the controller still runs: finalizers) and waits for it to go. */
  const teardown = async () => {
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
  const child = await start(counter.kubeconfig);
  try {
    note(`${side}: creating ${SETS} CocoonSets × ${REPLICAS} sub-agents at once`);
    const c0 = counter.snapshot();
    let t0 = 0;
    let convergeMs = 0;
    const done = waitForList(
      admin,
      ALL_PODS,
      (items) => {
        if (t0 === 0 || !converged(sets, items.filter(ours))) return false;
        convergeMs = since(t0);
        return true;
      },
      {
        labelSelector: LABELS.name,
        timeoutMs: CONVERGE_TIMEOUT_MS,
        description: `${SETS} CocoonSets with ${PODS_PER_SET} Ready pods each`,
      },
    );
    t0 = performance.now();
    await Promise.all(
      sets.map((s) =>
        admin.create(paths.cocoonSets(s.ns), {
          apiVersion: "cocoonset.cocoonstack.io/v1",
          kind: "CocoonSet",
          metadata: { name: s.name, namespace: s.ns },
          spec: { agent: { replicas: REPLICAS, image: IMAGE } },
        }),
      ),
    );
    await done;
    const convergeRequests = delta(c0, counter.snapshot());
    note(`${side}: converged in ${convergeMs} ms; settling ${SETTLE_MS / 1000} s`);

    await pause(SETTLE_MS);
    note(`${side}: counting writes over ${WINDOW_MS / 1000} s`);
    const w0 = counter.snapshot();
    await pause(WINDOW_MS);
    const steadyRequests = delta(w0, counter.snapshot());
    const rss = rssKiB(child.pid);
    const peak = rssKiB(child.pid, "VmHWM");

    const created: (number | null)[] = [];
    const ready: (number | null)[] = [];
    for (let i = 0; i < FAILURE_TRIALS; i++) {
      const s = sets[(i * SETS) / FAILURE_TRIALS + i];
      const r = await failAndReplace(admin, s.ns, s.name);
      note(
        `${side}: failure ${i + 1}/${FAILURE_TRIALS} in ${s.ns}/${s.name}: replacement created ${r.createdMs ?? "never"} ms, Ready ${r.readyMs ?? "never"} ms`,
      );
      created.push(r.createdMs);
      ready.push(r.readyMs);
    }

    const valid = (xs: (number | null)[]) => xs.filter((x): x is number => x !== null);
    return {
      convergeMs,
      convergeWrites: writes(convergeRequests),
      convergeRequests,
      steadyWritesPerMin: Math.round((writes(steadyRequests) * 60_000) / WINDOW_MS),
      steadyRequests,
      rssMiB: mib(rss),
      peakRssMiB: mib(peak),
      replacementCreatedMs: created,
      replacementReadyMs: ready,
      medianReplacementCreatedMs: valid(created).length ? median(valid(created)) : null,
      medianReplacementReadyMs: valid(ready).length ? median(valid(ready)) : null,
    };
  } finally {
    // Also on failure: the next controller watches every namespace and must find none of these.
    await teardown().catch((e: Error) => note(`${side}: teardown failed: ${e.message}`));
    await child.stop();
    await counter.close();
  }
}

/** Starts the project's controller on the proxy kubeconfig and waits for /readyz. */
async function startOurs(proxyKubeconfig: string): Promise<Child> {
  const [metrics, probe] = [await freePort(), await freePort()];
  const child = startChild(
    process.execPath,
    [
      join(repoRoot, "dist", "cli", "main.js"),
      "controller",
      "--kubeconfig",
      proxyKubeconfig,
      "--leader-elect=false",
      `--metrics-bind-address=127.0.0.1:${metrics}`,
      `--health-probe-bind-address=127.0.0.1:${probe}`,
    ],
    { ...process.env, KUBECONFIG: proxyKubeconfig },
  );
  await waitReady(child, `http://127.0.0.1:${probe}/readyz`, 60_000);
  return child;
}

/** Starts the peer on the proxy kubeconfig and waits for its /readyz. */
async function startPeer(binary: string, proxyKubeconfig: string): Promise<Child> {
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
  );
  await waitReady(child, `http://127.0.0.1:${probe}/readyz`, 60_000);
  return child;
}

function fmt(v: number | null | undefined, digits = 0): string {
  if (v === null || v === undefined || Number.isNaN(v)) return "—";
  return v.toFixed(digits);
}

function ratio(ours: number | null | undefined, peer: number | null | undefined): string {
  if (ours === null || ours === undefined || peer === null || peer === undefined) return "n/a";
  if (peer === 0) return ours === 0 ? "1.00 (0/0)" : "inf";
  return (ours / peer).toFixed(2);
}

const breakdown = (c: Counts) =>
  Object.entries(c)
    .filter(([k]) => !k.startsWith("GET"))
    .map(([k, v]) => `${k}=${v}`)
    .join(", ") || "none";

async function main(): Promise<void> {
  const t0 = Date.now();
  const peer: Peer = await ensurePeer(note);
  if (!peer.ok) note(`peer unavailable: ${peer.reason}`);

  const sides: Side[] = await withCluster("cocoonset-bench-controller", 2, async (cluster) => {
    const admin = new KubeClient({ kubeconfig: cluster.kubeconfig });
    const out: Side[] = [];
    try {
      await ensureCrd(admin);
      const ours = await measure(admin, cluster.kubeconfig, cluster.stateDir, "ours", startOurs);
      out.push({ name: "ours", figures: ours });

      if (!peer.ok) {
        out.push({ name: "peer", missing: peer.reason });
      } else {
        const crds = readCrds(peer.crdFiles);
        note(`peer: installing its CRDs (${crds.map((c) => c.metadata.name).join(", ")})`);
        try {
          await applyCrds(admin, crds);
          const figures = await measure(admin, cluster.kubeconfig, cluster.stateDir, "peer", (k) =>
            startPeer(peer.binary, k),
          );
          out.push({ name: "peer", figures });
        } catch (e) {
          const reason = `the peer run failed: ${(e as Error).message}`;
          note(reason);
          out.push({ name: "peer", missing: reason });
        } finally {
          for (const crd of crds)
            if (!crd.metadata.name?.startsWith("cocoonsets."))
              await deleteCrd(admin, crd.metadata.name!);
          await ensureCrd(admin);
        }
      }
    } finally {
      admin.close();
    }
    return out;
  });

  const o = sides.find((s) => s.name === "ours")?.figures;
  const p = sides.find((s) => s.name === "peer")?.figures;
  const missing = sides.find((s) => s.name === "peer")?.missing;
  const record = {
    date: new Date().toISOString(),
    machine: machine(),
    cluster: "private embedded cluster (2 simulated nodes)",
    peer: { module: PEER_MODULE, version: PEER_VERSION, available: !!p, reason: missing },
    workload: {
      namespaces: NAMESPACES,
      cocoonSets: SETS,
      replicas: REPLICAS,
      settleMs: SETTLE_MS,
      windowMs: WINDOW_MS,
      failureTrials: FAILURE_TRIALS,
    },
    ours: o,
    peerFigures: p,
    totalSeconds: Math.round((Date.now() - t0) / 1000),
  };

  const m = record.machine as { cores: number; node: string };
  const rows = [
    ["figure", "ours", "peer", "ours/peer"],
    [
      `converge ${SETS}×${PODS_PER_SET} pods Ready (ms)`,
      fmt(o?.convergeMs),
      fmt(p?.convergeMs),
      ratio(o?.convergeMs, p?.convergeMs),
    ],
    [
      "writes to converge",
      fmt(o?.convergeWrites),
      fmt(p?.convergeWrites),
      ratio(o?.convergeWrites, p?.convergeWrites),
    ],
    [
      `steady-state writes/min (${WINDOW_MS / 1000} s window)`,
      fmt(o?.steadyWritesPerMin),
      fmt(p?.steadyWritesPerMin),
      ratio(o?.steadyWritesPerMin, p?.steadyWritesPerMin),
    ],
    [
      `RSS at ${SETS * PODS_PER_SET} pods (MiB)`,
      fmt(o?.rssMiB, 1),
      fmt(p?.rssMiB, 1),
      ratio(o?.rssMiB, p?.rssMiB),
    ],
    [
      "peak RSS (MiB)",
      fmt(o?.peakRssMiB, 1),
      fmt(p?.peakRssMiB, 1),
      ratio(o?.peakRssMiB, p?.peakRssMiB),
    ],
    [
      `Failed → replacement created (ms, median of ${FAILURE_TRIALS})`,
      fmt(o?.medianReplacementCreatedMs),
      fmt(p?.medianReplacementCreatedMs),
      ratio(o?.medianReplacementCreatedMs, p?.medianReplacementCreatedMs),
    ],
    [
      `Failed → replacement Ready (ms, median of ${FAILURE_TRIALS})`,
      fmt(o?.medianReplacementReadyMs),
      fmt(p?.medianReplacementReadyMs),
      ratio(o?.medianReplacementReadyMs, p?.medianReplacementReadyMs),
    ],
  ];
  const lines = [
    `cocoonset controller benchmark — ${record.date}, ${m.cores} cores, node ${m.node}, peer ${PEER_MODULE}@${PEER_VERSION}`,
    table(rows),
    `writes to converge, ours: ${o ? breakdown(o.convergeRequests) : "—"}`,
    `writes in the window, ours: ${o ? breakdown(o.steadyRequests) : "—"}`,
    ...(p
      ? [
          `writes to converge, peer: ${breakdown(p.convergeRequests)}`,
          `writes in the window, peer: ${breakdown(p.steadyRequests)}`,
        ]
      : [`peer missing: ${missing ?? "unknown reason"}`]),
  ];
  process.stdout.write(lines.join("\n") + "\n");
  process.stdout.write(`written: ${writeResults("controller", record)}\n`);
}

// bench/image.ts imports the workload; only running this file measures.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
