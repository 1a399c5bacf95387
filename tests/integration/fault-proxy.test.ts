/**
 * The engine through a proxy that throttles, fails and drops about a fifth of its requests:
 * a 200-slot fan-out and the release of the fleet's tree still end with exactly the right
 * objects, and the client's retries are visible in its counters and debug logs.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { converge } from "../../engine/execute/index.js";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import type { CocoonSet } from "../../engine/spec/index.js";
import { KubeClient, paths, type KubeObject } from "../../engine/kube/index.js";
import { release } from "../../engine/release/index.js";
import { adminClient, isReady, withNamespace } from "../support/cluster.js";
import { startFaultProxy, type FaultProxy } from "../support/fault-proxy.js";
import { type PassResult } from "../../engine/execute/pass-result.js";

const REPLICAS = 200;
const NAME_LABEL = "cocoonset.cocoonstack.io/name";

let proxy: FaultProxy;

before(async () => {
  await ensureCrd(adminClient());
  proxy = await startFaultProxy(adminClient(), { rate: 0.2 });
});

after(async () => {
  await proxy.close();
  adminClient().close();
});

void describe("engine through a faulty apiserver connection", () => {
  void test("a 200-slot fan-out and the release of its tree end with exactly the right objects despite injected faults", async (t) => {
    const ns = await withNamespace(t, "fault-proxy");
    const admin = adminClient();
    const name = "fleet";
    const cs = await admin.create<CocoonSet>(paths.cocoonSets(ns), {
      apiVersion: "cocoonset.cocoonstack.io/v1",
      kind: "CocoonSet",
      metadata: { name },
      spec: { agent: { replicas: REPLICAS, image: "ghcr.io/cocoonstack/agent:1" } },
    });
    const bystander = await admin.create<KubeObject>(paths.pods(ns), {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "bystander", labels: { [NAME_LABEL]: name } },
      spec: {
        terminationGracePeriodSeconds: 1,
        containers: [{ name: "main", image: "registry.invalid/never-pulled" }],
      },
    });

    const debug: string[] = [];
    const client = KubeClient.fromString(proxy.kubeconfig, {
      onRetry: (info) =>
        debug.push(
          `debug: retry ${info.method} ${info.path} attempt ${info.attempt} in ${info.delayMs} ms (${info.cause})`,
        ),
    });
    t.after(() => client.close());

    // A pass may end with an error when a retried write meets its own earlier success
    // (a conflict); the next run converges, as the engine promises.
    let result: PassResult | undefined;
    for (let run = 1; run <= 5; run++) {
      result = await converge(client, ns, name, { fanOut: 8, timeoutMs: 120_000 });
      if (result.failures.length === 0) break;
    }
    assert.deepEqual(
      result?.failures.map((f) => f.message),
      [],
    );

    const want = Array.from({ length: REPLICAS + 1 }, (_, i) => `${name}-${i}`).sort();
    const pods = (await admin.list(paths.pods(ns))).items;
    const owned = pods.filter((p) =>
      p.metadata.ownerReferences?.some((r) => r.uid === cs.metadata.uid && r.controller),
    );
    assert.deepEqual(owned.map((p) => p.metadata.name).sort(), want);
    assert.equal(pods.length, REPLICAS + 2, "nothing but the fleet and the bystander");
    const mainNode = (
      owned.find((p) => p.metadata.name === `${name}-0`)!.spec as { nodeName: string }
    ).nodeName;
    for (const p of owned) assert.equal((p.spec as { nodeName?: string }).nodeName, mainNode);
    assert.ok(owned.filter((p) => isReady(p)).length > 0);

    assert.ok(client.counters.retries > 0, "the client retried");
    assert.equal(debug.length, client.counters.retries);
    const injected = Object.values(proxy.stats.faults).reduce((a, b) => a + b, 0);
    assert.ok(injected > 0, "the proxy injected faults");

    const released = await release(client, { kind: "CocoonSet", name, uid: cs.metadata.uid! }, ns, {
      timeoutMs: 120_000,
    });
    assert.equal(released.pods, REPLICAS + 1);
    const left = (await admin.list(paths.pods(ns))).items;
    assert.deepEqual(
      left.map((p) => p.metadata.uid),
      [bystander.metadata.uid],
    );
    assert.ok(await admin.getOrUndefined(paths.cocoonSet(ns, name)), "the owner itself stays");
    t.diagnostic(
      `requests ${proxy.stats.requests}, watches ${proxy.stats.watches}, faults ${JSON.stringify(proxy.stats.faults)}, client retries ${client.counters.retries}`,
    );
  });
});
