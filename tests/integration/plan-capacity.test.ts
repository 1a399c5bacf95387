/**
 * `cocoonset plan` prints the capacity forecast (engine/capacity, engine/execute/capacity.ts)
 * against live nodes whose allocatable the test sets: a new fleet whose main agent and
 * sub-agents one node can hold, one it cannot (the best node's shortfall), and a scale-up of
 * a live fleet whose sub-agents, bound to the main agent's node, do not all fit (the slots the
 * node would refuse). Then `up`'s own pass creates them and the node really refuses those
 * slots (the cluster's kubelet admission), as the forecast said.
 *
 * The fleet runs in a node pool of its own: one simulated node carries the pool's label, so
 * the scheduler has nowhere else to put the main agent.
 *
 * And the forecast of a live fleet's idle and expiry policies (engine/idle/forecast.ts):
 * each member's last activity read from its pod and its activity Lease, the moments the
 * policy would hibernate each member and suspend the fleet, and the expiry.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { stringify } from "yaml";
import { converge, runPass } from "../../engine/execute/index.js";
import { markActivity } from "../../engine/execute/activity.js";
import { ANNOTATIONS, type CocoonSet } from "../../engine/spec/index.js";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { paths, waitForObject, type KubeObject } from "../../engine/kube/index.js";
import { adminClient, suffix, testKubeconfig, withNamespace } from "../support/cluster.js";
import { poolNode } from "../support/pool-node.js";

const client = adminClient();
const run = promisify(execFile);
const BIN = fileURLToPath(new URL("../../../bin/cocoonset", import.meta.url));
const IMAGE = "ghcr.io/cocoonstack/agent:1";

interface PodObject extends KubeObject {
  status?: { phase?: string; reason?: string };
}

interface CapacityJSON {
  fits: boolean;
  nodes: {
    node: string;
    free: Record<string, string>;
    requested: Record<string, string>;
    slots: string[];
    refused: string[];
    short: { resource: string; free: string; requested: string }[];
  }[];
  placements: {
    slot: string;
    slots: string[];
    candidates: number;
    fits: boolean;
    node: string | null;
    short: { resource: string; free: string; requested: string }[];
  }[];
}

function spec(pool: string, replicas: number): Record<string, unknown> {
  return {
    nodePool: pool,
    agent: { image: IMAGE, replicas, resources: { requests: { cpu: "1", memory: "1Gi" } } },
  };
}

describe("cocoonset plan: the capacity forecast", { timeout: 300_000 }, () => {
  before(() => ensureCrd(client));

  test("names the node that holds a new fleet, the shortfall when none can, and the slots a scale-up's node would refuse", async (t) => {
    const ns = await withNamespace(t, "plan-capacity");
    const pool = `cap-${suffix()}`;
    const node = await poolNode(t, pool, { cpu: "4", memory: "16Gi", pods: "20" });
    const dir = mkdtempSync(join(tmpdir(), "plan-capacity-"));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, "cocoonset.yaml");
    const name = "fleet";
    const write = (s: unknown) =>
      writeFileSync(
        file,
        stringify({
          apiVersion: "cocoonset.cocoonstack.io/v1",
          kind: "CocoonSet",
          metadata: { name, namespace: ns },
          spec: s,
        }),
      );
    const plan = async (...args: string[]) =>
      (
        await run(BIN, ["plan", "-f", file, "--kubeconfig", testKubeconfig(), ...args], {
          env: { ...process.env, KUBECONFIG: "" },
        })
      ).stdout;
    const capacity = async () =>
      (JSON.parse(await plan("--json")) as { capacity: CapacityJSON }).capacity;

    // A new fleet: the main agent and two sub-agents (3 cpu) fit the pool's one node (4 cpu).
    write(spec(pool, 2));
    let c = await capacity();
    assert.deepEqual(c.nodes, []);
    assert.deepEqual(
      c.placements.map((p) => [p.slot, p.slots, p.candidates, p.fits, p.node]),
      [["0", ["0", "1", "2"], 1, true, node]],
    );
    assert.match(
      await plan(),
      new RegExp(
        `^${node} \\(scheduler\\) +cpu 4, memory 16Gi, pods 20 +cpu 3, memory 3Gi, pods 3 \\(slot 0 and 2 pods bound next to it\\) +fits`,
        "m",
      ),
    );

    // Five sub-agents: 6 cpu, 6Gi on a node with 4 cpu: the best (only) node's shortfall.
    write(spec(pool, 5));
    c = await capacity();
    assert.equal(c.fits, false);
    assert.deepEqual(
      c.placements.map((p) => [p.fits, p.node, p.short]),
      [[false, node, [{ resource: "cpu", free: "4", requested: "6" }]]],
    );
    assert.match(
      await plan(),
      /no node holds slot 0 and 5 pods bound next to it \(1 node matches\); best pool-cap-\w+: cpu 4 free, 6 requested/,
    );
    assert.equal((await client.list(paths.pods(ns))).items.length, 0, "plan creates nothing");

    // The fleet with two sub-agents, converged: 3 of the node's 4 cpu taken.
    write(spec(pool, 2));
    await client.create(paths.cocoonSets(ns), {
      apiVersion: "cocoonset.cocoonstack.io/v1",
      kind: "CocoonSet",
      metadata: { name, namespace: ns },
      spec: spec(pool, 2),
    });
    const done = await converge(client, ns, name, { timeoutMs: 120_000 });
    assert.deepEqual(
      done.failures.map((f) => f.message),
      [],
    );

    // Scale to five: slots 3-5 bound to the main agent's node, which has 1 cpu left: slots 4 and 5 would be refused.
    write(spec(pool, 5));
    c = await capacity();
    assert.deepEqual(
      c.nodes.map((n) => [n.node, n.free.cpu, n.requested.cpu, n.slots, n.refused, n.short]),
      [
        [
          node,
          "1",
          "3",
          ["3", "4", "5"],
          ["4", "5"],
          [{ resource: "cpu", free: "1", requested: "3" }],
        ],
      ],
    );
    assert.deepEqual(c.placements, []);
    const text = await plan();
    assert.match(text, /^slot 3: create$/m);
    assert.match(
      text,
      new RegExp(
        `^${node} +cpu 1, memory 13Gi, pods 17 +cpu 3, memory 3Gi, pods 3 \\(slots 3–5\\) +refuses slots 4–5: cpu 1 free, 3 requested$`,
        "m",
      ),
    );

    // What `up` would do: the node refuses as many of the new slots as the forecast said.
    // Which ones is the order the creates reach the node in: the pass sends them in parallel
    // (fan-out), and the kubelet admits pods as they arrive.
    await client.patch(paths.cocoonSet(ns, name), { spec: { agent: { replicas: 5 } } });
    // One pass, as `up`'s first: it creates slots 3-5 (the next would start rebuilding the refused ones).
    await runPass(client, await client.get<CocoonSet>(paths.cocoonSet(ns, name)));
    const outcomes = await Promise.all(
      [3, 4, 5].map((slot) =>
        waitForObject<PodObject>(
          client,
          paths.pods(ns),
          `${name}-${slot}`,
          (p) => p?.status?.phase === "Running" || p?.status?.phase === "Failed",
          { timeoutMs: 60_000, description: `slot ${slot} to run or be refused` },
        ).then((p) => `${p?.status?.phase}/${p?.status?.reason ?? ""}`),
      ),
    );
    assert.deepEqual(outcomes.sort(), ["Failed/OutOfcpu", "Failed/OutOfcpu", "Running/"]);
  });
});

interface PolicyJSON {
  idle: {
    after: string;
    lastActivity: Record<string, string>;
    next: { at: string; hibernate: string[]; wake: string[]; fleet?: string }[];
  };
  expiry: { after: string; since: string; action: string; expiresAt: string; due: boolean };
}

describe("cocoonset plan: the idle and expiry policies' forecast", { timeout: 300_000 }, () => {
  before(() => ensureCrd(client));

  test("a live fleet: each member's last activity from its pod and its Lease, when the policy hibernates a member and suspends the fleet, when the fleet expires; nothing written", async (t) => {
    const ns = await withNamespace(t, "plan-policy");
    const dir = mkdtempSync(join(tmpdir(), "plan-policy-"));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const name = "idler";
    const cocoonSet = {
      apiVersion: "cocoonset.cocoonstack.io/v1",
      kind: "CocoonSet",
      metadata: { name, namespace: ns },
      spec: {
        agent: { image: IMAGE, replicas: 2 },
        idle: { after: "1h" },
        expiry: { after: "48h", since: "idle", action: "delete" },
      },
    };
    const file = join(dir, "cocoonset.yaml");
    writeFileSync(file, stringify(cocoonSet));
    await client.create(paths.cocoonSets(ns), cocoonSet);
    const done = await converge(client, ns, name, { timeoutMs: 120_000 });
    assert.deepEqual(
      done.failures.map((f) => f.message),
      [],
    );
    const created = new Map<string, number>();
    for (const pod of (await client.list(paths.pods(ns))).items)
      created.set(pod.metadata.name ?? "", Date.parse(pod.metadata.creationTimestamp ?? ""));
    // Slot 1 was in use half an hour after its pod started: its Lease says so.
    const slot1 = created.get(`${name}-1`)! + 30 * 60_000;
    await markActivity(client, ns, name, [`${name}-1`], "plan-test", new Date(slot1));
    const before = await client.get<CocoonSet>(paths.cocoonSet(ns, name));

    const out = await run(BIN, ["plan", "-f", file, "--kubeconfig", testKubeconfig(), "--json"], {
      env: { ...process.env, KUBECONFIG: "" },
    });
    const policy = (JSON.parse(out.stdout) as { policy: PolicyJSON }).policy;
    const iso = (ms: number) => new Date(ms).toISOString();
    const hour = 3_600_000;
    assert.deepEqual(policy.idle.lastActivity, {
      "0": iso(created.get(`${name}-0`)!),
      "1": iso(slot1),
      "2": iso(created.get(`${name}-2`)!),
    });
    t.diagnostic(`the idle policy's next steps: ${JSON.stringify(policy.idle.next)}`);
    // Slot 2 an hour after its pod started; the main agent is never hibernated alone, so when
    // slot 1 is idle too, an hour after its Lease's renewal, every member is and the fleet is
    // suspended (slot 1 with it).
    assert.deepEqual(policy.idle.next, [
      { at: iso(created.get(`${name}-2`)! + hour), hibernate: ["2"], wake: [] },
      { at: iso(slot1 + hour), hibernate: [], wake: [], fleet: "suspend" },
    ]);
    assert.deepEqual(
      [policy.expiry.since, policy.expiry.action, policy.expiry.expiresAt, policy.expiry.due],
      ["idle", "delete", iso(slot1 + 48 * hour), false],
    );

    // The same in words.
    const text = (
      await run(BIN, ["plan", "-f", file, "--kubeconfig", testKubeconfig()], {
        env: { ...process.env, KUBECONFIG: "" },
      })
    ).stdout;
    assert.match(text, /^idle policy \(after 1h\), if no member is active from now:$/m);
    const at = (ms: number) => `^  ${iso(ms)} \\(in [0-9hms]+\\): `;
    const slot2 = created.get(`${name}-2`)! + hour;
    assert.match(text, new RegExp(`${at(slot2)}hibernate slot 2$`, "m"));
    assert.match(
      text,
      new RegExp(`${at(slot1 + hour)}suspend the fleet \\(every member idle\\)$`, "m"),
    );
    assert.match(
      text,
      new RegExp(
        `^expiry \\(after 48h since idle, then delete\\): ${iso(slot1 + 48 * hour)} `,
        "m",
      ),
    );

    // A plan reads: the fleet and its pods are as they were.
    const after = await client.get<CocoonSet>(paths.cocoonSet(ns, name));
    assert.equal(after.metadata.resourceVersion, before.metadata.resourceVersion);
    for (const pod of (await client.list(paths.pods(ns))).items)
      assert.equal(pod.metadata.annotations?.[ANNOTATIONS.hibernate], undefined);
  });
});
