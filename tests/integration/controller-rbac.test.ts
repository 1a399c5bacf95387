/**
 * The controller as a real process under exactly the RBAC the Operator installs for an
 * all-namespaces deployment: a service account bound to `controllerClusterRole()` and, in its
 * own namespace only, `controllerLeaseRole()`. A full lifecycle with leader election and a
 * 1 s reaper interval sees no denial: create, scale up and down, fail and rebuild, a
 * dead-letter mark, a toolbox name taken by another pod, expired Jobs, pods and ConfigMaps
 * reaped by the controller's own loop, and deletion releasing the tree a worker left (a Job
 * and a ConfigMap) before the finalizer goes. (That no granted verb is unused is
 * controller-rbac-verbs.test.ts.)
 *
 * It watches every namespace, so `scripts/test.mjs` runs this file alone.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { DEFAULT_LEASE_NAME } from "../../controller/leader-election.js";
import { toolboxPodName } from "../../engine/pods/index.js";
import { ANNOTATIONS } from "../../engine/spec/index.js";
import { paths, waitForList, waitForObject, type KubeObject } from "../../engine/kube/index.js";
import { adminClient, isReady } from "../support/cluster.js";
import {
  createCocoonSet,
  failPod,
  fleetPods,
  IMAGE,
  patchSpec,
  waitForConverged,
  waitForEvent,
} from "../support/controller-fleet.js";
import { Cleanup, controllerNamespace } from "../support/controller-process.js";
import {
  configMap,
  exhaustedCocoonSet,
  expiredJob,
  expiredPod,
  installRbac,
  NOWHERE,
  start,
  STARTUP_MS,
  textOf,
} from "../support/controller-rbac.js";

/** Any denial by RBAC or by the owner-reference admission check. */
const DENIAL = /cannot \w+ resource "|cannot set blockOwnerDeletion|HTTP 403/;
/**
 * A 403 that is not RBAC's: the namespace admission refusing creates in a namespace being
 * deleted. The controller watches every namespace of the shared test cluster, so another
 * test file's namespace still terminating (controller-ha.test.ts leaves a CocoonSet whose
 * pods are refused that way) shows up in its log.
 */
const TERMINATING = /unable to create new content in namespace \S+ because it is being terminated/;

describe(
  "cocoonset controller under exactly the generated ClusterRole",
  { timeout: 900_000 },
  () => {
    test("a full lifecycle with leader election and the reaper loop on meets no denial", async (t) => {
      const c = new Cleanup(t);
      const admin = adminClient();
      const rbac = await installRbac(c);
      const proc = await start(c, rbac, "cluster-role");
      await proc.synced(STARTUP_MS);
      const lease = await admin.get<{ spec?: { holderIdentity?: string } }>(
        paths.lease(rbac.sysNs, DEFAULT_LEASE_NAME),
      );
      assert.match(lease.spec?.holderIdentity ?? "", /./, "it leads on the Lease of its namespace");

      const ns = await controllerNamespace(c, "ctl-cr");
      // Create and scale.
      await createCocoonSet(ns, "life", { replicas: 2 });
      await waitForConverged(ns, "life", { replicas: 2 });
      await patchSpec(ns, "life", { agent: { replicas: 4 } });
      await waitForConverged(ns, "life", { replicas: 4 });
      await patchSpec(ns, "life", { agent: { replicas: 3 } });
      const { pods } = await waitForConverged(ns, "life", { replicas: 3 });

      // Fail and rebuild: history written, pod replaced, event posted.
      const victim = pods.find((p) => p.metadata?.name === "life-2")!;
      await failPod(ns, "life-2", victim.metadata!.uid!);
      await waitForObject(
        admin,
        paths.pods(ns),
        "life-2",
        (p) => !!p && p.metadata.uid !== victim.metadata?.uid && isReady(p),
        { description: "slot 2 rebuilt" },
      );
      await waitForEvent(ns, "life", "SubAgentRebuilding", "slot 2 attempt 1/4");
      await waitForConverged(ns, "life", { replicas: 3 });

      // A slot out of rebuilds is marked dead-letter (a pod patch).
      await admin.create(paths.cocoonSets(ns), exhaustedCocoonSet(ns, "spent"));
      const spent = await waitForConverged(ns, "spent", { replicas: 1 });
      const spentUid = spent.pods.find((p) => p.metadata?.name === "spent-1")!.metadata!.uid!;
      await failPod(ns, "spent-1", spentUid);
      await waitForObject(
        admin,
        paths.pods(ns),
        "spent-1",
        (p) => p?.metadata.annotations?.[ANNOTATIONS.deadLetter] === "true",
        { description: "slot 1 of spent marked dead-letter" },
      );

      // A toolbox whose name another pod holds: the controller reads that pod and says so.
      await admin.create(paths.pods(ns), {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: toolboxPodName("squat", "tools") },
        spec: { nodeSelector: NOWHERE, containers: [{ name: "main", image: IMAGE }] },
      });
      await createCocoonSet(ns, "squat", { toolboxes: [{ name: "tools", image: IMAGE }] });
      await proc.waitForLog("the toolbox name conflict", (l) =>
        /already exists and is not this CocoonSet's toolbox/.test(textOf(l)),
      );

      // The reaper loop: objects that expire after its first pass are reaped by a later one.
      await proc.waitForLog("a first reap pass", (l) => l.msg === "reap pass done");
      const job = await admin.create(paths.jobs(ns), expiredJob("old-job"));
      const pod = await admin.create(paths.pods(ns), expiredPod("old-pod"));
      const cm = await admin.create(paths.configMaps(ns), configMap("old-prompt"));
      const uids = new Set([job, pod, cm].map((o) => o.metadata.uid));
      for (const collection of [paths.jobs(ns), paths.pods(ns), paths.configMaps(ns)]) {
        await waitForList(
          admin,
          collection,
          (items) => !items.some((o) => uids.has(o.metadata.uid)),
          {
            description: `the expired object in ${collection} reaped`,
          },
        );
      }
      for (const [kind, name] of [
        ["job", "old-job"],
        ["pod", "old-pod"],
        ["configmap", "old-prompt"],
      ])
        await proc.waitForLog(
          `the reaper's log of ${kind} ${name}`,
          (l) => l.msg === `reaped ${kind}` && l.namespace === ns && l.name === name,
        );
      assert.ok((await proc.metric("cocoonset_reap_deleted_total", { reason: "Expired" })) >= 3);

      // Deletion releases what a worker in an agent pod left, then removes the finalizer.
      const agent = await admin.get<KubeObject>(paths.pod(ns, "life-1"));
      const workerJob = await admin.create(paths.jobs(ns), expiredJob("work", agent));
      await admin.create(paths.configMaps(ns), configMap("work-data", agent));
      for (const name of ["life", "spent", "squat"]) await admin.delete(paths.cocoonSet(ns, name));
      await waitForList(admin, paths.cocoonSets(ns), (items) => items.length === 0, {
        timeoutMs: 90_000,
        description: "every CocoonSet released and gone",
      });
      for (const name of ["life", "spent", "squat"])
        assert.deepEqual(await fleetPods(admin, ns, name), [], `no pod of ${name} is left`);
      assert.equal(
        await admin
          .getOrUndefined(paths.job(ns, "work"))
          .then((j) => (j?.metadata.uid === workerJob.metadata.uid ? j : undefined)),
        undefined,
        "the worker's Job is released",
      );
      assert.equal(await admin.getOrUndefined(paths.configMap(ns, "work-data")), undefined);
      assert.ok((await proc.metric("cocoonset_release_deleted_total", { kind: "job" })) >= 1);

      // Nothing was denied, and SIGTERM gives the Lease back (an update it is allowed).
      assert.deepEqual(
        proc.logs((l) => DENIAL.test(textOf(l)) && !TERMINATING.test(textOf(l))),
        [],
        "the generated ClusterRole and Lease Role cover every call",
      );
      const from = proc.lines.length;
      assert.deepEqual(await proc.stop(), { code: 0, signal: null }, proc.tail());
      assert.ok(
        proc.lines.slice(from).some((l) => l.msg === "released the lease"),
        `the Lease is released\n${proc.tail()}`,
      );
    });
  },
);
