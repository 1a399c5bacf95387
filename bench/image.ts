/**
 * Benchmark: the controller image. Builds it twice with `cocoonset-dev image build` (size,
 * compressed size, digest, and whether the second build gives the same digest), then, on a
 * private embedded cluster, runs it with podman (runc, host network, read-only root, UID
 * 65532, the Operator's arguments):
 * - start → /readyz 200, three times: from `podman run` and from the moment the container's
 *   process started (podman's `State.StartedAt`), i.e. inside the container;
 * - the workload of bench/controller.ts (50 CocoonSets × 10 sub-agents in 5 namespaces)
 *   against the container, with its resident memory (`VmRSS`/`VmHWM` of the container's
 *   process, read from the host's /proc) once converged.
 *
 * Usage: `./node_modules/.bin/node dist/bench/image.js` (needs podman, buildah and runc).
 * Prints a table and writes bench/results/image.json (with its provenance) and image.svg
 * (pods Ready over time for the containerised controller's workload).
 */
import { spawnSync } from "node:child_process";
import { chmodSync, copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildImage, type BuildResult } from "../cluster/image.js";
import { deploymentControllerArgs } from "../controller/image.js";
import { podmanRunArgs } from "../tests/support/controller-container.js";
import { ensureCrd } from "../engine/execute/install-crd.js";
import { KubeClient } from "../engine/kube/index.js";
import { lineChart } from "./chart.js";
import { NAMESPACES, REPLICAS, SETS, measure, waitReady, type SideFigures } from "./controller.js";
import {
  benchFlags,
  type Child,
  freePort,
  machine,
  median,
  note,
  startChild,
  startRun,
  table,
  withCluster,
} from "./support.js";

/** What `--help` prints. */
const USAGE = `node dist/bench/image.js: the controller image: size, reproducibility, start time, and
the 50x10 workload in its container (needs podman, buildah and runc); no flags
(bench/README.md).

  -h, --help  this text`;

const TAG = "localhost/cocoonset-bench/controller:latest";
const START_TRIALS = 3;

/** The container's main process id on the host, once podman reports it. */
async function containerPid(name: string, timeoutMs = 120_000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = spawnSync("podman", ["inspect", "--format", "{{.State.Pid}}", name], {
      encoding: "utf8",
    });
    const pid = Number(r.stdout.trim());
    if (r.status === 0 && pid > 0) return pid;
    if (Date.now() > deadline) throw new Error(`container ${name} has no process: ${r.stderr}`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

/** When the container's process started (ms since the epoch), from podman. */
function startedAt(name: string): number {
  const r = spawnSync("podman", ["inspect", "--format", "{{.State.StartedAt.UnixMilli}}", name], {
    encoding: "utf8",
  });
  return Number(r.stdout.trim());
}

/**
 * Runs the image with podman on `kubeconfig` (copied where UID 65532 can read it), waits
 * for /readyz and returns the child with `pid` set to the container's process.
 */
async function startContainer(
  kubeconfig: string,
  namespaces: string[],
): Promise<{ child: Child; fromRunMs: number; insideMs: number }> {
  const dir = mkdtempSync(join(tmpdir(), "cocoonset-bench-image-"));
  chmodSync(dir, 0o755);
  copyFileSync(kubeconfig, join(dir, "kubeconfig"));
  chmodSync(join(dir, "kubeconfig"), 0o644);
  const [metrics, probe] = [await freePort(), await freePort()];
  const name = `cocoonset-bench-${process.pid}-${Date.now()}`;
  const args = [
    ...podmanRunArgs(
      name,
      { COCOONSET_KUBECONFIG: "/etc/cocoonset/kubeconfig" },
      { [dir]: "/etc/cocoonset" },
    ),
    TAG,
    ...deploymentControllerArgs({
      leaderElect: false,
      concurrency: 4,
      fanoutConcurrency: 8,
      reapInterval: "5m",
      logLevel: "info",
      watchNamespaces: namespaces,
    }),
    `--metrics-bind-address=127.0.0.1:${metrics}`,
    `--health-probe-bind-address=127.0.0.1:${probe}`,
  ];
  const t0 = Date.now();
  const base = startChild("podman", args, process.env);
  const child: Child = {
    ...base,
    stop: async (graceMs) => {
      await base.stop(graceMs);
      spawnSync("podman", ["rm", "--force", "--ignore", name], { stdio: "ignore" });
      rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    await waitReady(child, `http://127.0.0.1:${probe}/readyz`, 180_000);
  } catch (e) {
    await child.stop();
    throw e;
  }
  const readyAt = Date.now();
  const pid = await containerPid(name);
  return {
    child: { ...child, pid },
    fromRunMs: readyAt - t0,
    insideMs: readyAt - startedAt(name),
  };
}

function build(): { result: BuildResult; seconds: number } {
  const t0 = Date.now();
  const result = buildImage({ tag: TAG, log: note });
  return { result, seconds: Math.round((Date.now() - t0) / 100) / 10 };
}

async function main(): Promise<void> {
  benchFlags(USAGE, {});
  const run = startRun("image");
  const t0 = Date.now();
  note("building the image (1/2)");
  const first = build();
  note("building the image again (2/2)");
  const second = build();
  const reproducible =
    first.result.id === second.result.id && first.result.digest === second.result.digest;
  note(
    `digest ${first.result.digest}, second build ${reproducible ? "identical" : second.result.digest}`,
  );

  const figures = await withCluster("cocoonset-bench-image", 2, async (cluster) => {
    const admin = new KubeClient({ kubeconfig: cluster.kubeconfig });
    try {
      await ensureCrd(admin);
      const starts: { fromRunMs: number; insideMs: number }[] = [];
      for (let i = 0; i < START_TRIALS; i++) {
        const s = await startContainer(cluster.kubeconfig, []);
        note(
          `start ${i + 1}/${START_TRIALS}: /readyz 200 ${s.fromRunMs} ms after podman run, ${s.insideMs} ms after the process started`,
        );
        starts.push({ fromRunMs: s.fromRunMs, insideMs: s.insideMs });
        await s.child.stop(30_000);
      }
      const workload = await measure(
        admin,
        cluster.kubeconfig,
        cluster.stateDir,
        "image",
        async (k) => {
          const s = await startContainer(k, []);
          return s.child;
        },
      );
      return { starts, workload };
    } finally {
      admin.close();
    }
  });

  const w: SideFigures = figures.workload;
  const mib = (b: number) => Math.round(b / 104857.6) / 10;
  const record = {
    date: new Date().toISOString(),
    machine: machine(),
    image: {
      tag: first.result.tag,
      id: first.result.id,
      digest: first.result.digest,
      sizeMiB: mib(first.result.size),
      compressedMiB: mib(first.result.compressedSize),
      files: first.result.files,
      node: first.result.nodeVersion,
      buildSeconds: [first.seconds, second.seconds],
      reproducible,
      secondDigest: second.result.digest,
    },
    start: {
      trials: figures.starts,
      medianFromRunMs: median(figures.starts.map((s) => s.fromRunMs)),
      medianInsideMs: median(figures.starts.map((s) => s.insideMs)),
    },
    workload: { namespaces: NAMESPACES, cocoonSets: SETS, replicas: REPLICAS, figures: w },
    totalSeconds: Math.round((Date.now() - t0) / 1000),
  };
  process.stdout.write(
    [
      `controller image benchmark — ${record.date}, ${String(record.machine.cores)} cores`,
      table([
        ["figure", "value"],
        ["image size (MiB, uncompressed)", String(record.image.sizeMiB)],
        ["image size (MiB, gzip layers)", String(record.image.compressedMiB)],
        ["same digest on a second build", String(reproducible)],
        ["podman run → /readyz 200 (ms, median)", String(record.start.medianFromRunMs)],
        ["process start → /readyz 200 (ms, median)", String(record.start.medianInsideMs)],
        [`converge ${SETS}×${REPLICAS + 1} pods Ready (ms)`, String(w.convergeMs)],
        [`RSS at ${SETS}×${REPLICAS} (MiB)`, String(w.rssMiB)],
        [`peak RSS (MiB)`, String(w.peakRssMiB)],
      ]),
    ].join("\n") + "\n",
  );
  const chart = lineChart({
    title: `Controller image: pods Ready, ${SETS} CocoonSets × ${REPLICAS} sub-agents`,
    xTitle: "seconds since the first create",
    yTitle: "pods Ready",
    step: true,
    points: w.readyTimeline.map((p) => ({
      series: "controller in its container",
      x: p.ms / 1000,
      y: p.ready,
    })),
  });
  const files = await run.write(record, chart);
  process.stdout.write(`written: ${files.join(", ")}\n`);
}

await main();
