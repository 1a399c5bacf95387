/**
 * A hung snapshot registry delays only the fleets that need it (issue: every tag check
 * waited out its timeout on a reconcile worker, so a frozen registry starved every fleet).
 *
 * A registry of the test's own (the toolchain's `registry`, as the embedded cluster runs
 * it) is frozen with SIGSTOP while four retain-suspend fleets and a slot-release wake in one
 * namespace wait on it, with a controller of two workers and a five-minute request timeout.
 * Then:
 * - the frozen fleets' passes are refused at once (Warning SnapshotRegistryUnanswered), the
 *   suspending fleets stay Suspending with their pods as they were, the wake creates no pod;
 * - `/readyz/registry` answers 503 naming the registry, `/readyz` stays 200 and names it;
 * - a scale-up of a fleet in another namespace converges while the registry is still frozen,
 *   with no registry request ended by its timeout yet (so before any registry timeout could
 *   have elapsed);
 * - after SIGCONT, every suspending fleet converges to Suspended, the wake to Running, and
 *   `/readyz/registry` is 200;
 * - frozen again, with a request waiting on it, the controller exits 0 at once on SIGTERM.
 * The scale-up's time with the registry answering and frozen is reported as a diagnostic.
 */
import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { ANNOTATIONS, SNAPSHOT_TAGS, type CocoonSet } from "../../engine/spec/index.js";
import { OciRegistry } from "../../engine/registry/oci.js";
import { paths } from "../../engine/kube/index.js";
import { adminClient, testKubeconfig } from "../support/cluster.js";
import {
  createCocoonSet,
  fleetPods,
  patchSpec,
  waitForConverged,
  waitForEvent,
} from "../support/controller-fleet.js";
import { Cleanup, controllerNamespace, startController } from "../support/controller-process.js";
import { optInNodeAgent, pushTag, vmReady, waitForPods, waitForSet } from "../support/lifecycle.js";
import { startPlainRegistry } from "../support/plain-registry.js";

const client = adminClient();
const FROZEN_FLEETS = 4;

before(async () => {
  await ensureCrd(client);
});

/** Scales `ns/name` to `replicas` and returns how long it took to converge, in ms. */
async function scaleUp(ns: string, name: string, replicas: number): Promise<number> {
  const start = performance.now();
  await patchSpec(ns, name, { agent: { replicas } });
  await waitForConverged(ns, name, { replicas }, 120_000);
  return performance.now() - start;
}

describe("a hung snapshot registry (SIGSTOP)", { timeout: 600_000 }, () => {
  test("delays only the fleets that need it; an unrelated scale-up converges while it is frozen", async (t) => {
    const c = new Cleanup(t);
    const reg = await startPlainRegistry(c);
    const frozenNs = await controllerNamespace(c, "regiso-need");
    await optInNodeAgent(frozenNs);
    const freeNs = await controllerNamespace(c, "regiso-free");
    const proc = await startController(c, {
      kubeconfig: testKubeconfig(),
      namespaces: [frozenNs, freeNs],
      extraArgs: [
        "--oci-registry",
        reg.address,
        // Long, so that no request can end by its timeout during the test: every figure below
        // is taken while the frozen requests are still waiting.
        "--oci-registry-timeout",
        "5m",
        "--concurrency",
        "2",
      ],
    });
    await proc.synced();

    const names = Array.from({ length: FROZEN_FLEETS }, (_, i) => `need-${i}`);
    for (const n of names) await createCocoonSet(frozenNs, n, { replicas: 0 });
    await createCocoonSet(freeNs, "free", { replicas: 1 });
    for (const n of names) await waitForPods(frozenNs, n, 1, vmReady, `${n}'s VM booted`);
    await waitForConverged(freeNs, "free", { replicas: 1 });
    // The snapshots the node agent would push to this registry (it pushes to the cluster's).
    const oci = new OciRegistry(reg.address);
    for (const n of names) await pushTag(oci, `vk-${frozenNs}-${n}-0`, SNAPSHOT_TAGS.hibernate);
    // A fleet that will wake from a slot release: suspended (its pod gone) while the registry
    // answers; its wake needs the registry's word on its snapshot.
    await createCocoonSet(frozenNs, "wake", { hibernatePolicy: "release" });
    await waitForPods(frozenNs, "wake", 1, vmReady, "wake's VM booted");
    await pushTag(oci, `vk-${frozenNs}-wake-0`, SNAPSHOT_TAGS.hibernate);
    await patchSpec(frozenNs, "wake", { suspend: true });
    await waitForSet(
      frozenNs,
      "wake",
      (cs) => cs.status?.phase === "Suspended" && (cs.status.agents ?? []).length === 0,
      "wake Suspended, its seat released",
    );
    await waitForPods(frozenNs, "wake", 0, () => true, "wake's pod gone");

    const answering = await scaleUp(freeNs, "free", 2);

    reg.freeze();
    for (const n of names) await patchSpec(frozenNs, n, { suspend: true });
    await patchSpec(frozenNs, "wake", { suspend: false });
    // Each fleet's VM hibernates (the simulator), then its pass needs the frozen registry.
    for (const n of names)
      await waitForPods(
        frozenNs,
        n,
        1,
        (p) => p.metadata?.annotations?.[ANNOTATIONS.lifecycleState] === "hibernated",
        `${n}'s VM hibernated`,
      );
    const refused = await waitForEvent(
      frozenNs,
      names[0],
      "SnapshotRegistryUnanswered",
      new RegExp(`snapshot registry ${reg.address.replace(/\./g, "\\.")} unanswered`),
      120_000,
    );
    assert.equal(refused[0].type, "Warning");
    const ready = await proc.probe("/readyz/registry");
    assert.equal(ready.status, 503, ready.body);
    assert.match(
      ready.body,
      new RegExp(`snapshot registry ${reg.address.replace(/\./g, "\\.")} unanswered`),
    );
    const readyz = await proc.probe("/readyz");
    assert.equal(
      readyz.status,
      200,
      "the controller still serves the fleets that need no registry",
    );
    assert.match(readyz.body, /\[-\]registry: snapshot registry .* unanswered/);

    const frozen = await scaleUp(freeNs, "free", 3);

    // Still frozen, and no registry request has ended: not one by its timeout.
    assert.equal(reg.frozen(), true);
    assert.equal(
      await proc.metric("cocoonset_snapshot_registry_calls_total", { result: "failed" }),
      0,
      "no registry request ended (its timeout is 5m): the scale-up did not wait for one",
    );
    assert.ok(
      (await proc.metric("cocoonset_snapshot_registry_calls_total", { result: "slow" })) >= 1,
    );
    assert.ok(
      (await proc.metric("cocoonset_snapshot_registry_calls_total", { result: "refused" })) >= 1,
    );
    assert.equal(await proc.metric("cocoonset_snapshot_registry_unanswered"), 1);
    // The fleets that need the registry changed nothing while it was frozen.
    for (const n of names) {
      const cs = await client.get<CocoonSet>(paths.cocoonSet(frozenNs, n));
      assert.equal(cs.status?.phase, "Suspending", `${n} waits for the registry`);
      assert.equal((await fleetPods(client, frozenNs, n)).length, 1, `${n}'s pod is kept`);
    }
    assert.deepEqual(await fleetPods(client, frozenNs, "wake"), [], "no wake without the registry");

    reg.thaw();
    for (const n of names)
      await waitForSet(
        frozenNs,
        n,
        (cs) =>
          cs.status?.phase === "Suspended" &&
          cs.status.observedGeneration === cs.metadata.generation,
        `${n} Suspended once the registry answers`,
        180_000,
      );
    await waitForSet(
      frozenNs,
      "wake",
      (cs) =>
        cs.status?.phase === "Running" &&
        cs.status.observedGeneration === cs.metadata.generation &&
        (cs.status.agents ?? []).every((a) => !!a.vmID),
      "wake Running once the registry answers",
      180_000,
    );
    const after = await proc.probe("/readyz/registry");
    assert.equal(after.status, 200, after.body);

    // Stopped while a request waits on the frozen registry, the controller exits at once: a
    // request no reconcile waits for is ended, not waited out (its timeout is 5 minutes).
    reg.freeze();
    const from = proc.lines.length;
    await patchSpec(frozenNs, "wake", { suspend: true });
    await proc.waitForLog(
      "a pass that stopped waiting for the frozen registry",
      (l) => /did not answer within 2000 ms/.test(String(l.err)),
      { from, timeoutMs: 120_000 },
    );
    assert.deepEqual(await proc.stop("SIGTERM", 20_000), { code: 0, signal: null });

    t.diagnostic(
      `unrelated scale-up: ${Math.round(answering)} ms with the registry answering, ${Math.round(frozen)} ms with it frozen`,
    );
  });
});
