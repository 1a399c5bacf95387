/**
 * Acceptance tests of `cocoonset controller` as a real process against the embedded
 * cluster: convergence of a 10-agent fleet (and what kubectl shows), scale up and down,
 * image change, toolboxes, main agent failure and recovery, deletion of the whole tree, and
 * bad input (flags, an unreachable apiserver). (A cluster without the CRD:
 * controller-no-crd.test.ts.)
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { before, describe, test } from "node:test";
import { promisify } from "node:util";
import { requireBinary } from "../../cluster/toolchain-pins.js";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import {
  ANNOTATIONS,
  FINALIZER,
  LABELS,
  type CocoonSet,
  type Pod,
} from "../../engine/spec/index.js";
import { paths, waitForList, waitForObject, type KubeObject } from "../../engine/kube/index.js";
import { ownerReferenceForPod } from "../../engine/release/index.js";
import { adminClient, testKubeconfig } from "../support/cluster.js";
import {
  IMAGE,
  createCocoonSet,
  failPod,
  fleetPods,
  listEvents,
  patchSpec,
  poke,
  slotOf,
  waitForConverged,
  waitForEvent,
} from "../support/controller-fleet.js";
import {
  Cleanup,
  controllerNamespace,
  freePort,
  runControllerToExit,
  startController,
  tempDir,
  writeTokenKubeconfig,
} from "../support/controller-process.js";

const run = promisify(execFile);

/** Runs the toolchain's kubectl against the shared cluster, with a fresh discovery cache. */
async function kubectl(
  cacheDir: string,
  args: string[],
): Promise<{ stdout: string; stderr: string }> {
  return run(requireBinary("kubectl"), args, {
    env: { ...process.env, KUBECONFIG: testKubeconfig(), KUBECACHEDIR: cacheDir },
  });
}

before(async () => {
  await ensureCrd(adminClient());
});

describe("cocoonset controller (child process)", { timeout: 240_000 }, () => {
  test("converges 10 sub-agents to Running 11/11; kubectl prints the printer columns, and `get cs` means componentstatuses", async (t) => {
    const c = new Cleanup(t);
    const ns = await controllerNamespace(c, "ctl-converge");
    const proc = await startController(c, { kubeconfig: testKubeconfig(), namespaces: [ns] });
    await proc.synced();
    await createCocoonSet(ns, "fleet", { replicas: 10 });

    const { cs, pods } = await waitForConverged(ns, "fleet", { replicas: 10 });
    assert.equal(cs.status?.phase, "Running");
    assert.equal(cs.status?.readyAgents, 11);
    assert.equal(cs.status?.desiredAgents, 11);
    assert.equal(cs.status?.readyToolboxes, 0);
    assert.equal(cs.status?.desiredToolboxes, 0);
    assert.deepEqual(
      (cs.status?.agents ?? []).map((a) => `${a.slot}:${a.role}:${a.podName}`),
      Array.from({ length: 11 }, (_, i) => `${i}:${i === 0 ? "main" : "sub-agent"}:fleet-${i}`),
    );
    assert.ok(cs.metadata.finalizers?.includes(FINALIZER), "the finalizer was added");
    const main = pods.find((p) => p.metadata?.name === "fleet-0")!;
    for (const p of pods.filter((p) => p !== main)) {
      assert.equal(
        p.spec?.nodeName,
        main.spec?.nodeName,
        "sub-agents are bound to the main's node",
      );
      assert.equal(p.metadata?.annotations?.[ANNOTATIONS.forkFrom], `vk-${ns}-fleet-0`);
    }
    const created = await proc.createdPods(pods.map((p) => p.metadata!.name!));
    assert.equal(created.length, 11, "one create per pod");

    const cache = tempDir(c, "kubectl-cache");
    const table = await kubectl(cache, ["get", "cocoonsets", "-n", ns]);
    const [header, row, ...rest] = table.stdout.trim().split("\n");
    assert.deepEqual(header.trim().split(/\s+/), ["NAME", "PHASE", "READY", "DESIRED", "AGE"]);
    assert.deepEqual(row.trim().split(/\s+/).slice(0, 4), ["fleet", "Running", "11", "11"]);
    assert.deepEqual(rest, []);

    // Observed on this apiserver: the built-in componentstatuses (core group) wins the
    // short name `cs`; the CocoonSet is reachable as `cs.cocoonset.cocoonstack.io`,
    // `cocoonsets` or the `cocoon` category.
    const short = await kubectl(cache, ["get", "cs", "-n", ns, "-o", "name"]);
    const shortNames = short.stdout.trim().split("\n");
    assert.ok(
      shortNames.length > 0 && shortNames.every((n) => n.startsWith("componentstatus/")),
      short.stdout,
    );
    assert.ok(!short.stdout.includes("fleet"));
    assert.match(
      short.stderr,
      /short name "cs" could also match lower priority resource cocoonsets\.cocoonset\.cocoonstack\.io/,
    );
    const qualified = await kubectl(cache, [
      "get",
      "cs.cocoonset.cocoonstack.io",
      "-n",
      ns,
      "-o",
      "name",
    ]);
    assert.equal(qualified.stdout.trim(), "cocoonset.cocoonset.cocoonstack.io/fleet");
    const category = await kubectl(cache, ["get", "cocoon", "-n", ns, "-o", "name"]);
    assert.equal(category.stdout.trim(), "cocoonset.cocoonset.cocoonstack.io/fleet");
  });

  test("scale up, scale down in ascending order, image change, toolbox add and remove, main failure and recovery", async (t) => {
    const c = new Cleanup(t);
    const ns = await controllerNamespace(c, "ctl-life");
    const client = adminClient();
    const proc = await startController(c, { kubeconfig: testKubeconfig(), namespaces: [ns] });
    await proc.synced();
    await createCocoonSet(ns, "life", { replicas: 2 });
    await waitForConverged(ns, "life", { replicas: 2 });

    // Scale up.
    await patchSpec(ns, "life", { agent: { replicas: 6 } });
    await waitForConverged(ns, "life", { replicas: 6 });

    // Scale down: 6, 5, 4, 3 go, in ascending slot order, in one pass.
    const deletedOrder: string[] = [];
    const seen = new Set<string>();
    const watching = waitForList<Pod & KubeObject>(
      client,
      paths.pods(ns),
      (items) => {
        const live = new Map(items.map((p) => [p.metadata.name!, p]));
        for (const name of ["life-3", "life-4", "life-5", "life-6"]) {
          const p = live.get(name);
          if (seen.has(name) || (p && !p.metadata.deletionTimestamp)) continue;
          seen.add(name);
          deletedOrder.push(name);
        }
        return seen.size === 4;
      },
      { labelSelector: `${LABELS.name}=life`, description: "slots 3..6 to be deleted" },
    );
    const scaleDownFrom = proc.lines.length;
    await patchSpec(ns, "life", { agent: { replicas: 2 } });
    await watching;
    assert.deepEqual(deletedOrder, ["life-3", "life-4", "life-5", "life-6"]);
    await proc.waitForLog(
      "the delete of life-6",
      (l) => l.msg === "deleted pod" && l.pod === "life-6",
      { from: scaleDownFrom },
    );
    const deleteLogs = proc.lines
      .slice(scaleDownFrom)
      .filter((l) => l.msg === "deleted pod" && l.decision === "scale-down");
    assert.deepEqual(
      deleteLogs.map((l) => l.pod),
      ["life-3", "life-4", "life-5", "life-6"],
    );
    assert.equal(
      new Set(deleteLogs.map((l) => l.reconcileId)).size,
      1,
      "one pass deletes them all",
    );
    await waitForConverged(ns, "life", { replicas: 2 });

    // Image change: every agent pod is recreated carrying the new image.
    const before = new Map(
      (await fleetPods(client, ns, "life")).map((p) => [p.metadata!.name!, p.metadata!.uid!]),
    );
    await patchSpec(ns, "life", { agent: { image: "ghcr.io/cocoonstack/agent:2" } });
    const { pods: afterImage, cs: csImage } = await waitForConverged(ns, "life", { replicas: 2 });
    assert.equal(csImage.status?.observedGeneration, csImage.metadata.generation);
    for (const p of afterImage) {
      assert.equal(p.metadata?.annotations?.[ANNOTATIONS.image], "ghcr.io/cocoonstack/agent:2");
      assert.notEqual(
        p.metadata?.uid,
        before.get(p.metadata.name!),
        `${p.metadata?.name} was recreated`,
      );
      assert.equal(
        p.metadata?.annotations?.[ANNOTATIONS.generation],
        String(csImage.metadata.generation),
      );
    }

    // Toolbox add, then remove.
    await patchSpec(ns, "life", {
      toolboxes: [{ name: "browser", image: "ghcr.io/cocoonstack/browser:1" }],
    });
    const { pods: withToolbox } = await waitForConverged(ns, "life", { replicas: 2, toolboxes: 1 });
    const tb = withToolbox.find((p) => p.metadata?.name === "life-browser");
    assert.ok(tb, "the toolbox pod exists");
    assert.equal(tb.metadata?.labels?.[LABELS.role], "toolbox");
    assert.equal(slotOf(tb), "browser");
    assert.equal(tb.metadata?.annotations?.[ANNOTATIONS.image], "ghcr.io/cocoonstack/browser:1");
    await patchSpec(ns, "life", { toolboxes: null });
    await waitForObject(client, paths.pods(ns), "life-browser", (p) => p === undefined, {
      description: "the toolbox pod to be gone",
    });
    await waitForConverged(ns, "life", { replicas: 2, toolboxes: 0 });

    // Main agent failure: phase Failed, a Warning event, and no rebuild.
    const main = await client.get<Pod>(paths.pod(ns, "life-0"));
    await failPod(ns, "life-0", main.metadata!.uid!);
    await waitForObject(
      client,
      paths.cocoonSets(ns),
      "life",
      (o) => (o as unknown as CocoonSet | undefined)?.status?.phase === "Failed",
      {
        description: "status phase Failed",
      },
    );
    const [failedEvent] = await waitForEvent(
      ns,
      "life",
      "MainAgentFailed",
      /^main agent pod life-0 failed \(.*\); it is not rebuilt automatically$/,
    );
    assert.equal(failedEvent.type, "Warning");
    assert.equal(failedEvent.reportingController, "cocoonset-controller");
    const since = Date.now();
    await poke(ns, "life-0");
    await proc.reconciledSince(ns, "life", since);
    const stillFailed = await client.get<Pod>(paths.pod(ns, "life-0"));
    assert.equal(
      stillFailed.metadata?.uid,
      main.metadata?.uid,
      "the failed main agent is not rebuilt",
    );
    assert.equal(stillFailed.status?.phase, "Failed");
    assert.equal(await proc.metric("cocoonset_subagent_rebuild_total"), 0);
    const failedCs = await client.get<CocoonSet>(paths.cocoonSet(ns, "life"));
    assert.equal(failedCs.status?.phase, "Failed");

    // Recovery: the user deletes the failed main; the controller recreates it and the
    // fleet is Running again, announced with a Normal event.
    await client.delete(paths.pod(ns, "life-0"));
    const { pods: recovered } = await waitForConverged(ns, "life", { replicas: 2 });
    assert.notEqual(
      recovered.find((p) => p.metadata?.name === "life-0")?.metadata?.uid,
      main.metadata?.uid,
    );
    const [recoveredEvent] = await waitForEvent(
      ns,
      "life",
      "RecoveredFromFailure",
      "main agent pod life-0 is Ready again",
    );
    assert.equal(recoveredEvent.type, "Normal");
    assert.equal(
      (await listEvents(ns)).filter((e) => e.reason === "RecoveredFromFailure").length,
      1,
      "the recovery is announced once",
    );
  });

  test("deleting the CocoonSet removes its pods and what they own (a Job and a ConfigMap), then the finalizer", async (t) => {
    const c = new Cleanup(t);
    const ns = await controllerNamespace(c, "ctl-delete");
    const client = adminClient();
    const proc = await startController(c, { kubeconfig: testKubeconfig(), namespaces: [ns] });
    await proc.synced();
    await createCocoonSet(ns, "gone", { replicas: 3, toolboxes: [{ name: "tools" }] });
    const { pods } = await waitForConverged(ns, "gone", { replicas: 3, toolboxes: 1 });
    const worker = pods.find((p) => p.metadata?.name === "gone-2")!;
    const ref = ownerReferenceForPod({ name: worker.metadata!.name!, uid: worker.metadata!.uid! });
    const job = await client.create<KubeObject>(paths.jobs(ns), {
      apiVersion: "batch/v1",
      kind: "Job",
      metadata: { name: "step", ownerReferences: [ref] },
      spec: {
        backoffLimit: 0,
        template: {
          spec: { restartPolicy: "Never", containers: [{ name: "main", image: IMAGE }] },
        },
      },
    });
    await client.create(paths.configMaps(ns), {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "prompt", ownerReferences: [ref] },
      data: { prompt: "hello" },
    });
    // Something in the namespace the CocoonSet does not own, which must survive.
    await client.create(paths.configMaps(ns), {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "bystander" },
    });
    // The Job's own pod is part of the tree too.
    await waitForList(client, paths.pods(ns), (items) => items.length > 0, {
      labelSelector: `batch.kubernetes.io/job-name=step`,
      description: "the Job's pod",
    });

    await client.delete(paths.cocoonSet(ns, "gone"));
    await waitForObject(client, paths.cocoonSets(ns), "gone", (o) => o === undefined, {
      timeoutMs: 90_000,
      description: "the CocoonSet to be gone",
    });
    const [podsLeft, jobsLeft, cmsLeft] = await Promise.all([
      client.list(paths.pods(ns)),
      client.list(paths.jobs(ns)),
      client.list(paths.configMaps(ns)),
    ]);
    assert.deepEqual(
      podsLeft.items.map((p) => p.metadata.name),
      [],
      "no pod is left",
    );
    assert.deepEqual(
      jobsLeft.items.map((j) => j.metadata.name),
      [],
      "no Job is left",
    );
    assert.deepEqual(
      cmsLeft.items.map((m) => m.metadata.name).filter((n) => n !== "kube-root-ca.crt"),
      ["bystander"],
      "only the ConfigMap the CocoonSet did not own is left",
    );
    assert.equal(await client.getOrUndefined(paths.job(ns, job.metadata.name!)), undefined);
    const done = await proc.waitForLog("finalizer removed", (l) =>
      l.msg.startsWith("released the CocoonSet's tree"),
    );
    assert.equal(done.name, "gone");
    assert.equal(await client.getOrUndefined(paths.cocoonSet(ns, "gone")), undefined);
  });

  test("bad flags and an unreachable apiserver: a message naming the flag or URL, a non-zero exit, nothing written", async (t) => {
    const c = new Cleanup(t);
    const ns = await controllerNamespace(c, "ctl-bad");
    const client = adminClient();
    await createCocoonSet(ns, "untouched", { replicas: 1 });
    const ports = async () => [
      `--metrics-bind-address=127.0.0.1:${await freePort()}`,
      `--health-probe-bind-address=127.0.0.1:${await freePort()}`,
    ];
    const base = ["--kubeconfig", testKubeconfig(), "--namespace", ns, "--leader-elect=false"];

    const zero = await runControllerToExit([...base, ...(await ports()), "--concurrency", "0"]);
    assert.notEqual(zero.code, 0);
    assert.match(
      zero.stderr,
      /\[--concurrency\] must be an integer between 1 and 10000 \(got "0"\)/,
    );

    const reap = await runControllerToExit([
      ...base,
      ...(await ports()),
      "--reap-interval",
      "nonsense",
    ]);
    assert.notEqual(reap.code, 0);
    assert.match(reap.stderr, /\[--reap-interval\] must be a duration .*\(got "nonsense"\)/);

    const closed = await freePort();
    const dir = tempDir(c, "unreachable");
    const cluster = client.config.getCurrentCluster()!;
    const kc = writeTokenKubeconfig(
      dir,
      "kubeconfig",
      `https://127.0.0.1:${closed}`,
      cluster.caData,
      "x",
    );
    const down = await runControllerToExit([
      "--kubeconfig",
      kc,
      "--namespace",
      ns,
      "--leader-elect=false",
      ...(await ports()),
    ]);
    assert.notEqual(down.code, 0);
    assert.match(
      down.stderr,
      new RegExp(`cannot reach the apiserver at https://127\\.0\\.0\\.1:${closed}`),
    );
    assert.ok(down.stderr.includes(kc), "the message says where the kubeconfig came from");

    for (const r of [zero, reap, down])
      assert.equal(r.stdout, "", "nothing started, so nothing was logged");
    const cs = await client.get<CocoonSet>(paths.cocoonSet(ns, "untouched"));
    assert.equal(cs.metadata.finalizers, undefined, "no finalizer was added");
    assert.equal(cs.status, undefined, "no status was written");
    assert.deepEqual(await fleetPods(client, ns, "untouched"), [], "no pod was created");
  });
});
