/**
 * Benchmark: mass pod deletes under the controller on a private embedded cluster.
 *
 * Two runs, one after the other: a fleet of 100 sub-agents loses all 100 at once; a fleet of
 * 20 loses all 20 at once while a CPU burner (one busy Node process) competes for the
 * machine. Deletes use the default grace period, as `kubectl delete` does. Figures per run:
 * - creates per deleted pod: distinct pod uids that appear on a pod watch of the fleet
 *   after the deletes, divided by the deleted pods (1.00 is the floor: one create each);
 * - time to converge: from the deletes until every deleted slot has a fresh Ready pod and
 *   the CocoonSet's status is Running again (both seen on watches).
 *
 * Usage: `./node_modules/.bin/node dist/bench/churn.js` (after a build). Prints a table and
 * writes bench/results/churn.json (with its provenance) and churn.svg (replacements Ready
 * over time, one line per run).
 */
import { spawn } from "node:child_process";
import { join } from "node:path";
import { Informer } from "../controller/informer.js";
import { ensureCrd } from "../engine/execute/install-crd.js";
import { API_VERSION } from "../engine/kube/api-names.js";
import { isReady } from "../engine/pods/index.js";
import { KIND, LABELS, type Pod } from "../engine/spec/index.js";
import { KubeClient, paths, waitForList, type KubeObject } from "../engine/kube/index.js";
import {
  benchFlags,
  freePort,
  note,
  onInterrupt,
  repoRoot,
  since,
  startChild,
  startRun,
  table,
  withCluster,
  createNamespace,
} from "./support.js";
import { lineChart } from "./chart.js";

/** What `--help` prints. */
const USAGE = `node dist/bench/churn.js: mass pod deletes under the controller, creates per deleted
pod against the floor of one, on a private cluster; no flags (bench/README.md).

  -h, --help  this text`;

const IMAGE = "ghcr.io/cocoonstack/agent:1";
const TIMEOUT_MS = 600_000;

interface RunFigures {
  run: string;
  replicas: number;
  deleted: number;
  creates: number;
  createsPerDeleted: number;
  convergeMs: number;
  /** Replacement pods Ready, each time the count changed: ms since the deletes. */
  timeline: { ms: number; ready: number }[];
}

const phaseOf = (o: KubeObject | undefined) => (o?.status as { phase?: string } | undefined)?.phase;

async function churnRun(
  client: KubeClient,
  run: string,
  ns: string,
  replicas: number,
  withBurner: boolean,
): Promise<RunFigures> {
  const name = "churn";
  const selector = `${LABELS.name}=${name}`;
  await createNamespace(client, ns);
  await client.create(paths.cocoonSets(ns), {
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: { name, namespace: ns },
    spec: { agent: { image: IMAGE, replicas } },
  });
  const settled = (items: KubeObject[]) =>
    items.length === replicas + 1 &&
    items.every((p) => !p.metadata.deletionTimestamp && isReady(p));
  await waitForList(client, paths.pods(ns), settled, {
    labelSelector: selector,
    timeoutMs: TIMEOUT_MS,
    description: `${ns}: ${replicas + 1} pods Ready`,
  });

  const uids = new Set<string>();
  const informer = new Informer<KubeObject>({
    client,
    path: paths.pods(ns),
    labelSelector: selector,
  });
  const timeline: { ms: number; ready: number }[] = [];
  const freshReady = new Set<string>();
  let t0 = 0;
  let before = new Set<string>();
  const see = (o: KubeObject) => {
    const uid = o.metadata.uid ?? "";
    uids.add(uid);
    if (t0 === 0 || before.has(uid)) return;
    const had = freshReady.size;
    if (!o.metadata.deletionTimestamp && isReady(o)) freshReady.add(uid);
    else freshReady.delete(uid);
    if (freshReady.size !== had) timeline.push({ ms: since(t0), ready: freshReady.size });
  };
  informer.addHandlers({ onAdd: see, onUpdate: (_, o) => see(o) });
  informer.start();
  await informer.waitForSync();
  before = new Set(uids);
  const victims = informer
    .list()
    .filter((p) => p.metadata.labels?.[LABELS.role] === "sub-agent") as unknown as Pod[];
  const victimUids = new Set(victims.map((p) => p.metadata?.uid ?? ""));

  const burner = withBurner
    ? spawn(process.execPath, ["-e", "for (;;) {}"], { stdio: "ignore" })
    : undefined;
  const removeBurner = onInterrupt(() => void burner?.kill("SIGKILL"));
  try {
    t0 = performance.now();
    timeline.push({ ms: 0, ready: 0 });
    await Promise.all(
      victims.map((p) =>
        client.delete(paths.pod(ns, p.metadata?.name ?? ""), { uid: p.metadata?.uid }),
      ),
    );
    await waitForList(
      client,
      paths.pods(ns),
      (items) => settled(items) && items.every((p) => !victimUids.has(p.metadata.uid ?? "")),
      { labelSelector: selector, timeoutMs: TIMEOUT_MS, description: `${ns}: replacements Ready` },
    );
    await waitForList(
      client,
      paths.cocoonSets(ns),
      (items) => items.some((o) => o.metadata.name === name && phaseOf(o) === "Running"),
      { timeoutMs: TIMEOUT_MS, description: `${ns}/${name} Running` },
    );
    const convergeMs = since(t0);
    const creates = [...uids].filter((u) => !before.has(u)).length;
    return {
      run,
      replicas,
      deleted: victims.length,
      creates,
      createsPerDeleted: Math.round((creates / victims.length) * 100) / 100,
      convergeMs,
      timeline,
    };
  } finally {
    burner?.kill("SIGKILL");
    removeBurner();
    await informer.stop();
  }
}

async function main(): Promise<void> {
  benchFlags(USAGE, {});
  const bench = startRun("churn");
  const results = await withCluster("cocoonset-bench-churn", 2, async (cluster) => {
    const client = new KubeClient({ kubeconfig: cluster.kubeconfig });
    await ensureCrd(client);
    const controller = startChild(
      process.execPath,
      [
        join(repoRoot, "dist", "cli", "main.js"),
        "controller",
        "--kubeconfig",
        cluster.kubeconfig,
        "--leader-elect=false",
        `--metrics-bind-address=127.0.0.1:${await freePort()}`,
        `--health-probe-bind-address=127.0.0.1:${await freePort()}`,
      ],
      { ...process.env, KUBECONFIG: cluster.kubeconfig },
    );
    try {
      note("run 1: 100 sub-agents, all deleted at once");
      const a = await churnRun(client, "100 deleted at once", "churn-100", 100, false);
      note("run 2: 20 sub-agents, all deleted at once, with a CPU burner");
      const b = await churnRun(client, "20 deleted at once + CPU burner", "churn-20", 20, true);
      return [a, b];
    } finally {
      await controller.stop();
    }
  });
  const rows = [
    ["run", "deleted", "creates", "creates/deleted", "converge (ms)"],
    ...results.map((r) => [
      r.run,
      String(r.deleted),
      String(r.creates),
      r.createsPerDeleted.toFixed(2),
      String(r.convergeMs),
    ]),
  ];
  process.stdout.write(`cocoonset churn benchmark — ${new Date().toISOString()}\n${table(rows)}\n`);
  const chart = lineChart({
    title: "Mass pod deletes: replacement pods Ready after the deletes",
    xTitle: "seconds since the deletes",
    yTitle: "replacement pods Ready",
    step: true,
    points: results.flatMap((r) =>
      r.timeline.map((p) => ({ series: r.run, x: p.ms / 1000, y: p.ready })),
    ),
  });
  const files = await bench.write({ results }, chart);
  process.stdout.write(`written: ${files.join(", ")}\n`);
}

await main();
