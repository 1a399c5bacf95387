/**
 * `spec.suspend` with the retain policy, end to end: the real controller process (with
 * `--oci-registry` at the embedded registry), the node-agent simulator in an opted-in
 * namespace, and the real registry, whose tag lists are read over HTTP.
 *
 * - suspend: every pod is asked to hibernate, the simulator pushes `<vm>:hibernate`, the
 *   CocoonSet goes Suspending → Suspended with cocoon-operator's conditions; unsuspend:
 *   the asks are withdrawn, the VMs boot again (new ids), phase Running, the tags stay;
 * - a VM slow to hibernate holds Suspending; a VM whose hibernation fails is terminal and,
 *   as in cocoon-operator, not waited for (Suspended without its tag), then rebuilt once
 *   unsuspended;
 * - a registry that does not answer fails the pass closed: the fleet stays Suspending, the
 *   reconcile error names the probe, and once the registry's breaker is open the fleet gets
 *   Warning SnapshotRegistryUnanswered and is asked again after each cool-down.
 *
 * Every wait is a watch on the CocoonSet or its pods.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { before, describe, test } from "node:test";
import { promisify } from "node:util";
import { stringify } from "yaml";
import { SIM_ANNOTATIONS } from "../../cluster/node-agent.js";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { ANNOTATIONS, SNAPSHOT_TAGS, type CocoonSet, type Pod } from "../../engine/spec/index.js";
import { paths } from "../../engine/kube/index.js";
import { OciRegistry } from "../../engine/registry/oci.js";
import { adminClient, testKubeconfig } from "../support/cluster.js";
import {
  createCocoonSet,
  fleetPods,
  patchSpec,
  waitForConverged,
} from "../support/controller-fleet.js";
import { CLI_MAIN, Cleanup, freePort } from "../support/controller-process.js";
import { lifecycleNamespace, registryAddress, vmReady, waitForPods } from "../support/lifecycle.js";
import { ObjectHistory } from "../support/object-history.js";
import type { PlanJSON } from "../../engine/plan/plan-render.js";

const client = adminClient();

interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
  observedGeneration?: number;
}

const annotationsOf = (p: Pod) => p.metadata?.annotations ?? {};
const phaseOf = (cs: CocoonSet) => cs.status?.phase ?? "";
const conditionsOf = (cs: CocoonSet) => (cs.status?.conditions ?? []) as Condition[];

/** An opted-in namespace, a controller on it with the registry flag, synced. */
const setUp = (c: Cleanup, prefix: string, registry = registryAddress()) =>
  lifecycleNamespace(c, prefix, registry);

before(async () => {
  await ensureCrd(client);
});

describe(
  "suspend with hibernatePolicy retain (controller, simulator, registry)",
  { timeout: 240_000 },
  () => {
    test("suspend: every VM hibernates to <vm>:hibernate, Suspending → Suspended; unsuspend: woken, Running, tags kept", async (t) => {
      const c = new Cleanup(t);
      const { ns } = await setUp(c, "susp-retain");
      const reg = new OciRegistry(registryAddress());
      await createCocoonSet(ns, "crew", { replicas: 2 });
      await waitForConverged(ns, "crew", { replicas: 2 });
      const booted = await waitForPods(ns, "crew", 3, vmReady, "every VM booted by the simulator");
      const idsBefore = new Map(
        booted.map((p) => [p.metadata?.name, annotationsOf(p)[ANNOTATIONS.vmID]]),
      );
      const vms = booted.map((p) => annotationsOf(p)[ANNOTATIONS.vmName] ?? "").sort();
      assert.deepEqual(vms, [
        "vk-" + ns + "-crew-0",
        "vk-" + ns + "-crew-1",
        "vk-" + ns + "-crew-2",
      ]);
      for (const vm of vms)
        assert.deepEqual(await reg.listTags(vm), [], `${vm} has no snapshot yet`);

      const history = await ObjectHistory.start<CocoonSet>(t, client, paths.cocoonSets(ns), "crew");
      await patchSpec(ns, "crew", { suspend: true });
      const suspended = await history.until(
        (cs) =>
          phaseOf(cs) === "Suspended" && cs.status?.observedGeneration === cs.metadata.generation,
        "phase Suspended at the new generation",
        { show: phaseOf },
      );
      const phases = history.fold(phaseOf);
      assert.deepEqual(phases.slice(phases.indexOf("Running")), [
        "Running",
        "Suspending",
        "Suspended",
      ]);

      const generation = suspended.metadata.generation ?? 0;
      const pods = await fleetPods(client, ns, "crew");
      assert.equal(pods.length, 3, "retain: every pod is kept");
      for (const p of pods) {
        const a = annotationsOf(p);
        assert.equal(
          a[ANNOTATIONS.hibernate],
          "true",
          `${p.metadata?.name} was asked to hibernate`,
        );
        assert.equal(a[ANNOTATIONS.lifecycleState], "hibernated", `${p.metadata?.name} hibernated`);
        assert.ok(Number(a[ANNOTATIONS.lifecycleObservedGeneration]) >= generation);
        assert.equal(a[ANNOTATIONS.vmID], undefined, "a hibernated VM has no id");
      }
      // The registry really holds the snapshots (GET /v2/<vm>/tags/list).
      for (const vm of vms) assert.deepEqual(await reg.listTags(vm), [SNAPSHOT_TAGS.hibernate], vm);

      // cocoon-operator's conditions: Ready from pod readiness, Progressing False/Stable.
      const conds = conditionsOf(suspended);
      const ready = conds.find((x) => x.type === "Ready");
      const progressing = conds.find((x) => x.type === "Progressing");
      assert.equal(ready?.status, "True");
      assert.equal(ready?.reason, "AllAgentsReady");
      assert.equal(ready?.observedGeneration, generation);
      assert.equal(progressing?.status, "False");
      assert.equal(progressing?.reason, "Stable");
      assert.equal(progressing?.observedGeneration, generation);
      assert.equal(suspended.status?.readyAgents, 3);
      assert.ok(
        suspended.status?.agents?.every((a) => a.vmID === undefined),
        "no VM id while suspended",
      );

      const since = history.seen.length;
      await patchSpec(ns, "crew", { suspend: false });
      const woken = await waitForPods(
        ns,
        "crew",
        3,
        (p) => vmReady(p) && annotationsOf(p)[ANNOTATIONS.hibernate] === undefined,
        "every hibernate ask withdrawn and every VM ready again",
      );
      for (const p of woken)
        assert.notEqual(
          annotationsOf(p)[ANNOTATIONS.vmID],
          idsBefore.get(p.metadata?.name),
          "a fresh VM id",
        );
      const running = await history.until(
        (cs) =>
          phaseOf(cs) === "Running" &&
          cs.status?.observedGeneration === cs.metadata.generation &&
          (cs.status?.agents ?? []).every((a) => !!a.vmID),
        "phase Running with every VM id reported",
        { since, show: phaseOf },
      );
      assert.ok(!history.fold(phaseOf, since).includes("Waking"), "retain has no Waking phase");
      assert.equal(conditionsOf(running).find((x) => x.type === "Progressing")?.reason, "Stable");
      // Unsuspend leaves the tags (they are dropped at teardown).
      for (const vm of vms) assert.deepEqual(await reg.listTags(vm), [SNAPSHOT_TAGS.hibernate], vm);
    });

    test("a slow hibernation holds Suspending; a failed one is terminal and not waited for, then rebuilt on unsuspend", async (t) => {
      const c = new Cleanup(t);
      const { ns } = await setUp(c, "susp-slow");
      const reg = new OciRegistry(registryAddress());
      await createCocoonSet(ns, "crew", { replicas: 2 });
      await waitForConverged(ns, "crew", { replicas: 2 });
      const booted = await waitForPods(ns, "crew", 3, vmReady, "every VM booted by the simulator");
      const uidOf = new Map(booted.map((p) => [p.metadata?.name, p.metadata?.uid]));
      // Slot 1 takes 3 s to hibernate; slot 2's hibernation fails.
      await client.patch(paths.pod(ns, "crew-1"), {
        metadata: { annotations: { [SIM_ANNOTATIONS.hibernateDelayMs]: "3000" } },
      });
      await client.patch(paths.pod(ns, "crew-2"), {
        metadata: { annotations: { [SIM_ANNOTATIONS.fail]: "hibernate" } },
      });
      const history = await ObjectHistory.start<CocoonSet>(t, client, paths.cocoonSets(ns), "crew");
      const slow = await ObjectHistory.start<Pod>(t, client, paths.pods(ns), "crew-1");
      await patchSpec(ns, "crew", { suspend: true });

      // While slot 1 is still hibernating, the fleet is Suspending.
      await slow.until(
        (p) => annotationsOf(p)[ANNOTATIONS.lifecycleState] === "hibernating",
        "crew-1 hibernating",
      );
      const holding = await history.until(
        (cs) => phaseOf(cs) === "Suspending",
        "phase Suspending",
        {
          show: phaseOf,
        },
      );
      assert.equal(
        conditionsOf(holding).find((x) => x.type === "Progressing")?.message,
        "Suspending",
      );
      const suspended = await history.until(
        (cs) => phaseOf(cs) === "Suspended",
        "phase Suspended",
        {
          show: phaseOf,
        },
      );
      // Suspended only after slot 1's snapshot landed (the watch saw it hibernated first).
      const hibernated = await slow.until(
        (p) => annotationsOf(p)[ANNOTATIONS.lifecycleState] === "hibernated",
        "crew-1 hibernated",
      );
      assert.ok(
        Number(hibernated.metadata?.resourceVersion) < Number(suspended.metadata.resourceVersion),
        "Suspended is written after the slow VM hibernated",
      );
      const failedPod = (await fleetPods(client, ns, "crew")).find(
        (p) => p.metadata?.name === "crew-2",
      );
      assert.equal(annotationsOf(failedPod!)[ANNOTATIONS.lifecycleState], "failed");
      assert.equal(
        annotationsOf(failedPod!)[ANNOTATIONS.lifecycleStateMessage],
        "simulated hibernate failure",
      );
      assert.deepEqual(
        await reg.listTags(`vk-${ns}-crew-2`),
        [],
        "the failed VM pushed no snapshot",
      );
      assert.deepEqual(await reg.listTags(`vk-${ns}-crew-1`), [SNAPSHOT_TAGS.hibernate]);

      // Unsuspended: the normal pass rebuilds the terminal sub-agent (a new pod).
      await client.patch(paths.pod(ns, "crew-2"), {
        metadata: { annotations: { [SIM_ANNOTATIONS.fail]: null } },
      });
      await patchSpec(ns, "crew", { suspend: false });
      const after = await waitForPods(
        ns,
        "crew",
        3,
        (p) => vmReady(p) && annotationsOf(p)[ANNOTATIONS.hibernate] === undefined,
        "every VM ready again with no hibernate ask",
      );
      const rebuilt = after.find((p) => p.metadata?.name === "crew-2");
      assert.notEqual(
        rebuilt?.metadata?.uid,
        uidOf.get("crew-2"),
        "the failed sub-agent was rebuilt",
      );
      assert.equal(
        after.find((p) => p.metadata?.name === "crew-1")?.metadata?.uid,
        uidOf.get("crew-1"),
        "the hibernated one was woken in place",
      );
      await waitForConverged(ns, "crew", { replicas: 2 });
    });

    test("a registry that does not answer fails the pass closed: Suspending is kept and the error names the probe", async (t) => {
      const c = new Cleanup(t);
      // A loopback port nothing listens on.
      const dead = `127.0.0.1:${await freePort()}`;
      const { ns, proc } = await setUp(c, "susp-noreg", dead);
      await createCocoonSet(ns, "crew", { replicas: 1 });
      await waitForConverged(ns, "crew", { replicas: 1 });
      await waitForPods(ns, "crew", 2, vmReady, "every VM booted by the simulator");
      const history = await ObjectHistory.start<CocoonSet>(t, client, paths.cocoonSets(ns), "crew");
      const from = proc.lines.length;
      await patchSpec(ns, "crew", { suspend: true });
      // The asks need no registry; the gate does, once the node agent reports hibernated.
      await waitForPods(
        ns,
        "crew",
        2,
        (p) => annotationsOf(p)[ANNOTATIONS.lifecycleState] === "hibernated",
        "both VMs hibernated by the simulator",
      );
      const failure = await proc.waitForLog(
        "a reconcile failed on the registry probe",
        (l) =>
          l.msg === "reconcile failed; requeued with backoff" &&
          /\[spec\.suspend\] cannot tell which VMs have hibernated: the snapshot registry did not answer: probe hibernate snapshot vk-/.test(
            String(l.err),
          ),
        { from },
      );
      assert.match(
        String(failure.err),
        new RegExp(`HEAD http://${dead.replace(/\./g, "\\.")}/v2/vk-`),
      );
      const now = await client.get<CocoonSet>(paths.cocoonSet(ns, "crew"));
      assert.equal(phaseOf(now), "Suspending", "never Suspended without the registry's word");
      assert.ok(!history.fold(phaseOf).includes("Suspended"));
      // Three calls without an answer open the registry's breaker: the fleet then says so
      // (Warning SnapshotRegistryUnanswered) and is asked again after each cool-down, failing
      // closed every time rather than giving up.
      const unanswered = (l: { reason?: unknown; msg: string }) =>
        l.reason === "SnapshotRegistryUnanswered" && /; requeued in \d+s$/.test(l.msg);
      await proc.waitForLog("the registry taken for unanswered", unanswered, { from });
      await proc.waitForLog("asked again after the cool-down", unanswered, {
        from: proc.lines.findLastIndex(unanswered) + 1,
      });
      assert.equal(phaseOf(await client.get<CocoonSet>(paths.cocoonSet(ns, "crew"))), "Suspending");
    });

    test("cocoonset plan --oci-registry shows the suspend the controller would carry out; without it, none; a bad value names the flag", async (t) => {
      const c = new Cleanup(t);
      const { ns } = await setUp(c, "susp-plan");
      await createCocoonSet(ns, "crew", { replicas: 2 });
      await waitForConverged(ns, "crew", { replicas: 2 });
      await waitForPods(ns, "crew", 3, vmReady, "every VM booted by the simulator");
      const dir = mkdtempSync(join(tmpdir(), "cocoonset-plan-suspend-"));
      t.after(() => rmSync(dir, { recursive: true, force: true }));
      const file = join(dir, "crew.yaml");
      const live = await client.get<CocoonSet>(paths.cocoonSet(ns, "crew"));
      writeFileSync(
        file,
        stringify({
          apiVersion: live.apiVersion,
          kind: live.kind,
          metadata: { name: "crew", namespace: ns },
          spec: { ...live.spec, suspend: true },
        }),
      );
      const env = { ...process.env, KUBECONFIG: "", OCI_REGISTRY: "" };
      const plan = (...args: string[]) =>
        promisify(execFile)(
          process.execPath,
          [CLI_MAIN, "plan", "-f", file, "--kubeconfig", testKubeconfig(), ...args],
          { env },
        );
      const withRegistry = JSON.parse(
        (await plan("--json", "--oci-registry", registryAddress())).stdout,
      ) as PlanJSON;
      assert.deepEqual(
        withRegistry.changes.map((x) => [x.target, x.decision]),
        [
          ["main", "hibernate"],
          ["slot 1", "hibernate"],
          ["slot 2", "hibernate"],
        ],
      );
      const text = (await plan("--oci-registry", registryAddress())).stdout;
      assert.match(text, /^main: hibernate \(suspend\)$/m);
      const without = JSON.parse((await plan("--json")).stdout) as PlanJSON;
      assert.deepEqual(without.changes, [], "without a registry, suspend is not acted on");
      // Read-only: nothing was asked to hibernate.
      for (const p of await fleetPods(client, ns, "crew"))
        assert.equal(annotationsOf(p)[ANNOTATIONS.hibernate], undefined);
      await assert.rejects(
        plan("--oci-registry", "not a registry"),
        (e: Error & { code?: number; stderr?: string }) => {
          assert.equal(e.code, 2);
          assert.match(String(e.stderr), /\[--oci-registry\] must be host\[:port\]\[\/prefix\]/);
          return true;
        },
      );
    });
  },
);
