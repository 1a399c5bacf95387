/**
 * No wedged fleet (issue 25, item 6b), end to end with the real controller process: a pod
 * that is not the fleet's holds a slot's name (`kubectl run f15-1`). The controller names
 * the pod in a Warning `SlotBlocked` and in the `SlotBlocked` condition, creates the other
 * slots, writes a status true to the pods (2 of 3 agents ready, phase Scaling), and
 * `cocoonset plan` says the slot is blocked and by what. Once the pod is gone the slot is
 * created and the fleet converges.
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
} from "../support/controller-fleet.js";
import { CLI_MAIN, Cleanup } from "../support/controller-process.js";
import { lifecycleNamespace } from "../support/lifecycle.js";

const client = adminClient();
const condition = (cs: CocoonSet | undefined, type: string) =>
  cs?.status?.conditions?.find((c) => c.type === type);

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
