/**
 * What the engine and owner release put on the wire, seen at a loopback proxy in front of
 * the apiserver (no faults): the fan-out never has more than 8 pod creates in flight, and
 * release deletes Jobs (Background propagation) before pods before ConfigMaps.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { converge } from "../../engine/execute/index.js";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import type { CocoonSet } from "../../engine/spec/index.js";
import {
  KubeClient,
  paths,
  type KubeObject,
  type OwnerReference,
} from "../../engine/kube/index.js";
import { release } from "../../engine/release/index.js";
import { adminClient, withNamespace } from "../support/cluster.js";
import { startFaultProxy, type RecordedRequest } from "../support/fault-proxy.js";

const IMAGE = "registry.invalid/never-pulled";

before(async () => {
  await ensureCrd(adminClient());
});

after(() => adminClient().close());

void describe("requests on the wire", () => {
  void test("a 40-slot create never has more than 8 pod creates in flight", async (t) => {
    const ns = await withNamespace(t, "wire-fanout");
    const admin = adminClient();
    // Each pod create is held until 8 are in flight: an engine that sent more at once would
    // have them all in flight together.
    const proxy = await startFaultProxy(admin, {
      rate: 0,
      holdUntil: 8,
      track: (method, path) =>
        method === "POST" && path === paths.pods(ns) ? "pod creates" : undefined,
    });
    t.after(() => proxy.close());
    const client = KubeClient.fromString(proxy.kubeconfig);
    t.after(() => client.close());
    await admin.create<CocoonSet>(paths.cocoonSets(ns), {
      apiVersion: "cocoonset.cocoonstack.io/v1",
      kind: "CocoonSet",
      metadata: { name: "wide" },
      spec: { agent: { replicas: 40, image: "ghcr.io/cocoonstack/agent:1" } },
    });

    const result = await converge(client, ns, "wide", { timeoutMs: 120_000 });
    assert.deepEqual(
      result.failures.map((f) => f.message),
      [],
    );
    const pods = (await admin.list(paths.pods(ns))).items;
    assert.equal(pods.length, 41, "the main agent and 40 sub-agents");
    t.diagnostic(`peak pod creates in flight: ${proxy.stats.peak["pod creates"]}`);
    assert.equal(proxy.stats.inFlight["pod creates"], 0);
    assert.equal(proxy.stats.peak["pod creates"], 8, "at most 8 at once, and the 8 are used");
  });

  void test("release deletes Jobs (Background propagation), then pods, then ConfigMaps", async (t) => {
    const ns = await withNamespace(t, "wire-release");
    const admin = adminClient();
    const owner = await admin.create(paths.configMaps(ns), {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "owner" },
    });
    const mine: OwnerReference[] = [
      { apiVersion: "v1", kind: "ConfigMap", name: "owner", uid: owner.metadata.uid! },
    ];
    const meta = (name: string) => ({ name, ownerReferences: mine });
    const podSpec = {
      restartPolicy: "Never",
      terminationGracePeriodSeconds: 1,
      containers: [{ name: "main", image: IMAGE }],
    };
    const bodies: [string, KubeObject][] = [];
    for (let i = 0; i < 3; i++) {
      bodies.push(
        [
          paths.jobs(ns),
          {
            apiVersion: "batch/v1",
            kind: "Job",
            metadata: meta(`job-${i}`),
            // Suspended: no pods of its own, so the tree is exactly what is listed here.
            spec: { suspend: true, backoffLimit: 0, template: { spec: podSpec } },
          },
        ],
        [
          paths.pods(ns),
          { apiVersion: "v1", kind: "Pod", metadata: meta(`pod-${i}`), spec: podSpec },
        ],
        [
          paths.configMaps(ns),
          { apiVersion: "v1", kind: "ConfigMap", metadata: meta(`cm-${i}`), data: { k: "v" } },
        ],
      );
    }
    const created = new Map<string, string>();
    for (const [collection, body] of bodies) {
      const o = await admin.create(collection, body);
      created.set(o.metadata.name!, o.metadata.uid!);
    }

    const proxy = await startFaultProxy(admin, { rate: 0, record: true });
    t.after(() => proxy.close());
    const client = KubeClient.fromString(proxy.kubeconfig);
    t.after(() => client.close());
    const result = await release(
      client,
      { kind: "ConfigMap", name: "owner", uid: owner.metadata.uid! },
      ns,
      {
        timeoutMs: 60_000,
      },
    );
    assert.deepEqual(result, { jobs: 3, pods: 3, configMaps: 3 });

    const deletes = proxy.stats.log.filter((r) => r.method === "DELETE");
    const kindOf = (r: RecordedRequest) => r.path.split("/").at(-2);
    const nameOf = (r: RecordedRequest) => r.path.split("/").at(-1)!;
    const kinds = deletes.map(kindOf);
    assert.deepEqual(
      kinds,
      ["jobs", "pods", "configmaps"].flatMap((k) => [k, k, k]),
      "every Job delete is sent before any pod delete, and every pod delete before any ConfigMap delete",
    );
    for (const r of deletes) {
      const body = r.body as { propagationPolicy?: string; preconditions?: { uid?: string } };
      assert.equal(
        body.propagationPolicy,
        kindOf(r) === "jobs" ? "Background" : undefined,
        `propagation of ${r.path}`,
      );
      assert.equal(
        body.preconditions?.uid,
        created.get(nameOf(r)),
        `uid precondition of ${r.path}`,
      );
    }
  });
});
