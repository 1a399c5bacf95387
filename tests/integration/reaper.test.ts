/**
 * The orphan reaper against the embedded cluster: the full decision table on real Jobs, pods
 * (every phase, set through the status subresource) and ConfigMaps, checked by listing the
 * survivors; narrow RBAC without Jobs; a pass that cannot list pods deletes nothing.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import pLimit from "p-limit";
import {
  isForbidden,
  paths,
  PatchType,
  waitForList,
  waitForObject,
  type KubeClient,
  type KubeObject,
} from "../../engine/kube/index.js";
import { reapNamespace } from "../../engine/release/index.js";
import { adminClient, withNamespace } from "../support/cluster.js";
import { serviceAccountClient } from "../support/service-account.js";

const IMAGE = "registry.invalid/never-pulled";
const MANAGED = { "app.kubernetes.io/managed-by": "cocoonset" };
const PROMPT = { ...MANAGED, "app.kubernetes.io/component": "prompt-data" };
const EXPIRES = "cocoonset.cocoonstack.io/expires-at";
// No node carries this pool, so these pods stay unbound and no kubelet (kwok) rewrites their status.
const NOWHERE = { "cocoonstack.io/pool": "no-such-pool" };

interface Shape {
  labels?: Record<string, string>;
  expires?: string;
  annotations?: Record<string, string>;
}

const meta = (name: string, s: Shape) => ({
  name,
  labels: s.labels,
  annotations: {
    ...(s.expires === undefined ? {} : { [EXPIRES]: s.expires }),
    ...s.annotations,
  },
});

function pod(name: string, s: Shape, finalizers?: string[]): KubeObject {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { ...meta(name, s), finalizers },
    spec: { nodeSelector: NOWHERE, containers: [{ name: "main", image: IMAGE }] },
  };
}

function configMap(name: string, s: Shape): KubeObject {
  return { apiVersion: "v1", kind: "ConfigMap", metadata: meta(name, s), data: { k: "v" } };
}

function job(
  name: string,
  s: Shape,
  spec: { template?: Shape & { nowhere?: boolean }; activeDeadlineSeconds?: number } = {},
): KubeObject {
  return {
    apiVersion: "batch/v1",
    kind: "Job",
    metadata: meta(name, s),
    spec: {
      backoffLimit: 0,
      activeDeadlineSeconds: spec.activeDeadlineSeconds,
      template: {
        metadata: spec.template ? meta("", spec.template) : undefined,
        spec: {
          restartPolicy: "Never",
          nodeSelector: spec.template?.nowhere ? NOWHERE : undefined,
          containers: [{ name: "main", image: IMAGE }],
        },
      },
    },
  };
}

async function createAll(
  client: KubeClient,
  collection: string,
  items: KubeObject[],
): Promise<KubeObject[]> {
  const limit = pLimit(16);
  return Promise.all(items.map((b) => limit(() => client.create<KubeObject>(collection, b))));
}

const conditionOf = (o: KubeObject | undefined, type: string) =>
  (
    (o?.status as { conditions?: { type: string; status: string; reason?: string }[] })
      ?.conditions ?? []
  ).find((c) => c.type === type && c.status === "True");

const sorted = (xs: Iterable<string>) => [...xs].sort();
const names = (items: KubeObject[]) => sorted(items.map((o) => o.metadata.name!));

/** Waits until the collection holds exactly `want` (by name), then returns the list. */
async function waitForExactly(
  client: KubeClient,
  collection: string,
  want: string[],
  filter: (o: KubeObject) => boolean,
): Promise<KubeObject[]> {
  const key = JSON.stringify(sorted(want));
  const items = await waitForList(
    client,
    collection,
    (items) => JSON.stringify(names(items.filter(filter))) === key,
    { timeoutMs: 30_000, description: `exactly ${key} in ${collection}` },
  ).catch(async () => (await client.list(collection)).items);
  return items.filter(filter);
}

void describe("orphan reaper", () => {
  void test("one pass applies the decision table to real Jobs, pods and ConfigMaps", async (t) => {
    const ns = await withNamespace(t, "reap");
    const client = adminClient();
    const nowS = Math.floor(Date.now() / 1000);
    const past = String(nowS - 60);
    const future = String(nowS + 3600);
    const equal = String(nowS);
    const managed = (expires?: string): Shape => ({ labels: MANAGED, expires });

    // Jobs.
    await createAll(client, paths.jobs(ns), [
      job("j-deadline", managed(), { activeDeadlineSeconds: 1, template: { nowhere: true } }),
      job("j-backoff", managed(), {
        template: { annotations: { "cocoonset.cocoonstack.io/simulate": "failed" } },
      }),
      job("j-expired", managed(past)),
      // Its pod is managed and expired, but controlled by the Job: the Job decides for it.
      job("j-future", managed(future), { template: { ...managed(past), nowhere: true } }),
      job("j-equal", managed(equal)),
      job("j-missing", managed()),
      job("j-garbage", managed("soon")),
      job("j-unmanaged", { expires: past }),
    ]);
    // Pods: [name, shape, status to set through /status].
    const pods: [string, Shape, Record<string, string> | undefined][] = [
      ["p-deadline", managed(), { phase: "Failed", reason: "DeadlineExceeded" }],
      ["p-deadline-future", managed(future), { phase: "Failed", reason: "DeadlineExceeded" }],
      ["p-failed-error", managed(), { phase: "Failed", reason: "Error" }],
      ["p-failed-error-expired", managed(past), { phase: "Failed", reason: "Error" }],
      ["p-pending-expired", managed(past), undefined],
      ["p-running-expired", managed(past), { phase: "Running" }],
      ["p-succeeded-expired", managed(past), { phase: "Succeeded" }],
      ["p-unknown-expired", managed(past), { phase: "Unknown" }],
      ["p-running-future", managed(future), { phase: "Running" }],
      ["p-unknown-future", managed(future), { phase: "Unknown" }],
      ["p-running-missing", managed(), { phase: "Running" }],
      ["p-garbage", managed("1e10"), { phase: "Running" }],
      ["p-equal", managed(equal), { phase: "Running" }],
      ["p-unmanaged-expired", { expires: past }, { phase: "Running" }],
    ];
    await createAll(client, paths.pods(ns), [
      ...pods.map(([n, s]) => pod(n, s)),
      pod("p-terminating-expired", managed(past), ["example.com/hold"]),
    ]);
    t.after(() =>
      client.patch(
        paths.pod(ns, "p-terminating-expired"),
        [{ op: "remove", path: "/metadata/finalizers" }],
        PatchType.json,
      ),
    );
    await client.delete(paths.pod(ns, "p-terminating-expired"));
    for (const [name, , status] of pods) {
      if (status) await client.patch(paths.podStatus(ns, name), { status });
    }
    // ConfigMaps.
    await createAll(client, paths.configMaps(ns), [
      configMap("c-expired", { labels: PROMPT, expires: past }),
      configMap("c-future", { labels: PROMPT, expires: future }),
      configMap("c-equal", { labels: PROMPT, expires: equal }),
      configMap("c-missing", { labels: PROMPT }),
      configMap("c-garbage", { labels: PROMPT, expires: "" }),
      configMap("c-no-component", { labels: MANAGED, expires: past }),
      configMap("c-other-component", {
        labels: { ...MANAGED, "app.kubernetes.io/component": "cache" },
        expires: past,
      }),
      configMap("c-unmanaged", {
        labels: { "app.kubernetes.io/component": "prompt-data" },
        expires: past,
      }),
    ]);
    // The cluster must have reached the states the table is about before the pass.
    await waitForObject(client, paths.jobs(ns), "j-deadline", (j) => {
      const c = conditionOf(j, "Failed");
      return c?.reason === "DeadlineExceeded";
    });
    await waitForObject(
      client,
      paths.jobs(ns),
      "j-backoff",
      (j) => conditionOf(j, "Failed")?.reason === "BackoffLimitExceeded",
    );
    const jobPods = await waitForList(client, paths.pods(ns), (items) => items.length === 1, {
      labelSelector: "batch.kubernetes.io/job-name=j-future",
    });
    const phases = await client.list(paths.pods(ns));
    for (const [name, , status] of pods) {
      const p = phases.items.find((o) => o.metadata.name === name);
      assert.equal((p?.status as { phase?: string }).phase, status?.phase ?? "Pending", name);
    }

    const calls: string[] = [];
    const r = await reapNamespace(client, ns, {
      now: () => new Date(nowS * 1000),
      metrics: { reapDeleted: (kind, reason) => calls.push(`${kind}:${reason}`) },
    });

    const keptJobs = ["j-backoff", "j-future", "j-equal", "j-missing", "j-garbage", "j-unmanaged"];
    const jobs = await waitForExactly(client, paths.jobs(ns), keptJobs, () => true);
    assert.deepEqual(names(jobs), sorted(keptJobs));
    const keptPods = [
      "p-failed-error",
      "p-running-future",
      "p-unknown-future",
      "p-running-missing",
      "p-garbage",
      "p-equal",
      "p-unmanaged-expired",
      "p-terminating-expired",
    ];
    const standalone = (o: KubeObject) => !o.metadata.ownerReferences?.length;
    const left = await waitForExactly(client, paths.pods(ns), keptPods, standalone);
    assert.deepEqual(names(left), sorted(keptPods));
    const jobPod = await client.getOrUndefined(paths.pod(ns, jobPods[0].metadata.name!));
    assert.equal(jobPod?.metadata.uid, jobPods[0].metadata.uid, "the Job-controlled pod stays");
    const keptCms = [
      "c-future",
      "c-equal",
      "c-missing",
      "c-garbage",
      "c-no-component",
      "c-other-component",
      "c-unmanaged",
    ];
    const cms = await waitForExactly(client, paths.configMaps(ns), keptCms, (o) =>
      o.metadata.name!.startsWith("c-"),
    );
    assert.deepEqual(names(cms), sorted(keptCms));

    assert.deepEqual(r, { jobs: 2, pods: 7, configMaps: 1 });
    assert.deepEqual(sorted(calls), [
      "configmap:Expired",
      "job:DeadlineExceeded",
      "job:Expired",
      "pod:DeadlineExceeded",
      "pod:DeadlineExceeded",
      "pod:Expired",
      "pod:Expired",
      "pod:Expired",
      "pod:Expired",
      "pod:Expired",
    ]);
    // The survivors stay survivors: a second pass deletes nothing.
    assert.deepEqual(await reapNamespace(client, ns, { now: () => new Date(nowS * 1000) }), {
      jobs: 0,
      pods: 0,
      configMaps: 0,
    });
  });

  void test("without rights on Jobs, a pass warns and still reaps pods and ConfigMaps", async (t) => {
    const ns = await withNamespace(t, "reap-rbac");
    const admin = adminClient();
    const past = String(Math.floor(Date.now() / 1000) - 60);
    await admin.create(paths.pods(ns), pod("p", { labels: MANAGED, expires: past }));
    await admin.create(paths.configMaps(ns), configMap("c", { labels: PROMPT, expires: past }));
    await admin.create(paths.jobs(ns), job("j", { labels: MANAGED, expires: past }));
    const sa = await serviceAccountClient(ns, "reaper", [
      {
        apiGroups: [""],
        resources: ["pods", "configmaps"],
        verbs: ["get", "list", "watch", "delete"],
      },
    ]);
    const warnings: string[] = [];
    try {
      const r = await reapNamespace(sa, ns, {
        log: (level, msg) => void (level === "warn" && warnings.push(msg)),
      });
      assert.deepEqual(r, { jobs: 0, pods: 1, configMaps: 1 });
    } finally {
      sa.close();
    }
    assert.deepEqual(warnings, ["not allowed to list Jobs: reaping without them"]);
    assert.equal(await admin.getOrUndefined(paths.pod(ns, "p")), undefined);
    assert.equal(await admin.getOrUndefined(paths.configMap(ns, "c")), undefined);
    assert.ok(await admin.getOrUndefined(paths.job(ns, "j")), "the Job it cannot see stays");
  });

  void test("a pass that cannot list pods fails and deletes nothing", async (t) => {
    const ns = await withNamespace(t, "reap-fail");
    const admin = adminClient();
    const past = String(Math.floor(Date.now() / 1000) - 60);
    await admin.create(paths.configMaps(ns), configMap("c", { labels: PROMPT, expires: past }));
    const sa = await serviceAccountClient(ns, "cm-only", [
      { apiGroups: [""], resources: ["configmaps"], verbs: ["get", "list", "delete"] },
    ]);
    try {
      await assert.rejects(reapNamespace(sa, ns), (e) => isForbidden(e));
    } finally {
      sa.close();
    }
    assert.ok(await admin.getOrUndefined(paths.configMap(ns, "c")), "the expired ConfigMap stays");
  });
});
