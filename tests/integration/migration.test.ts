/**
 * Migration to `spec.nodeName`, end to end: the real controller process (with
 * `--oci-registry` at the embedded registry), the node-agent simulator in an opted-in
 * namespace, the real registry (tags read over HTTP) and the embedded cluster's two kwok
 * nodes, both labelled with a snapshot compatibility class for this test.
 *
 * - a fleet pinned to node 0 with `snapshotCompatibilityClass`: its pods select the class;
 * - `spec.nodeName` set to node 1: phase Migrating (persisted before the hibernate request),
 *   the old pod hibernated to `<vm>:hibernate` and deleted, the new pod on node 1 restored
 *   from that tag, the tag dropped once the new VM is live, then phase Running;
 * - `cocoonset plan --oci-registry` shows the first step (nothing without a registry);
 * - a tag left by an earlier suspend is dropped first and the VM snapshotted afresh;
 * - the apiserver refuses a change or removal of the class (CEL).
 *
 * Every wait is a watch on the CocoonSet or its pods.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { stringify } from "yaml";
import { after, before, describe, test } from "node:test";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { vmNameFor } from "../../engine/pods/pod-builder.js";
import {
  ANNOTATIONS,
  NODE_LABELS,
  SNAPSHOT_TAGS,
  type CocoonSet,
  type Pod,
} from "../../engine/spec/index.js";
import { KubeApiError, PatchType, paths } from "../../engine/kube/index.js";
import { OciRegistry } from "../../engine/registry/oci.js";
import type { PlanJSON } from "../../engine/plan/plan-render.js";
import { adminClient, testKubeconfig } from "../support/cluster.js";
import { createCocoonSet, patchSpec, waitForConverged } from "../support/controller-fleet.js";
import { CLI_MAIN, Cleanup } from "../support/controller-process.js";
import { lifecycleNamespace, registryAddress, vmReady, waitForPods } from "../support/lifecycle.js";
import { ObjectHistory } from "../support/object-history.js";

const client = adminClient();
const NODES = ["kwok-node-0", "kwok-node-1"];
const CLASS = "migration-test-v1";

const annotationsOf = (p: Pod) => p.metadata?.annotations ?? {};
const phaseOf = (cs: CocoonSet) => cs.status?.phase ?? "";
const rv = (o: { metadata?: { resourceVersion?: string } }) => Number(o.metadata?.resourceVersion);

async function labelNodes(value: string | null): Promise<void> {
  for (const node of NODES)
    await client.patch(
      `${paths.nodes()}/${node}`,
      { metadata: { labels: { [NODE_LABELS.snapshotClass]: value } } },
      PatchType.merge,
    );
}

before(async () => {
  await ensureCrd(client);
  await labelNodes(CLASS);
});
after(() => labelNodes(null));

describe(
  "migration to spec.nodeName (controller, simulator, registry)",
  { timeout: 180_000 },
  () => {
    test("Migrating throughout: hibernate on node 0, restore on node 1, tag dropped once live, Running", async (t) => {
      const c = new Cleanup(t);
      const { ns } = await lifecycleNamespace(c, "migrate", registryAddress());
      const reg = new OciRegistry(registryAddress());
      const vm = vmNameFor(ns, "mover", 0);
      await createCocoonSet(ns, "mover", { nodeName: NODES[0], snapshotCompatibilityClass: CLASS });
      await waitForConverged(ns, "mover", { replicas: 0 });
      const [old] = await waitForPods(ns, "mover", 1, vmReady, "the VM booted on node 0");
      assert.equal(old.spec?.nodeName, NODES[0]);
      assert.deepEqual(old.spec?.nodeSelector, {
        [NODE_LABELS.pool]: "default",
        [NODE_LABELS.snapshotClass]: CLASS,
      });
      assert.deepEqual(await reg.listTags(vm), [], "no snapshot before the migration");

      // `cocoonset plan` shows the first step with a registry, nothing without; read-only.
      const dir = mkdtempSync(join(tmpdir(), "cocoonset-plan-migrate-"));
      t.after(() => rmSync(dir, { recursive: true, force: true }));
      const file = join(dir, "mover.yaml");
      const live = await client.get<CocoonSet>(paths.cocoonSet(ns, "mover"));
      const manifest = {
        apiVersion: live.apiVersion,
        kind: live.kind,
        metadata: { name: "mover", namespace: ns },
      };
      writeFileSync(file, stringify({ ...manifest, spec: { ...live.spec, nodeName: NODES[1] } }));
      const env = { ...process.env, KUBECONFIG: "", OCI_REGISTRY: "" };
      const plan = async (...args: string[]) =>
        (
          await promisify(execFile)(
            process.execPath,
            [CLI_MAIN, "plan", "-f", file, "--kubeconfig", testKubeconfig(), ...args],
            { env },
          )
        ).stdout;
      const planned = JSON.parse(
        await plan("--json", "--oci-registry", registryAddress()),
      ) as PlanJSON;
      assert.deepEqual(
        planned.changes.map((x) => [x.target, x.decision]),
        [["main", "migrate"]],
      );
      assert.match(
        await plan("--oci-registry", registryAddress()),
        /^main: hibernate \(migration to spec\.nodeName\)$/m,
      );
      assert.deepEqual(
        (JSON.parse(await plan("--json")) as PlanJSON).changes,
        [],
        "no registry: no migration",
      );
      const after = await client.get<Pod>(paths.pod(ns, "mover-0"));
      assert.equal(annotationsOf(after)[ANNOTATIONS.hibernate], undefined, "plan changed nothing");

      const history = await ObjectHistory.start<CocoonSet>(
        t,
        client,
        paths.cocoonSets(ns),
        "mover",
      );
      const podHistory = await ObjectHistory.start<Pod>(t, client, paths.pods(ns), "mover-0");
      const since = history.seen.length;
      const t0 = Date.now();
      await patchSpec(ns, "mover", { nodeName: NODES[1] });

      const migrating = await history.until(
        (cs) => phaseOf(cs) === "Migrating",
        "phase Migrating",
        {
          since,
          show: phaseOf,
        },
      );
      const oldUid = old.metadata?.uid;
      const asked = await podHistory.until(
        (p) => p.metadata?.uid === oldUid && annotationsOf(p)[ANNOTATIONS.hibernate] === "true",
        "the old pod asked to hibernate",
      );
      // Both in one etcd: its revisions order the two writes.
      assert.ok(rv(migrating) < rv(asked), "Migrating is persisted before the hibernate request");
      await podHistory.until(
        (p) =>
          p.metadata?.uid === oldUid &&
          annotationsOf(p)[ANNOTATIONS.lifecycleState] === "hibernated",
        "the old VM hibernated on node 0",
      );

      const [moved] = await waitForPods(
        ns,
        "mover",
        1,
        (p) => p.metadata?.uid !== oldUid && vmReady(p),
        "the new pod's VM live",
      );
      assert.equal(moved.spec?.nodeName, NODES[1], "recreated on the target");
      assert.equal(annotationsOf(moved)[ANNOTATIONS.restoreFromHibernate], "true");
      assert.match(
        annotationsOf(moved)[ANNOTATIONS.lifecycleStateMessage] ?? "",
        new RegExp(`restored from .*${vm}:${SNAPSHOT_TAGS.hibernate}$`),
        "the new VM was restored from the migration's snapshot",
      );
      assert.notEqual(annotationsOf(moved)[ANNOTATIONS.vmID], annotationsOf(old)[ANNOTATIONS.vmID]);
      assert.deepEqual(moved.spec?.nodeSelector?.[NODE_LABELS.snapshotClass], CLASS);

      const running = await history.until(
        (cs) =>
          phaseOf(cs) === "Running" &&
          cs.status?.observedGeneration === cs.metadata.generation &&
          (cs.status?.agents ?? []).every((a) => !!a.vmID),
        "phase Running with the new VM id",
        { since, show: phaseOf },
      );
      t.diagnostic(`spec.nodeName patched to phase Running: ${Date.now() - t0} ms`);
      assert.equal(running.status?.agents?.[0]?.vmID, annotationsOf(moved)[ANNOTATIONS.vmID]);
      const phases = history.fold(phaseOf, since);
      assert.deepEqual(
        phases.slice(phases.indexOf("Migrating")),
        ["Migrating", "Running"],
        "Migrating throughout, then Running",
      );
      assert.deepEqual(await reg.listTags(vm), [], "the snapshot tag is dropped");
      const progressing = (migrating.status?.conditions ?? []).find(
        (x) => x.type === "Progressing",
      );
      assert.equal(
        progressing?.reason,
        "Stable",
        "as upstream: Progressing is False while migrating",
      );
    });

    test("a tag left by an earlier suspend is dropped first: the VM is snapshotted afresh, never rolled back", async (t) => {
      const c = new Cleanup(t);
      const { ns } = await lifecycleNamespace(c, "migrate-stale", registryAddress());
      const reg = new OciRegistry(registryAddress());
      const vm = vmNameFor(ns, "mover", 0);
      // Not pinned: an unsuspend of a pinned fleet wakes in place through the migration,
      // which drops the tag once the VM is live (as upstream); a fleet with no nodeName keeps it.
      await createCocoonSet(ns, "mover", {});
      await waitForConverged(ns, "mover", { replicas: 0 });
      await waitForPods(ns, "mover", 1, vmReady, "the VM booted");
      // A retain suspend and unsuspend leave <vm>:hibernate behind (as upstream).
      await patchSpec(ns, "mover", { suspend: true });
      await waitForPods(
        ns,
        "mover",
        1,
        (p) => annotationsOf(p)[ANNOTATIONS.lifecycleState] === "hibernated",
        "hibernated by the suspend",
      );
      await patchSpec(ns, "mover", { suspend: false });
      const [woken] = await waitForPods(
        ns,
        "mover",
        1,
        (p) => vmReady(p) && annotationsOf(p)[ANNOTATIONS.hibernate] === undefined,
        "woken",
      );
      assert.deepEqual(
        await reg.listTags(vm),
        [SNAPSHOT_TAGS.hibernate],
        "the suspend's tag stays",
      );

      const history = await ObjectHistory.start<CocoonSet>(
        t,
        client,
        paths.cocoonSets(ns),
        "mover",
      );
      const podHistory = await ObjectHistory.start<Pod>(t, client, paths.pods(ns), "mover-0");
      const since = podHistory.seen.length;
      // Moved to the node it does not run on.
      const target = NODES.find((n) => n !== woken.spec?.nodeName) ?? NODES[1];
      await patchSpec(ns, "mover", { nodeName: target });
      const generation = (await client.get<CocoonSet>(paths.cocoonSet(ns, "mover"))).metadata
        .generation;
      // The same pod is asked to hibernate again and does so for the new generation: the
      // restore reads that snapshot, not the suspend's.
      await podHistory.until(
        (p) =>
          p.metadata?.uid === woken.metadata?.uid &&
          annotationsOf(p)[ANNOTATIONS.lifecycleState] === "hibernated" &&
          Number(annotationsOf(p)[ANNOTATIONS.lifecycleObservedGeneration]) >= (generation ?? 0),
        "the old pod hibernated again for the migration",
        { since },
      );
      const [moved] = await waitForPods(
        ns,
        "mover",
        1,
        (p) => p.metadata?.uid !== woken.metadata?.uid && vmReady(p),
        "restored on the target",
      );
      assert.equal(moved.spec?.nodeName, target);
      await history.until(
        (cs) => phaseOf(cs) === "Running" && cs.status?.observedGeneration === generation,
        "phase Running",
        { show: phaseOf },
      );
      assert.ok(history.fold(phaseOf).includes("Migrating"));
      assert.deepEqual(await reg.listTags(vm), [], "no tag left");
    });

    test("snapshotCompatibilityClass is immutable once set (the apiserver refuses)", async (t) => {
      const c = new Cleanup(t);
      const { ns } = await lifecycleNamespace(c, "migrate-class", registryAddress());
      await createCocoonSet(ns, "pinned", { snapshotCompatibilityClass: CLASS });
      for (const value of ["migration-test-v2", null]) {
        await assert.rejects(
          client.patch(
            paths.cocoonSet(ns, "pinned"),
            { spec: { snapshotCompatibilityClass: value } },
            PatchType.merge,
          ),
          (e: unknown) => {
            assert.ok(KubeApiError.isInstance(e));
            assert.equal(e.status, 422, e.message);
            assert.match(e.message, /snapshotCompatibilityClass is immutable once set/);
            return true;
          },
        );
      }
      // Setting it on a set that had none is allowed (pods created before are adopted).
      await createCocoonSet(ns, "late", {});
      await patchSpec(ns, "late", { snapshotCompatibilityClass: CLASS });
    });
  },
);
