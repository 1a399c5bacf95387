/**
 * No silent loss (issue 25, item 5) and a status that agrees with itself (item 7), end to end:
 * the real controller process with `--oci-registry` at the embedded registry, the node-agent
 * simulator in an opted-in namespace and the real registry, whose tags a test deletes by hand.
 *
 * - retain wake: a sub-agent's `:hibernate` tag deleted while suspended; the wake records
 *   the VM (annotation `cocoonset.cocoonstack.io/lost-snapshots`), posts a Warning
 *   `SnapshotLost` naming it and the status carries the `SnapshotLost` condition naming it;
 * - release wake: the main agent's tag deleted while the seat is released; the main agent
 *   boots fresh, loudly (the same Warning and condition), never a quiet `Running`;
 * - a main agent whose wake fails (the simulator's `fail: wake`): phase `Failed` with
 *   `readyAgents`, `agents[0].phase` and the `Ready` message all saying it is not ready.
 *
 * Every wait is a watch on the CocoonSet, its pods or its events.
 */
import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import { SIM_ANNOTATIONS } from "../../cluster/node-agent.js";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { vmNameFor } from "../../engine/pods/pod-builder.js";
import {
  ANNOTATIONS,
  SNAPSHOT_TAGS,
  type CocoonHibernation,
  type CocoonSet,
  type Pod,
} from "../../engine/spec/index.js";
import { PatchType, paths, waitForList, waitForObject } from "../../engine/kube/index.js";
import { OciRegistry } from "../../engine/registry/oci.js";
import { adminClient } from "../support/cluster.js";
import {
  type EventV1,
  createCocoonSet,
  patchSpec,
  waitForConverged,
  waitForEvent,
  statusCondition as condition,
} from "../support/controller-fleet.js";
import { Cleanup } from "../support/controller-process.js";
import {
  createHibernation,
  lifecycleNamespace,
  registryAddress,
  vmReady,
  waitForPods,
  waitForSet,
} from "../support/lifecycle.js";

const client = adminClient();
const annotationsOf = (o: { metadata?: { annotations?: Record<string, string> } }) =>
  o.metadata?.annotations ?? {};

before(async () => {
  await ensureCrd(client);
});

const suspended = (cs: CocoonSet) =>
  cs.status?.phase === "Suspended" && cs.status.observedGeneration === cs.metadata.generation;

describe(
  "no silent loss of a recorded snapshot (controller, simulator, registry)",
  { timeout: 300_000 },
  () => {
    test("retain wake: a sub-agent's tag gone is recorded, a Warning SnapshotLost and a condition name its VM", async (t) => {
      const c = new Cleanup(t);
      const { ns } = await lifecycleNamespace(c, "lost-retain", registryAddress());
      const reg = new OciRegistry(registryAddress());
      const vm1 = vmNameFor(ns, "keep", 1);
      await createCocoonSet(ns, "keep", { replicas: 1 });
      await waitForConverged(ns, "keep", { replicas: 1 });
      await waitForPods(ns, "keep", 2, vmReady, "both VMs booted");
      await patchSpec(ns, "keep", { suspend: true });
      await waitForSet(ns, "keep", suspended, "phase Suspended");
      assert.deepEqual(await reg.listTags(vm1), [SNAPSHOT_TAGS.hibernate]);
      await reg.deleteManifest(vm1, SNAPSHOT_TAGS.hibernate);

      await patchSpec(ns, "keep", { suspend: false });
      const [warning] = await waitForEvent(
        ns,
        "keep",
        "SnapshotLost",
        new RegExp(`^slot 1: .*${vm1}`),
      );
      assert.equal(warning.type, "Warning");
      assert.match(warning.note ?? "", /was recorded and is no longer in the registry/);
      const cs = await waitForSet(
        ns,
        "keep",
        (x) => condition(x, "SnapshotLost")?.status === "True",
        "condition SnapshotLost True",
      );
      assert.match(
        condition(cs, "SnapshotLost")?.message ?? "",
        new RegExp(`${vm1}:hibernate \\(slot 1\\)`),
      );
      assert.deepEqual(
        Object.keys(JSON.parse(annotationsOf(cs)[ANNOTATIONS.lostSnapshots] ?? "{}") as object),
        [vm1],
        "only the VM whose tag is gone is recorded",
      );
      // The fleet recovers (the sub-agent is rebuilt fresh) and the condition stays.
      const settled = await waitForSet(
        ns,
        "keep",
        (x) => x.status?.phase === "Running" && x.status.readyAgents === 2,
        "Running again with both agents",
      );
      assert.equal(condition(settled, "SnapshotLost")?.status, "True");
      // Acknowledged: the user removes the record; the condition turns False.
      await client.patch(
        paths.cocoonSet(ns, "keep"),
        { metadata: { annotations: { [ANNOTATIONS.lostSnapshots]: null } } },
        PatchType.merge,
      );
      // Annotation edits start no pass; a pod change does.
      await client.patch(
        paths.pod(ns, "keep-0"),
        { metadata: { annotations: { "test.cocoonstack.io/poke": String(Date.now()) } } },
        PatchType.merge,
      );
      await waitForSet(
        ns,
        "keep",
        (x) => condition(x, "SnapshotLost")?.status === "False",
        "condition SnapshotLost False once acknowledged",
      );
    });

    test("release wake: the main agent's tag gone boots it fresh, loudly", async (t) => {
      const c = new Cleanup(t);
      const { ns } = await lifecycleNamespace(c, "lost-release", registryAddress());
      const reg = new OciRegistry(registryAddress());
      const vm0 = vmNameFor(ns, "solo", 0);
      await createCocoonSet(ns, "solo", { hibernatePolicy: "release" });
      await waitForConverged(ns, "solo", { replicas: 0 });
      await waitForPods(ns, "solo", 1, vmReady, "the main VM booted");
      await patchSpec(ns, "solo", { suspend: true });
      await waitForSet(
        ns,
        "solo",
        (x) => suspended(x) && (x.status?.agents ?? []).length === 0,
        "Suspended, seat freed",
      );
      await waitForPods(ns, "solo", 0, () => true, "the released pod gone");
      await reg.deleteManifest(vm0, SNAPSHOT_TAGS.hibernate);

      await patchSpec(ns, "solo", { suspend: false });
      await waitForEvent(ns, "solo", "SnapshotLost", new RegExp(`^main agent: .*${vm0}`));
      const cs = await waitForSet(
        ns,
        "solo",
        (x) =>
          x.status?.phase === "Running" &&
          x.status.observedGeneration === x.metadata.generation &&
          condition(x, "SnapshotLost")?.status === "True",
        "Running, with the loss in the SnapshotLost condition",
      );
      assert.match(
        condition(cs, "SnapshotLost")?.message ?? "",
        new RegExp(`${vm0}:hibernate \\(main agent\\)`),
      );
      const [main] = await waitForPods(ns, "solo", 1, vmReady, "the main VM booted fresh");
      assert.equal(annotationsOf(main)[ANNOTATIONS.restoreFromHibernate], undefined);
    });
  },
);

describe(
  "no silent loss under a CocoonHibernation (controller, simulator, registry)",
  { timeout: 300_000 },
  () => {
    test("a pod its CR keeps Hibernated is built again after its tag is gone: the fresh boot is reported", async (t) => {
      const c = new Cleanup(t);
      const { ns } = await lifecycleNamespace(c, "lost-ch", registryAddress());
      const reg = new OciRegistry(registryAddress());
      const vm1 = vmNameFor(ns, "crew", 1);
      await createCocoonSet(ns, "crew", { replicas: 1 });
      await waitForConverged(ns, "crew", { replicas: 1 });
      await waitForPods(ns, "crew", 2, vmReady, "both VMs booted");
      await createHibernation(ns, "nap", "crew-1", "Hibernate");
      await waitForObject(
        client,
        paths.cocoonHibernations(ns),
        "nap",
        (o) => (o as { status?: { phase?: string } } | undefined)?.status?.phase === "Hibernated",
        { timeoutMs: 90_000, description: "the CR Hibernated" },
      );
      await reg.deleteManifest(vm1, SNAPSHOT_TAGS.hibernate);
      // A change of the pod makes the CR look again: it says the loss, and stays Hibernated.
      await client.patch(
        paths.pod(ns, "crew-1"),
        { metadata: { annotations: { "test.cocoonstack.io/poke": "1" } } },
        PatchType.merge,
      );
      const crEvents = await waitForList<EventV1>(
        client,
        paths.events(ns),
        (all) =>
          all.some((e) => e.reason === "SnapshotLost" && e.regarding?.kind === "CocoonHibernation"),
        { timeoutMs: 60_000, description: "Warning SnapshotLost on the CocoonHibernation" },
      );
      const onCr = crEvents.find(
        (e) => e.reason === "SnapshotLost" && e.regarding?.kind === "CocoonHibernation",
      );
      assert.equal(onCr?.type, "Warning");
      assert.match(onCr?.note ?? "", new RegExp(`^snapshot ${vm1}:hibernate was recorded`));
      const nap = await client.get<CocoonHibernation>(paths.cocoonHibernation(ns, "nap"));
      assert.equal(nap.status?.phase, "Hibernated");
      assert.equal(nap.status?.conditions?.[0]?.reason, "SnapshotLost");

      // The pod goes (deleted by hand, or its node lost): the pass builds it again with
      // restore intent, and reports the loss on the CocoonSet before the fresh boot.
      await client.delete(paths.pod(ns, "crew-1"));
      await waitForEvent(ns, "crew", "SnapshotLost", new RegExp(`^slot 1: .*${vm1}`));
      const cs = await waitForSet(
        ns,
        "crew",
        (x) => condition(x, "SnapshotLost")?.status === "True",
        "condition SnapshotLost True",
      );
      assert.match(
        condition(cs, "SnapshotLost")?.message ?? "",
        new RegExp(`${vm1}:hibernate \\(slot 1\\)`),
      );
    });
  },
);

describe(
  "a status that agrees with itself (controller, simulator, registry)",
  { timeout: 300_000 },
  () => {
    test("a main agent whose wake fails: Failed, and counted, listed and described as not ready", async (t) => {
      const c = new Cleanup(t);
      const { ns } = await lifecycleNamespace(c, "truth", registryAddress());
      await createCocoonSet(ns, "truth", { replicas: 2 });
      await waitForConverged(ns, "truth", { replicas: 2 });
      await waitForPods(ns, "truth", 3, vmReady, "three VMs booted");
      await client.patch(
        paths.pod(ns, "truth-0"),
        { metadata: { annotations: { [SIM_ANNOTATIONS.fail]: "wake" } } },
        PatchType.merge,
      );
      await patchSpec(ns, "truth", { suspend: true });
      await waitForSet(ns, "truth", suspended, "phase Suspended");
      await patchSpec(ns, "truth", { suspend: false });
      await waitForPods(
        ns,
        "truth",
        3,
        (p: Pod) =>
          p.metadata?.name === "truth-0"
            ? annotationsOf(p)[ANNOTATIONS.lifecycleState] === "failed"
            : vmReady(p),
        "the main VM failed its wake, the sub-agents woke",
      );
      const cs = await waitForSet(
        ns,
        "truth",
        (x) =>
          x.status?.phase === "Failed" && x.status.observedGeneration === x.metadata.generation,
        "phase Failed",
      );
      const s = cs.status!;
      assert.equal(s.readyAgents, 2, "the failed main agent is not counted ready");
      assert.equal(s.agents?.[0]?.phase, "Failed");
      const ready = condition(cs, "Ready");
      assert.equal(ready?.reason, "AgentsNotReady");
      assert.equal(ready?.message, "2/3 agents ready, 0/0 toolboxes ready");
    });
  },
);
