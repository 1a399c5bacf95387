/**
 * No wedged fleet (issue 25, item 6b), end to end with the real controller process: a pod
 * that is not the fleet's holds a slot's name (`kubectl run f15-1`). The controller names
 * the pod in a Warning `SlotBlocked` and in the `SlotBlocked` condition, creates the other
 * slots, writes a status true to the pods (2 of 3 agents ready, phase Scaling), and
 * `cocoonset plan` says the slot is blocked and by what. Once the pod is gone the slot is
 * created and the fleet converges.
 *
 * A pod that names the CocoonSet as its controller (an ownerReference anyone who may create
 * pods can write) but lacks the fleet's labels (issue 39, finding 5): the create of that slot
 * meets 409, and the controller used to take the holder for its own pod and wait for a cache
 * that never shows it (no status, no event, for ever). Now the slot is blocked by that pod,
 * said in the condition, the Warning and `cocoonset plan` without contradiction, and after
 * the progress deadline (the controller's clock moved past it) the condition `Progressing`
 * is `False` with reason `ProgressDeadlineExceeded`, naming the pod, with a Warning.
 *
 * Every wait is a watch on the CocoonSet or its events.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { stringify } from "yaml";
import { before, describe, test } from "node:test";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import type { CocoonSet } from "../../engine/spec/index.js";
import type { PlanJSON } from "../../engine/plan/plan-render.js";
import { paths, waitForObject } from "../../engine/kube/index.js";
import { adminClient, testKubeconfig } from "../support/cluster.js";
import {
  IMAGE,
  createCocoonSet,
  waitForConverged,
  waitForEvent,
  statusCondition as condition,
} from "../support/controller-fleet.js";
import { CLI_MAIN, Cleanup, controllerNamespace } from "../support/controller-process.js";
import { startInProcessController } from "../support/controller-in-process.js";
import { WarpClock } from "../support/fake-clock.js";
import { patchSpec } from "../support/controller-fleet.js";
import { lifecycleNamespace } from "../support/lifecycle.js";

const client = adminClient();

before(async () => {
  await ensureCrd(client);
});

describe(
  "a pod that is not the fleet's holds a slot's name (controller)",
  { timeout: 180_000 },
  () => {
    test("the slot is named as blocked by that pod; the others run and the status is true", async (t) => {
      const c = new Cleanup(t);
      const { ns } = await lifecycleNamespace(c, "blocked", null);
      // What `kubectl run f15-1 --image=busybox` leaves: no fleet label, no owner.
      await client.create(paths.pods(ns), {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "f15-1", labels: { run: "f15-1" } },
        spec: { containers: [{ name: "f15-1", image: "busybox" }] },
      });
      await createCocoonSet(ns, "f15", { replicas: 2 });

      const [warning] = await waitForEvent(ns, "f15", "SlotBlocked", /^slot 1: pod f15-1 /);
      assert.equal(warning.type, "Warning");
      assert.match(warning.note ?? "", /is not this CocoonSet's \(no controller\)/);
      const cs = (await waitForObject(
        client,
        paths.cocoonSets(ns),
        "f15",
        (o) => {
          const s = (o as unknown as CocoonSet | undefined)?.status;
          return (
            s?.readyAgents === 2 &&
            condition(o as unknown as CocoonSet, "SlotBlocked")?.status === "True"
          );
        },
        { timeoutMs: 60_000, description: "2 agents ready and the SlotBlocked condition" },
      )) as unknown as CocoonSet;
      assert.equal(cs.status?.phase, "Scaling");
      assert.equal(cs.status?.desiredAgents, 3);
      assert.deepEqual(
        (cs.status?.agents ?? []).map((a) => a.slot),
        [0, 2],
        "the foreign pod is no member",
      );
      assert.equal(condition(cs, "Ready")?.message, "2/3 agents ready, 0/0 toolboxes ready");
      assert.match(condition(cs, "SlotBlocked")?.message ?? "", /slot 1: pod f15-1 already exists/);

      // `cocoonset plan` says the slot is blocked and by what.
      const dir = mkdtempSync(join(tmpdir(), "cocoonset-plan-blocked-"));
      t.after(() => rmSync(dir, { recursive: true, force: true }));
      const file = join(dir, "f15.yaml");
      writeFileSync(
        file,
        stringify({
          apiVersion: cs.apiVersion,
          kind: cs.kind,
          metadata: { name: "f15", namespace: ns },
          spec: { agent: { image: IMAGE, replicas: 2 } },
        }),
      );
      const run = async (...args: string[]) =>
        (
          await promisify(execFile)(
            process.execPath,
            [CLI_MAIN, "plan", "-f", file, "--kubeconfig", testKubeconfig(), ...args],
            { env: { ...process.env, KUBECONFIG: "", OCI_REGISTRY: "" } },
          )
        ).stdout;
      assert.match(
        await run(),
        /^slot 1: blocked: pod f15-1 already exists and is not this CocoonSet's/m,
      );
      const planned = JSON.parse(await run("--json")) as PlanJSON;
      assert.deepEqual(
        planned.changes.map((x) => [x.target, x.decision]),
        [["slot 1", "blocked"]],
      );

      // The holder gone: the slot is created and the fleet converges.
      await client.delete(paths.pod(ns, "f15-1"));
      const { cs: done } = await waitForConverged(ns, "f15", { replicas: 2 }, 90_000);
      assert.equal(condition(done, "SlotBlocked")?.status, "False");
    });
  },
);

/** `cocoonset plan -f` of a fleet `name` with `replicas` sub-agents, as text. */
async function planText(
  t: { after(fn: () => void): void },
  ns: string,
  name: string,
  replicas: number,
) {
  const dir = mkdtempSync(join(tmpdir(), "cocoonset-plan-forged-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, `${name}.yaml`);
  writeFileSync(
    file,
    stringify({
      apiVersion: "cocoonset.cocoonstack.io/v1",
      kind: "CocoonSet",
      metadata: { name, namespace: ns },
      spec: { agent: { image: IMAGE, replicas } },
    }),
  );
  return (
    await promisify(execFile)(
      process.execPath,
      [CLI_MAIN, "plan", "-f", file, "--kubeconfig", testKubeconfig()],
      { env: { ...process.env, KUBECONFIG: "", OCI_REGISTRY: "" } },
    )
  ).stdout;
}

describe(
  "a pod with a forged owner and without the fleet's labels holds a slot's name (controller, moved clock)",
  { timeout: 180_000 },
  () => {
    test("the slot is blocked naming the pod and what it lacks; past the progress deadline Progressing is False (ProgressDeadlineExceeded) with a Warning", async (t) => {
      const c = new Cleanup(t);
      const ns = await controllerNamespace(c, "forged-holder");
      const clock = new WarpClock();
      const proc = await startInProcessController(c, { namespaces: [ns], clock });
      await proc.synced();
      const created = await createCocoonSet(ns, "f16", { replicas: 1 });
      await waitForConverged(ns, "f16", { replicas: 1 }, 90_000);

      // The forgery: a controller ownerReference to the fleet (no blockOwnerDeletion, which
      // the apiserver allows without rights on the CocoonSet), no fleet or managed-by label.
      await client.create(paths.pods(ns), {
        apiVersion: "v1",
        kind: "Pod",
        metadata: {
          name: "f16-2",
          labels: { run: "f16-2" },
          ownerReferences: [
            {
              apiVersion: "cocoonset.cocoonstack.io/v1",
              kind: "CocoonSet",
              name: "f16",
              uid: created.metadata.uid,
              controller: true,
            },
          ],
        },
        spec: { containers: [{ name: "f16-2", image: "busybox" }] },
      });
      await patchSpec(ns, "f16", { agent: { replicas: 2 } });

      const holder =
        /^slot 2: pod f16-2 already exists and is not this CocoonSet's \(its ownerReference names this CocoonSet, but it lacks the label\(s\) cocoonset\.cocoonstack\.io\/name=f16, app\.kubernetes\.io\/managed-by=cocoonset that the CocoonSet's pods carry: the controller did not create it\)/;
      const [warning] = await waitForEvent(ns, "f16", "SlotBlocked", holder);
      assert.equal(warning.type, "Warning");
      const blocked = (await waitForObject(
        client,
        paths.cocoonSets(ns),
        "f16",
        (o) => {
          const cs = o as unknown as CocoonSet | undefined;
          return (
            cs?.status?.observedGeneration === cs?.metadata.generation &&
            condition(cs, "SlotBlocked")?.status === "True"
          );
        },
        { timeoutMs: 60_000, description: "the new generation observed with SlotBlocked" },
      )) as unknown as CocoonSet;
      assert.match(condition(blocked, "SlotBlocked")?.message ?? "", holder);
      assert.equal(blocked.status?.phase, "Scaling");
      assert.equal(condition(blocked, "Progressing")?.reason, "Reconciling");
      assert.ok(blocked.status?.lastProgressTime, "the clock of the deadline runs");

      // `cocoonset plan` names the same holder, with what it lacks.
      assert.match(
        await planText(t, ns, "f16", 2),
        /^slot 2: blocked: pod f16-2 already exists and is not this CocoonSet's \(its ownerReference names this CocoonSet, but it lacks/m,
      );

      // Ten minutes without progress, on the controller's clock.
      clock.advance(601_000);
      const stalled = (await waitForObject(
        client,
        paths.cocoonSets(ns),
        "f16",
        (o) =>
          condition(o as unknown as CocoonSet, "Progressing")?.reason ===
          "ProgressDeadlineExceeded",
        { timeoutMs: 60_000, description: "Progressing False, ProgressDeadlineExceeded" },
      )) as unknown as CocoonSet;
      const progressing = condition(stalled, "Progressing");
      assert.equal(progressing?.status, "False");
      assert.match(
        progressing?.message ?? "",
        /^no progress since \S+ \(progressDeadlineSeconds 600\), phase Scaling: waiting for: slot 2: pod f16-2 already exists/,
      );
      const [stall] = await waitForEvent(
        ns,
        "f16",
        "ProgressDeadlineExceeded",
        /slot 2: pod f16-2/,
      );
      assert.equal(stall.type, "Warning");

      // The holder gone: the slot is created, the fleet rests, and the clock is put away.
      await client.delete(paths.pod(ns, "f16-2"));
      const { cs: done } = await waitForConverged(ns, "f16", { replicas: 2 }, 90_000);
      assert.equal(condition(done, "Progressing")?.reason, "Stable");
      assert.equal(done.status?.lastProgressTime, undefined);
      await proc.stop();
    });
  },
);
