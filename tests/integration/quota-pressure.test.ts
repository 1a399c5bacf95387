/**
 * A fleet far larger than its namespace's ResourceQuota, under the controller: each pass is
 * one bounded log line (counts, the quota, the first reason) instead of one per refused
 * create, and the status says what holds the fleet back (its phase, and a ReplicaFailure
 * condition naming the quota) instead of staying empty. Once the fleet fits, the
 * condition goes.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import type { CocoonSet } from "../../engine/spec/index.js";
import { PatchType, paths, waitForObject, type KubeObject } from "../../engine/kube/index.js";
import { adminClient, testKubeconfig } from "../support/cluster.js";
import {
  Cleanup,
  controllerNamespace,
  startController,
  type LogLine,
} from "../support/controller-process.js";
import { createCocoonSet, fleetPods } from "../support/controller-fleet.js";

interface QuotaObject extends KubeObject {
  status?: { hard?: Record<string, string> };
}

const quotaCondition = (cs: CocoonSet | undefined) =>
  cs?.status?.conditions?.find((c) => c.type === "ReplicaFailure");

test("replicas far above a pods quota: one bounded line per pass, and the status names the quota", async (t) => {
  const cleanup = new Cleanup(t);
  const client = adminClient();
  await ensureCrd(client);
  const ns = await controllerNamespace(cleanup, "quota-pressure");
  await client.create(`/api/v1/namespaces/${ns}/resourcequotas`, {
    apiVersion: "v1",
    kind: "ResourceQuota",
    metadata: { name: "pods-4" },
    spec: { hard: { pods: "4" } },
  });
  // The apiserver enforces a quota once the quota controller has measured it.
  await waitForObject<QuotaObject>(
    client,
    `/api/v1/namespaces/${ns}/resourcequotas`,
    "pods-4",
    (q) => q?.status?.hard?.pods === "4",
    { timeoutMs: 60_000 },
  );
  const ctl = await startController(cleanup, { kubeconfig: testKubeconfig(), namespaces: [ns] });
  await createCocoonSet(ns, "big", { replicas: 120 });

  const blocked = await waitForObject<CocoonSet>(
    client,
    paths.cocoonSets(ns),
    "big",
    (cs) => quotaCondition(cs)?.status === "True" && cs?.status?.phase === "Scaling",
    { timeoutMs: 90_000, description: "the status to name the quota" },
  );
  const condition = quotaCondition(blocked);
  assert.equal(condition?.reason, "QuotaExceeded");
  assert.match(
    condition?.message ?? "",
    /^ResourceQuota pods-4 refuses the pods of \d+ missing member\(s\) \(requested: pods=1, used: pods=4, limited: pods=4\)/,
  );
  assert.equal(blocked?.status?.desiredAgents, 121);
  assert.equal((await fleetPods(client, ns, "big")).length, 4, "the quota holds");

  // A few passes, each refused by the quota.
  const failed = (l: LogLine) =>
    l.namespace === ns && l.msg === "reconcile failed; requeued with backoff";
  for (let n = 1; n <= 3; n++)
    await ctl.waitForLog(
      `failed pass ${n}`,
      (l) => failed(l) && ctl.lines.filter(failed).length >= n,
    );
  const summary = ctl.lines.find(failed);
  assert.match(
    String(summary?.err),
    /^\d+ step\(s\) failed \(create ×\d+\); ResourceQuota pods-4 is full; \d+ create\(s\) not sent \(the quota refused the ones before\); first: big-\d+ \(create\): .*exceeded quota: pods-4/,
  );
  const perPass = new Map<string, number>();
  for (const l of ctl.lines)
    if (l.namespace === ns && (l.level === "warn" || l.level === "error"))
      perPass.set(String(l.reconcileId), (perPass.get(String(l.reconcileId)) ?? 0) + 1);
  assert.ok(perPass.size >= 3);
  for (const [id, lines] of perPass) assert.equal(lines, 1, `reconcile ${id}: one line`);
  const longest = Math.max(...ctl.rawLines.map((l) => l.length));
  assert.ok(longest < 4096, `the longest line has ${longest} characters`);

  // The fleet made to fit: the next quiet pass writes a status without the condition.
  await client.patch(
    paths.cocoonSet(ns, "big"),
    { spec: { agent: { replicas: 3 } } },
    PatchType.merge,
  );
  const fits = await waitForObject<CocoonSet>(
    client,
    paths.cocoonSets(ns),
    "big",
    (cs) => cs?.status?.phase === "Running" && quotaCondition(cs) === undefined,
    { timeoutMs: 90_000, description: "the fleet to run without the quota condition" },
  );
  assert.equal(fits?.status?.readyAgents, 4);
});
