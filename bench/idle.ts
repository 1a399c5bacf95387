/**
 * Benchmark: the idle policy (`spec.idle`) under the project's controller on real time, on
 * the embedded cluster with its node-agent simulator and OCI registry (the simulator
 * hibernates and boots a VM at once, so the delays are the control plane's).
 *
 * N agents (default 200) in F fleets (default 1: a main agent and N-1 sub-agents), each with
 * `idle: {after}` (default `1m`, the shortest the CRD takes). Once every VM runs, the benchmark
 * renews every member's activity Lease once, as a gateway would (server-side apply, the write
 * `cocoonset wake` makes, engine/execute/activity.ts), and from then on renews a tenth of them
 * (each fleet's main agent and the first sub-agents) every `after`/4, the most often the docs
 * ask a writer to. The other nine tenths go idle. Measured, in order:
 *
 * 1. **hibernate on idle**: for each idle member, from its idle deadline (its last activity
 *    as the controller recorded it at the hibernation, never before the bench's renewal, plus
 *    `after`) to its pod's VM `hibernated` on a pod watch; p50/p99/max. The active members must
 *    not be hibernated (counted).
 * 2. **steady state** (`--window-seconds`, default 60, once every idle member is hibernated
 *    and its CocoonHibernation says `Hibernated`; how long after the last VM that took is
 *    recorded):
 *    the activity writes per minute: the Lease writes the benchmark makes, and the apiserver's
 *    own count (`apiserver_request_total` of `leases` with a write verb, which also counts the
 *    cluster's own components' leader-election Leases, and of every resource); the controller's
 *    writes per minute (it talks to the apiserver through the counting proxy,
 *    bench/write-counter.ts) and its CPU seconds.
 * 3. **wake on demand**: a renewal of a hibernated member's Lease to its VM `ready` again,
 *    first for 10 members one at a time, then 200 at once, then the rest at once; p50/p99/max.
 * 4. **the baseline in the same run**: every fleet suspended by hand (`spec.suspend: true`,
 *    waited until `Suspended`), every Lease renewed (so the woken fleet is not idle at once),
 *    then `spec.suspend: false`: from that patch to each pod's VM `ready`; p50/p99/max.
 *
 * The controller runs as `cocoonset controller --oci-registry <the cluster's registry>` (a
 * fresh process, `dist/cli/main.js`, as bench:suspend starts it), its CPU seconds read from
 * /proc per phase.
 *
 * Usage: `./node_modules/.bin/node dist/bench/idle.js [--agents 200] [--fleets 1] [--after 1m]
 * [--window-seconds 60] [--name NAME]`. Prints a table and writes bench/results/idle-NAME.json
 * and .svg (NAME defaults to the number of agents).
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ClusterState } from "../cluster/local-cluster.js";
import { NODE_AGENT_ENABLED, NODE_AGENT_LABEL } from "../cluster/node-agent.js";
import { markActivity } from "../engine/execute/activity.js";
import { ensureCrd } from "../engine/execute/install-crd.js";
import { API_VERSION } from "../engine/kube/api-names.js";
import { KubeClient, PatchType, isGone, paths } from "../engine/kube/index.js";
import { agentPodName } from "../engine/pods/pod-builder.js";
import { parseDuration } from "../engine/spec/duration.js";
import {
  ANNOTATIONS,
  KIND,
  LABELS,
  type CocoonHibernation,
  type CocoonSet,
  type Pod,
} from "../engine/spec/index.js";
import { barChart, type Bar } from "./chart.js";
import { waitReady } from "./controller.js";
import {
  benchFlags,
  type Child,
  cpuSeconds,
  freePort,
  note,
  repoRoot,
  scrape,
  startChild,
  CONTROLLER_LOG,
  startRun,
  table,
  watchUntil,
  withCluster,
  createNamespace,
} from "./support.js";
import { delta, startWriteCounter, writes } from "./write-counter.js";

/** What `--help` prints. */
const USAGE = `node dist/bench/idle.js [flags]: the idle policy on real time under the controller: N
agents, a tenth kept active by Lease renewals, the others hibernated at their deadline and
woken by a renewal, against a hand-set suspend: false; figures to
bench/results/idle-NAME.json and a chart (bench/README.md).

  --agents N          agents in all, main agents included (default 200)
  --fleets F          fleets they are split into (default 1)
  --after D           spec.idle.after (default 1m, the CRD's shortest)
  --window-seconds S  the steady window (default 60, at least 10)
  --name NAME         the results' file name (default the number of agents)
  -h, --help          this text`;

const IMAGE = "ghcr.io/cocoonstack/agent:1";
/** How many idle members are woken one at a time before the rest are woken at once. */
const SINGLE_WAKES = 10;
/** How many are then woken at once (issue: the wake at 10 and at 200 members). */
const BATCH_WAKES = 200;
const HOLDER = "bench-gateway";

const annotationsOf = (p: Pod | undefined) => p?.metadata?.annotations ?? {};
const vmReady = (p: Pod) =>
  annotationsOf(p)[ANNOTATIONS.lifecycleState] === "ready" &&
  !!annotationsOf(p)[ANNOTATIONS.vmID] &&
  annotationsOf(p)[ANNOTATIONS.hibernate] === undefined;
const vmHibernated = (p: Pod) => annotationsOf(p)[ANNOTATIONS.lifecycleState] === "hibernated";
const live = (p: Pod) => !p.metadata?.deletionTimestamp;

/** p50, p99 and max of a list of milliseconds (nearest rank), rounded; NaN when empty. */
function percentiles(xs: number[]): { n: number; p50: number; p99: number; max: number } {
  const s = [...xs].sort((a, b) => a - b);
  const rank = (q: number) => s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))];
  return {
    n: s.length,
    p50: Math.round(rank(0.5) ?? NaN),
    p99: Math.round(rank(0.99) ?? NaN),
    max: Math.round(s.at(-1) ?? NaN),
  };
}

/**
 * The pods of a namespace as a watch shows them, and the wall-clock moment each first met a
 * condition asked for (`when`), so that many members can be timed from one watch.
 */
class PodTracker {
  readonly pods = new Map<string, Pod>();
  private readonly waiters = new Map<
    string,
    { ok: (p: Pod) => boolean; resolve: (t: number) => void }[]
  >();
  private readonly ac = new AbortController();
  private loop?: Promise<void>;

  constructor(
    private readonly client: KubeClient,
    private readonly ns: string,
  ) {}

  async start(): Promise<void> {
    let rv = await this.relist();
    this.loop = (async () => {
      while (!this.ac.signal.aborted) {
        try {
          rv = await this.client.watch<Pod>(
            paths.pods(this.ns),
            { labelSelector: LABELS.name, resourceVersion: rv, timeoutSeconds: 60 },
            (ev) => {
              const name = ev.object.metadata?.name ?? "";
              if (ev.type === "DELETED") this.pods.delete(name);
              else if (ev.type === "ADDED" || ev.type === "MODIFIED") this.seen(ev.object);
              return false;
            },
            this.ac.signal,
          );
        } catch (e) {
          if (this.ac.signal.aborted) return;
          // An expired resource version: list again; anything else: note it and go on.
          if (!isGone(e)) {
            note(`pod watch: ${(e as Error).message}`);
            await new Promise((r) => setTimeout(r, 500));
          }
          rv = await this.relist().catch(() => rv);
        }
      }
    })();
  }

  private async relist(): Promise<string | undefined> {
    const list = await this.client.list<Pod>(paths.pods(this.ns), { labelSelector: LABELS.name });
    for (const p of list.items) this.seen(p);
    return list.metadata.resourceVersion;
  }

  private seen(p: Pod): void {
    const name = p.metadata?.name ?? "";
    this.pods.set(name, p);
    const list = this.waiters.get(name);
    if (!list) return;
    const now = Date.now();
    const left = list.filter((w) => {
      if (!live(p) || !w.ok(p)) return true;
      w.resolve(now);
      return false;
    });
    if (left.length) this.waiters.set(name, left);
    else this.waiters.delete(name);
  }

  /** The wall-clock ms at which pod `name` first meets `ok` from now on (at once if it does). */
  when(name: string, ok: (p: Pod) => boolean): Promise<number> {
    const p = this.pods.get(name);
    if (p && live(p) && ok(p)) return Promise.resolve(Date.now());
    return new Promise((resolve) => {
      const list = this.waiters.get(name) ?? [];
      list.push({ ok, resolve });
      this.waiters.set(name, list);
    });
  }

  async stop(): Promise<void> {
    this.ac.abort();
    await this.loop?.catch(() => undefined);
  }
}

/** Resolves `p`, or rejects after `ms` naming `what`. */
async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)),
          ms,
        );
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** The apiserver's write requests so far (`apiserver_request_total`), for leases and in all. */
interface ApiWrites {
  leases: number;
  all: number;
}

const WRITE_VERBS = new Set(["CREATE", "UPDATE", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION"]);

/** Sums the apiserver's write requests from its metrics text. */
function apiWrites(text: string): ApiWrites {
  const out = { leases: 0, all: 0 };
  for (const line of text.split("\n")) {
    if (!line.startsWith("apiserver_request_total{")) continue;
    const labels = line.slice(line.indexOf("{") + 1, line.lastIndexOf("}"));
    const verb = /(?:^|,)verb="([^"]*)"/.exec(labels)?.[1] ?? "";
    if (!WRITE_VERBS.has(verb)) continue;
    const n = Number(line.slice(line.lastIndexOf(" ") + 1)) || 0;
    out.all += n;
    if (/(?:^|,)resource="leases"/.test(labels)) out.leases += n;
  }
  return out;
}

interface Fleet {
  name: string;
  /** Sub-agents: the fleet has replicas + 1 members. */
  replicas: number;
  active: string[];
  idle: string[];
}

/** N agents over F fleets, a tenth of each (at least its main agent) active. */
function layout(agents: number, fleets: number): Fleet[] {
  const out: Fleet[] = [];
  for (let i = 0; i < fleets; i++) {
    const size = Math.floor(agents / fleets) + (i < agents % fleets ? 1 : 0);
    const name = `idle-${i}`;
    const activeCount = Math.max(1, Math.round(size / 10));
    const pods = Array.from({ length: size }, (_, slot) => agentPodName(name, slot));
    out.push({
      name,
      replicas: size - 1,
      active: pods.slice(0, activeCount),
      idle: pods.slice(activeCount),
    });
  }
  return out;
}

/** Starts our controller on the bench namespace, through the counting proxy, with the registry. */
async function startOurs(kubeconfig: string, registry: string, ns: string): Promise<Child> {
  const [metrics, probe] = [await freePort(), await freePort()];
  const child = startChild(
    process.execPath,
    [
      join(repoRoot, "dist", "cli", "main.js"),
      "controller",
      "--kubeconfig",
      kubeconfig,
      "--leader-elect=false",
      "--namespace",
      ns,
      "--oci-registry",
      registry,
      `--metrics-bind-address=127.0.0.1:${metrics}`,
      `--health-probe-bind-address=127.0.0.1:${probe}`,
    ],
    { ...process.env, KUBECONFIG: kubeconfig },
    CONTROLLER_LOG,
  );
  await waitReady(child, `http://127.0.0.1:${probe}/readyz`, 60_000);
  return child;
}

interface Options {
  agents: number;
  fleets: number;
  after: string;
  afterMs: number;
  windowMs: number;
}

async function measure(cluster: ClusterState, o: Options) {
  if (!cluster.registry)
    throw new Error("this cluster has no OCI registry (started by an older version)");
  const admin = new KubeClient({ kubeconfig: cluster.kubeconfig });
  await ensureCrd(admin);
  const ns = `bench-idle-${Date.now().toString(36)}`;
  await createNamespace(admin, ns, { [NODE_AGENT_LABEL]: NODE_AGENT_ENABLED });
  const scratch = mkdtempSync(join(tmpdir(), "cocoonset-bench-idle-"));
  const counter = await startWriteCounter(cluster.kubeconfig, join(scratch, "controller.json"));
  // A second proxy only for the apiserver's /metrics (it adds the token; its counts are unused).
  const metricsProxy = await startWriteCounter(cluster.kubeconfig, join(scratch, "metrics.json"));
  const proxied = JSON.parse(readFileSync(metricsProxy.kubeconfig, "utf8")) as {
    clusters: { cluster: { server: string } }[];
  };
  const metricsUrl = `${proxied.clusters[0].cluster.server}/metrics`;
  const apiSnapshot = async (): Promise<ApiWrites | null> => {
    const text = await scrape(metricsUrl, 10_000);
    return text === null ? null : apiWrites(text);
  };
  const controller = await startOurs(counter.kubeconfig, cluster.registry, ns);
  const cpu = () => cpuSeconds(controller.pid) ?? NaN;
  const tracker = new PodTracker(admin, ns);
  await tracker.start();
  const fleets = layout(o.agents, o.fleets);
  const active = fleets.flatMap((f) => f.active);
  const idle = fleets.flatMap((f) => f.idle);
  const fleetOf = (pod: string) => fleets.find((f) => pod.startsWith(`${f.name}-`))!;
  let leaseWrites = 0;
  const renew = async (pods: string[], at = new Date()) => {
    const byFleet = new Map<string, string[]>();
    for (const p of pods) {
      const f = fleetOf(p).name;
      byFleet.set(f, [...(byFleet.get(f) ?? []), p]);
    }
    await Promise.all([...byFleet].map(([f, ps]) => markActivity(admin, ns, f, ps, HOLDER, at)));
    leaseWrites += pods.length;
  };
  let renewer: NodeJS.Timeout | undefined;
  try {
    // 1. The fleets, every VM running.
    // The waits' limits grow with the fleet (they are there to stop a stuck run, not to time it).
    const slow = Math.max(1, o.agents / 200);
    const cpuStart = cpu();
    const c0 = counter.snapshot();
    note(`creating ${fleets.length} fleet(s), ${o.agents} agents, idle after ${o.after}`);
    await Promise.all(
      fleets.map((f) =>
        admin.create(paths.cocoonSets(ns), {
          apiVersion: API_VERSION,
          kind: KIND,
          metadata: { name: f.name, namespace: ns },
          spec: { agent: { image: IMAGE, replicas: f.replicas }, idle: { after: o.after } },
        }),
      ),
    );
    await within(
      Promise.all([...active, ...idle].map((p) => tracker.when(p, vmReady))),
      300_000 * slow,
      `${o.agents} VMs ready`,
    );
    const convergeCpuS = cpu() - cpuStart;
    const convergeWrites = writes(delta(c0, counter.snapshot()));
    note(`every VM ready; the controller used ${convergeCpuS.toFixed(1)} CPU s`);

    // 2. Every member used once now; then only the active tenth, every after/4.
    const t0 = Date.now();
    const renewEveryMs = Math.max(1000, Math.floor(o.afterMs / 4));
    const hibernatedAt = new Map(idle.map((p) => [p, tracker.when(p, vmHibernated)]));
    // Counted until the steady window ends (the hand-set suspend hibernates them all later).
    const activeHibernated: string[] = [];
    let countActive = true;
    for (const p of active)
      void tracker.when(p, vmHibernated).then(() => {
        if (countActive) activeHibernated.push(p);
      });
    await renew([...active, ...idle], new Date(t0));
    renewer = setInterval(() => {
      renew(active).catch((e: Error) => note(`renewal failed: ${e.message}`));
    }, renewEveryMs);
    const idleCpu0 = cpu();
    const idleC0 = counter.snapshot();
    note(
      `renewed all ${o.agents} Leases; ${active.length} active, renewed every ${renewEveryMs} ms`,
    );
    const hibernatedTimes = await within(
      Promise.all(idle.map((p) => hibernatedAt.get(p)!)),
      o.afterMs + 300_000 * slow,
      `${idle.length} idle members hibernated`,
    );
    const idlePhaseMs = Date.now() - t0;
    const idleCpuS = cpu() - idleCpu0;
    const idleWrites = delta(idleC0, counter.snapshot());
    // Each member's deadline as the controller saw it: its recorded last activity + after.
    const records = new Map<string, Record<string, { lastActivity?: string }>>();
    for (const f of fleets) {
      const cs = await admin.get<CocoonSet>(paths.cocoonSet(ns, f.name));
      records.set(f.name, cs.status?.vms ?? {});
    }
    const hibernateDelays = idle.map((p, i) => {
      const f = fleetOf(p);
      const recorded = Date.parse(
        records.get(f.name)?.[p.slice(f.name.length + 1)]?.lastActivity ?? "",
      );
      const last = Number.isFinite(recorded) ? Math.max(recorded, t0) : t0;
      return hibernatedTimes[i] - (last + o.afterMs);
    });
    const hibernate = percentiles(hibernateDelays);
    note(
      `every idle member hibernated; deadline → hibernated p50 ${hibernate.p50} ms, p99 ${hibernate.p99} ms`,
    );

    // The policy's CocoonHibernations record each hibernation after the pod reports it: the
    // steady window starts once every one of them says Hibernated (before, the controller is
    // still catching up, which is not the steady state).
    const settleT = Date.now();
    const idleCrs = new Set(idle.map((p) => `${p}-idle`));
    await watchUntil<CocoonHibernation>(
      admin,
      paths.cocoonHibernations(ns),
      {},
      (l) =>
        l.filter((h) => idleCrs.has(h.metadata.name ?? "") && h.status?.phase === "Hibernated")
          .length === idleCrs.size,
      300_000 * slow,
      "every idle member's CocoonHibernation Hibernated",
    );
    const crSettleMs = Date.now() - settleT;
    note(`every idle member's CocoonHibernation Hibernated ${crSettleMs} ms after the last VM`);

    // 3. The steady state: only the active tenth's renewals.
    note(`steady window of ${o.windowMs / 1000} s`);
    const api0 = await apiSnapshot();
    const steadyC0 = counter.snapshot();
    const steadyCpu0 = cpu();
    const steadyLeases0 = leaseWrites;
    const w0 = Date.now();
    await new Promise((r) => setTimeout(r, o.windowMs));
    const windowMin = (Date.now() - w0) / 60_000;
    const api1 = await apiSnapshot();
    countActive = false;
    const steadyRequests = delta(steadyC0, counter.snapshot());
    const perMin = (n: number) => Math.round((n / windowMin) * 10) / 10;
    const steady = {
      windowSeconds: Math.round(windowMin * 60),
      benchLeaseWritesPerMin: perMin(leaseWrites - steadyLeases0),
      apiserverLeaseWritesPerMin: api0 && api1 ? perMin(api1.leases - api0.leases) : null,
      apiserverWritesPerMin: api0 && api1 ? perMin(api1.all - api0.all) : null,
      controllerWritesPerMin: perMin(writes(steadyRequests)),
      controllerRequests: steadyRequests,
      controllerCpuSeconds: Math.round((cpu() - steadyCpu0) * 100) / 100,
      controllerCpuSecondsPerMin: Math.round(((cpu() - steadyCpu0) / windowMin) * 100) / 100,
    };
    note(`steady: ${JSON.stringify({ ...steady, controllerRequests: undefined })}`);

    // 4. Wake on demand: a few members one at a time, then the rest at once.
    const wakeCpu0 = cpu();
    const wakeC0 = counter.snapshot();
    const singles = idle.slice(0, Math.min(SINGLE_WAKES, Math.floor(idle.length / 2)));
    const singleDelays: number[] = [];
    for (const p of singles) {
      const ready = tracker.when(p, vmReady);
      const t = Date.now();
      await renew([p], new Date(t));
      singleDelays.push((await within(ready, 120_000, `${p} ready again`)) - t);
    }
    // Then a batch of BATCH_WAKES members at once, then the rest at once.
    const wakeAtOnce = async (pods: string[], what: string) => {
      const ready = pods.map((p) => tracker.when(p, vmReady));
      const t = Date.now();
      await renew(pods, new Date(t));
      return (await within(Promise.all(ready), 600_000, what)).map((x) => x - t);
    };
    const afterSingles = idle.slice(singles.length);
    const batch = afterSingles.slice(0, BATCH_WAKES);
    const rest = afterSingles.slice(batch.length);
    const batchDelays = await wakeAtOnce(batch, `${batch.length} members ready again`);
    const restDelays = rest.length > 0 ? await wakeAtOnce(rest, "the rest ready again") : [];
    const wakeCpuS = cpu() - wakeCpu0;
    const wakeWrites = delta(wakeC0, counter.snapshot());
    const wakeOne = percentiles(singleDelays);
    const wakeBatch = percentiles(batchDelays);
    const wakeAll = percentiles(restDelays);
    note(
      `woken one at a time p50 ${wakeOne.p50} ms; ${batch.length} at once p50 ${wakeBatch.p50} ms, p99 ${wakeBatch.p99} ms; the other ${rest.length} at once p50 ${wakeAll.p50} ms, p99 ${wakeAll.p99} ms`,
    );

    // 5. The baseline: a hand-set suspend, then `suspend: false`.
    const suspendFleet = (suspend: boolean) =>
      Promise.all(
        fleets.map((f) =>
          admin.patch(paths.cocoonSet(ns, f.name), { spec: { suspend } }, PatchType.merge),
        ),
      );
    const suspendT = Date.now();
    const all = [...active, ...idle];
    const hibernatedAll = all.map((p) => tracker.when(p, vmHibernated));
    await suspendFleet(true);
    // Every VM hibernated is the figure; the phase `Suspended` is recorded when it comes.
    let suspendedPhase = true;
    await within(Promise.all(hibernatedAll), 120_000 * slow, "every VM hibernated by the suspend");
    await watchUntil<CocoonSet>(
      admin,
      paths.cocoonSets(ns),
      {},
      (l) =>
        l.length === fleets.length &&
        l.every(
          (cs) =>
            cs.status?.phase === "Suspended" &&
            cs.status.observedGeneration === cs.metadata.generation,
        ),
      30_000,
      "every fleet Suspended",
    ).catch(async (e: Error) => {
      suspendedPhase = false;
      const phases = await Promise.all(
        fleets.map((f) => admin.get<CocoonSet>(paths.cocoonSet(ns, f.name))),
      );
      note(
        `${e.message}: ${phases.map((cs) => `${cs.metadata.name} ${cs.status?.phase} ${JSON.stringify(cs.status?.conditions)}`).join("; ")}`,
      );
    });
    const suspendMs = Date.now() - suspendT;
    note(`suspended by hand in ${suspendMs} ms`);
    // Every member in use as it wakes, or the policy would find the woken fleet idle.
    await renew(all);
    const unsuspendCpu0 = cpu();
    const unsuspendC0 = counter.snapshot();
    const readyAll = all.map((p) => tracker.when(p, vmReady));
    const tUn = Date.now();
    await suspendFleet(false);
    const unsuspendDelays = (
      await within(Promise.all(readyAll), 300_000 * slow, "every VM ready after suspend: false")
    ).map((t) => t - tUn);
    const unsuspendCpuS = cpu() - unsuspendCpu0;
    const unsuspendWrites = delta(unsuspendC0, counter.snapshot());
    const unsuspend = percentiles(unsuspendDelays);
    note(`suspend: false → ready p50 ${unsuspend.p50} ms, p99 ${unsuspend.p99} ms`);

    const round2 = (x: number) => Math.round(x * 100) / 100;
    return {
      layout: fleets.map((f) => ({
        fleet: f.name,
        members: f.replicas + 1,
        active: f.active.length,
        idle: f.idle.length,
      })),
      idleAfter: o.after,
      renewEveryMs,
      converge: { controllerCpuSeconds: round2(convergeCpuS), controllerWrites: convergeWrites },
      hibernateOnIdle: {
        deadlineToHibernatedMs: hibernate,
        activeMembersHibernated: activeHibernated.length,
        phaseMs: idlePhaseMs,
        crSettleAfterLastVmMs: crSettleMs,
        controllerCpuSeconds: round2(idleCpuS),
        controllerWrites: writes(idleWrites),
        controllerRequests: idleWrites,
      },
      steady,
      wakeOnDemand: {
        oneAtATime: { renewalToReadyMs: wakeOne },
        batch: { members: batch.length, renewalToReadyMs: wakeBatch },
        atOnce: { members: rest.length, renewalToReadyMs: wakeAll },
        controllerCpuSeconds: round2(wakeCpuS),
        controllerWrites: writes(wakeWrites),
        controllerRequests: wakeWrites,
      },
      handSetSuspend: {
        suspendToSuspendedMs: suspendMs,
        suspendedPhaseReached: suspendedPhase,
        unsuspendToReadyMs: unsuspend,
        controllerCpuSeconds: round2(unsuspendCpuS),
        controllerWrites: writes(unsuspendWrites),
        controllerRequests: unsuspendWrites,
      },
      benchLeaseWrites: leaseWrites,
      controllerCpuSecondsTotal: round2(cpu() - cpuStart),
    };
  } catch (e) {
    note(`controller output:\n${controller.tail()}`);
    throw e;
  } finally {
    clearInterval(renewer);
    await tracker.stop();
    await controller.stop();
    await counter.close();
    await metricsProxy.close();
    admin.close();
    rmSync(scratch, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const values = benchFlags(USAGE, {
    agents: { type: "string", default: "200" },
    fleets: { type: "string", default: "1" },
    after: { type: "string", default: "1m" },
    "window-seconds": { type: "string", default: "60" },
    name: { type: "string" },
  });
  const agents = Number(values.agents);
  const fleets = Number(values.fleets);
  const windowSeconds = Number(values["window-seconds"]);
  if (!Number.isInteger(fleets) || fleets < 1) throw new Error("--fleets must be an integer >= 1");
  if (!Number.isInteger(agents) || agents < 2 * fleets || agents > 1001 * fleets)
    throw new Error(
      `--agents must be an integer from ${2 * fleets} to ${1001 * fleets} for ${fleets} fleet(s) (got ${values.agents})`,
    );
  if (!Number.isFinite(windowSeconds) || windowSeconds < 10)
    throw new Error("--window-seconds must be >= 10");
  const afterMs = parseDuration(values.after);
  if (afterMs < 60_000)
    throw new Error(`--after must be a duration of at least 1m (got ${values.after})`);
  const name = values.name ?? String(agents);
  const run = startRun(`idle-${name}`);
  const r = await withCluster("cocoonset-bench-idle", 2, (cluster) =>
    measure(cluster, {
      agents,
      fleets,
      after: values.after,
      afterMs,
      windowMs: windowSeconds * 1000,
    }),
  );
  const row = (label: string, p: { n: number; p50: number; p99: number; max: number }) => [
    label,
    String(p.n),
    `${p.p50} ms`,
    `${p.p99} ms`,
    `${p.max} ms`,
  ];
  const activeCount = r.layout.reduce((n, f) => n + f.active, 0);
  console.log(
    `\n${agents} agents in ${fleets} fleet(s), idle after ${values.after}, ${activeCount} active (renewed every ${r.renewEveryMs / 1000} s):\n` +
      table([
        ["delay", "members", "p50", "p99", "max"],
        row("idle deadline → VM hibernated", r.hibernateOnIdle.deadlineToHibernatedMs),
        row("renewal → VM ready, one at a time", r.wakeOnDemand.oneAtATime.renewalToReadyMs),
        row(
          `renewal → VM ready, ${r.wakeOnDemand.batch.members} at once`,
          r.wakeOnDemand.batch.renewalToReadyMs,
        ),
        row("renewal → VM ready, the rest at once", r.wakeOnDemand.atOnce.renewalToReadyMs),
        row("suspend: false → VM ready (baseline)", r.handSetSuspend.unsuspendToReadyMs),
      ]) +
      "\n\nsteady state, per minute:\n" +
      table([
        ["figure", "value"],
        ["Lease writes by the benchmark (the gateway)", String(r.steady.benchLeaseWritesPerMin)],
        ["apiserver: lease writes (all clients)", String(r.steady.apiserverLeaseWritesPerMin)],
        ["apiserver: writes (all resources, all clients)", String(r.steady.apiserverWritesPerMin)],
        ["controller: writes", String(r.steady.controllerWritesPerMin)],
        ["controller: CPU seconds", String(r.steady.controllerCpuSecondsPerMin)],
      ]) +
      "\n\ncontroller CPU seconds by phase:\n" +
      table([
        ["phase", "CPU s", "writes"],
        [
          "create and boot",
          String(r.converge.controllerCpuSeconds),
          String(r.converge.controllerWrites),
        ],
        [
          "renewals until every idle member hibernated",
          String(r.hibernateOnIdle.controllerCpuSeconds),
          String(r.hibernateOnIdle.controllerWrites),
        ],
        [
          "wake on demand",
          String(r.wakeOnDemand.controllerCpuSeconds),
          String(r.wakeOnDemand.controllerWrites),
        ],
        [
          "suspend: false until every VM ready",
          String(r.handSetSuspend.controllerCpuSeconds),
          String(r.handSetSuspend.controllerWrites),
        ],
      ]),
  );
  if (r.hibernateOnIdle.activeMembersHibernated > 0)
    console.log(`\n${r.hibernateOnIdle.activeMembersHibernated} active member(s) were hibernated`);
  const bars: Bar[] = [];
  const add = (group: string, p: { p50: number; p99: number }) => {
    bars.push({ group, series: "p50", value: p.p50 }, { group, series: "p99", value: p.p99 });
  };
  add("idle deadline → hibernated", r.hibernateOnIdle.deadlineToHibernatedMs);
  add("renewal → ready (one)", r.wakeOnDemand.oneAtATime.renewalToReadyMs);
  add(
    `renewal → ready (${r.wakeOnDemand.batch.members} at once)`,
    r.wakeOnDemand.batch.renewalToReadyMs,
  );
  if (r.wakeOnDemand.atOnce.members > 0)
    add("renewal → ready (the rest at once)", r.wakeOnDemand.atOnce.renewalToReadyMs);
  add("suspend: false → ready", r.handSetSuspend.unsuspendToReadyMs);
  const written = await run.write(
    { agents, fleets, ...r },
    barChart({
      title: `Idle policy, ${agents} agents (${activeCount} active), idle after ${values.after}`,
      yTitle: "ms",
      bars,
    }),
  );
  note(`wrote ${written.join(", ")}`);
}

await main();
