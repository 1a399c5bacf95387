/**
 * Benchmark: how long the controller takes to suspend and to wake a fleet with
 * `hibernatePolicy: retain`, on the embedded cluster with its node-agent simulator and OCI
 * registry (the VMs' own work is the simulator's, which hibernates and boots at once, so
 * the figures are the control plane's: the controller's passes, the simulator's patches and
 * pushes, the registry's HEADs).
 *
 * One CocoonSet of 1 main + R sub-agents (default 10) in a namespace opted in to the
 * simulator, reconciled by `cocoonset controller --oci-registry <the cluster's registry>`
 * (a fresh process), then the same under the Go peer cocoon-operator v0.3.3 (`OCI_REGISTRY` at
 * the same registry, its own CRDs for its run; skipped with the reason when it cannot be
 * built, or with `--no-peer`). Then, per controller and round (default 3):
 * - suspend: from the `spec.suspend: true` patch to the CocoonSet reporting `Suspended` at
 *   that generation (every VM hibernated, every `<vm>:hibernate` tag in the registry);
 * - wake: from the `suspend: false` patch to every pod's VM `ready` again with no hibernate
 *   ask and the CocoonSet `Running` at that generation with every VM id reported.
 * Both are read from watches. Printed next to them: from the patch to the last pod's VM
 * reaching `hibernated` (resp. `ready`), i.e. the controller's asks plus the simulator's
 * work; the difference is what the status report costs after it (the gate's HEADs, the
 * status write).
 *
 * Usage: `./node_modules/.bin/node dist/bench/suspend.js [--replicas 10] [--rounds 3]
 * [--no-peer] [--state-dir <a running cluster's state folder>]` (without it a private cluster is started
 * and stopped). Prints a table and writes bench/results/suspend.json.
 */
import { join } from "node:path";
import { readState, type ClusterState } from "../cluster/local-cluster.js";
import { NODE_AGENT_ENABLED, NODE_AGENT_LABEL } from "../cluster/node-agent.js";
import { ensureCrd } from "../engine/execute/install-crd.js";
import { API_VERSION } from "../engine/kube/api-names.js";
import { ANNOTATIONS, KIND, LABELS, type CocoonSet, type Pod } from "../engine/spec/index.js";
import { KubeClient, PatchType, paths } from "../engine/kube/index.js";
import { applyCrds, deleteCrd, ensurePeer, peerHelp, readCrds, type Peer } from "./peer.js";
import {
  benchFlags,
  type Child,
  freePort,
  median,
  note,
  repoRoot,
  startChild,
  startRun,
  table,
  watchUntil,
  withCluster,
  createNamespace,
} from "./support.js";

/** What `--help` prints. */
const USAGE = `node dist/bench/suspend.js [flags]: suspend and wake of a 1 + R retain fleet under the
controller (--oci-registry) and under the Go peer, each against the moment the last VM
hibernated or booted (bench/README.md).

  --replicas R      sub-agents (default 10)
  --rounds N        suspend-wake rounds per side (default 3)
  --no-peer         ours only
  --state-dir DIR   a running cluster's state folder instead of a private cluster
  -h, --help        this text`;

interface Round {
  suspendMs: number;
  suspendSimulatorMs: number;
  wakeMs: number;
  wakeSimulatorMs: number;
}

const annotationsOf = (p: Pod) => p.metadata?.annotations ?? {};

/** Starts our controller on the bench namespace with the cluster's registry. */
async function startOurs(cluster: ClusterState, ns: string): Promise<Child> {
  return startChild(
    process.execPath,
    [
      join(repoRoot, "dist", "cli", "main.js"),
      "controller",
      "--kubeconfig",
      cluster.kubeconfig,
      "--leader-elect=false",
      "--namespace",
      ns,
      "--oci-registry",
      cluster.registry ?? "",
      `--metrics-bind-address=127.0.0.1:${await freePort()}`,
      `--health-probe-bind-address=127.0.0.1:${await freePort()}`,
    ],
    { ...process.env, KUBECONFIG: cluster.kubeconfig },
  );
}

/** Starts the peer (every namespace) with `OCI_REGISTRY` at the cluster's registry. */
async function startThePeer(binary: string, cluster: ClusterState): Promise<Child> {
  const takesKubeconfig = /-kubeconfig\b/.test(peerHelp(binary));
  return startChild(
    binary,
    [
      ...(takesKubeconfig ? [`--kubeconfig=${cluster.kubeconfig}`] : []),
      "--leader-elect=false",
      `--metrics-bind-address=127.0.0.1:${await freePort()}`,
      `--health-probe-bind-address=127.0.0.1:${await freePort()}`,
    ],
    {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      KUBECONFIG: cluster.kubeconfig,
      LEADER_ELECT: "false",
      OCI_REGISTRY: cluster.registry ?? "",
    },
  );
}

async function measure(
  cluster: ClusterState,
  who: string,
  start: (cluster: ClusterState, ns: string) => Promise<Child>,
  replicas: number,
  rounds: number,
): Promise<Round[]> {
  if (!cluster.registry)
    throw new Error("this cluster has no OCI registry (started by an older version)");
  const client = new KubeClient({ kubeconfig: cluster.kubeconfig });
  const ns = `bench-suspend-${who}-${Date.now().toString(36)}`;
  const name = "fleet";
  await createNamespace(client, ns, { [NODE_AGENT_LABEL]: NODE_AGENT_ENABLED });
  const controller = await start(cluster, ns);
  const desired = replicas + 1;
  const selector = { labelSelector: `${LABELS.name}=${name}` };
  const csQuery = { fieldSelector: `metadata.name=${name}` };
  const live = (pods: Pod[]) => pods.filter((p) => !p.metadata?.deletionTimestamp);
  const allPods = (pods: Pod[], ok: (p: Pod) => boolean) =>
    live(pods).length === desired && live(pods).every(ok);
  const vmReady = (p: Pod) =>
    annotationsOf(p)[ANNOTATIONS.lifecycleState] === "ready" &&
    !!annotationsOf(p)[ANNOTATIONS.vmID] &&
    annotationsOf(p)[ANNOTATIONS.hibernate] === undefined;
  const atGeneration = (cs: CocoonSet, phase: string) =>
    cs.status?.phase === phase && cs.status?.observedGeneration === cs.metadata.generation;
  const out: Round[] = [];
  try {
    await client.create(paths.cocoonSets(ns), {
      apiVersion: API_VERSION,
      kind: KIND,
      metadata: { name, namespace: ns },
      spec: { agent: { image: "ghcr.io/cocoonstack/agent:1", replicas } },
    });
    await watchUntil<Pod>(
      client,
      paths.pods(ns),
      selector,
      (p) => allPods(p, vmReady),
      180_000,
      `${desired} VMs ready`,
    );
    await watchUntil<CocoonSet>(
      client,
      paths.cocoonSets(ns),
      csQuery,
      (l) => l.some((cs) => atGeneration(cs, "Running")),
      180_000,
      "the fleet Running",
    );
    note(`${who}: fleet of 1 + ${replicas} Running; ${rounds} suspend/wake rounds`);
    const patch = (suspend: boolean) =>
      client.patch(paths.cocoonSet(ns, name), { spec: { suspend } }, PatchType.merge);
    for (let round = 1; round <= rounds; round++) {
      let t0 = performance.now();
      await patch(true);
      const simSuspend = watchUntil<Pod>(
        client,
        paths.pods(ns),
        selector,
        (p) => allPods(p, (x) => annotationsOf(x)[ANNOTATIONS.lifecycleState] === "hibernated"),
        180_000,
        "every VM hibernated",
      ).then(() => performance.now() - t0);
      await watchUntil<CocoonSet>(
        client,
        paths.cocoonSets(ns),
        csQuery,
        (l) => l.some((cs) => atGeneration(cs, "Suspended")),
        180_000,
        "the fleet Suspended",
      );
      const suspendMs = performance.now() - t0;
      const suspendSimulatorMs = await simSuspend;
      t0 = performance.now();
      await patch(false);
      await watchUntil<Pod>(
        client,
        paths.pods(ns),
        selector,
        (p) => allPods(p, vmReady),
        180_000,
        "every VM ready again",
      );
      const wakeSimulatorMs = performance.now() - t0;
      await watchUntil<CocoonSet>(
        client,
        paths.cocoonSets(ns),
        csQuery,
        (l) =>
          l.some(
            (cs) => atGeneration(cs, "Running") && (cs.status?.agents ?? []).every((a) => !!a.vmID),
          ),
        180_000,
        "the fleet Running with every VM id",
      );
      const wakeMs = performance.now() - t0;
      const r = { suspendMs, suspendSimulatorMs, wakeMs, wakeSimulatorMs };
      note(
        `${who}: round ${round}: suspend ${Math.round(suspendMs)} ms (last VM done at ${Math.round(suspendSimulatorMs)}), wake ${Math.round(wakeMs)} ms (last VM done at ${Math.round(wakeSimulatorMs)})`,
      );
      out.push(r);
    }
  } catch (e) {
    note(`controller output:\n${controller.tail()}`);
    throw e;
  } finally {
    await client.delete(paths.cocoonSet(ns, name)).catch(() => undefined);
    await watchUntil<CocoonSet>(
      client,
      paths.cocoonSets(ns),
      csQuery,
      (l) => l.length === 0,
      120_000,
      "the fleet deleted",
    ).catch((e: Error) => note(e.message));
    await controller.stop();
    await client.delete(paths.namespace(ns)).catch(() => undefined);
    client.close();
  }
  return out;
}

async function main(): Promise<void> {
  const values = benchFlags(USAGE, {
    replicas: { type: "string", default: "10" },
    rounds: { type: "string", default: "3" },
    "state-dir": { type: "string" },
    "no-peer": { type: "boolean", default: false },
  });
  const replicas = Number(values.replicas);
  const rounds = Number(values.rounds);
  if (!Number.isInteger(replicas) || replicas < 0)
    throw new Error("--replicas must be an integer >= 0");
  if (!Number.isInteger(rounds) || rounds < 1) throw new Error("--rounds must be an integer >= 1");
  const run = startRun("suspend");
  const peer: Peer = values["no-peer"]
    ? { ok: false, reason: "not run (--no-peer)" }
    : await ensurePeer(note);
  if (!peer.ok) note(`peer unavailable: ${peer.reason}`);
  const both = async (cluster: ClusterState) => {
    const admin = new KubeClient({ kubeconfig: cluster.kubeconfig });
    try {
      await ensureCrd(admin);
      const ours = await measure(cluster, "ours", startOurs, replicas, rounds);
      if (!peer.ok) return { ours, peerMissing: peer.reason };
      // The peer's CRDs (its CocoonSet CRD has our CRD's name) for its run only; deleted and
      // created again after it, as the differential tier does.
      const crds = readCrds(peer.crdFiles);
      try {
        await applyCrds(admin, crds);
        const theirs = await measure(
          cluster,
          "peer",
          (c) => startThePeer(peer.binary, c),
          replicas,
          rounds,
        );
        return { ours, peer: theirs };
      } catch (e) {
        note(`the peer run failed: ${(e as Error).message}`);
        return { ours, peerMissing: `the peer run failed: ${(e as Error).message}` };
      } finally {
        for (const crd of crds) await deleteCrd(admin, crd.metadata.name ?? "");
        await ensureCrd(admin);
      }
    } finally {
      admin.close();
    }
  };
  let measured: { ours: Round[]; peer?: Round[]; peerMissing?: string };
  if (values["state-dir"]) {
    const st = readState(values["state-dir"]);
    if (!st) throw new Error(`no cluster state in ${values["state-dir"]}`);
    measured = await both(st);
  } else {
    measured = await withCluster("cocoonset-bench-suspend", 2, both);
  }
  const ms = (xs: number[]) => `${Math.round(median(xs))} ms`;
  const rows: string[][] = [["", "fleet status", "last VM done", "range (status)"]];
  const add = (who: string, results: Round[]) => {
    const row = (label: string, pick: (r: Round) => number, sim: (r: Round) => number) => [
      `${who}: ${label}`,
      ms(results.map(pick)),
      ms(results.map(sim)),
      `${Math.round(Math.min(...results.map(pick)))}–${Math.round(Math.max(...results.map(pick)))} ms`,
    ];
    rows.push(
      row(
        "suspend → Suspended",
        (r) => r.suspendMs,
        (r) => r.suspendSimulatorMs,
      ),
    );
    rows.push(
      row(
        "wake → Running",
        (r) => r.wakeMs,
        (r) => r.wakeSimulatorMs,
      ),
    );
  };
  add("ours", measured.ours);
  if (measured.peer) add("peer", measured.peer);
  console.log(`\nfleet of 1 + ${replicas}, ${rounds} round(s), medians:\n` + table(rows));
  if (measured.peerMissing) console.log(`peer: ${measured.peerMissing}`);
  const record = (results: Round[]) => ({
    rounds: results.map((r) => ({
      suspendMs: Math.round(r.suspendMs),
      suspendSimulatorMs: Math.round(r.suspendSimulatorMs),
      wakeMs: Math.round(r.wakeMs),
      wakeSimulatorMs: Math.round(r.wakeSimulatorMs),
    })),
    medianSuspendMs: Math.round(median(results.map((r) => r.suspendMs))),
    medianWakeMs: Math.round(median(results.map((r) => r.wakeMs))),
  });
  const written = await run.write({
    fleet: { main: 1, subAgents: replicas },
    ours: record(measured.ours),
    ...(measured.peer ? { peer: record(measured.peer) } : { peerMissing: measured.peerMissing }),
  });
  note(`wrote ${written.join(", ")}`);
}

await main();
