/**
 * CocoonHibernation end to end: the real controller process (with `--oci-registry` at the
 * embedded registry), the node-agent simulator in an opted-in namespace, and the real
 * registry, whose tag lists are read over HTTP.
 *
 * - hibernate a sub-agent: Hibernating → Hibernated, its `<vm>:hibernate` tag pushed; a
 *   second CR for the pod is refused (Failed, Warning) and its deletion keeps the tag; the
 *   pod deleted while hibernated is rebuilt with `restore-from-hibernate`; wake: Active with
 *   a new VM id and the tag dropped; hibernated again, then the CR deleted: the tag is GC'd;
 * - a desire reversed while Hibernating finishes the hibernation first, then wakes;
 * - a VM slow to hibernate (simulator delay) meets `--hibernate-timeout`: Failed with a
 *   HibernateTimedOut Warning.
 *
 * Every wait is a watch on the CR, the pods or the events.
 */
import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import { NODE_AGENT_ENABLED, NODE_AGENT_LABEL, SIM_ANNOTATIONS } from "../../cluster/node-agent.js";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { HIBERNATION_FINALIZER } from "../../engine/spec/hibernation-schema.js";
import {
  ANNOTATIONS,
  SNAPSHOT_TAGS,
  type CocoonHibernation,
  type CocoonSet,
  type Pod,
} from "../../engine/spec/index.js";
import { paths, waitForList, waitForObject } from "../../engine/kube/index.js";
import { OciRegistry } from "../../engine/registry/oci.js";
import { adminClient, testKubeconfig } from "../support/cluster.js";
import { createCocoonSet, waitForConverged, type EventV1 } from "../support/controller-fleet.js";
import { Cleanup, controllerNamespace, startController } from "../support/controller-process.js";
import { createHibernation, registryAddress, vmReady, waitForPods } from "../support/lifecycle.js";
import { ObjectHistory } from "../support/object-history.js";

const client = adminClient();
const annotationsOf = (p: Pod | undefined) => p?.metadata?.annotations ?? {};
const phaseOf = (h: CocoonHibernation) => h.status?.phase ?? "";

before(async () => {
  await ensureCrd(client);
});

/** An opted-in namespace and a controller on it with the registry and `extraArgs`, synced. */
async function setUp(c: Cleanup, prefix: string, extraArgs: string[] = []) {
  const ns = await controllerNamespace(c, prefix);
  await client.patch(paths.namespace(ns), {
    metadata: { labels: { [NODE_AGENT_LABEL]: NODE_AGENT_ENABLED } },
  });
  const proc = await startController(c, {
    kubeconfig: testKubeconfig(),
    namespaces: [ns],
    extraArgs: ["--oci-registry", registryAddress(), ...extraArgs],
  });
  await proc.synced();
  return { ns, proc };
}

/** Sets the CR's desire; resolves to the generation that asks for it. */
async function setDesire(ns: string, name: string, desire: "Hibernate" | "Wake"): Promise<number> {
  const patched = await client.patch<CocoonHibernation>(paths.cocoonHibernation(ns, name), {
    spec: { desire },
  });
  return patched.metadata.generation ?? 0;
}

/** Waits (watch) for an event with `reason` on the named CocoonHibernation. */
async function waitForCrEvent(ns: string, name: string, reason: string): Promise<EventV1> {
  const matches = (e: EventV1) =>
    e.reason === reason && e.regarding?.kind === "CocoonHibernation" && e.regarding?.name === name;
  const items = await waitForList<EventV1>(client, paths.events(ns), (all) => all.some(matches), {
    timeoutMs: 60_000,
    description: `event ${reason} on CocoonHibernation ${ns}/${name}`,
  });
  return items.find(matches)!;
}

async function waitGone(ns: string, name: string): Promise<void> {
  await waitForObject(client, paths.cocoonHibernations(ns), name, (o) => o === undefined, {
    timeoutMs: 60_000,
    description: `CocoonHibernation ${name} to be gone`,
  });
}

/** Waits until the CocoonHibernation `name` reports `phase`. */
async function waitCrPhase(ns: string, name: string, phase: string): Promise<void> {
  await waitForObject(
    client,
    paths.cocoonHibernations(ns),
    name,
    (h) => phaseOf(h as never) === phase,
    { timeoutMs: 60_000, description: `${name} ${phase}` },
  );
}

/** A fleet `crew` of a main agent and one sub-agent, every VM booted; crew-1's VM name. */
async function bootedCrew(ns: string): Promise<string> {
  await createCocoonSet(ns, "crew", { replicas: 1 });
  await waitForConverged(ns, "crew", { replicas: 1 });
  const booted = await waitForPods(ns, "crew", 2, vmReady, "both VMs booted");
  return annotationsOf(booted.find((p) => p.metadata?.name === "crew-1"))[ANNOTATIONS.vmName];
}

/**
 * `crew` suspended as its pass writes it, with no controller running: `spec.suspend`, then
 * each pod asked to hibernate at the new generation; returns once both VMs hibernated at it.
 */
async function suspendCrewByHand(ns: string): Promise<void> {
  const cs = await client.patch<CocoonSet>(paths.cocoonSet(ns, "crew"), {
    spec: { suspend: true },
  });
  const generation = String(cs.metadata.generation);
  for (const pod of ["crew-0", "crew-1"])
    await client.patch(paths.pod(ns, pod), {
      metadata: {
        annotations: { [ANNOTATIONS.hibernate]: "true", [ANNOTATIONS.generation]: generation },
      },
    });
  await waitForPods(
    ns,
    "crew",
    2,
    (p) =>
      annotationsOf(p)[ANNOTATIONS.lifecycleState] === "hibernated" &&
      annotationsOf(p)[ANNOTATIONS.lifecycleObservedGeneration] === generation,
    "both VMs hibernated by the suspend",
  );
}

/** The controller of `ns` started again (with the registry), its caches listed. */
async function restartController(c: Cleanup, ns: string): Promise<void> {
  const again = await startController(c, {
    kubeconfig: testKubeconfig(),
    namespaces: [ns],
    extraArgs: ["--oci-registry", registryAddress()],
    label: "controller after the restart",
  });
  await again.synced();
}

/**
 * A namespace with its controller, `crew` booted, and the CR `nap` that hibernated crew-1:
 * the namespace, the controller and crew-1's VM name.
 */
async function napHibernated(c: Cleanup, prefix: string) {
  const { ns, proc } = await setUp(c, prefix);
  const vm = await bootedCrew(ns);
  await createHibernation(ns, "nap", "crew-1", "Hibernate");
  await waitCrPhase(ns, "nap", "Hibernated");
  return { ns, proc, vm };
}

/**
 * With the controller stopped and the CR `nap` deleted: `crew` suspended by hand, then the
 * controller started again, which finalizes `nap`. Its finalizer must leave the suspend's
 * snapshot of `vm`, and `crew` reaches Suspended.
 */
async function suspendThenFinalizeNap(c: Cleanup, ns: string, vm: string): Promise<void> {
  const reg = new OciRegistry(registryAddress());
  await suspendCrewByHand(ns);
  assert.deepEqual(await reg.listTags(vm), [SNAPSHOT_TAGS.hibernate], "the suspend's snapshot");
  await restartController(c, ns);
  await waitGone(ns, "nap");
  assert.deepEqual(
    await reg.listTags(vm),
    [SNAPSHOT_TAGS.hibernate],
    "the deleted CR left the suspend's snapshot alone",
  );
  await waitCrewSuspended(ns);
}

/** Waits until `crew` reports Suspended at its generation. */
async function waitCrewSuspended(ns: string): Promise<void> {
  await waitForObject(
    client,
    paths.cocoonSets(ns),
    "crew",
    (o) => {
      const x = o as unknown as CocoonSet | undefined;
      return (
        x?.status?.phase === "Suspended" && x.status.observedGeneration === x.metadata.generation
      );
    },
    { timeoutMs: 60_000, description: "crew Suspended" },
  );
}

describe("CocoonHibernation (controller, simulator, registry)", { timeout: 300_000 }, () => {
  test("hibernate a sub-agent, refuse a duplicate, restore a rebuilt pod, wake, GC the tag", async (t) => {
    const c = new Cleanup(t);
    const { ns } = await setUp(c, "hib");
    const reg = new OciRegistry(registryAddress());
    await createCocoonSet(ns, "crew", { replicas: 1 });
    await waitForConverged(ns, "crew", { replicas: 1 });
    const booted = await waitForPods(ns, "crew", 2, vmReady, "both VMs booted");
    const target = booted.find((p) => p.metadata?.name === "crew-1")!;
    const vm = annotationsOf(target)[ANNOTATIONS.vmName];
    const idBefore = annotationsOf(target)[ANNOTATIONS.vmID];
    assert.deepEqual(await reg.listTags(vm), []);

    // Hibernate.
    await createHibernation(ns, "nap", "crew-1", "Hibernate");
    const history = await ObjectHistory.start<CocoonHibernation>(
      t,
      client,
      paths.cocoonHibernations(ns),
      "nap",
    );
    const hibernated = await history.until((h) => phaseOf(h) === "Hibernated", "Hibernated", {
      show: phaseOf,
    });
    assert.deepEqual(history.fold(phaseOf).filter(Boolean), ["Hibernating", "Hibernated"]);
    assert.deepEqual(hibernated.metadata.finalizers, [HIBERNATION_FINALIZER]);
    assert.equal(hibernated.status?.vmName, vm);
    const ready = hibernated.status?.conditions?.find((x) => x.type === "Ready");
    assert.deepEqual(
      [ready?.status, ready?.reason, ready?.message],
      ["True", "Done", "Hibernated"],
    );
    const pod = await client.get<Pod>(paths.pod(ns, "crew-1"));
    assert.equal(annotationsOf(pod)[ANNOTATIONS.hibernate], "true");
    assert.equal(annotationsOf(pod)[ANNOTATIONS.lifecycleState], "hibernated");
    assert.deepEqual(await reg.listTags(vm), [SNAPSHOT_TAGS.hibernate]);
    const event = await waitForCrEvent(ns, "nap", "Hibernated");
    assert.equal(event.type, "Normal");
    assert.equal(event.note, `snapshot ${vm} pushed to the registry`);

    // A second CR for the same pod is refused, and deleting it keeps the holder's tag.
    await createHibernation(ns, "again", "crew-1", "Wake");
    const refused = await waitForObject<CocoonHibernation>(
      client,
      paths.cocoonHibernations(ns),
      "again",
      (h) => h?.status?.phase === "Failed",
      { timeoutMs: 60_000, description: "the duplicate Failed" },
    );
    assert.match(
      refused!.status?.conditions?.[0].message ?? "",
      /already targeted by CocoonHibernation nap/,
    );
    const warning = await waitForCrEvent(ns, "again", "DuplicateHibernation");
    assert.equal(warning.type, "Warning");
    assert.equal(
      annotationsOf(await client.get<Pod>(paths.pod(ns, "crew-1")))[ANNOTATIONS.hibernate],
      "true",
    );
    await client.delete(paths.cocoonHibernation(ns, "again"));
    await waitGone(ns, "again");
    assert.deepEqual(await reg.listTags(vm), [SNAPSHOT_TAGS.hibernate], "the holder's tag is kept");

    // The pod deleted while hibernated: the CocoonSet rebuilds it to restore from the tag.
    await client.delete(paths.pod(ns, "crew-1"));
    const [rebuilt] = await waitForList<Pod>(
      client,
      paths.pods(ns),
      (all) =>
        all.some((p) => p.metadata?.name === "crew-1" && p.metadata.uid !== pod.metadata?.uid),
      { timeoutMs: 60_000, description: "crew-1 rebuilt" },
    ).then((all) => all.filter((p) => p.metadata?.name === "crew-1"));
    assert.equal(annotationsOf(rebuilt)[ANNOTATIONS.restoreFromHibernate], "true");
    // The CR still wants it hibernated: the restored VM is hibernated again.
    await waitForList<Pod>(
      client,
      paths.pods(ns),
      (all) =>
        all.some(
          (p) =>
            p.metadata?.uid === rebuilt.metadata?.uid &&
            annotationsOf(p)[ANNOTATIONS.lifecycleState] === "hibernated",
        ),
      { timeoutMs: 60_000, description: "the rebuilt crew-1 hibernated again" },
    );
    const napped = await waitForObject<CocoonHibernation>(
      client,
      paths.cocoonHibernations(ns),
      "nap",
      (h) => h?.status?.phase === "Hibernated",
      { timeoutMs: 60_000, description: "nap Hibernated after the rebuild" },
    );
    // The history's own watch may still be behind that read: the wake's phases are counted
    // from the version it showed, once the history has it too.
    const caughtUp = await history.until(
      (h) => h.metadata?.resourceVersion === napped?.metadata?.resourceVersion,
      "the history at nap's Hibernated version",
    );

    // Wake: the VM boots again with a new id, the tag is dropped.
    const since = history.seen.lastIndexOf(caughtUp) + 1;
    const wake = await setDesire(ns, "nap", "Wake");
    await history.until((h) => phaseOf(h) === "Active", "Active", { since, show: phaseOf });
    // The wake's phases are those of the statuses written for the generation that asked for
    // it: on a busy machine the CR's own reconcile of the rebuilt pod (Hibernating, then
    // Hibernated again) can still be under way when the wake is asked for. The CocoonSet's
    // pass also withdraws the hibernate request once no CR holds the pod (docs/behaviour.md
    // §3.18); when it is first, the node agent may have woken the VM before this CR's
    // reconcile, which then reads a live VM and goes straight to Active.
    const wakePhases = history
      .fold((h) => ((h.status?.observedGeneration ?? 0) >= wake ? phaseOf(h) : ""), since)
      .filter((p) => p !== "" && p !== "Hibernated");
    assert.ok(
      ["Waking,Active", "Active"].includes(wakePhases.join(",")),
      `the wake's phases: ${wakePhases.join(" → ")}`,
    );
    const woken = await client.get<Pod>(paths.pod(ns, "crew-1"));
    assert.equal(annotationsOf(woken)[ANNOTATIONS.hibernate], undefined);
    const idAfter = annotationsOf(woken)[ANNOTATIONS.vmID];
    assert.ok(idAfter && idAfter !== idBefore, `a new VM id (${idBefore} → ${idAfter})`);
    assert.deepEqual(await reg.listTags(vm), [], "the tag is dropped once awake");
    assert.equal((await waitForCrEvent(ns, "nap", "WokenActive")).type, "Normal");

    // Hibernated again, then the CR deleted: the last holder GCs the tag.
    const again = history.seen.length;
    await setDesire(ns, "nap", "Hibernate");
    await history.until((h) => phaseOf(h) === "Hibernated", "Hibernated (2)", {
      since: again,
      show: phaseOf,
    });
    assert.deepEqual(await reg.listTags(vm), [SNAPSHOT_TAGS.hibernate]);
    await client.delete(paths.cocoonHibernation(ns, "nap"));
    await waitGone(ns, "nap");
    assert.deepEqual(await reg.listTags(vm), [], "deleting the CR dropped the tag");
  });

  test("a desire reversed while Hibernating finishes the hibernation first", async (t) => {
    const c = new Cleanup(t);
    const { ns } = await setUp(c, "hib-rev");
    await createCocoonSet(ns, "crew", { replicas: 1 });
    await waitForConverged(ns, "crew", { replicas: 1 });
    await waitForPods(ns, "crew", 2, vmReady, "both VMs booted");
    await client.patch(paths.pod(ns, "crew-1"), {
      metadata: { annotations: { [SIM_ANNOTATIONS.hibernateDelayMs]: "3000" } },
    });
    await createHibernation(ns, "flip", "crew-1", "Hibernate");
    const history = await ObjectHistory.start<CocoonHibernation>(
      t,
      client,
      paths.cocoonHibernations(ns),
      "flip",
    );
    await history.until((h) => phaseOf(h) === "Hibernating", "Hibernating", { show: phaseOf });
    await setDesire(ns, "flip", "Wake");
    await history.until((h) => phaseOf(h) === "Active", "Active", {
      timeoutMs: 90_000,
      show: phaseOf,
    });
    assert.deepEqual(history.fold(phaseOf).filter(Boolean), [
      "Hibernating",
      "Hibernated",
      "Waking",
      "Active",
    ]);
    // Deleted while the controller runs, so its finalizer does not outlive the namespace.
    await client.delete(paths.cocoonHibernation(ns, "flip"));
    await waitGone(ns, "flip");
  });

  test("a woken CR deleted while its fleet suspends takes none of the suspend's snapshot; the fleet reaches Suspended", async (t) => {
    const c = new Cleanup(t);
    const { ns, proc, vm } = await napHibernated(c, "hib-late");
    const reg = new OciRegistry(registryAddress());
    await setDesire(ns, "nap", "Wake");
    await waitCrPhase(ns, "nap", "Active");
    assert.deepEqual(await reg.listTags(vm), [], "the wake dropped the CR's own snapshot");

    // The CR's deletion waits in the controller's queue while the fleet suspends (at 200
    // members its backlog lasted past the suspend's snapshots): here the controller is stopped
    // meanwhile, and the suspend's request on the pods is written as its pass writes it.
    await proc.stop();
    await client.delete(paths.cocoonHibernation(ns, "nap"));
    await suspendThenFinalizeNap(c, ns, vm);
  });

  test("a CR woken by its fleet and deleted before its own wake ran keeps the snapshot of the suspend that followed; the fleet reaches Suspended", async (t) => {
    const c = new Cleanup(t);
    const { ns, proc, vm } = await napHibernated(c, "hib-race");

    // What the idle policy did at 1,000 agents while this controller's CR queue was long: it
    // asked the CR to wake, woke the pod itself (wake on demand) and deleted the CR as a wake
    // that is over, all before the CR controller ran its wake; then the fleet was suspended.
    // Here the controller is stopped meanwhile, and each write is made as its writer makes it.
    await proc.stop();
    await setDesire(ns, "nap", "Wake");
    await client.patch(paths.pod(ns, "crew-1"), {
      metadata: { annotations: { [ANNOTATIONS.hibernate]: null } },
    });
    await waitForPods(ns, "crew", 2, vmReady, "crew-1 woken by its fleet");
    await client.delete(paths.cocoonHibernation(ns, "nap"));
    // The CR, never Active, is finalized after the suspend: the tag is the suspend's.
    await suspendThenFinalizeNap(c, ns, vm);
  });

  test("a suspend asks no pod whose CocoonHibernation is being deleted until it is gone, then reaches Suspended with its own snapshot", async (t) => {
    const c = new Cleanup(t);
    const { ns, vm } = await napHibernated(c, "hib-order");
    const reg = new OciRegistry(registryAddress());
    await setDesire(ns, "nap", "Wake");
    await waitCrPhase(ns, "nap", "Active");
    // Another controller's finalizer holds the CR once ours is released: it stays, being deleted.
    const hold = "example.com/hold";
    const held = await client.get<CocoonHibernation>(paths.cocoonHibernation(ns, "nap"));
    await client.patch(paths.cocoonHibernation(ns, "nap"), {
      metadata: { finalizers: [...(held.metadata.finalizers ?? []), hold] },
    });
    c.defer("release the hold", async () => {
      await client
        .patch(paths.cocoonHibernation(ns, "nap"), { metadata: { finalizers: null } })
        .catch(() => undefined);
    });
    await client.delete(paths.cocoonHibernation(ns, "nap"));
    await waitForObject(
      client,
      paths.cocoonHibernations(ns),
      "nap",
      (h) => JSON.stringify(h?.metadata.finalizers) === JSON.stringify([hold]),
      { timeoutMs: 60_000, description: "nap's own finalizer released, the hold left" },
    );

    // Suspended: the main agent hibernates; crew-1 is not asked while its CR is being deleted
    // (that CR's finalizer, run late, would drop the snapshot the suspend pushes).
    await client.patch<CocoonSet>(paths.cocoonSet(ns, "crew"), { spec: { suspend: true } });
    await waitForPods(
      ns,
      "crew",
      2,
      (p) =>
        p.metadata?.name !== "crew-0" ||
        annotationsOf(p)[ANNOTATIONS.lifecycleState] === "hibernated",
      "the main agent hibernated by the suspend",
    );
    // The pass that asked crew-0 writes the phase after its asks: waited for, not read once.
    await waitForObject(
      client,
      paths.cocoonSets(ns),
      "crew",
      (o) => (o as unknown as CocoonSet | undefined)?.status?.phase === "Suspending",
      { timeoutMs: 60_000, description: "crew Suspending" },
    );
    const one = await client.get<Pod>(paths.pod(ns, "crew-1"));
    assert.equal(annotationsOf(one)[ANNOTATIONS.hibernate], undefined, "crew-1 not asked yet");

    // The CR gone, crew-1 hibernates and the fleet is Suspended, its snapshot in the registry.
    await client.patch(paths.cocoonHibernation(ns, "nap"), { metadata: { finalizers: null } });
    await waitGone(ns, "nap");
    await waitCrewSuspended(ns);
    assert.deepEqual(await reg.listTags(vm), [SNAPSHOT_TAGS.hibernate], "crew-1's snapshot");
  });

  test("a VM slow to hibernate meets --hibernate-timeout: Failed, HibernateTimedOut", async (t) => {
    const c = new Cleanup(t);
    const { ns } = await setUp(c, "hib-slow", ["--hibernate-timeout", "3s"]);
    await createCocoonSet(ns, "crew", { replicas: 1 });
    await waitForConverged(ns, "crew", { replicas: 1 });
    await waitForPods(ns, "crew", 2, vmReady, "both VMs booted");
    await client.patch(paths.pod(ns, "crew-1"), {
      metadata: { annotations: { [SIM_ANNOTATIONS.hibernateDelayMs]: "600000" } },
    });
    await createHibernation(ns, "slow", "crew-1", "Hibernate");
    const history = await ObjectHistory.start<CocoonHibernation>(
      t,
      client,
      paths.cocoonHibernations(ns),
      "slow",
    );
    const failed = await history.until((h) => phaseOf(h) === "Failed", "Failed", {
      show: phaseOf,
    });
    assert.match(failed.status?.conditions?.[0].message ?? "", /hibernate not confirmed within 3s/);
    const warning = await waitForCrEvent(ns, "slow", "HibernateTimedOut");
    assert.equal(warning.type, "Warning");
    assert.match(warning.note ?? "", /not confirmed in the registry within 3s/);
    // As upstream, Failed is retried: RetryRequested, Hibernating again with a fresh clock.
    assert.equal((await waitForCrEvent(ns, "slow", "RetryRequested")).type, "Normal");
    await client.delete(paths.cocoonHibernation(ns, "slow"));
    await waitGone(ns, "slow");
  });
});
