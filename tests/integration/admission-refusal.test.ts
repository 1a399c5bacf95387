/**
 * A namespace whose admission refuses every pod the fleet asks for (issue 39, finding 8):
 * Pod Security `restricted` enforced, so each create meets 403. The status used to stay
 * empty (no phase, no condition, no event); now the pass writes what the pods give (phase
 * Pending), a condition `ReplicaFailure` with reason `FailedCreate` quoting the apiserver,
 * and a Warning `FailedCreate`, as the quota case writes `ReplicaFailure`. Past the progress
 * deadline (the controller's clock moved past it) `Progressing` is `False`
 * (`ProgressDeadlineExceeded`) naming the refusal. Once the namespace allows the pods, the
 * fleet converges and the condition goes.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import type { CocoonSet } from "../../engine/spec/index.js";
import { PatchType, paths, waitForObject } from "../../engine/kube/index.js";
import { adminClient } from "../support/cluster.js";
import { Cleanup, controllerNamespace } from "../support/controller-process.js";
import { startInProcessController } from "../support/controller-in-process.js";
import { WarpClock } from "../support/fake-clock.js";
import {
  createCocoonSet,
  waitForConverged,
  waitForEvent,
  statusCondition as condition,
} from "../support/controller-fleet.js";

test("Pod Security restricted refuses every create: the status and a Warning FailedCreate say so, then ProgressDeadlineExceeded", async (t) => {
  const c = new Cleanup(t);
  const client = adminClient();
  await ensureCrd(client);
  const ns = await controllerNamespace(c, "admission");
  const enforce = (level: string | null) =>
    client.patch(
      paths.namespace(ns),
      { metadata: { labels: { "pod-security.kubernetes.io/enforce": level } } },
      PatchType.merge,
    );
  await enforce("restricted");
  const clock = new WarpClock();
  const proc = await startInProcessController(c, { namespaces: [ns], clock });
  await proc.synced();
  await createCocoonSet(ns, "psa", { replicas: 1 });

  const refused = (await waitForObject<CocoonSet>(
    client,
    paths.cocoonSets(ns),
    "psa",
    (cs) => condition(cs, "ReplicaFailure")?.status === "True",
    { timeoutMs: 60_000, description: "the status to name the refusal" },
  )) as CocoonSet;
  assert.equal(refused.status?.phase, "Pending");
  assert.equal(refused.status?.observedGeneration, refused.metadata.generation);
  const failure = condition(refused, "ReplicaFailure");
  assert.equal(failure?.reason, "FailedCreate");
  assert.match(
    failure?.message ?? "",
    /^the apiserver refuses to create the pods of 1 missing member\(s\): .*violates PodSecurity "restricted/,
  );
  const [warning] = await waitForEvent(ns, "psa", "FailedCreate", /violates PodSecurity/);
  assert.equal(warning.type, "Warning");
  assert.equal(warning.note, failure?.message);

  clock.advance(601_000);
  const stalled = await waitForObject<CocoonSet>(
    client,
    paths.cocoonSets(ns),
    "psa",
    (cs) => condition(cs, "Progressing")?.reason === "ProgressDeadlineExceeded",
    { timeoutMs: 60_000, description: "Progressing False, ProgressDeadlineExceeded" },
  );
  assert.equal(condition(stalled, "Progressing")?.status, "False");
  assert.match(
    condition(stalled, "Progressing")?.message ?? "",
    /phase Pending: waiting for: the apiserver refuses to create the pods of 1 missing member\(s\)/,
  );
  await waitForEvent(ns, "psa", "ProgressDeadlineExceeded", /violates PodSecurity/);

  // The namespace lets the pods in: the fleet converges and the refusal is gone.
  await enforce(null);
  const { cs: done } = await waitForConverged(ns, "psa", { replicas: 1 }, 90_000);
  assert.equal(condition(done, "ReplicaFailure"), undefined);
  assert.equal(condition(done, "Progressing")?.reason, "Stable");
  await proc.stop();
});
