/**
 * No wedged fleet (issue 25, item 6a), end to end: the real controller process with
 * `--oci-registry`, the node-agent simulator, the registry and the embedded cluster's two
 * kwok nodes.
 *
 * - `spec.nodeName: no-such-node`: refused before anything hibernates: a Warning
 *   `MigrationRefused` and the condition of that name say why, the main agent is never asked
 *   to hibernate and the fleet stays `Running` where it runs; clearing the field ends it;
 * - a migration whose restore pod cannot be placed on its target (the node cordoned after
 *   the migration began): clearing `nodeName` replaces that pod and restores the VM on any
 *   node, from the migration's snapshot, then `Running`.
 *
 * Every wait is a watch on the CocoonSet, its pods or its events.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { SIM_ANNOTATIONS } from "../../cluster/node-agent.js";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { vmNameFor } from "../../engine/pods/pod-builder.js";
import { ANNOTATIONS, SNAPSHOT_TAGS, type Pod } from "../../engine/spec/index.js";
import { PatchType, paths } from "../../engine/kube/index.js";
import { OciRegistry } from "../../engine/registry/oci.js";
import { adminClient } from "../support/cluster.js";
import {
  createCocoonSet,
  patchSpec,
  waitForConverged,
  waitForEvent,
  statusCondition as condition,
} from "../support/controller-fleet.js";
import { Cleanup } from "../support/controller-process.js";
import {
  lifecycleNamespace,
  registryAddress,
  vmReady,
  waitForPods,
  waitForSet,
} from "../support/lifecycle.js";
import { ObjectHistory } from "../support/object-history.js";

const client = adminClient();
const NODES = ["kwok-node-0", "kwok-node-1"];
const annotationsOf = (p: Pod) => p.metadata?.annotations ?? {};

const cordon = (node: string, value: boolean) =>
  client.patch(`${paths.nodes()}/${node}`, { spec: { unschedulable: value } }, PatchType.merge);

before(async () => {
  await ensureCrd(client);
});
after(() => cordon(NODES[1], false));

describe(
  "migration to spec.nodeName: an unfit target (controller, simulator, registry)",
  { timeout: 240_000 },
  () => {
    test("a node that does not exist is refused before anything hibernates", async (t) => {
      const c = new Cleanup(t);
      const { ns } = await lifecycleNamespace(c, "mig-refused", registryAddress());
      await createCocoonSet(ns, "mover", { nodeName: NODES[0] });
      await waitForConverged(ns, "mover", { replicas: 0 });
      const [main] = await waitForPods(ns, "mover", 1, vmReady, "the VM booted on node 0");
      const podHistory = await ObjectHistory.start<Pod>(t, client, paths.pods(ns), "mover-0");

      await patchSpec(ns, "mover", { nodeName: "no-such-node" });
      const [warning] = await waitForEvent(
        ns,
        "mover",
        "MigrationRefused",
        /node "no-such-node" does not exist/,
      );
      assert.equal(warning.type, "Warning");
      const cs = await waitForSet(
        ns,
        "mover",
        (x) =>
          condition(x, "MigrationRefused")?.status === "True" &&
          x.status?.observedGeneration === x.metadata.generation,
        "condition MigrationRefused",
      );
      assert.equal(cs.status?.phase, "Running", "the main agent stays where it runs");
      assert.match(
        condition(cs, "MigrationRefused")?.message ?? "",
        /^\[spec\.nodeName\] node "no-such-node" does not exist/,
      );
      assert.ok(
        podHistory.seen.every(
          (p) =>
            p.metadata?.uid === main.metadata?.uid &&
            annotationsOf(p)[ANNOTATIONS.hibernate] === undefined,
        ),
        "the main agent was never asked to hibernate",
      );

      await patchSpec(ns, "mover", { nodeName: null });
      const cleared = await waitForSet(
        ns,
        "mover",
        (x) =>
          condition(x, "MigrationRefused")?.status === "False" &&
          x.status?.observedGeneration === x.metadata.generation,
        "the refusal over once nodeName is cleared",
      );
      assert.equal(cleared.status?.phase, "Running");
    });

    test("nodeName cleared while the restore waits for a target that cannot take it: restored on any node", async (t) => {
      const c = new Cleanup(t);
      const { ns } = await lifecycleNamespace(c, "mig-retarget", registryAddress());
      const reg = new OciRegistry(registryAddress());
      const vm = vmNameFor(ns, "mover", 0);
      await createCocoonSet(ns, "mover", { nodeName: NODES[0] });
      await waitForConverged(ns, "mover", { replicas: 0 });
      const [old] = await waitForPods(ns, "mover", 1, vmReady, "the VM booted on node 0");
      // Time to cordon the target between the check and the restore.
      await client.patch(
        paths.pod(ns, "mover-0"),
        { metadata: { annotations: { [SIM_ANNOTATIONS.hibernateDelayMs]: "3000" } } },
        PatchType.merge,
      );
      await patchSpec(ns, "mover", { nodeName: NODES[1] });
      await waitForPods(
        ns,
        "mover",
        1,
        (p) => annotationsOf(p)[ANNOTATIONS.hibernate] === "true",
        "the migration began",
      );
      await cordon(NODES[1], true);
      const [stuck] = await waitForPods(
        ns,
        "mover",
        1,
        (p) =>
          p.metadata?.uid !== old.metadata?.uid &&
          !p.spec?.nodeName &&
          (p.status?.conditions ?? []).some(
            (x) => x.type === "PodScheduled" && x.reason === "Unschedulable",
          ),
        "the restore pod unschedulable on the cordoned target",
      );
      assert.equal(annotationsOf(stuck)[ANNOTATIONS.restoreFromHibernate], "true");

      await patchSpec(ns, "mover", { nodeName: null });
      const [moved] = await waitForPods(
        ns,
        "mover",
        1,
        (p) => p.metadata?.uid !== stuck.metadata?.uid && vmReady(p),
        "restored on any node",
      );
      assert.equal(moved.spec?.nodeName, NODES[0]);
      assert.equal(moved.spec?.affinity, undefined, "no pin once nodeName is cleared");
      assert.match(
        annotationsOf(moved)[ANNOTATIONS.lifecycleStateMessage] ?? "",
        new RegExp(`restored from .*${vm}:${SNAPSHOT_TAGS.hibernate}$`),
        "from the migration's snapshot, not a fresh boot",
      );
      await waitForSet(
        ns,
        "mover",
        (x) =>
          x.status?.phase === "Running" && x.status.observedGeneration === x.metadata.generation,
        "Running",
      );
      assert.deepEqual(await reg.listTags(vm), [], "the tag dropped once the VM is live");
    });
  },
);
