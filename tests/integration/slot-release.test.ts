/**
 * `spec.suspend` with `hibernatePolicy: release` (slot release), end to end: the real
 * controller process (with `--oci-registry` at the embedded registry), the node-agent
 * simulator in an opted-in namespace, the real registry (tags listed over HTTP) and the
 * real scheduler placing the woken main agent.
 *
 * - suspend: the main VM hibernates to `<vm>:hibernate`, then its pod is deleted (the seat
 *   freed): Suspending → Suspended with no pod, the tag in the registry, the node hint and
 *   the VM names on the CocoonSet, `cocoonset_slot_release_pods_deleted_total` counted;
 * - wake: Waking is written before the main agent is created again with restore intent and
 *   a preferred affinity to the hint node; it lands there, the tag is deleted, the hint
 *   cleared, `cocoonset_slot_release_wake_total{placement="hint-node"}` counted, Running;
 * - a pool with no free seat (its only node cordoned): Waking holds, Warning
 *   `WakeNoCapacity` is posted and counted; once the node takes pods again the wake ends;
 * - without a registry the release suspend fails with the message naming the set; the CRD's
 *   CEL rule refuses release with sub-agents or toolboxes.
 *
 * Every wait is a watch on the CocoonSet, its pods or its events.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { stringify } from "yaml";
import { before, describe, test } from "node:test";
import { FAKE_NODE_ANNOTATION, POOL_LABEL } from "../../cluster/local-cluster.js";
import { NODE_AGENT_ENABLED, NODE_AGENT_LABEL } from "../../cluster/node-agent.js";
import { converge } from "../../engine/execute/index.js";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { ANNOTATIONS, SNAPSHOT_TAGS, type CocoonSet, type Pod } from "../../engine/spec/index.js";
import { KubeApiError, paths, waitForObject, type KubeObject } from "../../engine/kube/index.js";
import { OciRegistry } from "../../engine/registry/oci.js";
import type { PlanJSON } from "../../engine/plan/plan-render.js";
import { adminClient, suffix, testKubeconfig } from "../support/cluster.js";
import {
  createCocoonSet,
  fleetPods,
  patchSpec,
  waitForConverged,
  waitForEvent,
} from "../support/controller-fleet.js";
import type { Cleanup as CleanupT, ControllerProcess } from "../support/controller-process.js";
import { CLI_MAIN, Cleanup, controllerNamespace } from "../support/controller-process.js";
import { lifecycleNamespace, registryAddress, vmReady, waitForPods } from "../support/lifecycle.js";
import { ObjectHistory } from "../support/object-history.js";

const client = adminClient();
const phaseOf = (cs: CocoonSet) => cs.status?.phase ?? "";
const annotationsOf = (o: { metadata?: { annotations?: Record<string, string> } }) =>
  o.metadata?.annotations ?? {};
const METRICS = {
  deleted: "cocoonset_slot_release_pods_deleted_total",
  wake: "cocoonset_slot_release_wake_total",
  unschedulable: "cocoonset_slot_release_wake_unschedulable_total",
} as const;

before(async () => {
  await ensureCrd(client);
});

/**
 * A main-only release set converged and booted, then suspended until Suspended with no pod
 * left; returns the node its main agent ran on and the CocoonSet's history.
 */
async function suspendReleased(
  t: Parameters<typeof ObjectHistory.start>[0],
  ns: string,
  proc: ControllerProcess,
  spec: { nodePool?: string } = {},
): Promise<{ node: string; vm: string; history: ObjectHistory<CocoonSet> }> {
  await createCocoonSet(ns, "solo", { hibernatePolicy: "release", ...spec });
  await waitForConverged(ns, "solo", { replicas: 0 });
  const [main] = await waitForPods(ns, "solo", 1, vmReady, "the main VM booted");
  const node = main.spec?.nodeName ?? "";
  const vm = annotationsOf(main)[ANNOTATIONS.vmName] ?? "";
  assert.ok(node !== "" && vm !== "");
  const history = await suspendedWithoutPods(t, ns, proc);
  return { node, vm, history };
}

/** Suspends the set `solo` and waits until it is Suspended with no pod, the delete counted. */
async function suspendedWithoutPods(
  t: Parameters<typeof ObjectHistory.start>[0],
  ns: string,
  proc: ControllerProcess,
): Promise<ObjectHistory<CocoonSet>> {
  const history = await ObjectHistory.start<CocoonSet>(t, client, paths.cocoonSets(ns), "solo");
  await patchSpec(ns, "solo", { suspend: true });
  await history.until(
    (cs) =>
      phaseOf(cs) === "Suspended" &&
      cs.status?.observedGeneration === cs.metadata.generation &&
      (cs.status?.agents ?? []).length === 0,
    "phase Suspended at the new generation with no agent",
    { show: phaseOf },
  );
  await waitForPods(ns, "solo", 0, () => true, "the released pod gone");
  assert.equal(await proc.metric(METRICS.deleted, { namespace: ns, cocoonset: "solo" }), 1);
  return history;
}

describe(
  "suspend with hibernatePolicy release (controller, simulator, registry, scheduler)",
  { timeout: 300_000 },
  () => {
    test("suspend frees the seat (tag kept, hint recorded); wake restores on the hint node, drops the tag, Running", async (t) => {
      const c = new Cleanup(t);
      const { ns, proc } = await lifecycleNamespace(c, "rel-wake", registryAddress());
      const reg = new OciRegistry(registryAddress());
      const { node, vm, history } = await suspendReleased(t, ns, proc);
      const phases = history.fold(phaseOf);
      assert.deepEqual(phases.slice(phases.indexOf("Running")), [
        "Running",
        "Suspending",
        "Suspended",
      ]);
      const suspended = await client.get<CocoonSet>(paths.cocoonSet(ns, "solo"));
      assert.equal(annotationsOf(suspended)[ANNOTATIONS.hibernatedOnNode], node, "the node hint");
      assert.equal(annotationsOf(suspended)[ANNOTATIONS.deleteVmNames], vm, "the VM names");
      assert.equal(suspended.status?.readyAgents, 0);
      // Slot release keeps the node's local copy: the simulator pushes no `:latest`.
      assert.deepEqual(await reg.listTags(vm), [SNAPSHOT_TAGS.hibernate]);

      const since = history.seen.length;
      const podHistory = await ObjectHistory.start<Pod>(t, client, paths.pods(ns), "solo-0");
      await patchSpec(ns, "solo", { suspend: false });
      const running = await history.until(
        (cs) =>
          phaseOf(cs) === "Running" &&
          cs.status?.observedGeneration === cs.metadata.generation &&
          (cs.status?.agents ?? []).every((a) => !!a.vmID) &&
          annotationsOf(cs)[ANNOTATIONS.hibernatedOnNode] === undefined,
        "phase Running with the VM id reported and the hint cleared",
        { since, show: phaseOf },
      );
      const woke = history.fold(phaseOf, since);
      assert.equal(woke[0], "Suspended");
      assert.equal(woke[1], "Waking", `Waking first: ${woke.join(" → ")}`);
      assert.equal(woke[woke.length - 1], "Running");
      // Waking was written before the main agent's pod existed.
      const waking = history.seen.slice(since).find((cs) => phaseOf(cs) === "Waking");
      const created = podHistory.seen[0];
      assert.ok(waking && created);
      assert.ok(
        Number(waking.metadata.resourceVersion) < Number(created.metadata?.resourceVersion),
        "Waking precedes the create",
      );
      const [main] = await waitForPods(ns, "solo", 1, vmReady, "the main VM restored");
      assert.equal(annotationsOf(main)[ANNOTATIONS.restoreFromHibernate], "true");
      assert.deepEqual(main.spec?.affinity, {
        nodeAffinity: {
          preferredDuringSchedulingIgnoredDuringExecution: [
            {
              weight: 100,
              preference: {
                matchExpressions: [
                  { key: "kubernetes.io/hostname", operator: "In", values: [node] },
                ],
              },
            },
          ],
        },
      });
      assert.equal(main.spec?.nodeName, node, "landed on the hint node");
      assert.deepEqual(await reg.listTags(vm), [], "the tag is dropped once the VM is live");
      assert.equal(
        await proc.metric(METRICS.wake, {
          namespace: ns,
          cocoonset: "solo",
          placement: "hint-node",
        }),
        1,
      );
      assert.equal(
        await proc.metric(METRICS.wake, { namespace: ns, cocoonset: "solo", placement: "pool" }),
        0,
      );
      assert.equal(
        running.status?.conditions?.find((x) => x.type === "Progressing")?.reason,
        "Stable",
      );
    });

    test("a pool with no free seat: Waking holds and Warning WakeNoCapacity is posted and counted; a freed seat ends the wake", async (t) => {
      const c = new Cleanup(t);
      const pool = `rel-${suffix()}`.slice(0, 40);
      const nodeName = `kwok-${pool}`;
      await client.create(paths.nodes(), {
        apiVersion: "v1",
        kind: "Node",
        metadata: {
          name: nodeName,
          annotations: { [FAKE_NODE_ANNOTATION]: "fake", "node.alpha.kubernetes.io/ttl": "0" },
          labels: {
            "kubernetes.io/hostname": nodeName,
            "kubernetes.io/os": "linux",
            type: "kwok",
            [POOL_LABEL]: pool,
          },
        },
        spec: {},
      });
      c.defer(`delete node ${nodeName}`, async () => {
        await client.delete(`${paths.nodes()}/${nodeName}`);
      });
      await waitForObject<
        KubeObject & { status?: { conditions?: { type: string; status: string }[] } }
      >(
        client,
        paths.nodes(),
        nodeName,
        (n) => !!n?.status?.conditions?.some((x) => x.type === "Ready" && x.status === "True"),
        { timeoutMs: 60_000, description: `node ${nodeName} Ready` },
      );
      const { ns, proc } = await lifecycleNamespace(c, "rel-full", registryAddress());
      const { node, history } = await suspendReleased(t, ns, proc, { nodePool: pool });
      assert.equal(node, nodeName, "the pool's only node");

      // The pool's only seat is taken meanwhile: nothing can be scheduled on its node.
      await client.patch(`${paths.nodes()}/${nodeName}`, { spec: { unschedulable: true } });
      const since = history.seen.length;
      await patchSpec(ns, "solo", { suspend: false });
      const [warning] = await waitForEvent(
        ns,
        "solo",
        "WakeNoCapacity",
        /^main pod solo-0 unschedulable: 0\/\d+ nodes are available/,
      );
      assert.equal(warning.type, "Warning");
      await history.until((cs) => phaseOf(cs) === "Waking", "phase Waking", {
        since,
        show: phaseOf,
      });
      assert.ok(
        (await proc.metric(METRICS.unschedulable, { namespace: ns, cocoonset: "solo" })) >= 1,
      );
      const pending = (await fleetPods(client, ns, "solo"))[0];
      assert.equal(pending.spec?.nodeName, undefined, "not scheduled");
      assert.equal(phaseOf(await client.get<CocoonSet>(paths.cocoonSet(ns, "solo"))), "Waking");

      await client.patch(`${paths.nodes()}/${nodeName}`, { spec: { unschedulable: false } });
      await history.until(
        (cs) =>
          phaseOf(cs) === "Running" &&
          annotationsOf(cs)[ANNOTATIONS.hibernatedOnNode] === undefined,
        "phase Running once the seat is free",
        { since, show: phaseOf },
      );
      const [main] = await waitForPods(ns, "solo", 1, vmReady, "the main VM restored");
      assert.equal(main.spec?.nodeName, nodeName);
      assert.equal(
        await proc.metric(METRICS.wake, {
          namespace: ns,
          cocoonset: "solo",
          placement: "hint-node",
        }),
        1,
      );
    });

    test("cocoonset plan --oci-registry shows the release suspend and the wake the controller would carry out", async (t) => {
      const c = new Cleanup(t);
      const { ns, proc } = await lifecycleNamespace(c, "rel-plan", registryAddress());
      const dir = mkdtempSync(join(tmpdir(), "cocoonset-plan-release-"));
      t.after(() => rmSync(dir, { recursive: true, force: true }));
      const file = join(dir, "solo.yaml");
      const planOf = async (suspend: boolean) => {
        const live = await client.get<CocoonSet>(paths.cocoonSet(ns, "solo"));
        writeFileSync(
          file,
          stringify({
            apiVersion: live.apiVersion,
            kind: live.kind,
            metadata: { name: "solo", namespace: ns },
            spec: { ...live.spec, suspend },
          }),
        );
        const { stdout } = await promisify(execFile)(
          process.execPath,
          [
            CLI_MAIN,
            "plan",
            "-f",
            file,
            "--kubeconfig",
            testKubeconfig(),
            "--json",
            "--oci-registry",
            registryAddress(),
          ],
          { env: { ...process.env, KUBECONFIG: "", OCI_REGISTRY: "" } },
        );
        return (JSON.parse(stdout) as PlanJSON).changes.map((x) => [x.target, x.decision]);
      };
      await createCocoonSet(ns, "solo", { hibernatePolicy: "release" });
      await waitForConverged(ns, "solo", { replicas: 0 });
      await waitForPods(ns, "solo", 1, vmReady, "the main VM booted");
      assert.deepEqual(await planOf(true), [["main", "hibernate"]]);
      await suspendedWithoutPods(t, ns, proc);
      assert.deepEqual(await planOf(false), [["main", "wake-restore"]]);
      assert.deepEqual(await fleetPods(client, ns, "solo"), [], "plan is read-only");
    });

    test("the engine's converge (what pulumi up runs) carries the release suspend and the wake, without a controller", async (t) => {
      const c = new Cleanup(t);
      const ns = await controllerNamespace(c, "rel-converge");
      await client.patch(paths.namespace(ns), {
        metadata: { labels: { [NODE_AGENT_LABEL]: NODE_AGENT_ENABLED } },
      });
      const registry = new OciRegistry(registryAddress());
      const up = () => converge(client, ns, "solo", { registry, timeoutMs: 60_000 });
      await createCocoonSet(ns, "solo", { hibernatePolicy: "release" });
      await up();
      const [booted] = await waitForPods(ns, "solo", 1, vmReady, "the main VM booted");
      const vm = annotationsOf(booted)[ANNOTATIONS.vmName] ?? "";
      await patchSpec(ns, "solo", { suspend: true });
      const asking = await up();
      assert.equal(asking.cocoonSet.status?.phase, "Suspending");
      await waitForPods(
        ns,
        "solo",
        1,
        (p) => annotationsOf(p)[ANNOTATIONS.lifecycleState] === "hibernated",
        "the main VM hibernated",
      );
      const released = await up();
      assert.deepEqual(
        released.failures.map((f) => f.message),
        [],
      );
      assert.equal(released.cocoonSet.status?.phase, "Suspended");
      assert.deepEqual(await fleetPods(client, ns, "solo"), [], "the seat is freed");
      assert.deepEqual(await registry.listTags(vm), [SNAPSHOT_TAGS.hibernate]);
      await patchSpec(ns, "solo", { suspend: false });
      const woken = await up();
      assert.deepEqual(
        woken.failures.map((f) => f.message),
        [],
      );
      assert.equal(woken.cocoonSet.status?.phase, "Running");
      assert.equal(annotationsOf(woken.cocoonSet)[ANNOTATIONS.hibernatedOnNode], undefined);
      assert.deepEqual(await registry.listTags(vm), [], "the tag is dropped");
      const [main] = await fleetPods(client, ns, "solo");
      assert.equal(annotationsOf(main)[ANNOTATIONS.restoreFromHibernate], "true");
      assert.equal(main.spec?.nodeName, booted.spec?.nodeName, "back on the hint node");
    });

    test("without a registry the release suspend fails with a message naming the set", async (t) => {
      const c: CleanupT = new Cleanup(t);
      const { ns, proc } = await lifecycleNamespace(c, "rel-noreg", null);
      await createCocoonSet(ns, "solo", { hibernatePolicy: "release" });
      await waitForConverged(ns, "solo", { replicas: 0 });
      const from = proc.lines.length;
      await patchSpec(ns, "solo", { suspend: true });
      await proc.waitForLog(
        "the reconcile fails on the missing registry",
        (l) =>
          l.msg === "reconcile failed; requeued with backoff" &&
          String(l.err).includes(
            `hibernatePolicy=release on ${ns}/solo requires a configured registry`,
          ),
        { from },
      );
      const pods = await fleetPods(client, ns, "solo");
      assert.equal(pods.length, 1, "the seat is kept");
      assert.equal(annotationsOf(pods[0])[ANNOTATIONS.hibernate], undefined, "nothing asked");
    });

    test("the CRD's CEL rule refuses release with sub-agents or toolboxes", async (t) => {
      const c = new Cleanup(t);
      const { ns } = await lifecycleNamespace(c, "rel-cel", registryAddress());
      const refused = async (what: string, run: () => Promise<unknown>) =>
        assert.rejects(run, (e: unknown) => {
          assert.ok(KubeApiError.isInstance(e), `${what}: ${String(e)}`);
          assert.equal(e.status, 422, what);
          assert.match(
            e.message,
            /hibernatePolicy=release needs agent\.replicas 0 and no toolboxes/,
          );
          return true;
        });
      await refused("replicas 2", () =>
        createCocoonSet(ns, "crew", { hibernatePolicy: "release", replicas: 2 }),
      );
      await refused("a toolbox", () =>
        createCocoonSet(ns, "crew", {
          hibernatePolicy: "release",
          toolboxes: [{ name: "shell", image: "ghcr.io/cocoonstack/shell:1" }],
        }),
      );
      await createCocoonSet(ns, "solo", { hibernatePolicy: "release" });
      await refused("scaling a release set up", () =>
        client.patch(paths.cocoonSet(ns, "solo"), { spec: { agent: { replicas: 1 } } }),
      );
      await createCocoonSet(ns, "crew", { replicas: 1 });
      await refused("switching a set with sub-agents to release", () =>
        patchSpec(ns, "crew", { hibernatePolicy: "release" }),
      );
    });
  },
);
