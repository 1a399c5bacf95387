/**
 * Owner release against the embedded cluster: exactly the owner's tree goes (Jobs, their
 * pods, pods, ConfigMaps), everything else stays; finalizers make it time out with a report;
 * bad input and a wrong Pod owner delete nothing; a worker's boot release; narrow RBAC.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import pLimit from "p-limit";
import {
  KubeClient,
  paths,
  PatchType,
  waitForList,
  type KubeObject,
  type OwnerReference,
} from "../../engine/kube/index.js";
import {
  ownerReferenceForPod,
  release,
  releaseAtBoot,
  ReleaseError,
  ReleaseTimeoutError,
  workerIdentityFromEnv,
} from "../../engine/release/index.js";
import { adminClient, testKubeconfig, withNamespace } from "../support/cluster.js";
import { serviceAccountClient } from "../support/service-account.js";

const IMAGE = "registry.invalid/never-pulled";

const refTo = (o: KubeObject, kind: string): OwnerReference => ({
  apiVersion: "v1",
  kind,
  name: o.metadata.name!,
  uid: o.metadata.uid!,
});

function pod(name: string, owners: OwnerReference[] = [], finalizers?: string[]): KubeObject {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, ownerReferences: owners, finalizers },
    spec: { terminationGracePeriodSeconds: 1, containers: [{ name: "main", image: IMAGE }] },
  };
}

function configMap(name: string, owners: OwnerReference[] = [], finalizers?: string[]): KubeObject {
  return {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name, ownerReferences: owners, finalizers },
    data: { k: "v" },
  };
}

function job(name: string, owners: OwnerReference[] = []): KubeObject {
  return {
    apiVersion: "batch/v1",
    kind: "Job",
    metadata: { name, ownerReferences: owners },
    spec: {
      backoffLimit: 0,
      template: {
        spec: { restartPolicy: "Never", containers: [{ name: "main", image: IMAGE }] },
      },
    },
  };
}

/** Creates objects 16 at a time and returns them as created (with uids). */
async function createAll(
  client: KubeClient,
  items: [collection: string, body: KubeObject][],
): Promise<KubeObject[]> {
  const limit = pLimit(16);
  return Promise.all(items.map(([c, b]) => limit(() => client.create<KubeObject>(c, b))));
}

/** Every Job, pod and ConfigMap in the namespace. */
async function snapshot(client: KubeClient, ns: string): Promise<KubeObject[]> {
  const [j, p, c] = await Promise.all([
    client.list(paths.jobs(ns)),
    client.list(paths.pods(ns)),
    client.list(paths.configMaps(ns)),
  ]);
  // List items carry no kind: set it so assertions can name objects.
  const as = (kind: string, items: KubeObject[]) => items.map((o) => ({ ...o, kind }));
  return [...as("Job", j.items), ...as("Pod", p.items), ...as("ConfigMap", c.items)];
}

const uids = (items: KubeObject[]) => new Set(items.map((o) => o.metadata.uid!));
const ownedBy = (o: KubeObject, owners: Set<string>) =>
  (o.metadata.ownerReferences ?? []).some((r) => owners.has(r.uid));

void describe("owner release", () => {
  void test("deletes exactly the owner's tree (pods, Jobs with their pods, ConfigMaps) and waits until it is gone", async (t) => {
    const ns = await withNamespace(t, "release");
    const client = adminClient();
    const [owner, other] = await createAll(client, [
      [paths.configMaps(ns), configMap("owner")],
      [paths.configMaps(ns), configMap("other-owner")],
    ]);
    const mine = [refTo(owner, "ConfigMap")];
    const theirs = [refTo(other, "ConfigMap")];
    const range = (n: number) => [...Array(n).keys()];
    const created = await createAll(client, [
      ...range(50).map((i): [string, KubeObject] => [paths.pods(ns), pod(`own-${i}`, mine)]),
      ...range(10).map((i): [string, KubeObject] => [paths.jobs(ns), job(`own-job-${i}`, mine)]),
      ...range(20).map((i): [string, KubeObject] => [
        paths.configMaps(ns),
        configMap(`own-cm-${i}`, mine),
      ]),
      ...range(15).map((i): [string, KubeObject] => [paths.pods(ns), pod(`other-${i}`, theirs)]),
      ...range(15).map((i): [string, KubeObject] => [
        paths.configMaps(ns),
        configMap(`other-cm-${i}`, theirs),
      ]),
      ...range(5).map((i): [string, KubeObject] => [paths.pods(ns), pod(`free-${i}`)]),
      ...range(5).map((i): [string, KubeObject] => [
        paths.configMaps(ns),
        configMap(`free-cm-${i}`),
      ]),
    ]);
    const ownJobs = created.filter((o) => o.kind === "Job");
    const jobUids = uids(ownJobs);
    // The job controller must have made each Job's pod before the release, so they are in the tree.
    await waitForList(
      client,
      paths.pods(ns),
      (items) => ownJobs.every((j) => items.some((p) => ownedBy(p, new Set([j.metadata.uid!])))),
      { description: "a pod for each of the 10 Jobs" },
    );
    const before = await snapshot(client, ns);
    const jobPods = before.filter((o) => o.kind === "Pod" && ownedBy(o, jobUids));
    assert.equal(jobPods.length, 10);
    const tree = new Set([
      ...uids(before.filter((o) => ownedBy(o, new Set([owner.metadata.uid!])))),
      ...uids(jobPods),
    ]);
    assert.equal(tree.size, 90);
    const others = before.filter((o) => !tree.has(o.metadata.uid!));
    // 30 of the other owner, 10 unowned, the two owner ConfigMaps (and kube-root-ca.crt).
    assert.ok(others.length >= 42);

    const metrics: Record<string, number> = {};
    const result = await release(
      client,
      { kind: "ConfigMap", name: "owner", uid: owner.metadata.uid! },
      ns,
      {
        timeoutMs: 60_000,
        metrics: { releaseDeleted: (kind, n) => (metrics[kind] = (metrics[kind] ?? 0) + n) },
      },
    );

    const after = await snapshot(client, ns);
    const leftovers = after.filter(
      (o) =>
        tree.has(o.metadata.uid!) ||
        ownedBy(o, jobUids) ||
        ownedBy(o, new Set([owner.metadata.uid!])),
    );
    assert.deepEqual(
      leftovers.map((o) => `${o.kind}/${o.metadata.name}`),
      [],
      "the tree is gone",
    );
    const afterUids = uids(after);
    const missing = others.filter((o) => !afterUids.has(o.metadata.uid!));
    assert.deepEqual(
      missing.map((o) => `${o.kind}/${o.metadata.name}`),
      [],
      "the others are all there",
    );
    assert.deepEqual(result, { jobs: 10, pods: 60, configMaps: 20 });
    assert.deepEqual(metrics, { job: 10, pod: 60, configmap: 20 });
  });

  void test("times out once, naming the pod and the ConfigMap finalizers hold, after deleting the rest", async (t) => {
    const ns = await withNamespace(t, "release-hold");
    const client = adminClient();
    const [owner] = await createAll(client, [[paths.configMaps(ns), configMap("owner")]]);
    const mine = [refTo(owner, "ConfigMap")];
    await createAll(client, [
      [paths.pods(ns), pod("free-0", mine)],
      [paths.pods(ns), pod("free-1", mine)],
      [paths.pods(ns), pod("held", mine, ["example.com/hold"])],
      [paths.configMaps(ns), configMap("cm", mine)],
      [paths.configMaps(ns), configMap("held-cm", mine, ["example.com/hold"])],
    ]);
    try {
      await assert.rejects(
        release(client, { kind: "ConfigMap", name: "owner", uid: owner.metadata.uid! }, ns, {
          timeoutMs: 5000,
        }),
        (e) => {
          assert.ok(ReleaseTimeoutError.isInstance(e), String(e));
          assert.match(
            e.message,
            new RegExp(`pod ${ns}/held \\(finalizers: example\\.com/hold; terminating since `),
          );
          assert.match(e.message, /timed out after 5000 ms/);
          // The waits of every kind share the one deadline: one error names what each left.
          assert.deepEqual(
            e.remaining.map((r) => `${r.kind}/${r.name}`),
            ["pod/held", "configmap/held-cm"],
          );
          return true;
        },
      );
      const left = await snapshot(client, ns);
      const names = left.filter((o) => o.kind === "Pod").map((o) => o.metadata.name);
      assert.deepEqual(names, ["held"]);
      assert.ok(left.find((o) => o.metadata.name === "held")?.metadata.deletionTimestamp);
      assert.equal(
        left.some((o) => o.metadata.name === "cm"),
        false,
      );
    } finally {
      for (const path of [paths.pod(ns, "held"), paths.configMap(ns, "held-cm")])
        await client.patch(path, [{ op: "remove", path: "/metadata/finalizers" }], PatchType.json);
    }
  });

  void test("an empty owner uid is refused before any request and nothing is deleted", async (t) => {
    const ns = await withNamespace(t, "release-bad");
    const admin = adminClient();
    const [owner] = await createAll(admin, [[paths.configMaps(ns), configMap("owner")]]);
    await createAll(admin, [
      [paths.configMaps(ns), configMap("child", [refTo(owner, "ConfigMap")])],
    ]);
    const client = new KubeClient({ kubeconfig: testKubeconfig() });
    try {
      for (const uid of ["", "   "]) {
        await assert.rejects(
          release(client, { kind: "ConfigMap", name: "owner", uid }, ns),
          (e) => ReleaseError.isInstance(e) && e.message === "[owner.uid] must not be empty",
        );
      }
      assert.deepEqual(client.counters.byVerb, {}, "no request was made");
      assert.ok(await admin.getOrUndefined(paths.configMap(ns, "child")));
    } finally {
      client.close();
    }
  });

  void test("a Pod owner expected alive but missing, or with another uid, is refused and nothing is deleted", async (t) => {
    const ns = await withNamespace(t, "release-alive");
    const client = adminClient();
    // X owns children; the caller wrongly names pod w (or a missing pod) with X's uid.
    const [x, w] = await createAll(client, [
      [paths.configMaps(ns), configMap("x")],
      [paths.pods(ns), pod("w")],
    ]);
    const children = await createAll(client, [
      [paths.pods(ns), pod("child-pod", [refTo(x, "ConfigMap")])],
      [paths.configMaps(ns), configMap("child-cm", [refTo(x, "ConfigMap")])],
    ]);
    await assert.rejects(
      release(client, { kind: "Pod", name: "w", uid: x.metadata.uid! }, ns, {
        expectAlivePod: true,
      }),
      (e) =>
        ReleaseError.isInstance(e) &&
        e.message.includes(w.metadata.uid!) &&
        e.message.includes(x.metadata.uid!),
    );
    await assert.rejects(
      release(client, { kind: "Pod", name: "ghost", uid: x.metadata.uid! }, ns, {
        expectAlivePod: true,
      }),
      (e) =>
        ReleaseError.isInstance(e) &&
        e.message.startsWith(
          `pod ${ns}/ghost not found: an ownerReference only holds inside its owner's namespace`,
        ),
    );
    const now = uids(await snapshot(client, ns));
    for (const o of [w, x, ...children])
      assert.ok(now.has(o.metadata.uid!), `${o.metadata.name} is still there`);
  });

  void test("a worker's boot release deletes what its pod owns and keeps the pod", async (t) => {
    const ns = await withNamespace(t, "release-boot");
    const client = adminClient();
    const [w, stranger] = await createAll(client, [
      [paths.pods(ns), pod("worker")],
      [paths.pods(ns), pod("stranger")],
    ]);
    // The previous process of the worker made these; the pod (and its uid) survived the restart.
    const ref = ownerReferenceForPod({ name: "worker", uid: w.metadata.uid! });
    const children = await createAll(client, [
      [paths.pods(ns), pod("step-0", [ref])],
      [paths.pods(ns), pod("step-1", [ref])],
      [paths.jobs(ns), job("step-job", [ref])],
      [paths.configMaps(ns), configMap("prompt-0", [ref])],
      [paths.configMaps(ns), configMap("prompt-1", [ref])],
    ]);
    const identity = workerIdentityFromEnv({
      POD_NAMESPACE: ns,
      POD_NAME: "worker",
      POD_UID: w.metadata.uid!,
    });
    const r = await releaseAtBoot(client, identity);
    assert.equal(r.jobs, 1);
    assert.equal(r.configMaps, 2);
    const now = await snapshot(client, ns);
    const nowUids = uids(now);
    for (const c of children)
      assert.equal(nowUids.has(c.metadata.uid!), false, `${c.metadata.name} is gone`);
    assert.equal(
      now.some((o) => ownedBy(o, uids(children))),
      false,
      "the Job's pods are gone",
    );
    assert.ok(nowUids.has(w.metadata.uid!), "the worker pod stays");
    assert.ok(nowUids.has(stranger.metadata.uid!), "an unowned pod stays");
  });

  void test("without rights on Jobs, release still deletes the owner's pods and ConfigMaps", async (t) => {
    const ns = await withNamespace(t, "release-rbac");
    const admin = adminClient();
    const [owner] = await createAll(admin, [[paths.configMaps(ns), configMap("owner")]]);
    const mine = [refTo(owner, "ConfigMap")];
    const [ownedJob] = await createAll(admin, [
      [paths.jobs(ns), job("job", mine)],
      [paths.pods(ns), pod("p-0", mine)],
      [paths.pods(ns), pod("p-1", mine)],
      [paths.configMaps(ns), configMap("cm-0", mine)],
      [paths.pods(ns), pod("free")],
    ]);
    const sa = await serviceAccountClient(ns, "narrow", [
      {
        apiGroups: [""],
        resources: ["pods", "configmaps"],
        verbs: ["get", "list", "watch", "delete"],
      },
    ]);
    const warnings: string[] = [];
    try {
      const r = await release(
        sa,
        { kind: "ConfigMap", name: "owner", uid: owner.metadata.uid! },
        ns,
        {
          log: (level, msg) => void (level === "warn" && warnings.push(msg)),
        },
      );
      assert.deepEqual(r, { jobs: 0, pods: 2, configMaps: 1 });
    } finally {
      sa.close();
    }
    assert.deepEqual(warnings, ["not allowed to list Jobs: releasing without them"]);
    const now = await snapshot(admin, ns);
    const names = now
      .filter((o) => !ownedBy(o, uids([ownedJob])))
      .map((o) => `${o.kind ?? ""}/${o.metadata.name}`);
    const standalone = new Set(names);
    for (const gone of ["p-0", "p-1", "cm-0"])
      assert.equal(
        [...standalone].some((n) => n.endsWith(`/${gone}`)),
        false,
        `${gone} is gone`,
      );
    assert.ok(
      now.some((o) => o.metadata.uid === ownedJob.metadata.uid),
      "the Job it cannot see stays",
    );
    assert.ok(
      now.some((o) => o.metadata.name === "free"),
      "the unowned pod stays",
    );
    assert.ok(
      now.some((o) => o.metadata.name === "owner"),
      "the owner stays",
    );
  });
});
