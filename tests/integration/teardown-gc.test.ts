/**
 * The snapshot clean-up of a CocoonSet's deletion, end to end: the real controller process,
 * the node-agent simulator in an opted-in namespace and the real registry, whose tag lists
 * are read over HTTP.
 *
 * - a suspended fleet with `snapshotPolicy: main-only` is deleted: once its pods are gone
 *   every `<vm>:hibernate` is dropped, `:latest` of the sub-agents too, the main agent's
 *   `:latest` and another set's tags are kept; the VM names were stashed on the CocoonSet
 *   before its pods went;
 * - a fleet suspended, woken with fewer slots, then deleted drops the tags of the slots scaled
 *   away too:
 *   the status records every VM the fleet named;
 * - a deletion while a VM is still hibernating waits for its snapshot, then drops it too;
 * - a registry that does not answer does not hold the deletion: the finalizer is released,
 *   the failure logged per tag;
 * - without a registry the deletion leaves the registry alone.
 *
 * Every wait is a watch on the CocoonSet or its pods.
 */
import assert from "node:assert/strict";
import { before, describe, test, type TestContext } from "node:test";
import { SIM_ANNOTATIONS } from "../../cluster/node-agent.js";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { ANNOTATIONS, SNAPSHOT_TAGS, type CocoonSet, type Pod } from "../../engine/spec/index.js";
import { paths, PatchType, waitForObject } from "../../engine/kube/index.js";
import { OciRegistry } from "../../engine/registry/oci.js";
import { adminClient } from "../support/cluster.js";
import { createCocoonSet, patchSpec, waitForConverged } from "../support/controller-fleet.js";
import { Cleanup, freePort } from "../support/controller-process.js";
import {
  lifecycleNamespace,
  pushTag,
  registryAddress,
  vmReady,
  waitForPods,
} from "../support/lifecycle.js";
import { ObjectHistory } from "../support/object-history.js";

const client = adminClient();

const phaseOf = (cs: CocoonSet) => cs.status?.phase ?? "";

/** Deletes the CocoonSet and waits (watch) until it is gone, finalizer released. */
async function deleteAndWait(ns: string, name: string): Promise<void> {
  await client.delete(paths.cocoonSet(ns, name));
  await waitForObject<CocoonSet>(client, paths.cocoonSets(ns), name, (o) => o === undefined, {
    timeoutMs: 60_000,
    description: `CocoonSet ${ns}/${name} to be gone`,
  });
}

before(async () => {
  await ensureCrd(client);
});

/**
 * A fleet `crew` of 2 sub-agents with the snapshot policy given, booted by the simulator and
 * then suspended: every VM's `:hibernate` is in the registry.
 */
async function suspendedCrew(
  t: TestContext,
  prefix: string,
  snapshotPolicy: "main-only" | "never",
) {
  const c = new Cleanup(t);
  const { ns } = await lifecycleNamespace(c, prefix, registryAddress());
  const reg = new OciRegistry(registryAddress());
  await createCocoonSet(ns, "crew", { replicas: 2, snapshotPolicy });
  await waitForConverged(ns, "crew", { replicas: 2 });
  await waitForPods(ns, "crew", 3, vmReady, "every VM booted by the simulator");
  const history = await ObjectHistory.start<CocoonSet>(t, client, paths.cocoonSets(ns), "crew");
  await patchSpec(ns, "crew", { suspend: true });
  await history.until((cs) => phaseOf(cs) === "Suspended", "phase Suspended", { show: phaseOf });
  const vms = [0, 1, 2].map((n) => `vk-${ns}-crew-${n}`);
  for (const vm of vms) assert.deepEqual(await reg.listTags(vm), [SNAPSHOT_TAGS.hibernate], vm);
  return { ns, reg, history, vms };
}

describe(
  "teardown GC of snapshot tags (controller, simulator, registry)",
  { timeout: 240_000 },
  () => {
    test("deleting a suspended main-only fleet drops every :hibernate and the sub-agents' :latest; keeps the main's :latest and other sets' tags", async (t) => {
      const { ns, reg, history, vms } = await suspendedCrew(t, "gc-main-only", "main-only");
      // `:latest` of an earlier deletion (hibernated VMs push none), and another set's tags.
      for (const vm of vms) await pushTag(reg, vm, SNAPSHOT_TAGS.latest);
      const other = `vk-${ns}-other-0`;
      await pushTag(reg, other, SNAPSHOT_TAGS.hibernate);
      await pushTag(reg, other, SNAPSHOT_TAGS.latest);

      await deleteAndWait(ns, "crew");
      // Before the pods went, the VM names were stashed on the CocoonSet.
      await history.until(
        (cs) => cs.metadata.annotations?.[ANNOTATIONS.deleteVmNames] === vms.join(","),
        "the VM names stashed",
      );
      assert.deepEqual(await reg.listTags(vms[0]), [SNAPSHOT_TAGS.latest], "main keeps :latest");
      assert.deepEqual(await reg.listTags(vms[1]), [], "slot 1: both tags dropped");
      assert.deepEqual(await reg.listTags(vms[2]), [], "slot 2: both tags dropped");
      assert.deepEqual(
        await reg.listTags(other),
        [SNAPSHOT_TAGS.hibernate, SNAPSHOT_TAGS.latest],
        "another CocoonSet's VM is not touched",
      );
    });

    test("a fleet suspended, woken with fewer slots, then deleted drops the :hibernate tags of the slots scaled away too (snapshotPolicy never)", async (t) => {
      const { ns, reg, vms } = await suspendedCrew(t, "gc-scaled", "never");
      // Woken with fewer slots: slots 1 and 2 are scaled away unwoken, their snapshots stay.
      await patchSpec(ns, "crew", { suspend: null, agent: { replicas: 0 } });
      await waitForConverged(ns, "crew", { replicas: 0 });
      await waitForPods(ns, "crew", 1, vmReady, "the main agent woken, slots 1 and 2 gone");
      for (const vm of vms.slice(1))
        assert.deepEqual(await reg.listTags(vm), [SNAPSHOT_TAGS.hibernate], `${vm} kept`);

      await deleteAndWait(ns, "crew");
      for (const vm of vms) assert.deepEqual(await reg.listTags(vm), [], `${vm}: dropped`);
    });

    test("a deletion waits for a hibernation in flight, so the snapshot it ends with is dropped with the rest", async (t) => {
      const c = new Cleanup(t);
      const { ns } = await lifecycleNamespace(c, "gc-in-flight", registryAddress());
      const reg = new OciRegistry(registryAddress());
      await createCocoonSet(ns, "crew", { replicas: 1, snapshotPolicy: "never" });
      await waitForConverged(ns, "crew", { replicas: 1 });
      await waitForPods(ns, "crew", 2, vmReady, "both VMs booted by the simulator");
      // The simulator holds crew-1 in `hibernating` for 4 s, then pushes its snapshot.
      await client.patch(
        paths.pod(ns, "crew-1"),
        { metadata: { annotations: { [SIM_ANNOTATIONS.hibernateDelayMs]: "4000" } } },
        PatchType.merge,
      );
      await patchSpec(ns, "crew", { suspend: true });
      await waitForPods(
        ns,
        "crew",
        2,
        (p) =>
          p.metadata?.name !== "crew-1" ||
          p.metadata.annotations?.[ANNOTATIONS.lifecycleState] === "hibernating",
        "crew-1 hibernating",
      );
      const pod = await ObjectHistory.start<Pod>(t, client, paths.pods(ns), "crew-1");
      await deleteAndWait(ns, "crew");
      // The pods went only once crew-1's hibernation had ended: its last version says so.
      const states = pod.seen.map((p) => p.metadata?.annotations?.[ANNOTATIONS.lifecycleState]);
      assert.equal(states.at(-1), "hibernated", `crew-1's states: ${states.join(", ")}`);
      assert.deepEqual(
        await reg.listTags(`vk-${ns}-crew-1`),
        [],
        "the :hibernate pushed at the end of the hibernation in flight is dropped too",
      );
    });

    test("a registry that does not answer does not hold the deletion; each failed tag is logged", async (t) => {
      const c = new Cleanup(t);
      const dead = `127.0.0.1:${await freePort()}`;
      const { ns, proc } = await lifecycleNamespace(c, "gc-dead", dead);
      await createCocoonSet(ns, "crew", { replicas: 1, snapshotPolicy: "never" });
      await waitForConverged(ns, "crew", { replicas: 1 });
      await deleteAndWait(ns, "crew");
      const dropFailed = "could not drop a snapshot tag; it is left in the registry";
      const expected = [
        `vk-${ns}-crew-0:hibernate`,
        `vk-${ns}-crew-0:latest`,
        `vk-${ns}-crew-1:hibernate`,
        `vk-${ns}-crew-1:latest`,
      ];
      // The lines are written before the finalizer is lifted, but reach the test through the
      // process's stdout pipe, which can lag behind the watch that saw the set go.
      for (const tag of expected)
        await proc.waitForLog(
          `${dropFailed} (${tag})`,
          (l) => l.msg === dropFailed && `${String(l.vm)}:${String(l.tag)}` === tag,
          { timeoutMs: 30_000 },
        );
      const failed = proc.logs((l) => l.msg === dropFailed);
      assert.deepEqual(
        failed.map((l) => `${String(l.vm)}:${String(l.tag)}`).sort(),
        expected,
        proc.tail(),
      );
      for (const l of failed)
        assert.match(String(l.error), new RegExp(`DELETE http://${dead}/v2/`));
    });

    test("without a registry the deletion leaves the tags", async (t) => {
      const c = new Cleanup(t);
      const { ns } = await lifecycleNamespace(c, "gc-none", null);
      const reg = new OciRegistry(registryAddress());
      await createCocoonSet(ns, "crew", { replicas: 0, snapshotPolicy: "never" });
      await waitForConverged(ns, "crew", { replicas: 0 });
      const vm = `vk-${ns}-crew-0`;
      await pushTag(reg, vm, SNAPSHOT_TAGS.hibernate);
      await pushTag(reg, vm, SNAPSHOT_TAGS.latest);
      await deleteAndWait(ns, "crew");
      assert.deepEqual(await reg.listTags(vm), [SNAPSHOT_TAGS.hibernate, SNAPSHOT_TAGS.latest]);
    });
  },
);
