/**
 * The engine against the embedded cluster: fan-out, steady state, scale-down, drift, rebuild
 * backoff and dead-letter (with an injected clock), a delete that fails after the history
 * write, status, toolboxes, deletion, bad input and `cocoonset plan`.
 */
import { CREATE_TOKEN_ANNOTATION } from "../../engine/attribution/index.js";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test, type TestContext } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { stringify } from "yaml";
import { ReleaseTimeoutError } from "../../engine/release/index.js";
import {
  converge,
  deleteFleet,
  finalizeDeletion,
  addFinalizerTo,
  runPass,
  type EngineHooks,
  type PassOptions,
} from "../../engine/execute/index.js";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { shardBucketOf } from "../../engine/spec/shard-bucket.js";
import type { PlanJSON } from "../../engine/plan/plan-render.js";
import {
  FINALIZER,
  validateCocoonSetSpec,
  type CocoonSet,
  type CocoonSetSpec,
} from "../../engine/spec/index.js";
import {
  KubeApiError,
  KubeClient,
  PatchType,
  paths,
  waitForList,
  waitForObject,
  type KubeObject,
} from "../../engine/kube/index.js";
import {
  adminClient,
  isReady,
  testKubeconfig,
  waitForPodPhase,
  withNamespace,
} from "../support/cluster.js";
import { serviceAccountClient } from "../support/service-account.js";
import {
  PASS_ABORTED,
  PassAborted,
  type PassResult,
  PlanRefusal,
  onlyOvertaken,
  StaleCocoonSet,
} from "../../engine/execute/pass-result.js";

const IMAGE = "ghcr.io/cocoonstack/agent:1";
const NAME_LABEL = "cocoonset.cocoonstack.io/name";
const HISTORY = "cocoonset.cocoonstack.io/rebuild-history";
const DEAD_LETTER = "cocoonset.cocoonstack.io/dead-letter";
const SIMULATE = "cocoonset.cocoonstack.io/simulate";
const BIN = fileURLToPath(new URL("../../../bin/cocoonset", import.meta.url));

interface Recorded {
  hooks: EngineHooks;
  events: { type: string; reason: string; message: string }[];
  metrics: string[];
  logs: { level: string; msg: string; fields?: Record<string, unknown> }[];
}

function recorder(): Recorded {
  const r: Recorded = { hooks: {}, events: [], metrics: [], logs: [] };
  r.hooks = {
    event: (_cs, type, reason, message) => r.events.push({ type, reason, message }),
    metric: (name) => r.metrics.push(name),
    log: (level, msg, fields) => r.logs.push({ level, msg, fields }),
  };
  return r;
}

/** A client of its own per test, so request counters are this test's alone. */
function engineClient(t: TestContext): KubeClient {
  const client = new KubeClient({ kubeconfig: testKubeconfig() });
  t.after(() => client.close());
  return client;
}

function manifest(ns: string, name: string, spec: unknown): KubeObject {
  return {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonSet",
    metadata: { name, namespace: ns },
    spec,
  };
}

async function createCocoonSet(ns: string, name: string, spec: CocoonSetSpec): Promise<CocoonSet> {
  return adminClient().create<CocoonSet>(paths.cocoonSets(ns), manifest(ns, name, spec));
}

async function read(ns: string, name: string): Promise<CocoonSet> {
  return adminClient().get<CocoonSet>(paths.cocoonSet(ns, name));
}

async function patchSpec(ns: string, name: string, spec: Record<string, unknown>): Promise<void> {
  await adminClient().patch(paths.cocoonSet(ns, name), { spec }, PatchType.merge);
}

async function pass(
  client: KubeClient,
  ns: string,
  name: string,
  opts: PassOptions = {},
): Promise<PassResult> {
  return runPass(client, await read(ns, name), opts);
}

async function fleetPods(ns: string, name: string): Promise<KubeObject[]> {
  const list = await adminClient().list(paths.pods(ns), { labelSelector: `${NAME_LABEL}=${name}` });
  return list.items;
}

const podNames = (pods: KubeObject[]) => pods.map((p) => p.metadata.name!).sort();

/** Waits until exactly `names` exist in the fleet, all Ready and none terminating. */
async function waitFleet(ns: string, name: string, names: string[]): Promise<KubeObject[]> {
  const want = [...names].sort();
  return waitForList(
    adminClient(),
    paths.pods(ns),
    (pods) =>
      JSON.stringify(podNames(pods)) === JSON.stringify(want) &&
      pods.every((p) => isReady(p) && !p.metadata.deletionTimestamp),
    {
      labelSelector: `${NAME_LABEL}=${name}`,
      timeoutMs: 60_000,
      description: `fleet ${ns}/${name} to be exactly ${want.length} Ready pods`,
    },
  );
}

/** Waits until the pod with this uid is gone (absent, or replaced by another uid). */
async function waitPodGone(ns: string, pod: string, uid: string): Promise<void> {
  await waitForObject(adminClient(), paths.pods(ns), pod, (p) => p?.metadata.uid !== uid, {
    timeoutMs: 30_000,
    description: `pod ${ns}/${pod} (${uid}) to be gone`,
  });
}

const agentNames = (name: string, from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => `${name}-${from + i}`);

/** Creates the main agent, waits for it, fans out and waits until every agent is Ready. */
async function convergeFleet(
  client: KubeClient,
  ns: string,
  name: string,
  extra: string[] = [],
): Promise<void> {
  const first = await pass(client, ns, name);
  assert.deepEqual(
    first.failures.map((f) => f.message),
    [],
  );
  await waitFleet(ns, name, [`${name}-0`]);
  const cs = await read(ns, name);
  const second = await pass(client, ns, name);
  assert.deepEqual(
    second.failures.map((f) => f.message),
    [],
  );
  await waitFleet(ns, name, [...agentNames(name, 0, cs.spec.agent.replicas ?? 0), ...extra]);
}

async function failPod(ns: string, pod: string): Promise<string> {
  await adminClient().patch(
    paths.pod(ns, pod),
    { metadata: { annotations: { [SIMULATE]: "failed" } } },
    PatchType.merge,
  );
  const failed = await waitForPodPhase(ns, pod, "Failed");
  return failed.metadata.uid!;
}

function historyOf(cs: CocoonSet): Record<string, { count: number; lastDeleted: string }> {
  const raw = cs.metadata.annotations?.[HISTORY];
  return raw ? (JSON.parse(raw) as Record<string, { count: number; lastDeleted: string }>) : {};
}

const writes = (c: KubeClient) => ({
  POST: c.counters.byVerb.POST ?? 0,
  PATCH: c.counters.byVerb.PATCH ?? 0,
  DELETE: c.counters.byVerb.DELETE ?? 0,
  PUT: c.counters.byVerb.PUT ?? 0,
});

function delta(before: ReturnType<typeof writes>, now: ReturnType<typeof writes>) {
  return {
    POST: now.POST - before.POST,
    PATCH: now.PATCH - before.PATCH,
    DELETE: now.DELETE - before.DELETE,
    PUT: now.PUT - before.PUT,
  };
}

before(async () => {
  await ensureCrd(adminClient());
});

after(() => adminClient().close());

void describe("engine: a pass stopped by its signal", () => {
  void test("an aborted signal starts no action and writes no status; an abort mid fan-out stops the rest", async (t) => {
    const ns = await withNamespace(t, "engine-abort");
    const client = engineClient(t);
    await createCocoonSet(ns, "halt", { agent: { image: IMAGE, replicas: 6 } });
    const stopped = new AbortController();
    stopped.abort();
    const none = await pass(client, ns, "halt", { signal: stopped.signal });
    assert.deepEqual(none.created, []);
    assert.deepEqual(
      none.failures.map((f) => f.message),
      [PASS_ABORTED],
    );
    assert.ok(PassAborted.isInstance(none.failures[0]), "the failure is typed");
    assert.equal(none.statusWritten, false);
    assert.deepEqual(await fleetPods(ns, "halt"), [], "no pod was created");
    assert.equal((await read(ns, "halt")).status, undefined, "no status was written");

    // The main agent, then the fan-out, aborted after its first create: one at a time, so
    // every create after the abort is one that did not start.
    assert.deepEqual(
      (await pass(client, ns, "halt")).failures.map((f) => f.message),
      [],
    );
    await waitFleet(ns, "halt", ["halt-0"]);
    const midway = new AbortController();
    const cut = await pass(client, ns, "halt", {
      fanOut: 1,
      signal: midway.signal,
      hooks: { log: (_l, msg) => msg === "created pod" && midway.abort() },
    });
    assert.equal(cut.created.length, 1, cut.created.join(", "));
    assert.ok(
      cut.failures.map((f) => f.message).includes(PASS_ABORTED),
      cut.failures.map((f) => f.message).join("; "),
    );
    assert.deepEqual(podNames(await fleetPods(ns, "halt")), ["halt-0", cut.created[0]].sort());
  });
});

void describe("engine: fan-out, steady state, status, scale-down and drift", () => {
  void test("replicas 20: main first, then slots 1..20 with the exact SPEC section 2 metadata, then passes that write nothing", async (t) => {
    const ns = await withNamespace(t, "engine-fanout");
    const client = engineClient(t);
    const name = "fleet";
    const created = await createCocoonSet(ns, name, { agent: { replicas: 20, image: IMAGE } });

    const first = await pass(client, ns, name);
    assert.deepEqual(first.created, [`${name}-0`]);
    assert.deepEqual(podNames(await fleetPods(ns, name)), [`${name}-0`]);
    const [main] = await waitFleet(ns, name, [`${name}-0`]);
    const mainNode = (main.spec as { nodeName?: string }).nodeName;
    assert.ok(mainNode, "the main pod is scheduled");

    const progress: number[] = [];
    const second = await pass(client, ns, name, {
      fanOut: 8,
      hooks: { progress: (done) => progress.push(done) },
    });
    assert.deepEqual(
      second.failures.map((f) => f.message),
      [],
    );
    assert.deepEqual([...second.created].sort(), agentNames(name, 1, 20).sort());
    assert.equal(progress.length, 20);

    const pods = await waitFleet(ns, name, agentNames(name, 0, 20));
    const vm = (member: number | string) => `vk-${ns}-${name}-${member}`;
    for (let slot = 1; slot <= 20; slot++) {
      const pod = pods.find((p) => p.metadata.name === `${name}-${slot}`)!;
      assert.deepEqual(pod.metadata.labels, {
        "cocoonset.cocoonstack.io/name": name,
        "cocoonset.cocoonstack.io/role": "sub-agent",
        "cocoonset.cocoonstack.io/slot": String(slot),
        "app.kubernetes.io/name": name,
        "app.kubernetes.io/managed-by": "cocoonset",
        // The project's own addition: the fleet's shard bucket (docs/differences.md).
        "cocoonset.cocoonstack.io/shard-bucket": String(shardBucketOf(ns, name)),
      });
      const annotations = { ...pod.metadata.annotations };
      delete annotations[SIMULATE];
      // The token of the create the engine announced in the status (docs/security.md).
      assert.match(annotations[CREATE_TOKEN_ANNOTATION] ?? "", /^[0-9a-f]{32}$/);
      delete annotations[CREATE_TOKEN_ANNOTATION];
      assert.deepEqual(annotations, {
        "vm.cocoonstack.io/name": vm(slot),
        "cocoonset.cocoonstack.io/image": IMAGE,
        "cocoonset.cocoonstack.io/mode": "clone",
        "cocoonset.cocoonstack.io/os": "linux",
        "cocoonset.cocoonstack.io/snapshot-policy": "always",
        "cocoonset.cocoonstack.io/managed": "true",
        "cocoonset.cocoonstack.io/generation": String(created.metadata.generation),
        "vm.cocoonstack.io/fork-from": vm(0),
        "vm.cocoonstack.io/backend": "cloud-hypervisor",
      });
      assert.deepEqual(pod.metadata.ownerReferences, [
        {
          apiVersion: "cocoonset.cocoonstack.io/v1",
          kind: "CocoonSet",
          name,
          uid: created.metadata.uid,
          controller: true,
          blockOwnerDeletion: true,
        },
      ]);
      assert.equal((pod.spec as { nodeName?: string }).nodeName, mainNode);
    }

    // Everything is Ready: the next pass changes no pod and writes at most the status.
    const w0 = writes(client);
    const third = await pass(client, ns, name);
    const d1 = delta(w0, writes(client));
    assert.deepEqual(third.plan.steps, []);
    assert.equal(d1.POST + d1.DELETE + d1.PUT, 0);
    assert.equal(d1.PATCH, third.statusWritten ? 1 : 0);

    // And the one after writes literally nothing.
    const w1 = writes(client);
    const fourth = await pass(client, ns, name);
    assert.deepEqual(delta(w1, writes(client)), { POST: 0, PATCH: 0, DELETE: 0, PUT: 0 });
    assert.equal(fourth.statusWritten, false);
    assert.deepEqual(
      fourth.failures.map((f) => f.message),
      [],
    );

    const cs = await read(ns, name);
    const status = cs.status!;
    assert.equal(status.readyAgents, 21);
    assert.equal(status.desiredAgents, 21);
    assert.equal(status.readyToolboxes, 0);
    assert.equal(status.desiredToolboxes, 0);
    assert.equal(status.phase, "Running");
    assert.equal(status.observedGeneration, cs.metadata.generation);
    assert.deepEqual(
      status.agents?.map((a) => a.slot),
      Array.from({ length: 21 }, (_, i) => i),
    );
    const cond = (type: string) => status.conditions?.find((c) => c.type === type);
    assert.equal(cond("Ready")?.status, "True");
    assert.equal(cond("Ready")?.reason, "AllAgentsReady");
    assert.equal(cond("Ready")?.message, "21/21 agents ready, 0/0 toolboxes ready");
    assert.equal(cond("Progressing")?.status, "False");
    assert.equal(cond("Progressing")?.reason, "Stable");

    // The engine writes the status's lists and its record whole, and the CRD says so: the
    // apiserver keeps one owned field for each, not one per member, however big the fleet.
    assert.equal(Object.keys(status.vms ?? {}).length, 21);
    type ManagedFields = { subresource?: string; fieldsV1?: { "f:status"?: object } }[];
    const managed = (cs.metadata as { managedFields?: ManagedFields }).managedFields ?? [];
    const fields = managed.find((m) => m.subresource === "status")?.fieldsV1?.["f:status"] as
      Record<string, unknown> | undefined;
    assert.deepEqual(fields?.["f:agents"], {});
    assert.deepEqual(fields?.["f:vms"], {});
  });

  void test("scale 20 → 5 deletes slots 6..20 in ascending order; an image change replaces pods without writing rebuild history", async (t) => {
    const ns = await withNamespace(t, "engine-scale");
    const client = engineClient(t);
    const name = "fleet";
    await createCocoonSet(ns, name, { agent: { replicas: 20, image: IMAGE } });
    await convergeFleet(client, ns, name);

    await patchSpec(ns, name, { agent: { replicas: 5 } });
    const rec = recorder();
    const down = await pass(client, ns, name, { hooks: rec.hooks });
    assert.deepEqual(
      down.failures.map((f) => f.message),
      [],
    );
    assert.deepEqual(down.deleted, agentNames(name, 6, 20));
    assert.deepEqual(
      rec.logs.filter((l) => l.msg === "deleted pod").map((l) => l.fields?.pod),
      agentNames(name, 6, 20),
    );
    await waitFleet(ns, name, agentNames(name, 0, 5));

    // Image change: the main agent drifts first (sub-agents fork from it), then the rest.
    const image2 = "ghcr.io/cocoonstack/agent:2";
    const before = new Map(
      (await fleetPods(ns, name)).map((p) => [p.metadata.name!, p.metadata.uid!]),
    );
    await patchSpec(ns, name, { agent: { image: image2 } });
    const mainDrift = await pass(client, ns, name);
    assert.deepEqual(mainDrift.deleted, [`${name}-0`]);
    assert.deepEqual(mainDrift.plan.steps[0]?.drift, ["image"]);
    await waitPodGone(ns, `${name}-0`, before.get(`${name}-0`)!);
    const recreateMain = await pass(client, ns, name);
    assert.deepEqual(recreateMain.created, [`${name}-0`]);
    await waitForPodPhase(ns, `${name}-0`, "Running");
    await waitForObject(adminClient(), paths.pods(ns), `${name}-0`, isReady);

    const subDrift = await pass(client, ns, name);
    assert.deepEqual(
      subDrift.failures.map((f) => f.message),
      [],
    );
    assert.deepEqual(subDrift.deleted, agentNames(name, 1, 5));
    assert.ok(subDrift.plan.steps.every((s) => s.decision === "delete-drifted"));
    for (const pod of agentNames(name, 1, 5)) await waitPodGone(ns, pod, before.get(pod)!);
    const recreate = await pass(client, ns, name);
    assert.deepEqual([...recreate.created].sort(), agentNames(name, 1, 5).sort());
    const pods = await waitFleet(ns, name, agentNames(name, 0, 5));
    for (const pod of pods) {
      assert.notEqual(pod.metadata.uid, before.get(pod.metadata.name!));
      assert.equal(pod.metadata.annotations?.["cocoonset.cocoonstack.io/image"], image2);
    }
    assert.equal((await read(ns, name)).metadata.annotations?.[HISTORY], undefined);
  });
});

void describe("engine: converge meets a terminating main agent", () => {
  void test("converge waits for the terminating pod of the main agent's name to be gone, then creates it and fans out", async (t) => {
    const ns = await withNamespace(t, "engine-terminating");
    const client = engineClient(t);
    const name = "fleet";
    const hold = "test.cocoonstack.io/hold";
    await createCocoonSet(ns, name, { agent: { replicas: 2, image: IMAGE } });
    await convergeFleet(client, ns, name);
    const main = `${name}-0`;
    // Held by a finalizer of the test's, the old main pod stays terminating (and Ready).
    await adminClient().patch(
      paths.pod(ns, main),
      { metadata: { finalizers: [hold] } },
      PatchType.merge,
    );
    const old = await adminClient().get<KubeObject>(paths.pod(ns, main));
    await adminClient().delete(paths.pod(ns, main), { uid: old.metadata.uid });
    await waitForObject(adminClient(), paths.pods(ns), main, (p) =>
      Boolean(p?.metadata.deletionTimestamp),
    );

    const rec = recorder();
    let waiting!: () => void;
    const sawWait = new Promise<void>((resolve) => (waiting = resolve));
    rec.hooks.log = (level, msg, fields) => {
      rec.logs.push({ level, msg, fields });
      if (msg.startsWith("pod of the same name is still terminating")) waiting();
    };
    const run = converge(client, ns, name, { hooks: rec.hooks, timeoutMs: 60_000 });
    // Without the wait, converge gives up (or returns) with the old pod still there.
    const first = await Promise.race([sawWait.then(() => "waiting"), run.then(() => "returned")]);
    assert.equal(first, "waiting", JSON.stringify(rec.logs));
    await adminClient().patch(
      paths.pod(ns, main),
      [
        { op: "test", path: "/metadata/finalizers", value: [hold] },
        { op: "remove", path: "/metadata/finalizers" },
      ],
      PatchType.json,
    );
    const result = await run;
    assert.deepEqual(
      result.failures.map((f) => f.message),
      [],
    );
    const pods = await waitFleet(ns, name, agentNames(name, 0, 2));
    const fresh = pods.find((p) => p.metadata.name === main)!;
    assert.notEqual(fresh.metadata.uid, old.metadata.uid);
    assert.ok(
      rec.logs.some((l) => l.msg === "created pod" && l.fields?.pod === main),
      "converge itself created the new main agent",
    );
  });
});

void describe("engine: rebuild backoff and dead-letter", () => {
  void test("a failed sub-agent is rebuilt 4 times on the 0/1/5/30 s schedule, then left in dead-letter until a spec edit", async (t) => {
    const ns = await withNamespace(t, "engine-rebuild");
    const client = engineClient(t);
    const name = "fleet";
    const slotPod = `${name}-1`;
    await createCocoonSet(ns, name, { agent: { replicas: 1, image: IMAGE } });
    await convergeFleet(client, ns, name);

    const base = Math.floor(Date.now() / 1000) * 1000;
    let clock = base;
    const now = () => clock;
    const schedule = [0, 1000, 5000, 30_000];
    let lastDeleted = base;
    for (let attempt = 1; attempt <= 4; attempt++) {
      const uid = await failPod(ns, slotPod);
      const wait = schedule[attempt - 1];
      if (wait > 0) {
        // One millisecond early: still in backoff, nothing is deleted.
        clock = lastDeleted + wait - 1;
        const early = await pass(client, ns, name, { now });
        assert.deepEqual(early.deleted, []);
        assert.equal(early.plan.steps[0]?.decision, "wait-backoff");
        assert.equal(early.requeueAfterMs, 1);
        assert.equal((await adminClient().get(paths.pod(ns, slotPod))).metadata.uid, uid);
      }
      clock = lastDeleted + wait;
      const rec = recorder();
      const rebuild = await pass(client, ns, name, { now, hooks: rec.hooks });
      assert.deepEqual(
        rebuild.failures.map((f) => f.message),
        [],
      );
      assert.deepEqual(rebuild.deleted, [slotPod]);
      assert.equal(rebuild.plan.steps[0]?.attempt, attempt);
      assert.deepEqual(historyOf(await read(ns, name)), {
        "1": { count: attempt, lastDeleted: new Date(clock).toISOString() },
      });
      assert.deepEqual(rec.events, [
        { type: "Normal", reason: "SubAgentRebuilding", message: `slot 1 attempt ${attempt}/4` },
      ]);
      assert.deepEqual(rec.metrics, ["subagent_rebuild_total"]);
      lastDeleted = clock;
      // The apiserver removes a Failed pod at once (grace 0): the same pass creates its
      // replacement, without waiting for a watch to show the old one gone.
      assert.deepEqual(rebuild.created, [slotPod]);
      await waitPodGone(ns, slotPod, uid);
      await waitFleet(ns, name, agentNames(name, 0, 1));
    }

    const uid = await failPod(ns, slotPod);
    // Well past the last backoff (30 s), within the progress deadline (600 s): the only
    // Warning is the dead-letter's.
    clock = lastDeleted + 60_000;
    const rec = recorder();
    const parked = await pass(client, ns, name, { now, hooks: rec.hooks });
    assert.deepEqual(
      parked.failures.map((f) => f.message),
      [],
    );
    assert.deepEqual(parked.deleted, []);
    assert.equal(parked.plan.steps[0]?.decision, "dead-letter");
    const pod = await adminClient().get(paths.pod(ns, slotPod));
    assert.equal(pod.metadata.uid, uid);
    assert.equal(pod.metadata.annotations?.[DEAD_LETTER], "true");
    assert.deepEqual(rec.events, [
      {
        type: "Warning",
        reason: "SubAgentDeadLetter",
        message: `slot 1 exhausted 4 rebuilds; pod ${slotPod} left in dead-letter`,
      },
    ]);
    assert.deepEqual(rec.metrics, ["subagent_dead_letter_total"]);
    assert.equal(historyOf(await read(ns, name))["1"]?.count, 4);

    // Parked: later passes leave it alone.
    const w = writes(client);
    const idle = await pass(client, ns, name, { now });
    assert.equal(idle.plan.mutatesPods, false);
    const d = delta(w, writes(client));
    assert.equal(d.POST + d.DELETE, 0);
    assert.equal((await adminClient().get(paths.pod(ns, slotPod))).metadata.uid, uid);

    // A spec edit clears dead-letter: the main agent is replaced first, then the slot.
    const image2 = "ghcr.io/cocoonstack/agent:2";
    const mainUid = (await adminClient().get(paths.pod(ns, `${name}-0`))).metadata.uid!;
    await patchSpec(ns, name, { agent: { image: image2 } });
    assert.deepEqual((await pass(client, ns, name, { now })).deleted, [`${name}-0`]);
    await waitPodGone(ns, `${name}-0`, mainUid);
    assert.deepEqual((await pass(client, ns, name, { now })).created, [`${name}-0`]);
    await waitForObject(adminClient(), paths.pods(ns), `${name}-0`, isReady);
    const reset = await pass(client, ns, name, { now });
    assert.deepEqual(
      reset.failures.map((f) => f.message),
      [],
    );
    assert.equal(reset.plan.steps[0]?.decision, "reset-dead-letter");
    assert.deepEqual(reset.deleted, [slotPod]);
    assert.deepEqual(historyOf(await read(ns, name)), {});
    await waitPodGone(ns, slotPod, uid);
    assert.deepEqual((await pass(client, ns, name, { now })).created, [slotPod]);
    const [, fresh] = await waitFleet(ns, name, agentNames(name, 0, 1));
    assert.equal(fresh.metadata.annotations?.[DEAD_LETTER], undefined);
    assert.equal(fresh.metadata.annotations?.["cocoonset.cocoonstack.io/image"], image2);
  });

  void test("a Failed pod a finalizer holds is deleted; its replacement waits until it is gone (no create in the same pass)", async (t) => {
    const ns = await withNamespace(t, "engine-held");
    const client = engineClient(t);
    const name = "fleet";
    const slotPod = `${name}-1`;
    const HOLD = "example.com/hold";
    await createCocoonSet(ns, name, { agent: { replicas: 1, image: IMAGE } });
    await convergeFleet(client, ns, name);
    const uid = await failPod(ns, slotPod);
    await adminClient().patch(
      paths.pod(ns, slotPod),
      { metadata: { finalizers: [HOLD] } },
      PatchType.merge,
    );
    const rebuild = await pass(client, ns, name);
    assert.deepEqual(rebuild.deleted, [slotPod]);
    assert.deepEqual(rebuild.created, [], "the name is not free: the delete left it terminating");
    assert.deepEqual(
      rebuild.failures.map((f) => f.message),
      [],
    );
    const held = await adminClient().get(paths.pod(ns, slotPod));
    assert.equal(held.metadata.uid, uid);
    assert.ok(held.metadata.deletionTimestamp, "terminating, held by the finalizer");
    await adminClient().patch(
      paths.pod(ns, slotPod),
      [{ op: "remove", path: "/metadata/finalizers" }],
      PatchType.json,
    );
    await waitPodGone(ns, slotPod, uid);
    assert.deepEqual((await pass(client, ns, name)).created, [slotPod]);
    await waitFleet(ns, name, agentNames(name, 0, 1));
  });

  void test("a delete that fails after the history write never grants a fifth rebuild", async (t) => {
    const ns = await withNamespace(t, "engine-forbidden");
    const admin = engineClient(t);
    const name = "fleet";
    const slotPod = `${name}-1`;
    await createCocoonSet(ns, name, { agent: { replicas: 1, image: IMAGE } });
    await convergeFleet(admin, ns, name);
    // May write the CocoonSet and annotate pods, but not delete them.
    const limited = await serviceAccountClient(ns, "no-pod-delete", [
      { apiGroups: [""], resources: ["pods"], verbs: ["get", "list", "watch", "create", "patch"] },
      {
        apiGroups: ["cocoonset.cocoonstack.io"],
        resources: ["cocoonsets", "cocoonsets/status"],
        verbs: ["get", "list", "watch", "patch", "update"],
      },
    ]);
    t.after(() => limited.close());
    const uid = await failPod(ns, slotPod);

    let clock = Math.floor(Date.now() / 1000) * 1000;
    const counts: number[] = [];
    const decisions: string[] = [];
    for (let i = 0; i < 7; i++) {
      const r = await pass(limited, ns, name, { now: () => clock });
      decisions.push(r.plan.steps[0]?.decision ?? "none");
      if (r.plan.steps[0]?.decision === "rebuild") {
        assert.equal(r.failures.length, 1);
        assert.match(r.failures.map((f) => f.message)[0], /403|forbidden/i);
      }
      counts.push(historyOf(await read(ns, name))["1"]?.count ?? 0);
      clock += 60_000;
    }
    assert.deepEqual(decisions, [
      "rebuild",
      "rebuild",
      "rebuild",
      "rebuild",
      "dead-letter",
      "none",
      "none",
    ]);
    assert.deepEqual(counts, [1, 2, 3, 4, 4, 4, 4]);
    const pod = await adminClient().get(paths.pod(ns, slotPod));
    assert.equal(pod.metadata.uid, uid, "the pod was never deleted");
    assert.equal(pod.metadata.annotations?.[DEAD_LETTER], "true");
  });
});

void describe("engine: toolboxes", () => {
  void test("toolboxes are created and removed; a pod squatting a toolbox name is a conflict and is left alone", async (t) => {
    const ns = await withNamespace(t, "engine-toolbox");
    const client = engineClient(t);
    const name = "fleet";
    await createCocoonSet(ns, name, {
      agent: { replicas: 0, image: IMAGE },
      toolboxes: [
        { name: "browser", image: "ghcr.io/cocoonstack/browser:1" },
        { name: "shell", image: "ghcr.io/cocoonstack/shell:1" },
      ],
    });
    await pass(client, ns, name);
    await waitFleet(ns, name, [`${name}-0`]);
    const fanOut = await pass(client, ns, name);
    assert.deepEqual([...fanOut.created].sort(), [`${name}-browser`, `${name}-shell`]);
    const pods = await waitFleet(ns, name, [`${name}-0`, `${name}-browser`, `${name}-shell`]);
    const browser = pods.find((p) => p.metadata.name === `${name}-browser`)!;
    assert.equal(browser.metadata.labels?.["cocoonset.cocoonstack.io/role"], "toolbox");
    assert.equal(browser.metadata.labels?.["cocoonset.cocoonstack.io/slot"], "browser");
    assert.equal(
      browser.metadata.annotations?.["cocoonset.cocoonstack.io/image"],
      "ghcr.io/cocoonstack/browser:1",
    );
    await pass(client, ns, name); // status
    assert.equal((await read(ns, name)).status?.readyToolboxes, 2);

    await patchSpec(ns, name, {
      toolboxes: [{ name: "browser", image: "ghcr.io/cocoonstack/browser:1" }],
    });
    const removed = await pass(client, ns, name);
    assert.deepEqual(removed.deleted, [`${name}-shell`]);
    await waitFleet(ns, name, [`${name}-0`, `${name}-browser`]);

    // Two squatters: one unlabelled, one wearing the fleet's name label without an owner.
    const squat = (pod: string, labels?: Record<string, string>) =>
      adminClient().create<KubeObject>(paths.pods(ns), {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: pod, labels },
        spec: {
          terminationGracePeriodSeconds: 1,
          containers: [{ name: "main", image: "registry.invalid/never-pulled" }],
        },
      });
    const plain = await squat(`${name}-editor`);
    const labelled = await squat(`${name}-debugger`, { [NAME_LABEL]: name });
    await patchSpec(ns, name, {
      toolboxes: [
        { name: "browser", image: "ghcr.io/cocoonstack/browser:1" },
        { name: "editor", image: "ghcr.io/cocoonstack/editor:1" },
        { name: "debugger", image: "ghcr.io/cocoonstack/debugger:1" },
      ],
    });
    const conflict = await pass(client, ns, name);
    assert.equal(conflict.failures.length, 2, conflict.failures.map((f) => f.message).join("\n"));
    assert.ok(
      conflict.failures.every((f) => PlanRefusal.isInstance(f)),
      "the planner sees both conflicts before any create",
    );
    assert.ok(
      conflict.failures
        .map((f) => f.message)
        .some((e) => e.includes(`${name}-editor`) && e.includes("not this CocoonSet's toolbox")),
    );
    assert.ok(
      conflict.failures
        .map((f) => f.message)
        .some((e) => e.includes(`${name}-debugger`) && e.includes("not this CocoonSet's toolbox")),
    );
    assert.deepEqual(conflict.created, []);
    assert.deepEqual(conflict.deleted, []);
    for (const original of [plain, labelled]) {
      const now = await adminClient().get(paths.pod(ns, original.metadata.name!));
      assert.equal(now.metadata.uid, original.metadata.uid);
      assert.equal(now.metadata.ownerReferences, undefined);
      assert.equal(now.metadata.annotations?.["cocoonset.cocoonstack.io/image"], undefined);
    }
  });
});

void describe("engine: the finalizer as the plan's setup", () => {
  void test("a pass that keeps a finalizer adds it first; from a copy another writer overtook, it is refused as overtaken and nothing else is done", async (t) => {
    const ns = await withNamespace(t, "engine-finalizer");
    const client = engineClient(t);
    const name = "fleet";
    await createCocoonSet(ns, name, { agent: { replicas: 1, image: IMAGE } });
    const stale = await read(ns, name);
    // Another controller adds its own finalizer after the copy was read.
    await adminClient().patch(
      paths.cocoonSet(ns, name),
      { metadata: { finalizers: ["example.com/other"] } },
      PatchType.merge,
    );
    const refused = await runPass(client, stale, { finalizer: FINALIZER });
    assert.ok(onlyOvertaken(refused), "overtaken: planned again, no error");
    assert.ok(refused.failures.every((f) => StaleCocoonSet.isInstance(f)));
    assert.deepEqual(refused.created, []);
    assert.deepEqual((await read(ns, name)).metadata.finalizers, ["example.com/other"]);

    const added = await runPass(client, await read(ns, name), { finalizer: FINALIZER });
    assert.deepEqual(added.failures, []);
    assert.deepEqual(added.created, [`${name}-0`]);
    assert.deepEqual((await read(ns, name)).metadata.finalizers, ["example.com/other", FINALIZER]);
    await adminClient().patch(
      paths.cocoonSet(ns, name),
      { metadata: { finalizers: null } },
      PatchType.merge,
    );
  });
});

void describe("engine: deletion", () => {
  void test("deleteFleet removes every pod the CocoonSet owns, what they own, and the CocoonSet with its finalizer", async (t) => {
    const ns = await withNamespace(t, "engine-delete");
    const client = engineClient(t);
    const name = "fleet";
    await createCocoonSet(ns, name, {
      agent: { replicas: 3, image: IMAGE },
      toolboxes: [{ name: "browser", image: "ghcr.io/cocoonstack/browser:1" }],
    });
    const withFinalizer = await addFinalizerTo(
      client,
      paths.cocoonSet(ns, name),
      await read(ns, name),
      FINALIZER,
    );
    assert.deepEqual(withFinalizer.metadata.finalizers, [FINALIZER]);
    await convergeFleet(client, ns, name, [`${name}-browser`]);
    const slot1 = await adminClient().get(paths.pod(ns, `${name}-1`));
    await adminClient().create(paths.configMaps(ns), {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: {
        name: "slot-1-prompt",
        ownerReferences: [
          { apiVersion: "v1", kind: "Pod", name: slot1.metadata.name, uid: slot1.metadata.uid },
        ],
      },
      data: { prompt: "hello" },
    });
    const bystander = await adminClient().create<KubeObject>(paths.configMaps(ns), {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "bystander" },
      data: { k: "v" },
    });

    const released = await deleteFleet(client, ns, name, { timeoutMs: 60_000 });
    assert.equal(released?.pods, 5);
    assert.equal(released?.configMaps, 1);
    assert.equal(await adminClient().getOrUndefined(paths.cocoonSet(ns, name)), undefined);
    assert.deepEqual((await adminClient().list(paths.pods(ns))).items, []);
    const cms = (await adminClient().list(paths.configMaps(ns))).items.map((c) => c.metadata.uid);
    assert.ok(cms.includes(bystander.metadata.uid));
    assert.ok(!(await adminClient().getOrUndefined(paths.configMap(ns, "slot-1-prompt"))));
  });

  void test("a deletion another finalizer holds gives up at its deadline naming what is left, and keeps the CocoonSet's finalizer", async (t) => {
    const ns = await withNamespace(t, "engine-delete-held");
    const client = engineClient(t);
    const name = "held";
    await createCocoonSet(ns, name, { agent: { replicas: 2, image: IMAGE } });
    await addFinalizerTo(client, paths.cocoonSet(ns, name), await read(ns, name), FINALIZER);
    await convergeFleet(client, ns, name);
    const hold = "example.com/hold";
    await adminClient().patch(paths.pod(ns, `${name}-1`), { metadata: { finalizers: [hold] } });
    t.after(async () => {
      for (const path of [paths.pod(ns, `${name}-1`), paths.cocoonSet(ns, name)])
        await adminClient()
          .patch(path, { metadata: { finalizers: null } })
          .catch(() => undefined);
    });

    // The release's wait is the plan wait `objects-gone`, run by the one awaiter of plan
    // waits: its timeout names the held pod and the hold, and nothing after it is done.
    await assert.rejects(deleteFleet(client, ns, name, { timeoutMs: 4000 }), (e: Error) => {
      assert.ok(ReleaseTimeoutError.isInstance(e), String(e));
      assert.match(
        e.message,
        new RegExp(
          `^release of CocoonSet ${ns}/${name} \\(uid [0-9a-f-]+\\) timed out after \\d+ ms`,
        ),
      );
      assert.deepEqual(
        e.remaining.map((r) => `${r.kind}/${r.name}:${r.finalizers.join(",")}`),
        [`pod/${name}-1:${hold}`],
      );
      return true;
    });
    const left = await read(ns, name);
    assert.ok(left.metadata.deletionTimestamp, "the CocoonSet is being deleted");
    assert.deepEqual(
      left.metadata.finalizers,
      [FINALIZER],
      "its finalizer stays until the tree is gone",
    );
    assert.deepEqual(
      (await adminClient().list(paths.pods(ns))).items.map((p) => p.metadata.name),
      [`${name}-1`],
      "the rest of the tree is gone",
    );

    // Once the hold goes, a second deletion finishes: the tree, then the CocoonSet, gone.
    await adminClient().patch(paths.pod(ns, `${name}-1`), { metadata: { finalizers: null } });
    await finalizeDeletion(client, left, { timeoutMs: 30_000 });
    await waitForObject(client, paths.cocoonSets(ns), name, (o) => o === undefined, {
      timeoutMs: 30_000,
      description: `CocoonSet ${ns}/${name} to be gone`,
    });
  });
});

/**
 * Specs that break one rule each, the field our validator must name, and the field the
 * apiserver names (a list-map key duplicate is reported on the list item).
 */
const BAD_SPECS: [label: string, spec: unknown, field: string, apiField: string][] = [
  [
    "replicas -1",
    { agent: { replicas: -1, image: IMAGE } },
    "agent.replicas",
    "spec.agent.replicas",
  ],
  [
    "replicas 1000000",
    { agent: { replicas: 1_000_000, image: IMAGE } },
    "agent.replicas",
    "spec.agent.replicas",
  ],
  ["empty image", { agent: { replicas: 1, image: "" } }, "agent.image", "spec.agent.image"],
  [
    "numeric toolbox name",
    { agent: { image: IMAGE }, toolboxes: [{ name: "7" }] },
    "toolboxes[0].name",
    "spec.toolboxes[0].name",
  ],
  [
    "duplicate toolbox names",
    { agent: { image: IMAGE }, toolboxes: [{ name: "web" }, { name: "web" }] },
    "toolboxes[1].name",
    "spec.toolboxes[1]",
  ],
  [
    "probe port 70000",
    { agent: { image: IMAGE, probePort: 70_000 } },
    "agent.probePort",
    "spec.agent.probePort",
  ],
  [
    "vnc port -1",
    { agent: { image: IMAGE }, toolboxes: [{ name: "vnc", vncPort: -1 }] },
    "toolboxes[0].vncPort",
    "spec.toolboxes[0].vncPort",
  ],
];

void describe("engine: bad input", () => {
  void test("the validator and the apiserver both reject bad specs, naming the field, and nothing is created", async (t) => {
    const ns = await withNamespace(t, "engine-bad");
    const admin = adminClient();
    for (const [label, spec, field, apiField] of BAD_SPECS) {
      const checked = validateCocoonSetSpec(spec);
      assert.equal(checked.ok, false, label);
      if (!checked.ok) {
        assert.ok(
          checked.failures.some((f) => f.property === field),
          `${label}: ${JSON.stringify(checked.failures)}`,
        );
      }
      await assert.rejects(
        admin.create(paths.cocoonSets(ns), manifest(ns, "bad", spec)),
        (e: unknown) => {
          assert.ok(KubeApiError.isInstance(e), label);
          assert.equal(e.status, 422, `${label}: ${e.message}`);
          assert.ok(e.message.includes(`${apiField}: `), `${label}: ${e.message}`);
          return true;
        },
      );
    }
    assert.deepEqual((await admin.list(paths.cocoonSets(ns))).items, []);
    assert.deepEqual((await admin.list(paths.pods(ns))).items, []);
  });
});

const run = promisify(execFile);

void describe("cocoonset plan", () => {
  void test("prints the live plan as JSON and `no changes` once converged; a bad file fails naming the field", async (t) => {
    const ns = await withNamespace(t, "engine-plan");
    const client = engineClient(t);
    const dir = mkdtempSync(join(tmpdir(), "cocoonset-plan-"));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const name = "fleet";
    const file = join(dir, "cocoonset.yaml");
    const write = (spec: unknown) => writeFileSync(file, stringify(manifest(ns, name, spec)));
    const plan = async (...args: string[]) =>
      run(BIN, ["plan", "-f", file, "--kubeconfig", testKubeconfig(), ...args], {
        env: { ...process.env, KUBECONFIG: "" },
      });

    // Not created yet: everything would be created.
    write({ agent: { replicas: 2, image: IMAGE }, toolboxes: [{ name: "browser" }] });
    const fresh = JSON.parse((await plan("--json")).stdout) as PlanJSON;
    assert.deepEqual(fresh.cocoonSet, { namespace: ns, name });
    assert.deepEqual(
      fresh.changes.map((c) => [c.target, c.decision]),
      [
        ["main", "create"],
        ["slot 1", "create"],
        ["slot 2", "create"],
        ["toolbox browser", "create"],
      ],
    );
    assert.deepEqual(
      await adminClient()
        .list(paths.pods(ns))
        .then((l) => l.items),
      [],
    );

    await createCocoonSet(ns, name, {
      agent: { replicas: 2, image: IMAGE },
      toolboxes: [{ name: "browser" }],
    });
    await convergeFleet(client, ns, name, [`${name}-browser`]);
    await pass(client, ns, name);
    assert.equal((await plan()).stdout, "no changes\n");

    // The file asks for 4 replicas and no toolbox: two creates and a removal, nothing applied.
    write({ agent: { replicas: 4, image: IMAGE } });
    const pending = JSON.parse((await plan("--json")).stdout) as PlanJSON;
    assert.deepEqual(
      pending.changes.map((c) => [c.target, c.decision, c.podName]),
      [
        ["slot 3", "create", `${name}-3`],
        ["slot 4", "create", `${name}-4`],
        ["toolbox browser", "delete-extra", `${name}-browser`],
      ],
    );
    assert.deepEqual(pending.errors, []);
    const human = (await plan()).stdout;
    const [changes, forecast] = human.split("\n\n");
    assert.equal(changes, "slot 3: create\nslot 4: create\ntoolbox browser: delete (not in spec)");
    // Then the capacity forecast: the two slots are bound to the main agent's node.
    const mainNode = (await fleetPods(ns, name)).find((p) => p.metadata.name === `${name}-0`)
      ?.spec as { nodeName?: string } | undefined;
    assert.match(forecast, /^capacity forecast:\nNODE +FREE +REQUESTED BY THIS PLAN +VERDICT\n/);
    assert.match(
      forecast,
      new RegExp(`^${mainNode?.nodeName} +pods \\d+ +pods 2 \\(slots 3–4\\) +fits$`, "m"),
    );
    assert.equal((await read(ns, name)).spec.agent.replicas, 2);
    assert.equal((await fleetPods(ns, name)).length, 4);

    write({ agent: { replicas: -1, image: "" } });
    await assert.rejects(plan(), (e: { code?: number; stderr?: string; stdout?: string }) => {
      assert.notEqual(e.code, 0);
      assert.match(e.stderr ?? "", /\[spec\.agent\.replicas\] must be >= 0/);
      assert.match(e.stderr ?? "", /\[spec\.agent\.image\] must not be empty/);
      assert.equal(e.stdout, "");
      return true;
    });
  });
});
