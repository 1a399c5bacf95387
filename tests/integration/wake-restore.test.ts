/**
 * A retain wake whose main agent's pod is deleted while its VM is still starting: the
 * replacement restores from the fleet's own snapshot instead of booting fresh. The
 * CocoonSet's record (`status.vms`) marks the member hibernated from the suspend until its
 * VM runs again. The real controller process with `--oci-registry`, the node-agent
 * simulator and the embedded registry; every wait is a watch.
 */
import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import { SIM_ANNOTATIONS } from "../../cluster/node-agent.js";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { ANNOTATIONS, type CocoonSet, type Pod } from "../../engine/spec/index.js";
import { paths } from "../../engine/kube/index.js";
import { adminClient } from "../support/cluster.js";
import { createCocoonSet, patchSpec, waitForConverged } from "../support/controller-fleet.js";
import { Cleanup } from "../support/controller-process.js";
import { lifecycleNamespace, registryAddress, vmReady, waitForPods } from "../support/lifecycle.js";
import { ObjectHistory } from "../support/object-history.js";

const client = adminClient();
const annotationsOf = (p: Pod | undefined) => p?.metadata?.annotations ?? {};

before(async () => {
  await ensureCrd(client);
});

describe(
  "a retain wake interrupted by a pod deletion (controller, simulator, registry)",
  { timeout: 180_000 },
  () => {
    test("the main agent's replacement restores from the snapshot; the record's mark goes once it runs", async (t) => {
      const c = new Cleanup(t);
      const { ns } = await lifecycleNamespace(c, "wake-del", registryAddress());
      await createCocoonSet(ns, "f9", {});
      await waitForConverged(ns, "f9", { replicas: 0 });
      const [first] = await waitForPods(ns, "f9", 1, vmReady, "the VM booted");
      // The wake of this pod takes long enough to delete the pod in the middle of it.
      await client.patch(paths.pod(ns, "f9-0"), {
        metadata: { annotations: { [SIM_ANNOTATIONS.wakeDelayMs]: "20000" } },
      });
      const set = await ObjectHistory.start<CocoonSet>(t, client, paths.cocoonSets(ns), "f9");
      await patchSpec(ns, "f9", { suspend: true });
      await set.until(
        (cs) => cs.status?.phase === "Suspended" && cs.status?.vms?.["0"]?.hibernated === true,
        "Suspended, the main agent's VM recorded hibernated",
      );

      const pods = await ObjectHistory.start<Pod>(t, client, paths.pods(ns), "f9-0");
      await patchSpec(ns, "f9", { suspend: null });
      await pods.until(
        (p) => annotationsOf(p)[ANNOTATIONS.lifecycleState] === "creating",
        "the wake under way",
      );
      await client.delete(paths.pod(ns, "f9-0"), { uid: first.metadata?.uid });
      const replacement = await pods.until(
        (p) => p.metadata?.uid !== first.metadata?.uid && !p.metadata?.deletionTimestamp,
        "the replacement created",
      );
      assert.equal(
        annotationsOf(replacement)[ANNOTATIONS.restoreFromHibernate],
        "true",
        "the replacement restores from the fleet's snapshot",
      );
      const [woken] = await waitForPods(ns, "f9", 1, vmReady, "the replacement's VM running");
      assert.match(annotationsOf(woken)[ANNOTATIONS.lifecycleStateMessage] ?? "", /restored from/);
      await set.until(
        (cs) => cs.status?.vms?.["0"]?.hibernated === undefined,
        "the mark cleared once the VM runs",
      );
    });
  },
);
