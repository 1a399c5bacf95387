/**
 * Benchmark: what the capacity forecast adds to the preview of a 1,000-slot fleet.
 *
 * Measured on the slots resource's `check` (provider/dynamic/slots.ts), the call `pulumi
 * preview` makes for the slots and where the forecast runs, rather than a whole `pulumi
 * preview`: the CLI, the language host and the CocoonSet's own preview add the same seconds
 * to both sides, which would only dilute the ratio. Baseline in the same script: the same
 * check with `capacityCheck: "off"` (the dry runs and the quota sums, no node or pod listed)
 * against `"refuse"` (those plus the two LISTs and the forecast). Rounds alternate the two,
 * after one warm-up of each; the figure is the ratio of the medians (goal ≤ 1.1×).
 *
 * Two previews on a private cluster (2 simulated nodes) that holds a live fleet of 1 + 1,000
 * pods, all bound to one node, so the forecast lists and counts them:
 * - `new fleet`: a second fleet of 1,000 sub-agents (1,001 pods created; the main agent is
 *   placed by the scheduler, the sub-agents follow it);
 * - `image change`: the live fleet's image changes (its 1,001 pods deleted and created again,
 *   their room freed first).
 *
 * Then the same comparison on what a user waits for: the whole `pulumi preview` (the real CLI,
 * a local file backend, the bench's Fleet program) of the new 1,000-slot fleet next to the
 * live one, `capacityCheck` set to "off" and to "refuse" in alternate rounds.
 *
 * Usage: `npm run bench:preview-capacity` (or `./node_modules/.bin/node
 * dist/bench/preview-capacity.js [--rounds N] [--preview-rounds N]` after a build; 15 and 5). Prints a table and writes
 * bench/results/preview-capacity.json (with its provenance) and preview-capacity.svg.
 */
import type { Stack } from "@pulumi/pulumi/automation/index.js";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { converge } from "../engine/execute/index.js";
import { ensureCrd } from "../engine/execute/install-crd.js";
import { API_VERSION } from "../engine/kube/api-names.js";
import { KubeClient, paths } from "../engine/kube/index.js";
import { KIND, type CocoonSet, type CocoonSetSpec } from "../engine/spec/index.js";
import { check } from "../provider/dynamic/slots.js";
import type { CapacityCheck } from "../provider/dynamic/dry-run.js";
import { barChart } from "./chart.js";
import { BenchWorkspace } from "./pulumi-env.js";
import {
  benchFlags,
  median,
  note,
  onInterrupt,
  repoRoot,
  since,
  startRun,
  table,
  withCluster,
  createNamespace,
} from "./support.js";

/** What `--help` prints. */
const USAGE = `node dist/bench/preview-capacity.js [flags]: a 1,000-slot preview with the capacity
forecast (capacityCheck refuse) against without it (off), next to a live fleet of 1,001
pods (bench/README.md).

  --rounds N          rounds of the slots' check (default 15)
  --preview-rounds N  rounds of the whole pulumi preview (default 5)
  -h, --help          this text`;

const REPLICAS = 1000;
const NS = "bench";
const spec = (image: string): CocoonSetSpec => ({
  agent: { image, replicas: REPLICAS, resources: { requests: { cpu: "100m", memory: "256Mi" } } },
});

function roundsArg(text: string, flag: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${flag}: a positive integer (got ${text})`);
  return n;
}

interface Case {
  preview: string;
  /** What the check is given: the last deploy's outputs (none for a new fleet) and the new inputs. */
  olds: Record<string, unknown>;
  news: Record<string, unknown>;
}

interface CaseFigures {
  preview: string;
  rounds: number;
  offMs: number[];
  refuseMs: number[];
  offMedianMs: number;
  refuseMedianMs: number;
  ratio: number;
}

/** One check, timed; it must pass (the fleet fits). */
async function timedCheck(c: Case, mode: CapacityCheck): Promise<number> {
  const t0 = performance.now();
  const { failures } = await check(c.olds, { ...c.news, capacityCheck: mode });
  const ms = since(t0);
  if (failures.length > 0)
    throw new Error(`${c.preview} (${mode}): ${failures.map((f) => f.reason).join("; ")}`);
  return ms;
}

/**
 * `timed` with "off" and "refuse": one warm-up of each, then `rounds` rounds alternating the
 * two, each round's order swapped, so drift in load falls on both alike; the medians' ratio.
 */
async function alternate(
  preview: string,
  rounds: number,
  timed: (mode: CapacityCheck) => Promise<number>,
): Promise<CaseFigures> {
  await timed("off");
  await timed("refuse");
  const offMs: number[] = [];
  const refuseMs: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const order: CapacityCheck[] = i % 2 === 0 ? ["off", "refuse"] : ["refuse", "off"];
    for (const mode of order) (mode === "off" ? offMs : refuseMs).push(await timed(mode));
    note(`${preview}: round ${i + 1}: off ${offMs[i]} ms, refuse ${refuseMs[i]} ms`);
  }
  const offMedianMs = median(offMs);
  const refuseMedianMs = median(refuseMs);
  note(`${preview}: off ${offMedianMs} ms, refuse ${refuseMedianMs} ms (medians of ${rounds})`);
  return {
    preview,
    rounds,
    offMs,
    refuseMs,
    offMedianMs,
    refuseMedianMs,
    ratio: Math.round((refuseMedianMs / offMedianMs) * 1000) / 1000,
  };
}

/** One whole `pulumi preview` of the stack with `capacityCheck` = `mode`, timed. */
async function timedPreview(stack: Stack, mode: CapacityCheck): Promise<number> {
  await stack.setConfig("capacityCheck", { value: mode });
  const t0 = performance.now();
  const { changeSummary } = await stack.preview();
  const ms = since(t0);
  if (!changeSummary.create)
    throw new Error(`the preview (${mode}) creates nothing: ${JSON.stringify(changeSummary)}`);
  return ms;
}

/** The whole preview of a new 1,000-slot fleet, "off" against "refuse", alternating. */
async function measureWholePreview(kubeconfigFile: string, rounds: number): Promise<CaseFigures> {
  const programDir = join(repoRoot, "dist", "bench", "programs", "fleet");
  const ws = await BenchWorkspace.open(programDir, "index.js", kubeconfigFile);
  const removeScratch = onInterrupt(() => ws.dispose());
  try {
    const stack = await ws.stack("capacity", {
      namespace: NS,
      name: "fresh",
      replicas: String(REPLICAS),
    });
    note("whole pulumi preview, new fleet: warming up");
    return await alternate("whole pulumi preview, new fleet", rounds, (mode) =>
      timedPreview(stack, mode),
    );
  } finally {
    removeScratch();
    ws.dispose();
  }
}

async function main(): Promise<void> {
  const flags = benchFlags(USAGE, {
    rounds: { type: "string", default: "15" },
    "preview-rounds": { type: "string", default: "5" },
  });
  const rounds = roundsArg(flags.rounds, "--rounds");
  const previewRounds = roundsArg(flags["preview-rounds"], "--preview-rounds");
  const bench = startRun("preview-capacity");
  const results = await withCluster("cocoonset-bench-preview-capacity", 2, async (cluster) => {
    const client = new KubeClient({ kubeconfig: cluster.kubeconfig });
    const kubeconfig = readFileSync(cluster.kubeconfig, "utf8");
    await ensureCrd(client);
    await createNamespace(client, NS);
    const image = "ghcr.io/cocoonstack/agent:1";
    await client.create(paths.cocoonSets(NS), {
      apiVersion: API_VERSION,
      kind: KIND,
      metadata: { name: "live", namespace: NS },
      spec: spec(image),
    });
    note(`creating the live fleet (1 + ${REPLICAS} pods)`);
    const t0 = performance.now();
    const done = await converge(client, NS, "live", { fanOut: 64, timeoutMs: 900_000 });
    if (done.failures.length > 0)
      throw new Error(`the live fleet: ${done.failures.map((f) => f.message).join("; ")}`);
    note(`live fleet converged in ${since(t0)} ms`);
    const live = await client.get<CocoonSet>(paths.cocoonSet(NS, "live"));
    const base = { kubeconfig, namespace: NS, providerVersion: "bench", fanOut: 8 };
    const cases: Case[] = [
      {
        preview: "new fleet (1,001 pods created)",
        olds: {},
        news: { ...base, name: "fresh", spec: spec(image) },
      },
      {
        preview: "image change (1,001 pods recreated)",
        olds: { ...base, name: "live", uid: live.metadata.uid, spec: live.spec },
        news: {
          ...base,
          name: "live",
          uid: live.metadata.uid,
          spec: spec("ghcr.io/cocoonstack/agent:2"),
        },
      },
    ];
    const out: CaseFigures[] = [];
    for (const c of cases) out.push(await alternate(c.preview, rounds, (m) => timedCheck(c, m)));
    out.push(await measureWholePreview(cluster.kubeconfig, previewRounds));
    client.close();
    return out;
  });
  const rows = [
    ["preview", "off (ms)", "refuse (ms)", "ratio"],
    ...results.map((r) => [
      r.preview,
      String(r.offMedianMs),
      String(r.refuseMedianMs),
      `${r.ratio.toFixed(2)}×`,
    ]),
  ];
  process.stdout.write(
    `cocoonset preview-capacity benchmark — ${new Date().toISOString()} (medians of ${rounds} rounds of the check and ${previewRounds} of the whole preview; goal ≤ 1.10×)\n${table(rows)}\n`,
  );
  const chart = barChart({
    title:
      "A 1,000-slot preview (the slots' check, and the whole pulumi preview), with the capacity forecast and without",
    yTitle: "median ms",
    bars: results.flatMap((r) => [
      { group: r.preview, series: 'capacityCheck "off"', value: r.offMedianMs },
      { group: r.preview, series: 'capacityCheck "refuse"', value: r.refuseMedianMs },
    ]),
  });
  const files = await bench.write({ replicas: REPLICAS, rounds, previewRounds, results }, chart);
  process.stdout.write(`written: ${files.join(", ")}\n`);
}

await main();
