/**
 * Benchmark: what the Pulumi layer costs on top of the engine, with the real `pulumi` CLI
 * (toolchain build, Automation API, local file backend) on a private embedded cluster. No
 * controller runs: the slots resource converges the fleets itself.
 *
 * (a) `pulumi preview` of a 1,000-slot change: a fleet deployed at replicas 0, previewed at
 *     replicas 1000 (plain and `--diff`), against a preview with no change as the baseline.
 *     The provider's own share is timed in-process on the same inputs: `check`, `diff` (olds
 *     = the slots resource's outputs from the exported state, news = the 1,001-slot inputs)
 *     and building the slot map, each the median of many calls.
 * (b) `pulumi up` of a fleet from 0 to 200 slots, against the same fan-out run by the engine
 *     directly (`converge` after patching replicas on an identical CocoonSet in another
 *     namespace). Each round uses new fleets so no pod name is reused; sides alternate. A
 *     no-change `up` of the same stack gives Pulumi's fixed cost per run.
 *
 * Usage: `./node_modules/.bin/node dist/bench/pulumi.js`. Prints a table and writes
 * bench/results/pulumi.json (with its provenance) and pulumi.svg (the medians as bars). Not a
 * test: nothing is asserted about time.
 */
import type { Stack } from "@pulumi/pulumi/automation/index.js";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  check,
  desiredSlots,
  diff,
  type SlotsInputs,
  type SlotsOutputs,
} from "../provider/dynamic/index.js";
import { converge, deleteFleet } from "../engine/execute/index.js";
import { ensureCrd } from "../engine/execute/install-crd.js";
import { LABELS, type CocoonSetSpec } from "../engine/spec/index.js";
import { KubeClient, paths } from "../engine/kube/index.js";
import { barChart } from "./chart.js";
import { BenchWorkspace } from "./pulumi-env.js";
import {
  benchFlags,
  machine,
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
const USAGE = `node dist/bench/pulumi.js: the Pulumi layer (the real pulumi CLI, a local file backend)
against the engine it drives, on a private cluster; no flags (bench/README.md).

  -h, --help  this text`;

const PREVIEW_SLOTS = 1000;
const PREVIEW_ROUNDS = 5;
const IMPORT_RUNS = 5;
const INPROCESS_CALLS = 20;
const UP_SLOTS = 200;
const UP_ROUNDS = 3;
const FAN_OUT = 8;
const IMAGE = "ghcr.io/cocoonstack/agent:1";
const SLOTS_TYPE = "pulumi-nodejs:dynamic/cocoonset:Slots";

const spec = (replicas: number): CocoonSetSpec => ({ agent: { replicas, image: IMAGE } });

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return since(t0);
}

/** Median wall time of `calls` runs of `fn`, in ms with two decimals (after one warm-up). */
async function inProcess(calls: number, fn: () => unknown): Promise<number> {
  await fn();
  const xs: number[] = [];
  for (let i = 0; i < calls; i++) {
    const t0 = performance.now();
    await fn();
    xs.push(performance.now() - t0);
  }
  return Math.round(median(xs) * 100) / 100;
}

/**
 * Cold import of the provider package in a fresh Node process, in ms: what the dynamic
 * provider pays on its first call in each pulumi run, since it loads the engine inside the
 * method rather than capturing it.
 */
function coldImportMs(): number {
  const script =
    "const t0 = performance.now(); await import('pulumi-cocoonset/provider'); " +
    "process.stdout.write(String(performance.now() - t0));";
  const r = spawnSync(process.execPath, ["--input-type=module", "-e", script], {
    cwd: repoRoot,
    encoding: "utf8",
  });
  const ms = parseFloat(r.stdout);
  if (r.status !== 0 || Number.isNaN(ms))
    throw new Error(`cannot import pulumi-cocoonset/provider: ${r.stderr}`);
  return Math.round(ms);
}

/** Fails unless the fleet has exactly `count` live pods: a figure is only kept when true. */
async function expectPods(admin: KubeClient, ns: string, name: string, count: number) {
  const pods = await admin.list(paths.pods(ns), { labelSelector: `${LABELS.name}=${name}` });
  const live = pods.items.filter((p) => !p.metadata.deletionTimestamp).length;
  if (live !== count) throw new Error(`${ns}/${name} has ${live} live pods, expected ${count}`);
}

/** The slots resource's outputs from the stack's state, with the kubeconfig in clear. */
async function slotsOutputs(
  stack: Stack,
  kubeconfig: string,
): Promise<SlotsOutputs & { kubeconfig: string }> {
  const state = await stack.exportStack();
  const resources = (state.deployment as { resources?: { type: string; outputs?: unknown }[] })
    .resources;
  const res = resources?.find((r) => r.type === SLOTS_TYPE);
  if (!res?.outputs) throw new Error(`no ${SLOTS_TYPE} in the stack's state`);
  return { ...(res.outputs as SlotsOutputs), kubeconfig };
}

interface PreviewFigures {
  noChangeMs: number[];
  changeMs: number[];
  changeDiffMs: number[];
  medianNoChangeMs: number;
  medianChangeMs: number;
  medianChangeDiffMs: number;
  provider: {
    desiredSlotsMs: number;
    checkMs: number;
    diffChangeMs: number;
    diffNoChangeMs: number;
    coldImportMs: number[];
    medianColdImportMs: number;
  };
}

async function previewBench(
  ws: BenchWorkspace,
  admin: KubeClient,
  kubeconfig: string,
  ns: string,
): Promise<PreviewFigures> {
  const name = "preview";
  const stack = await ws.stack("preview", { namespace: ns, name, replicas: "0" });
  try {
    note(`(a) deploying fleet ${ns}/${name} at replicas 0`);
    await stack.up();
    await expectPods(admin, ns, name, 1);
    const noChangeMs: number[] = [];
    const changeMs: number[] = [];
    const changeDiffMs: number[] = [];
    for (let r = 0; r < PREVIEW_ROUNDS; r++) {
      await stack.setConfig("replicas", { value: "0" });
      noChangeMs.push(await timed(() => stack.preview()));
      await stack.setConfig("replicas", { value: String(PREVIEW_SLOTS) });
      let summary: Record<string, number> | undefined;
      changeMs.push(
        await timed(async () => {
          summary = (await stack.preview()).changeSummary;
        }),
      );
      if (!summary?.update)
        throw new Error(`the preview shows no update: ${JSON.stringify(summary)}`);
      changeDiffMs.push(await timed(() => stack.preview({ diff: true })));
      note(
        `(a) round ${r + 1}: preview no change ${noChangeMs[r]} ms, ${PREVIEW_SLOTS} slots ${changeMs[r]} ms, --diff ${changeDiffMs[r]} ms`,
      );
    }

    // The provider's part, in-process on the very inputs the preview sent it.
    const olds = await slotsOutputs(stack, readFileSync(kubeconfig, "utf8"));
    const base: SlotsInputs = {
      kubeconfig: olds.kubeconfig,
      namespace: olds.namespace,
      name: olds.name,
      uid: olds.uid,
      spec: olds.spec,
      slots: olds.slots,
      providerVersion: olds.providerVersion,
      fanOut: olds.fanOut,
      timeoutSeconds: olds.timeoutSeconds,
      releaseTimeoutSeconds: olds.releaseTimeoutSeconds,
    };
    const bigSpec = spec(PREVIEW_SLOTS);
    const news: SlotsInputs = { ...base, spec: bigSpec, slots: desiredSlots(ns, name, bigSpec) };
    if (Object.keys(news.slots).length !== PREVIEW_SLOTS + 1)
      throw new Error(`desiredSlots gave ${Object.keys(news.slots).length} slots`);
    const provider = {
      desiredSlotsMs: await inProcess(INPROCESS_CALLS, () => desiredSlots(ns, name, bigSpec)),
      checkMs: await inProcess(INPROCESS_CALLS, () =>
        check(olds, news as unknown as Record<string, unknown>),
      ),
      diffChangeMs: await inProcess(INPROCESS_CALLS, () => diff(`${ns}/${name}`, olds, news)),
      diffNoChangeMs: await inProcess(INPROCESS_CALLS, () => diff(`${ns}/${name}`, olds, base)),
      coldImportMs: Array.from({ length: IMPORT_RUNS }, coldImportMs),
      medianColdImportMs: 0,
    };
    provider.medianColdImportMs = median(provider.coldImportMs);
    await stack.setConfig("replicas", { value: "0" });
    return {
      noChangeMs,
      changeMs,
      changeDiffMs,
      medianNoChangeMs: median(noChangeMs),
      medianChangeMs: median(changeMs),
      medianChangeDiffMs: median(changeDiffMs),
      provider,
    };
  } finally {
    note("(a) destroying the preview stack");
    await stack.destroy();
    await stack.workspace.removeStack(stack.name, { force: true });
  }
}

async function pulumiUp(
  ws: BenchWorkspace,
  admin: KubeClient,
  ns: string,
  round: number,
): Promise<{ ms: number; noChangeMs: number }> {
  const name = `pul-${round}`;
  const stack = await ws.stack(`up-${round}`, { namespace: ns, name, replicas: "0" });
  try {
    await stack.up();
    await expectPods(admin, ns, name, 1);
    // The fixed cost of an up (CLI, program, plugins, state), with nothing to change.
    const noChangeMs = await timed(() => stack.up());
    await stack.setConfig("replicas", { value: String(UP_SLOTS) });
    const ms = await timed(() => stack.up());
    await expectPods(admin, ns, name, UP_SLOTS + 1);
    return { ms, noChangeMs };
  } finally {
    await stack.destroy();
    await stack.workspace.removeStack(stack.name, { force: true });
  }
}

async function engineUp(admin: KubeClient, ns: string, round: number): Promise<number> {
  const name = `eng-${round}`;
  await admin.create(paths.cocoonSets(ns), {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonSet",
    metadata: { name, namespace: ns },
    spec: spec(0),
  });
  try {
    const first = await converge(admin, ns, name, { fanOut: FAN_OUT });
    if (first.failures.length > 0) throw new Error(first.failures.map((f) => f.message).join("; "));
    await expectPods(admin, ns, name, 1);
    const ms = await timed(async () => {
      await admin.patch(paths.cocoonSet(ns, name), { spec: { agent: { replicas: UP_SLOTS } } });
      const result = await converge(admin, ns, name, { fanOut: FAN_OUT });
      if (result.failures.length > 0)
        throw new Error(result.failures.map((f) => f.message).join("; "));
    });
    await expectPods(admin, ns, name, UP_SLOTS + 1);
    return ms;
  } finally {
    await deleteFleet(admin, ns, name, { timeoutMs: 300_000 });
  }
}

async function main(): Promise<void> {
  benchFlags(USAGE, {});
  const run = startRun("pulumi");
  const started = Date.now();
  const programDir = join(repoRoot, "dist", "bench", "programs", "fleet");
  const results = await withCluster("cocoonset-bench-pulumi", 2, async (cluster) => {
    const admin = new KubeClient({ kubeconfig: cluster.kubeconfig });
    const ws = await BenchWorkspace.open(programDir, "index.js", cluster.kubeconfig);
    const removeScratch = onInterrupt(() => ws.dispose());
    try {
      await ensureCrd(admin);
      const nsPulumi = "bench-pulumi";
      const nsEngine = "bench-engine";
      for (const name of [nsPulumi, nsEngine]) await createNamespace(admin, name);

      const preview = await previewBench(ws, admin, cluster.kubeconfig, nsPulumi);

      const up = { pulumi: [] as number[], engine: [] as number[], pulumiNoChange: [] as number[] };
      for (let r = 1; r <= UP_ROUNDS; r++) {
        // Alternate which side goes first, so warm caches favour neither.
        const order = r % 2 ? (["pulumi", "engine"] as const) : (["engine", "pulumi"] as const);
        for (const side of order) {
          let ms: number;
          if (side === "pulumi") {
            const p = await pulumiUp(ws, admin, nsPulumi, r);
            ms = p.ms;
            up.pulumiNoChange.push(p.noChangeMs);
          } else {
            ms = await engineUp(admin, nsEngine, r);
          }
          up[side].push(ms);
          note(`(b) round ${r}: ${side} 0 → ${UP_SLOTS} slots in ${ms} ms`);
        }
      }
      return { preview, up };
    } finally {
      removeScratch();
      ws.dispose();
      admin.close();
    }
  });

  const { preview: a, up } = results;
  const upPulumi = median(up.pulumi);
  const upEngine = median(up.engine);
  const upNoChange = median(up.pulumiNoChange);
  const providerShare = a.provider.checkMs + a.provider.diffChangeMs;
  const record = {
    date: new Date().toISOString(),
    machine: machine(),
    cluster: "private embedded cluster (2 simulated nodes)",
    preview: {
      slots: PREVIEW_SLOTS,
      rounds: PREVIEW_ROUNDS,
      inProcessCalls: INPROCESS_CALLS,
      ...a,
    },
    up: {
      slots: UP_SLOTS,
      fanOut: FAN_OUT,
      rounds: UP_ROUNDS,
      pulumiMs: up.pulumi,
      engineMs: up.engine,
      pulumiNoChangeMs: up.pulumiNoChange,
      medianPulumiNoChangeMs: upNoChange,
      medianPulumiMs: upPulumi,
      medianEngineMs: upEngine,
      /** pulumi / engine: 1.0 would mean Pulumi adds nothing. */
      ratio: Math.round((upPulumi / upEngine) * 100) / 100,
    },
    totalSeconds: Math.round((Date.now() - started) / 1000),
  };
  const m = record.machine as { cores: number; node: string };
  const lines = [
    `cocoonset Pulumi-layer benchmark — ${record.date}, ${m.cores} cores, node ${m.node}`,
    "",
    `(a) pulumi preview, median of ${PREVIEW_ROUNDS}`,
    table([
      ["preview", "ms", "vs no change"],
      ["no change (replicas 0 → 0)", String(a.medianNoChangeMs), "1.00"],
      [
        `0 → ${PREVIEW_SLOTS} slots`,
        String(a.medianChangeMs),
        (a.medianChangeMs / a.medianNoChangeMs).toFixed(2),
      ],
      [
        `0 → ${PREVIEW_SLOTS} slots, --diff`,
        String(a.medianChangeDiffMs),
        (a.medianChangeDiffMs / a.medianNoChangeMs).toFixed(2),
      ],
    ]),
    "",
    `provider work in-process on the same inputs, median of ${INPROCESS_CALLS}`,
    table([
      ["call", "ms", "share of preview"],
      [
        `desiredSlots (${PREVIEW_SLOTS + 1} slots)`,
        a.provider.desiredSlotsMs.toFixed(2),
        `${((a.provider.desiredSlotsMs / a.medianChangeMs) * 100).toFixed(2)}%`,
      ],
      [
        "check (schema validation)",
        a.provider.checkMs.toFixed(2),
        `${((a.provider.checkMs / a.medianChangeMs) * 100).toFixed(2)}%`,
      ],
      [
        `diff (${PREVIEW_SLOTS}-slot change)`,
        a.provider.diffChangeMs.toFixed(2),
        `${((a.provider.diffChangeMs / a.medianChangeMs) * 100).toFixed(2)}%`,
      ],
      ["diff (no change: one pod LIST)", a.provider.diffNoChangeMs.toFixed(2), ""],
      [
        `cold import of the provider (median of ${IMPORT_RUNS})`,
        a.provider.medianColdImportMs.toFixed(2),
        `${((a.provider.medianColdImportMs / a.medianChangeMs) * 100).toFixed(2)}%`,
      ],
      [
        "check + diff",
        providerShare.toFixed(2),
        `${((providerShare / a.medianChangeMs) * 100).toFixed(2)}%`,
      ],
    ]),
    "",
    `(b) fan-out 0 → ${UP_SLOTS} slots at ${FAN_OUT} in flight, median of ${UP_ROUNDS}`,
    table([
      ["path", "ms", "ratio"],
      ["engine converge (direct)", String(upEngine), "1.00"],
      ["pulumi up", String(upPulumi), record.up.ratio.toFixed(2)],
      [
        "pulumi up with no change (fixed cost)",
        String(upNoChange),
        (upNoChange / upEngine).toFixed(2),
      ],
      [
        "pulumi up minus its fixed cost",
        String(upPulumi - upNoChange),
        ((upPulumi - upNoChange) / upEngine).toFixed(2),
      ],
    ]),
    `rounds: pulumi ${up.pulumi.join("/")} ms; no-change up ${up.pulumiNoChange.join("/")} ms; engine ${up.engine.join("/")} ms`,
  ];
  process.stdout.write(lines.join("\n") + "\n");
  const chart = barChart({
    title: `Pulumi layer: preview of ${PREVIEW_SLOTS} slots and up of ${UP_SLOTS} slots (medians)`,
    yTitle: "ms",
    bars: [
      { group: "preview, no change", series: "pulumi", value: a.medianNoChangeMs },
      { group: `preview 0 → ${PREVIEW_SLOTS}`, series: "pulumi", value: a.medianChangeMs },
      {
        group: `preview 0 → ${PREVIEW_SLOTS} --diff`,
        series: "pulumi",
        value: a.medianChangeDiffMs,
      },
      { group: "up, no change", series: "pulumi", value: upNoChange },
      { group: `up 0 → ${UP_SLOTS}`, series: "pulumi", value: upPulumi },
      { group: `up 0 → ${UP_SLOTS}`, series: "engine direct", value: upEngine },
    ],
  });
  const files = await run.write(record, chart);
  process.stdout.write(`written: ${files.join(", ")}\n`);
}

await main();
