/**
 * Benchmark: the engine's fan-out and owner release against their floor on a real apiserver.
 *
 * - Fan-out: one `runPass` creating 200 sub-agents at concurrency 8, against a bare loop that
 *   POSTs the same 200 manifests (`buildAgentPod`) through p-limit(8): the ceiling.
 * - Release: `release()` of the CocoonSet's 201 pods, against a bare loop that lists them,
 *   DELETEs them 16 at a time (release's default) and waits until they are gone.
 *
 * Runs against `$KUBECONFIG` when set, else starts a private embedded cluster and stops it
 * after. Each measurement is repeated and the median reported; the order of engine and
 * baseline alternates between rounds. Prints a table and writes bench/results/fanout.json
 * (with its provenance) and fanout.svg (the time of every round, engine and ceiling).
 * Not a test: nothing is asserted about time.
 *
 * Usage: `./node_modules/.bin/node dist/bench/fanout.js`
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pLimit from "p-limit";
import { clusterDown, clusterUp } from "../cluster/index.js";
import { runPass } from "../engine/execute/index.js";
import { ensureCrd } from "../engine/execute/install-crd.js";
import { waitForMainReady } from "../engine/execute/converge.js";
import { buildAgentPod } from "../engine/pods/index.js";
import {
  ANNOTATIONS,
  LABELS,
  withDefaults,
  type CocoonSet,
  type Pod,
} from "../engine/spec/index.js";
import { KubeClient, paths, waitForList } from "../engine/kube/index.js";
import { release } from "../engine/release/index.js";
import { lineChart } from "./chart.js";
import {
  benchFlags,
  createNamespace,
  existingKubeconfig,
  machine,
  note,
  startRun,
} from "./support.js";

/** What `--help` prints. */
const USAGE = `node dist/bench/fanout.js: the engine's fan-out and owner release against bare API
calls; against $KUBECONFIG when it names an existing file, else a private cluster; no flags
(bench/README.md).

  -h, --help  this text`;

const SLOTS = 200;
const FANOUT = 8;
const RELEASE_CONCURRENCY = 16;
const ROUNDS = 5;

interface Figures {
  engineMs: number[];
  baselineMs: number[];
  medianEngineMs: number;
  medianBaselineMs: number;
  /** engine / baseline: 1.0 means the engine costs nothing over the bare calls. */
  ratio: number;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

function figures(engineMs: number[], baselineMs: number[]): Figures {
  const medianEngineMs = median(engineMs);
  const medianBaselineMs = median(baselineMs);
  return {
    engineMs,
    baselineMs,
    medianEngineMs,
    medianBaselineMs,
    ratio: Math.round((medianEngineMs / medianBaselineMs) * 100) / 100,
  };
}

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return Math.round(performance.now() - t0);
}

/** A fresh client (own sockets), warmed up with one request so both sides start equal. */
async function freshClient(kubeconfig: string): Promise<KubeClient> {
  const client = new KubeClient({ kubeconfig, maxSockets: 32 });
  await client.list(paths.namespaces(), { limit: 1 });
  return client;
}

/**
 * Each measurement uses a CocoonSet of its own (`fan-1-engine`, ...): kwok deletes pods by
 * name from a queue that can lag behind, so reusing pod names right after a delete would let
 * a stale delete remove a fresh pod.
 */
class Bench {
  constructor(
    readonly admin: KubeClient,
    readonly kubeconfig: string,
    readonly ns: string,
  ) {}

  selector(name: string): string {
    return `${LABELS.name}=${name}`;
  }

  /** Deletes pods matching the selector and waits until none is left. */
  async wipe(client: KubeClient, labelSelector: string): Promise<void> {
    const pods = await client.list(paths.pods(this.ns), { labelSelector });
    const limit = pLimit(RELEASE_CONCURRENCY);
    await Promise.all(
      pods.items.map((p) => limit(() => client.delete(paths.pod(this.ns, p.metadata.name!)))),
    );
    await waitForList(client, paths.pods(this.ns), (items) => items.length === 0, {
      labelSelector,
      timeoutMs: 120_000,
      description: `pods ${labelSelector} to be gone`,
    });
  }

  /** Removes a measurement's fleet: its pods, then the CocoonSet. */
  async dispose(name: string): Promise<void> {
    await this.wipe(this.admin, this.selector(name));
    await this.admin.delete(paths.cocoonSet(this.ns, name));
  }

  /** A new CocoonSet of {@link SLOTS} replicas with its main agent Ready. */
  async newFleet(name: string): Promise<{ cs: CocoonSet; main: Pod }> {
    const cs = await this.admin.create<CocoonSet>(paths.cocoonSets(this.ns), {
      apiVersion: "cocoonset.cocoonstack.io/v1",
      kind: "CocoonSet",
      metadata: { name },
      spec: { agent: { replicas: SLOTS, image: "ghcr.io/cocoonstack/agent:1" } },
    });
    const first = await runPass(this.admin, cs, { fanOut: FANOUT });
    if (first.failures.length > 0) throw new Error(first.failures.map((f) => f.message).join("; "));
    const main = await waitForMainReady(this.admin, cs, Date.now() + 60_000);
    return { cs: await this.admin.get<CocoonSet>(paths.cocoonSet(this.ns, name)), main };
  }

  async engineFanOut(name: string): Promise<number> {
    const { cs } = await this.newFleet(name);
    const client = await freshClient(this.kubeconfig);
    let created = 0;
    const ms = await timed(async () => {
      const result = await runPass(client, cs, { fanOut: FANOUT });
      created = result.created.length;
      if (result.failures.length > 0)
        throw new Error(result.failures.map((f) => f.message).join("; "));
    });
    client.close();
    if (created !== SLOTS) throw new Error(`the engine created ${created} pods, not ${SLOTS}`);
    return ms;
  }

  async baselineFanOut(name: string): Promise<number> {
    const { cs, main } = await this.newFleet(name);
    const desired = withDefaults(cs);
    const options = {
      mainVMName: main.metadata?.annotations?.[ANNOTATIONS.vmName],
      mainNodeName: main.spec?.nodeName,
    };
    const manifests = Array.from({ length: SLOTS }, (_, i) =>
      buildAgentPod(desired, i + 1, options),
    );
    const client = await freshClient(this.kubeconfig);
    const limit = pLimit(FANOUT);
    const ms = await timed(() =>
      Promise.all(manifests.map((m) => limit(() => client.create(paths.pods(this.ns), m)))),
    );
    client.close();
    return ms;
  }

  /** A new CocoonSet with all {@link SLOTS} + 1 pods created. */
  async fullFleet(name: string): Promise<CocoonSet> {
    const { cs } = await this.newFleet(name);
    const result = await runPass(this.admin, cs, { fanOut: FANOUT });
    if (result.failures.length > 0)
      throw new Error(result.failures.map((f) => f.message).join("; "));
    await waitForList(this.admin, paths.pods(this.ns), (items) => items.length === SLOTS + 1, {
      labelSelector: this.selector(name),
      timeoutMs: 120_000,
      description: `the full fleet ${name}`,
    });
    return cs;
  }

  async engineRelease(name: string): Promise<number> {
    const cs = await this.fullFleet(name);
    const client = await freshClient(this.kubeconfig);
    const ms = await timed(() =>
      release(client, { kind: "CocoonSet", name, uid: cs.metadata.uid! }, this.ns, {
        timeoutMs: 120_000,
        concurrency: RELEASE_CONCURRENCY,
      }),
    );
    client.close();
    return ms;
  }

  async baselineRelease(name: string): Promise<number> {
    await this.fullFleet(name);
    const client = await freshClient(this.kubeconfig);
    const ms = await timed(() => this.wipe(client, this.selector(name)));
    client.close();
    return ms;
  }
}

async function main(): Promise<void> {
  benchFlags(USAGE, {});
  const run = startRun("fanout");
  let kubeconfig = existingKubeconfig();
  let stateDir: string | undefined;
  const clusterKind = kubeconfig ? "$KUBECONFIG" : "private embedded cluster";
  if (!kubeconfig) {
    stateDir = mkdtempSync(join(tmpdir(), "cocoonset-bench-"));
    kubeconfig = (await clusterUp({ stateDir })).kubeconfig;
  }
  const admin = new KubeClient({ kubeconfig });
  const ns = `bench-fanout-${randomBytes(3).toString("hex")}`;
  try {
    await ensureCrd(admin);
    await createNamespace(admin, ns);
    const bench = new Bench(admin, kubeconfig, ns);

    const fan = { engine: [] as number[], baseline: [] as number[] };
    const rel = { engine: [] as number[], baseline: [] as number[] };
    for (let round = 0; round < ROUNDS; round++) {
      // Alternate which side goes first, so warm caches favour neither.
      const order =
        round % 2 === 0 ? (["engine", "baseline"] as const) : (["baseline", "engine"] as const);
      for (const side of order) {
        note(`round ${round + 1}: fan-out, ${side}`);
        const name = `fan-${round + 1}-${side}`;
        fan[side].push(
          side === "engine" ? await bench.engineFanOut(name) : await bench.baselineFanOut(name),
        );
        await bench.dispose(name);
      }
      for (const side of order) {
        note(`round ${round + 1}: release, ${side}`);
        const name = `release-${round + 1}-${side}`;
        rel[side].push(
          side === "engine" ? await bench.engineRelease(name) : await bench.baselineRelease(name),
        );
        await bench.dispose(name);
      }
    }

    const results = {
      fanOut: figures(fan.engine, fan.baseline),
      release: figures(rel.engine, rel.baseline),
    };
    const record = {
      date: new Date().toISOString(),
      machine: machine(),
      cluster: clusterKind,
      slots: SLOTS,
      fanOut: FANOUT,
      releaseConcurrency: RELEASE_CONCURRENCY,
      rounds: ROUNDS,
      results,
    };

    const row = (label: string, f: Figures) =>
      `${label.padEnd(34)}${String(f.medianEngineMs).padStart(12)}${String(f.medianBaselineMs).padStart(14)}${f.ratio.toFixed(2).padStart(8)}`;
    const lines = [
      `cocoonset fan-out benchmark — ${record.date}, ${record.machine.cores} cores, node ${record.machine.node}, ${clusterKind}`,
      `${"operation (median of " + ROUNDS + ")"}`.padEnd(34) +
        "engine ms".padStart(12) +
        "baseline ms".padStart(14) +
        "ratio".padStart(8),
      row(`create ${SLOTS} sub-agents @${FANOUT}`, results.fanOut),
      row(`release ${SLOTS + 1} pods @${RELEASE_CONCURRENCY}`, results.release),
      `rounds: fan-out engine ${fan.engine.join("/")} baseline ${fan.baseline.join("/")}; release engine ${rel.engine.join("/")} baseline ${rel.baseline.join("/")}`,
    ];
    process.stdout.write(lines.join("\n") + "\n");

    const rounds = (label: string, xs: number[]) =>
      xs.map((ms, i) => ({ series: label, x: i + 1, y: ms }));
    const chart = lineChart({
      title: `Fan-out of ${SLOTS} sub-agents and release of ${SLOTS + 1} pods, per round`,
      xTitle: "round",
      yTitle: "ms",
      points: [
        ...rounds(`create ${SLOTS} @${FANOUT}: engine`, fan.engine),
        ...rounds(`create ${SLOTS} @${FANOUT}: raw ceiling`, fan.baseline),
        ...rounds(`release ${SLOTS + 1} @${RELEASE_CONCURRENCY}: engine`, rel.engine),
        ...rounds(`release ${SLOTS + 1} @${RELEASE_CONCURRENCY}: raw ceiling`, rel.baseline),
      ],
    });
    const files = await run.write(record, chart);
    process.stdout.write(`written: ${files.join(", ")}\n`);
  } finally {
    await admin.delete(paths.namespace(ns)).catch(() => false);
    admin.close();
    if (stateDir) await clusterDown(stateDir);
  }
}

await main();
