/**
 * A VM name, and its snapshot tags, belong to one fleet (docs/behaviour.md §2.7, §3.13,
 * §3.18, §3.19), end to end: the real controller process with `--oci-registry`, the
 * node-agent simulator and the embedded registry, whose tags are read over HTTP.
 *
 * - namespace `N-x` fleet `yy` and namespace `N` fleet `x-yy` derive the same VM name: the
 *   younger fleet is refused (condition, Warning naming both, no pod; `cocoonset plan` and
 *   the preview's check say so), and deleting it keeps the holder's tag, whose wake works;
 * - a CocoonHibernation in one namespace on a pod annotated with another namespace's VM name
 *   (Hibernate, or Wake with a fake VM id) is `Failed` with a Warning; the other namespace's
 *   tags survive its deletion;
 * - a fleet deleted while a slow hibernation is in flight waits for it, and leaves no tag;
 * - a new fleet does not restore a tag it did not take.
 *
 * Every wait is a watch.
 */
import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import { SIM_ANNOTATIONS } from "../../cluster/node-agent.js";
import { dryRunRefusals } from "../../provider/dynamic/dry-run.js";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import type { PlanJSON } from "../../engine/plan/plan-render.js";
import { HIBERNATION_EVENTS } from "../../engine/hibernation/hibernation.js";
import { VM_NAME_CONDITION, VM_NAME_CONFLICT_REASON } from "../../engine/snapshots/vm-names.js";
import {
  ANNOTATIONS,
  SNAPSHOT_TAGS,
  type CocoonHibernation,
  type CocoonSet,
  type Pod,
} from "../../engine/spec/index.js";
import { paths, PatchType, waitForList, waitForObject } from "../../engine/kube/index.js";
import { OciRegistry } from "../../engine/registry/oci.js";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { stringify } from "yaml";
import { adminClient, testKubeconfig } from "../support/cluster.js";
import {
  IMAGE,
  cocoonSet,
  createCocoonSet,
  fleetPods,
  patchSpec,
  waitForConverged,
  waitForEvent,
  type EventV1,
} from "../support/controller-fleet.js";
import {
  CLI_MAIN,
  Cleanup,
  controllerNamespace,
  namespaceNamed,
  startController,
} from "../support/controller-process.js";
import {
  createHibernation,
  optInNodeAgent,
  pushTag,
  registryAddress,
  vmReady,
  waitForPods,
} from "../support/lifecycle.js";
import { ObjectHistory } from "../support/object-history.js";

const client = adminClient();
const annotationsOf = (p: Pod | undefined) => p?.metadata?.annotations ?? {};
const phaseOf = (o: { status?: { phase?: string } }) => o.status?.phase ?? "";

before(async () => {
  await ensureCrd(client);
});

/** A controller with the registry on `namespaces`, synced. */
async function controllerOn(c: Cleanup, namespaces: string[]) {
  const proc = await startController(c, {
    kubeconfig: testKubeconfig(),
    namespaces,
    extraArgs: ["--oci-registry", registryAddress()],
  });
  await proc.synced();
  return proc;
}

/** Suspends a running fleet and waits until it is Suspended. */
async function suspend(ns: string, name: string): Promise<void> {
  await patchSpec(ns, name, { suspend: true });
  await waitForObject<CocoonSet>(
    client,
    paths.cocoonSets(ns),
    name,
    (cs) =>
      phaseOf(cs ?? {}) === "Suspended" &&
      cs?.status?.observedGeneration === cs?.metadata.generation,
    { timeoutMs: 60_000, description: `${ns}/${name} Suspended` },
  );
}

describe(
  "a VM name belongs to one fleet (controller, simulator, registry)",
  { timeout: 300_000 },
  () => {
    test("a fleet whose VM name another namespace's fleet holds is refused; its deletion keeps that tag", async (t) => {
      const c = new Cleanup(t);
      const reg = new OciRegistry(registryAddress());
      const ns = await controllerNamespace(c, "vmn");
      const nsx = await namespaceNamed(c, `${ns}-x`);
      for (const n of [ns, nsx]) await optInNodeAgent(n);
      await controllerOn(c, [ns, nsx]);
      const vm = `vk-${ns}-x-yy-0`;

      // The holder: namespace N-x, fleet yy, suspended (its VM's snapshot in the registry).
      await createCocoonSet(nsx, "yy", {});
      await waitForConverged(nsx, "yy", { replicas: 0 });
      await waitForPods(nsx, "yy", 1, vmReady, "yy's VM booted");
      await suspend(nsx, "yy");
      assert.deepEqual(await reg.listTags(vm), [SNAPSHOT_TAGS.hibernate]);

      // Before anything is created, the plan and the preview's check say so.
      const planned = cocoonSet(ns, "x-yy", {
        agent: { image: IMAGE },
        suspend: true,
      }) as unknown as CocoonSet;
      const dir = mkdtempSync(join(tmpdir(), "cocoonset-plan-vmnames-"));
      t.after(() => rmSync(dir, { recursive: true, force: true }));
      const file = join(dir, "x-yy.yaml");
      writeFileSync(file, stringify(planned));
      const { stdout } = await promisify(execFile)(
        process.execPath,
        [CLI_MAIN, "plan", "-f", file, "--kubeconfig", testKubeconfig(), "--json"],
        { env: { ...process.env, KUBECONFIG: "", OCI_REGISTRY: "" } },
      );
      const plan = JSON.parse(stdout) as PlanJSON;
      assert.deepEqual(
        plan.changes.map((x) => x.decision),
        ["refuse-vm-names"],
        "cocoonset plan creates nothing",
      );
      assert.match(
        plan.errors.join("\n"),
        new RegExp(`${vm} of CocoonSet ${ns}/x-yy is already held by CocoonSet ${nsx}/yy`),
      );
      const found = await dryRunRefusals({
        kubeconfig: readFileSync(testKubeconfig(), "utf8"),
        namespace: ns,
        name: "x-yy",
        spec: planned.spec,
      });
      assert.match(found.refusals.join("\n"), new RegExp(`already held by CocoonSet ${nsx}/yy`));

      // Created anyway (suspended: it would restore yy's VM): refused, nothing created.
      const history = await ObjectHistory.start<CocoonSet>(t, client, paths.cocoonSets(ns), "x-yy");
      await createCocoonSet(ns, "x-yy", { suspend: true });
      const refused = await history.until(
        (cs) => (cs.status?.conditions ?? []).some((x) => x.type === VM_NAME_CONDITION),
        "the VM name condition",
      );
      const cond = refused.status?.conditions?.find((x) => x.type === VM_NAME_CONDITION);
      assert.equal(cond?.status, "False");
      assert.equal(cond?.reason, VM_NAME_CONFLICT_REASON);
      assert.match(
        cond?.message ?? "",
        new RegExp(`CocoonSet ${ns}/x-yy is already held by CocoonSet ${nsx}/yy`),
      );
      await waitForEvent(
        ns,
        "x-yy",
        VM_NAME_CONFLICT_REASON,
        new RegExp(`held by CocoonSet ${nsx}/yy`),
      );
      assert.deepEqual(await fleetPods(client, ns, "x-yy"), [], "the refused fleet has no pod");

      // As if it had run that VM before the refusal existed (a clash already in the cluster):
      // its deletion still drops no tag the holder holds; the holder's wake restores it.
      await client.patch(
        paths.cocoonSetStatus(ns, "x-yy"),
        {
          status: {
            readyAgents: 0,
            desiredAgents: 1,
            readyToolboxes: 0,
            desiredToolboxes: 0,
            agents: [{ slot: 0, role: "main", vmName: vm }],
          },
        },
        PatchType.merge,
      );
      await client.delete(paths.cocoonSet(ns, "x-yy"));
      await waitForObject(client, paths.cocoonSets(ns), "x-yy", (o) => o === undefined, {
        timeoutMs: 60_000,
        description: `${ns}/x-yy gone`,
      });
      assert.deepEqual(
        await reg.listTags(vm),
        [SNAPSHOT_TAGS.hibernate],
        "the holder's tag is kept",
      );
      await patchSpec(nsx, "yy", { suspend: null });
      await waitForConverged(nsx, "yy", { replicas: 0 });
      const [woken] = await waitForPods(nsx, "yy", 1, vmReady, "yy's VM woken");
      assert.equal(annotationsOf(woken)[ANNOTATIONS.lifecycleState], "ready");
    });

    test("a CocoonHibernation on a pod naming another namespace's VM is refused and drops no tag", async (t) => {
      const c = new Cleanup(t);
      const reg = new OciRegistry(registryAddress());
      const victim = await controllerNamespace(c, "vmn-b");
      const tenant = await controllerNamespace(c, "vmn-a");
      await optInNodeAgent(victim);
      await controllerOn(c, [victim, tenant]);
      await createCocoonSet(victim, "f13", { replicas: 1 });
      await waitForConverged(victim, "f13", { replicas: 1 });
      await waitForPods(victim, "f13", 2, vmReady, "f13's VMs booted");
      await suspend(victim, "f13");
      const vms = [`vk-${victim}-f13-0`, `vk-${victim}-f13-1`];
      for (const vm of vms) assert.deepEqual(await reg.listTags(vm), [SNAPSHOT_TAGS.hibernate]);

      // Plain pods in the tenant's namespace, annotated with the victim's VM names.
      const nodes = (await client.list<{ metadata: { name?: string } }>(paths.nodes())).items;
      const node = nodes.map((n) => n.metadata.name ?? "").find((n) => n !== "");
      for (const [name, vm] of [
        ["evil2", vms[1]],
        ["evil3", vms[0]],
      ]) {
        await client.create(paths.pods(tenant), {
          apiVersion: "v1",
          kind: "Pod",
          metadata: {
            name,
            annotations: { [ANNOTATIONS.vmName]: vm, [ANNOTATIONS.vmID]: "fake" },
          },
          spec: {
            nodeName: node,
            tolerations: [{ operator: "Exists" }],
            containers: [{ name: "agent", image: "registry.invalid/none:1" }],
          },
        });
      }
      const crs: [string, string, "Hibernate" | "Wake"][] = [
        ["nap", "evil2", "Hibernate"],
        ["rise", "evil3", "Wake"],
      ];
      for (const [name, pod, desire] of crs) {
        await createHibernation(tenant, name, pod, desire);
      }
      for (const [name, pod] of crs) {
        const failed = await waitForObject<CocoonHibernation>(
          client,
          paths.cocoonHibernations(tenant),
          name,
          (h) => phaseOf(h ?? {}) !== "" && phaseOf(h ?? {}) !== "Pending",
          { timeoutMs: 60_000, description: `CocoonHibernation ${name} decided` },
        );
        assert.equal(phaseOf(failed!), "Failed", `${name} is refused`);
        assert.equal(failed?.status?.vmName, undefined, `${name} records no VM`);
        const events = await waitForList<EventV1>(
          client,
          paths.events(tenant),
          (all) =>
            all.some(
              (e) => e.reason === HIBERNATION_EVENTS.vmNameMismatch && e.regarding?.name === name,
            ),
          { timeoutMs: 60_000, description: `${HIBERNATION_EVENTS.vmNameMismatch} on ${name}` },
        );
        const note = events.find((e) => e.regarding?.name === name)?.note ?? "";
        assert.match(note, new RegExp(`pod ${tenant}/${pod} carries`));
        const p = await client.get<Pod>(paths.pod(tenant, pod));
        assert.equal(
          annotationsOf(p)[ANNOTATIONS.hibernate],
          undefined,
          `${pod} was not asked to hibernate`,
        );
      }
      for (const [name] of crs) {
        await client.delete(paths.cocoonHibernation(tenant, name));
        await waitForObject(
          client,
          paths.cocoonHibernations(tenant),
          name,
          (o) => o === undefined,
          {
            timeoutMs: 60_000,
            description: `CocoonHibernation ${name} gone`,
          },
        );
      }
      for (const vm of vms)
        assert.deepEqual(
          await reg.listTags(vm),
          [SNAPSHOT_TAGS.hibernate],
          `${vm} keeps its snapshot`,
        );
    });

    test("a fleet deleted while a slow hibernation is in flight leaves no tag", async (t) => {
      const c = new Cleanup(t);
      const reg = new OciRegistry(registryAddress());
      const ns = await controllerNamespace(c, "vmn-del");
      await optInNodeAgent(ns);
      await controllerOn(c, [ns]);
      await createCocoonSet(ns, "f12", {});
      await waitForConverged(ns, "f12", { replicas: 0 });
      await waitForPods(ns, "f12", 1, vmReady, "f12's VM booted");
      const vm = `vk-${ns}-f12-0`;
      await client.patch(paths.pod(ns, "f12-0"), {
        metadata: { annotations: { [SIM_ANNOTATIONS.hibernateDelayMs]: "6000" } },
      });
      const pod = await ObjectHistory.start<Pod>(t, client, paths.pods(ns), "f12-0");
      await patchSpec(ns, "f12", { suspend: true });
      await pod.until(
        (p) => annotationsOf(p)[ANNOTATIONS.lifecycleState] === "hibernating",
        "hibernating",
      );
      await client.delete(paths.cocoonSet(ns, "f12"));
      await waitForObject(client, paths.cocoonSets(ns), "f12", (o) => o === undefined, {
        timeoutMs: 90_000,
        description: `${ns}/f12 gone`,
      });
      // The pod was deleted only once its snapshot was pushed: none can land after the clean-up.
      const deleted = await pod.until((p) => !!p.metadata?.deletionTimestamp, "the pod deleted");
      assert.equal(
        annotationsOf(deleted)[ANNOTATIONS.lifecycleState],
        "hibernated",
        "the deletion waited for the hibernation in flight",
      );
      assert.deepEqual(await reg.listTags(vm), [], "no tag is left behind");
    });

    test("a new fleet does not restore a snapshot it did not take", async (t) => {
      const c = new Cleanup(t);
      const reg = new OciRegistry(registryAddress());
      const ns = await controllerNamespace(c, "vmn-own");
      await optInNodeAgent(ns);
      await controllerOn(c, [ns]);
      const vm = `vk-${ns}-f12-0`;
      // A tag a deleted predecessor of the same name left behind.
      await pushTag(reg, vm, SNAPSHOT_TAGS.hibernate);
      const pod = await ObjectHistory.start<Pod>(t, client, paths.pods(ns), "f12-0");
      await createCocoonSet(ns, "f12", { suspend: true, agent: { image: `${IMAGE}-other` } });
      const created = await pod.until(() => true, "the main agent created");
      assert.equal(
        annotationsOf(created)[ANNOTATIONS.restoreFromHibernate],
        undefined,
        "not restored from a tag this fleet did not take",
      );
      await waitForObject<CocoonSet>(
        client,
        paths.cocoonSets(ns),
        "f12",
        (cs) => phaseOf(cs ?? {}) === "Suspended",
        { timeoutMs: 60_000, description: `${ns}/f12 Suspended` },
      );
      assert.ok(
        pod.seen.every(
          (p) => !/restored from/.test(annotationsOf(p)[ANNOTATIONS.lifecycleStateMessage] ?? ""),
        ),
        "the VM booted fresh",
      );
      // Its own snapshot is recorded under its uid, and a wake restores from it.
      const cs = await client.get<CocoonSet>(paths.cocoonSet(ns, "f12"));
      const record = JSON.parse(
        cs.metadata.annotations?.["snapshot.cocoonset.cocoonstack.io/taken-by"] ?? "{}",
      ) as {
        uid?: string;
        vms?: string[];
      };
      assert.deepEqual(record, { uid: cs.metadata.uid, vms: [vm] });
    });
  },
);
