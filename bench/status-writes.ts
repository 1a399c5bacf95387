/**
 * Benchmark: what one write of a big fleet's CocoonSet costs on a real apiserver, with the
 * CRD's status lists as the project declares them (atomic: `agents[]`, `toolboxes[]`, the
 * record `vms`) against the same CRD with them keyed (`agents[]` by slot, `toolboxes[]` by
 * name, `vms` by member), as the peer's CRD keys `agents[]`: the baseline.
 *
 * For each side, in rounds whose order alternates, the CRD is replaced by that side's, a
 * CocoonSet of 1,000 sub-agents gets a converged fleet's status (every agent's entry and the
 * record of every member, as the engine writes them), and then the two writes a rebuild and a
 * pass make are timed: an annotation PATCH (the rebuild history's, on the object) and a status
 * PATCH (one agent's phase). Prints the object's size, its managed fields' size and the medians;
 * writes bench/results/status-writes.json. Not a test: nothing is asserted about time.
 *
 * Runs against `$KUBECONFIG` when set (its CocoonSet CRD is replaced during the run and put back
 * as the project generates it), else starts a private embedded cluster and stops it after.
 *
 * Usage: `./node_modules/.bin/node dist/bench/status-writes.js [--members N] [--rounds N]`
 */
import { createHash, randomBytes, randomUUID } from "node:crypto";
import { ensureCrd } from "../engine/execute/install-crd.js";
import { KubeClient, PatchType, paths } from "../engine/kube/index.js";
import { vmNameFor } from "../engine/pods/pod-builder.js";
import { API_VERSION } from "../engine/spec/constants.js";
import type { AgentStatus, VMRecord } from "../engine/spec/generated/types.js";
import {
  ANNOTATIONS,
  KIND,
  cocoonSetCrd,
  type CocoonSet,
  type CrdManifest,
} from "../engine/spec/index.js";
import { sleep } from "../engine/kube/sleep.js";
import {
  benchFlags,
  existingKubeconfig,
  median,
  note,
  startRun,
  table,
  withCluster,
  createNamespace,
} from "./support.js";

/** What `--help` prints. */
const USAGE = `node dist/bench/status-writes.js: one write of a big fleet's CocoonSet, the CRD's
status lists atomic (the project's) against keyed (the baseline), alternating rounds; against
$KUBECONFIG when it names an existing file (its CRD is replaced, then put back), else a private
cluster (bench/README.md).

  --members N  sub-agents of the fleet (default 1000)
  --rounds N   rounds; each times 10 writes of each kind per side (default 4)
  -h, --help   this text`;

/** Writes of each kind timed per side and round. */
const WRITES = 10;

type Side = "atomic" | "keyed";

const CRD_PATH = `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${cocoonSetCrd.metadata.name}`;

interface StatusNode {
  properties: Record<string, Record<string, unknown>>;
}

/** The project's CRD, or the same with the status lists keyed as the baseline keys them. */
function crdOf(side: Side): CrdManifest {
  const crd = structuredClone(cocoonSetCrd) as CrdManifest & {
    spec: { versions: { schema: { openAPIV3Schema: { properties: { status: StatusNode } } } }[] };
  };
  if (side === "keyed")
    for (const v of crd.spec.versions) {
      const status = v.schema.openAPIV3Schema.properties.status.properties;
      Object.assign(status.agents, {
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["slot"],
      });
      Object.assign(status.toolboxes, {
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
      });
      delete status.vms["x-kubernetes-map-type"];
    }
  return crd;
}

/** Replaces the CRD with `side`'s and waits until a new object's managed fields show it. */
async function useCrd(client: KubeClient, ns: string, side: Side): Promise<void> {
  const live = await client.get<CrdManifest>(CRD_PATH);
  const want = crdOf(side);
  await client.replace(CRD_PATH, { ...want, metadata: { ...want.metadata, ...live.metadata } });
  const deadline = Date.now() + 60_000;
  for (let attempt = 1, delay = 50; ; attempt++, delay = Math.min(delay * 2, 1000)) {
    // A name per attempt: no wait for the last probe to go (none has a finalizer anyway).
    const probe = `probe-${side}-${attempt}`;
    await client.create<CocoonSet>(paths.cocoonSets(ns), cocoonSet(ns, probe, 1));
    const written = await client.patch<CocoonSet>(
      paths.cocoonSetStatus(ns, probe),
      { status: fleetStatus(ns, probe, 1) },
      PatchType.merge,
    );
    await client.delete(paths.cocoonSet(ns, probe), { gracePeriodSeconds: 0 });
    if (ownedAgents(written) === side) return;
    if (Date.now() > deadline)
      throw new Error(`the apiserver did not serve the ${side} CRD in 60 s`);
    await sleep(delay);
  }
}

/** Whether the status' managed fields hold `agents` as one field or one per entry. */
function ownedAgents(cs: CocoonSet): "atomic" | "keyed" | "none" {
  type Managed = { subresource?: string; fieldsV1?: { "f:status"?: Record<string, unknown> } };
  const managed = (cs.metadata as { managedFields?: Managed[] }).managedFields ?? [];
  const agents = managed.find((m) => m.subresource === "status")?.fieldsV1?.["f:status"]?.[
    "f:agents"
  ] as Record<string, unknown> | undefined;
  if (!agents) return "none";
  return Object.keys(agents).some((k) => k.startsWith("k:")) ? "keyed" : "atomic";
}

function cocoonSet(ns: string, name: string, members: number): CocoonSet {
  return {
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: { name, namespace: ns },
    spec: { agent: { image: "agents/coder:1", replicas: members } },
  };
}

/** A converged fleet's status as the engine writes it: every agent Running, every member recorded. */
function fleetStatus(ns: string, name: string, members: number): CocoonSet["status"] {
  const agents: AgentStatus[] = [];
  const vms: Record<string, VMRecord> = {};
  for (let slot = 0; slot <= members; slot++) {
    const vm = vmNameFor(ns, name, slot);
    agents.push({
      slot,
      role: slot === 0 ? "main" : "sub-agent",
      podName: `${name}-${slot}`,
      vmName: vm,
      vmID: randomUUID(),
      ip: `10.${slot >> 16}.${(slot >> 8) & 255}.${slot & 255}`,
      phase: "Running",
      ...(slot > 0 ? { forkedFrom: vmNameFor(ns, name, 0) } : {}),
    });
    const digest = createHash("sha256").update(randomBytes(16)).digest("hex");
    vms[String(slot)] = { vm, podUID: randomUUID(), createToken: digest };
  }
  return {
    observedGeneration: 1,
    phase: "Running",
    readyAgents: members + 1,
    desiredAgents: members + 1,
    readyToolboxes: 0,
    desiredToolboxes: 0,
    agents,
    vms,
  };
}

interface SideFigures {
  objectKiB: number;
  managedFieldsKiB: number;
  /** The rebuild history's write: an annotation PATCH of the object. */
  annotationMs: number[];
  /** A pass's status write: one agent's phase. */
  statusMs: number[];
}

async function measure(
  client: KubeClient,
  ns: string,
  side: Side,
  round: number,
  members: number,
  into: SideFigures,
): Promise<void> {
  await useCrd(client, ns, side);
  const name = `fleet-${side}-${round}`;
  await client.create<CocoonSet>(paths.cocoonSets(ns), cocoonSet(ns, name, members));
  const status = fleetStatus(ns, name, members);
  const stored = await client.patch<CocoonSet>(
    paths.cocoonSetStatus(ns, name),
    { status },
    PatchType.merge,
  );
  into.objectKiB = Math.round(JSON.stringify(stored).length / 102.4) / 10;
  const managed = (stored.metadata as { managedFields?: unknown }).managedFields ?? [];
  into.managedFieldsKiB = Math.round(JSON.stringify(managed).length / 102.4) / 10;
  for (let i = 0; i < WRITES; i++) {
    const t0 = performance.now();
    await client.patch(
      paths.cocoonSet(ns, name),
      { metadata: { annotations: { [ANNOTATIONS.rebuildHistory]: `{"${i + 1}":{"count":1}}` } } },
      PatchType.merge,
    );
    into.annotationMs.push(Math.round(performance.now() - t0));
    const agents = (status?.agents ?? []).map((a) =>
      a.slot === i + 1 ? { ...a, phase: i % 2 ? "Running" : "Pending" } : a,
    );
    const t1 = performance.now();
    await client.patch(paths.cocoonSetStatus(ns, name), { status: { agents } }, PatchType.merge);
    into.statusMs.push(Math.round(performance.now() - t1));
  }
  await client.delete(paths.cocoonSet(ns, name), { gracePeriodSeconds: 0 });
}

async function main(): Promise<void> {
  const values = benchFlags(USAGE, {
    members: { type: "string", default: "1000" },
    rounds: { type: "string", default: "4" },
  });
  const members = Number(values.members);
  const rounds = Number(values.rounds);
  if (!Number.isInteger(members) || members < 1 || members > 1000)
    throw new Error("--members must be a whole number from 1 to 1000 (the CRD's bound)");
  if (!Number.isInteger(rounds) || rounds < 1)
    throw new Error("--rounds must be a whole number of rounds, 1 or more");
  const run = startRun("status-writes");
  const kubeconfig = existingKubeconfig();
  const body = async (config: string) => {
    const client = new KubeClient({ kubeconfig: config });
    const ns = `bench-status-${randomBytes(3).toString("hex")}`;
    const sides: Record<Side, SideFigures> = {
      atomic: { objectKiB: 0, managedFieldsKiB: 0, annotationMs: [], statusMs: [] },
      keyed: { objectKiB: 0, managedFieldsKiB: 0, annotationMs: [], statusMs: [] },
    };
    try {
      await ensureCrd(client);
      await createNamespace(client, ns);
      for (let round = 1; round <= rounds; round++) {
        const order: Side[] = round % 2 ? ["keyed", "atomic"] : ["atomic", "keyed"];
        for (const side of order) {
          note(`round ${round} of ${rounds}: ${side}`);
          await measure(client, ns, side, round, members, sides[side]);
        }
      }
    } finally {
      // The project's CRD back, whatever happened.
      await useCrd(client, ns, "atomic").catch((e: Error) =>
        note(`CRD not restored: ${e.message}`),
      );
      await client.delete(paths.namespace(ns)).catch(() => undefined);
      client.close();
    }
    return sides;
  };
  const sides = kubeconfig
    ? await body(kubeconfig)
    : await withCluster("cocoonset-bench-status", 1, (c) => body(c.kubeconfig));
  const ratio = (a: number, b: number) => (b === 0 ? "-" : (a / b).toFixed(2));
  const [a, k] = [sides.atomic, sides.keyed];
  const rows = [
    [`CocoonSet of 1 + ${members} agents`, "atomic", "keyed", "atomic/keyed"],
    ["object (KiB)", String(a.objectKiB), String(k.objectKiB), ratio(a.objectKiB, k.objectKiB)],
    [
      "managed fields (KiB)",
      String(a.managedFieldsKiB),
      String(k.managedFieldsKiB),
      ratio(a.managedFieldsKiB, k.managedFieldsKiB),
    ],
    [
      "annotation PATCH, the rebuild history's (ms, median)",
      String(median(a.annotationMs)),
      String(median(k.annotationMs)),
      ratio(median(a.annotationMs), median(k.annotationMs)),
    ],
    [
      "status PATCH, one agent's phase (ms, median)",
      String(median(a.statusMs)),
      String(median(k.statusMs)),
      ratio(median(a.statusMs), median(k.statusMs)),
    ],
  ];
  process.stdout.write(`${table(rows)}\n`);
  const written = await run.write({ members, rounds, writesPerRound: WRITES, sides });
  note(`written: ${written.join(", ")}`);
}

main().catch((e: unknown) => {
  process.stderr.write(`${e instanceof Error ? e.message : String(e)}\n`);
  process.exitCode = 1;
});
