/**
 * Forgeries, generated: the controller believes nothing a tenant can write
 * (docs/security.md). The real controller process with `--oci-registry`, the node-agent
 * simulator and the embedded registry; the tenant is a ServiceAccount with a Role on
 * CocoonSets, pods and CocoonHibernations of its own namespace `A` only.
 *
 * Three victims, each holding a `:hibernate` tag:
 * - fleet `victim` in `A` (the tenant's namespace), suspended with its VMs kept;
 * - fleet `rel` in `A`, suspended by slot release (no pod, the VM only in the registry);
 * - a standalone pod `db` in namespace `A-prod`, hibernated by a CocoonHibernation: its VM
 *   `vk-A-prod-db` is also what a toolbox `db` of a fleet `prod` in `A` derives.
 *
 * For every target VM the tenant plants each forgery of {@link POD_FORGERIES} (a pod's
 * labels, annotations, ownerReference without blockOwnerDeletion and lifecycle state, a
 * CocoonHibernation's podRef), and its own fleet `prod` carries the CocoonSet annotations
 * of {@link FLEET_FORGERIES} naming every target. Then the lifecycle runs: the victims' own
 * passes (suspend, release), CocoonHibernation wake, hibernate and delete, the tenant's fleet
 * deleted, and the victim fleet woken. No victim's pod uid, tag digest or status may change,
 * and no forged pod is ever asked to hibernate or wake. Every wait is a watch or a log line.
 */
import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import {
  ANNOTATIONS,
  LABELS,
  MANAGED_BY,
  SNAPSHOT_TAGS,
  type CocoonHibernation,
  type CocoonSet,
  type Pod,
} from "../../engine/spec/index.js";
import { KubeClient, paths, waitForObject } from "../../engine/kube/index.js";
import { API_VERSION, GROUP } from "../../engine/spec/constants.js";
import { OciRegistry } from "../../engine/registry/oci.js";
import { SNAPSHOT_OWNER_ANNOTATION } from "../../engine/lifecycle/index.js";
import { adminClient, testKubeconfig } from "../support/cluster.js";
import { createCocoonSet, patchSpec, waitForConverged } from "../support/controller-fleet.js";
import {
  Cleanup,
  controllerNamespace,
  namespaceNamed,
  startController,
  type ControllerProcess,
} from "../support/controller-process.js";
import {
  createHibernation,
  optInNodeAgent,
  registryAddress,
  vmReady,
  waitForPods,
  waitForSet,
} from "../support/lifecycle.js";
import { serviceAccountKubeconfig } from "../support/service-account.js";

const client = adminClient();
const annotationsOf = (p: { metadata?: { annotations?: Record<string, string> } } | undefined) =>
  p?.metadata?.annotations ?? {};
const phaseOf = (o: { status?: { phase?: string } } | undefined) => o?.status?.phase ?? "";

before(async () => {
  await ensureCrd(client);
});

/** One VM a tenant must not reach, and the member whose name derives it. */
interface Target {
  /** What it is, for messages. */
  what: string;
  vm: string;
  /** The fleet whose member name derives the VM (the victim's, or the tenant's own `prod`). */
  fleet: string;
  member: string;
  role: "main" | "sub-agent" | "toolbox";
}

/** A forged pod: what it carries and which operation reaches it. */
interface PodForgery {
  kind: string;
  /** The lifecycle operation that could act on it. */
  op: "fleet pass" | "CR Wake" | "CR Hibernate, then CR deleted";
  /** Claims membership: the fleet's labels and a controller ownerReference to its uid. */
  member: boolean;
  /** On a simulated node, so the node agent would run (and snapshot) it. */
  bound: boolean;
  /** Reports the VM hibernated, as only the node agent should. */
  reportsHibernated: boolean;
}

/** The forgeries planted for every target. */
const POD_FORGERIES: PodForgery[] = [
  {
    kind: "member (labels, ownerReference, VM name)",
    op: "fleet pass",
    member: true,
    bound: true,
    reportsHibernated: false,
  },
  {
    kind: "member (labels, ownerReference, VM name)",
    op: "CR Wake",
    member: true,
    bound: false,
    reportsHibernated: false,
  },
  {
    kind: "member reporting hibernated (lifecycle state)",
    op: "CR Hibernate, then CR deleted",
    member: true,
    bound: false,
    reportsHibernated: true,
  },
  {
    kind: "standalone pod naming the VM",
    op: "CR Wake",
    member: false,
    bound: false,
    reportsHibernated: false,
  },
  {
    kind: "standalone pod naming the VM, reporting hibernated",
    op: "CR Hibernate, then CR deleted",
    member: false,
    bound: false,
    reportsHibernated: true,
  },
];

/** The CocoonSet annotations the tenant's own fleet carries, naming every target. */
const FLEET_FORGERIES: {
  kind: string;
  annotations: (vms: string[], uid: string) => Record<string, string>;
}[] = [
  {
    kind: `${ANNOTATIONS.deleteVmNames} (the deletion's list)`,
    annotations: (vms) => ({ [ANNOTATIONS.deleteVmNames]: vms.join(",") }),
  },
  {
    kind: `${SNAPSHOT_OWNER_ANNOTATION} (the snapshots it took)`,
    annotations: (vms, uid) => ({ [SNAPSHOT_OWNER_ANNOTATION]: JSON.stringify({ uid, vms }) }),
  },
];

/** What a victim looks like from outside: pod uids, tag digests, phases. */
interface VictimState {
  pods: Record<string, string>;
  tags: Record<string, string>;
  phases: Record<string, string>;
}

describe(
  "forgeries, generated: a tenant reaches no other fleet's, namespace's or pod's VM",
  { timeout: 420_000 },
  () => {
    test("every forgery × target × operation leaves the victims as they were", async (t) => {
      const c = new Cleanup(t);
      const addr = registryAddress();
      const reg = new OciRegistry(addr);
      const A = await controllerNamespace(c, "fg");
      const P = await namespaceNamed(c, `${A}-prod`);
      for (const n of [A, P]) await optInNodeAgent(n);
      const proc: ControllerProcess = await startController(c, {
        kubeconfig: testKubeconfig(),
        namespaces: [A, P],
        extraArgs: ["--oci-registry", addr],
      });
      await proc.synced();
      const node = (await client.list<{ metadata: { name?: string } }>(paths.nodes())).items
        .map((n) => n.metadata.name ?? "")
        .find((n) => n !== "")!;

      // The victims.
      const suspendedAt = async (name: string) =>
        waitForSet(
          A,
          name,
          (cs) =>
            phaseOf(cs) === "Suspended" && cs.status?.observedGeneration === cs.metadata.generation,
          `${A}/${name} Suspended`,
        );
      await Promise.all([
        (async () => {
          await createCocoonSet(A, "victim", { replicas: 1 });
          await waitForConverged(A, "victim", { replicas: 1 });
          await waitForPods(A, "victim", 2, vmReady, "victim's VMs booted");
          await patchSpec(A, "victim", { suspend: true });
          await suspendedAt("victim");
        })(),
        (async () => {
          await createCocoonSet(A, "rel", { hibernatePolicy: "release" });
          await waitForConverged(A, "rel", { replicas: 0 });
          await waitForPods(A, "rel", 1, vmReady, "rel's VM booted");
          await patchSpec(A, "rel", { suspend: true });
          await suspendedAt("rel");
          await waitForPods(A, "rel", 0, () => true, "rel's pod released");
        })(),
        (async () => {
          await client.create(paths.pods(P), {
            apiVersion: "v1",
            kind: "Pod",
            metadata: {
              name: "db",
              annotations: {
                [ANNOTATIONS.vmName]: `vk-${P}-db`,
                [ANNOTATIONS.managed]: "true",
                [ANNOTATIONS.snapshotPolicy]: "never",
              },
            },
            spec: {
              nodeName: node,
              tolerations: [{ operator: "Exists" }],
              containers: [{ name: "agent", image: "ghcr.io/acme/db:1" }],
            },
          });
          await waitForObject<Pod>(client, paths.pods(P), "db", (p) => !!p && vmReady(p), {
            timeoutMs: 60_000,
            description: "db's VM booted",
          });
          await createHibernation(P, "db-nap", "db", "Hibernate");
          await waitForObject<CocoonHibernation>(
            client,
            paths.cocoonHibernations(P),
            "db-nap",
            (h) => phaseOf(h) === "Hibernated",
            { timeoutMs: 60_000, description: "db-nap Hibernated" },
          );
        })(),
      ]);
      const targets: Target[] = [
        {
          what: "another fleet's VM in the same namespace",
          vm: `vk-${A}-victim-1`,
          fleet: "victim",
          member: "1",
          role: "sub-agent",
        },
        {
          what: "a released fleet's VM",
          vm: `vk-${A}-rel-0`,
          fleet: "rel",
          member: "0",
          role: "main",
        },
        {
          what: "another namespace's standalone VM, hibernated by a CocoonHibernation (the dash ambiguity)",
          vm: `vk-${P}-db`,
          fleet: "prod",
          member: "db",
          role: "toolbox",
        },
      ];
      const victimVms = [`vk-${A}-victim-0`, `vk-${A}-victim-1`, `vk-${A}-rel-0`, `vk-${P}-db`];
      assert.equal(`vk-${P}-db`, `vk-${A}-prod-db`, "the names collide");

      const digest = async (vm: string, tag: string): Promise<string> => {
        const r = await fetch(`http://${addr}/v2/${reg.repository(vm)}/manifests/${tag}`, {
          method: "HEAD",
          headers: { accept: "application/vnd.oci.image.manifest.v1+json" },
        });
        return r.status === 200
          ? (r.headers.get("docker-content-digest") ?? "?")
          : `HTTP ${r.status}`;
      };
      const observe = async (): Promise<VictimState> => {
        const state: VictimState = { pods: {}, tags: {}, phases: {} };
        for (const vm of victimVms) {
          state.tags[vm] =
            `${(await reg.listTags(vm)).join(",")} ${await digest(vm, SNAPSHOT_TAGS.hibernate)}`;
        }
        for (const [ns, name] of [
          [A, "victim-0"],
          [A, "victim-1"],
          [P, "db"],
        ]) {
          const p = await client.getOrUndefined<Pod>(paths.pod(ns, name));
          state.pods[`${ns}/${name}`] = p?.metadata?.uid ?? "gone";
        }
        for (const name of ["victim", "rel"]) {
          const cs = await client.get<CocoonSet>(paths.cocoonSet(A, name));
          state.phases[`CocoonSet ${name}`] = phaseOf(cs);
        }
        const cr = await client.get<CocoonHibernation>(paths.cocoonHibernation(P, "db-nap"));
        state.phases["CocoonHibernation db-nap"] = phaseOf(cr);
        return state;
      };
      const before = await observe();
      for (const vm of victimVms)
        assert.match(before.tags[vm], /^hibernate sha256:/, `${vm} is hibernated`);

      // The tenant: namespace A only, no status, no finalizers.
      const tenant = KubeClient.fromString(
        await serviceAccountKubeconfig(A, "tenant", [
          {
            apiGroups: [GROUP],
            resources: ["cocoonsets", "cocoonhibernations"],
            verbs: ["get", "list", "watch", "create", "update", "patch", "delete"],
          },
          {
            apiGroups: [""],
            resources: ["pods"],
            verbs: ["get", "list", "watch", "create", "update", "patch", "delete"],
          },
        ]),
      );
      t.after(() => tenant.close());

      // The tenant's own fleet, its annotations naming every target.
      const prod = await tenant.create<CocoonSet>(paths.cocoonSets(A), {
        apiVersion: API_VERSION,
        kind: "CocoonSet",
        metadata: { name: "prod" },
        // Its spec asks, through the dash, for the VM of pod `db` of namespace `A-prod`.
        spec: {
          agent: { image: "evil/image:1" },
          toolboxes: [{ name: "db", image: "evil/image:1" }],
          suspend: true,
        },
      });
      const uids: Record<string, string> = { prod: prod.metadata.uid ?? "" };
      for (const name of ["victim", "rel"])
        uids[name] = (await client.get<CocoonSet>(paths.cocoonSet(A, name))).metadata.uid ?? "";
      const fleetAnnotations: Record<string, string> = {};
      for (const f of FLEET_FORGERIES)
        Object.assign(fleetAnnotations, f.annotations(victimVms, uids.prod));
      await tenant.patch(paths.cocoonSet(A, "prod"), {
        metadata: { annotations: fleetAnnotations },
      });
      // The apiserver refuses blockOwnerDeletion to a tenant without rights on finalizers.
      await assert.rejects(
        tenant.create(paths.pods(A), forgedPod("probe", targets[0], true, false, false, true)),
        /blockOwnerDeletion|forbidden/i,
        "blockOwnerDeletion is refused",
      );

      function forgedPod(
        name: string,
        target: Target,
        member: boolean,
        bound: boolean,
        reportsHibernated: boolean,
        blockOwnerDeletion = false,
      ): Record<string, unknown> {
        const annotations: Record<string, string> = {
          [ANNOTATIONS.vmName]: target.vm,
          [ANNOTATIONS.vmID]: "forged",
          [ANNOTATIONS.managed]: "true",
          // Deleting it must not make the node agent push `:latest` (the tenant's own doing).
          [ANNOTATIONS.snapshotPolicy]: "never",
        };
        if (reportsHibernated) {
          annotations[ANNOTATIONS.lifecycleState] = "hibernated";
          annotations[ANNOTATIONS.lifecycleObservedGeneration] = "99";
        }
        const labels: Record<string, string> = member
          ? {
              [LABELS.name]: target.fleet,
              [LABELS.role]: target.role,
              [LABELS.slot]: target.member,
              [LABELS.managedBy]: MANAGED_BY,
            }
          : {};
        return {
          apiVersion: "v1",
          kind: "Pod",
          metadata: {
            name,
            labels,
            annotations,
            ...(member && {
              ownerReferences: [
                {
                  apiVersion: API_VERSION,
                  kind: "CocoonSet",
                  name: target.fleet,
                  uid: uids[target.fleet],
                  controller: true,
                  ...(blockOwnerDeletion && { blockOwnerDeletion: true }),
                },
              ],
            }),
          },
          spec: {
            ...(bound ? { nodeName: node } : { nodeSelector: { "forgery.test/nowhere": "true" } }),
            tolerations: [{ operator: "Exists" }],
            containers: [{ name: "agent", image: "evil/image:1" }],
          },
        };
      }

      // Every pod forgery for every target; the CocoonHibernations they call for.
      const cases: {
        title: string;
        pod: string;
        cr?: { name: string; desire: "Wake" | "Hibernate" };
      }[] = [];
      let i = 0;
      // When the pod a fleet's pass reaches was planted: its creation enqueues that fleet.
      const planted: Record<string, number> = {};
      for (const target of targets) {
        for (const f of POD_FORGERIES) {
          i++;
          // A fleet pass reaches a pod under a member's own name, when it is free.
          const taken = target.fleet === "victim";
          const pod =
            f.op === "fleet pass"
              ? taken
                ? `${target.fleet}-9`
                : `${target.fleet}-${target.member}`
              : `forged-${i}`;
          const t2 = f.op === "fleet pass" && taken ? { ...target, member: "9" } : target;
          if (f.op === "fleet pass") planted[target.fleet] = Date.now();
          await tenant.create(
            paths.pods(A),
            forgedPod(pod, t2, f.member, f.bound, f.reportsHibernated),
          );
          const cr =
            f.op === "CR Wake"
              ? { name: `cr-${i}`, desire: "Wake" as const }
              : f.op === "CR Hibernate, then CR deleted"
                ? { name: `cr-${i}`, desire: "Hibernate" as const }
                : undefined;
          cases.push({ title: `${f.kind} → ${target.what} (${target.vm}) → ${f.op}`, pod, cr });
        }
      }
      for (const f of FLEET_FORGERIES)
        cases.push({
          title: `CocoonSet annotation ${f.kind} → every target → fleet deleted`,
          pod: "",
        });
      t.diagnostic(`${cases.length} forgeries:\n${cases.map((x) => `  ${x.title}`).join("\n")}`);

      // Operations. The victims' own passes: one of each fleet after the forgeries were planted.
      // The tenant's own fleet is refused (its spec's forgery, below): its passes end in that.
      for (const [fleet, at] of Object.entries(planted))
        if (fleet !== "prod") await proc.reconciledSince(A, fleet, at);
      // CocoonHibernations on the forged pods, as the tenant.
      for (const x of cases)
        if (x.cr)
          await tenant.create(paths.cocoonHibernations(A), {
            apiVersion: API_VERSION,
            kind: "CocoonHibernation",
            metadata: { name: x.cr.name },
            spec: { podRef: { name: x.pod }, desire: x.cr.desire },
          });
      // Each is decided: refused (Failed), or taken up (any other phase but Pending).
      const accepted: string[] = [];
      for (const x of cases) {
        if (!x.cr) continue;
        // Refused at once, or not: a CR left waiting (its pod deleted) is not refused either.
        const h = await waitForObject<CocoonHibernation>(
          client,
          paths.cocoonHibernations(A),
          x.cr.name,
          (o) => phaseOf(o) !== "" && phaseOf(o) !== "Pending",
          { timeoutMs: 20_000, description: `${x.cr.name} decided (${x.title})` },
        ).catch(() =>
          client.getOrUndefined<CocoonHibernation>(paths.cocoonHibernation(A, x.cr!.name)),
        );
        if (phaseOf(h) !== "Failed") accepted.push(`${x.title}: ${phaseOf(h)}`);
      }
      for (const x of cases) if (x.cr) await tenant.delete(paths.cocoonHibernation(A, x.cr.name));
      for (const x of cases) {
        if (!x.cr) continue;
        await waitForObject(
          client,
          paths.cocoonHibernations(A),
          x.cr.name,
          (o) => o === undefined,
          {
            timeoutMs: 60_000,
            description: `${x.cr.name} gone`,
          },
        );
      }
      // A forged pod the controller asked to hibernate: wait for the node agent to finish.
      for (const x of cases) {
        if (!x.pod) continue;
        const p = await client.getOrUndefined<Pod>(paths.pod(A, x.pod));
        if (annotationsOf(p)[ANNOTATIONS.hibernate] === "true" && p?.spec?.nodeName)
          await waitForObject<Pod>(
            client,
            paths.pods(A),
            x.pod,
            (q) => annotationsOf(q)[ANNOTATIONS.lifecycleState] === "hibernated",
            { timeoutMs: 30_000, description: `${x.pod} hibernated` },
          );
      }
      const asked = (p: Pod | undefined) =>
        annotationsOf(p)[ANNOTATIONS.hibernate] !== undefined ||
        annotationsOf(p)[ANNOTATIONS.restoreFromHibernate] !== undefined;
      const forgedAsked: string[] = [];
      for (const x of cases) {
        if (!x.pod) continue;
        const p = await client.getOrUndefined<Pod>(paths.pod(A, x.pod));
        if (asked(p)) forgedAsked.push(x.title);
      }
      // The spec's forgery: the fleet is refused the VM the CocoonHibernation holds.
      cases.push({
        title: "CocoonSet spec (a toolbox whose VM is another namespace's) → fleet pass, suspend",
        pod: "",
      });
      const refusedProd = await waitForObject<CocoonSet>(
        client,
        paths.cocoonSets(A),
        "prod",
        (cs) => (cs?.status?.conditions ?? []).some((x) => x.type === "VMNamesAvailable"),
        { timeoutMs: 30_000, description: "prod refused its VM names" },
      ).catch(() => undefined);
      const prodRefusal = refusedProd?.status?.conditions?.find(
        (x) => x.type === "VMNamesAvailable",
      );
      // The tenant's fleet deleted (the CocoonSet annotations' operation), its forged pods too.
      await tenant.delete(paths.cocoonSet(A, "prod"));
      await waitForObject(client, paths.cocoonSets(A), "prod", (o) => o === undefined, {
        timeoutMs: 90_000,
        description: `${A}/prod gone`,
      });
      const after = await observe();
      const changed = (k: keyof VictimState) =>
        Object.keys(before[k])
          .filter((key) => before[k][key] !== after[k][key])
          .map((key) => `${key}: ${before[k][key]} → ${after[k][key]}`);
      assert.deepEqual(
        {
          tags: changed("tags"),
          pods: changed("pods"),
          phases: changed("phases"),
          forgedAsked,
          accepted,
          prodRefused:
            prodRefusal?.status === "False" && /CocoonHibernation/.test(prodRefusal.message ?? ""),
        },
        { tags: [], pods: [], phases: [], forgedAsked: [], accepted: [], prodRefused: true },
        "no victim's tag, pod or status changed, and no forged pod was acted on",
      );

      // The owner wakes the victim fleet: it restores its own VMs from its own tags.
      for (const x of cases)
        if (x.pod) await tenant.delete(paths.pod(A, x.pod)).catch(() => undefined);
      await patchSpec(A, "victim", { suspend: null });
      await waitForConverged(A, "victim", { replicas: 1 });
      const woken = await waitForPods(A, "victim", 2, vmReady, "victim woken");
      for (const p of woken) {
        assert.equal(
          p.metadata?.uid,
          before.pods[`${A}/${p.metadata?.name}`],
          "the same pods woke",
        );
        assert.match(
          annotationsOf(p)[ANNOTATIONS.lifecycleStateMessage] ?? "",
          /restored from/,
          `${p.metadata?.name} restored its own snapshot`,
        );
      }
    });
  },
);
