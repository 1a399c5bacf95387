/**
 * That every verb of the controller's generated RBAC is needed: each verb of each rule of
 * `controllerClusterRole()` and `controllerLeaseRole()` is taken away in turn from a service
 * account bound to exactly them, and a short scenario that needs it shows the apiserver's
 * denial in the log of a controller (a real process) running as that account. No granted
 * verb is unused. The verbs run four at a time, each with its own service account, roles
 * and namespace.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import pLimit from "p-limit";
import { controllerRules, leaderElectionRules, type PolicyRule } from "../../controller/rbac.js";
import { markActivity } from "../../engine/execute/activity.js";
import { toolboxPodName } from "../../engine/pods/index.js";
import { FINALIZER, type Pod } from "../../engine/spec/index.js";
import { PatchType, paths, waitForObject, type KubeObject } from "../../engine/kube/index.js";
import { adminClient } from "../support/cluster.js";
import {
  createCocoonSet,
  failPod,
  IMAGE,
  patchSpec,
  waitForConverged,
} from "../support/controller-fleet.js";
import { Cleanup, type ControllerProcess } from "../support/controller-process.js";
import {
  access,
  configMap,
  exhaustedCocoonSet,
  expiredJob,
  hibernation,
  HOLD,
  installRbac,
  NOWHERE,
  scenarioNamespace,
  setRules,
  SA,
  start,
  STARTUP_MS,
  textOf,
  untilAllowed,
  type Access,
  type Rbac,
} from "../support/controller-rbac.js";

describe("each verb of the controller's generated RBAC", { timeout: 900_000 }, () => {
  test("each verb of each rule is needed: without it a short scenario logs the denial", async (t) => {
    const c = new Cleanup(t);
    const admin = adminClient();

    /** A scenario: what to do with a fresh namespace once the controller runs. */
    type Run = (ns: string, proc: ControllerProcess) => Promise<void>;
    const nothing: Run = async () => undefined;
    const afterSync =
      (run: Run): Run =>
      async (ns, proc) => {
        await proc.synced(STARTUP_MS);
        await run(ns, proc);
      };
    const newFleet: Run = afterSync(async (ns) => {
      await createCocoonSet(ns, "f", { replicas: 1 });
    });
    const convergedFleet = async (ns: string) => {
      await createCocoonSet(ns, "f", { replicas: 1 });
      await waitForConverged(ns, "f", { replicas: 1 });
    };
    /** Deletes a converged fleet after a worker left `objects` under its main agent. */
    const releaseWith = (make: (owner: KubeObject) => [string, KubeObject]): Run =>
      afterSync(async (ns) => {
        await convergedFleet(ns);
        const owner = await admin.get(paths.pod(ns, "f-0"));
        const [collection, body] = make(owner);
        await admin.create(collection, body);
        await admin.delete(paths.cocoonSet(ns, "f"));
      });
    /** A fleet (so the reaper visits the namespace) and an expired object. */
    const reapOne = (collection: (ns: string) => string, body: KubeObject): Run =>
      afterSync(async (ns) => {
        await createCocoonSet(ns, "f", { replicas: 0 });
        await admin.create(collection(ns), body);
      });

    const scenarios: Record<string, Run> = {
      // The release of a deleted fleet reads the CocoonSet again when its finalizers changed
      // under it: another holder lets go while the release waits for a held object (the
      // controller plans from its cache and adds its finalizer from it, so this is where it
      // still GETs a CocoonSet).
      "cocoonsets get": afterSync(async (ns) => {
        await convergedFleet(ns);
        const cs = paths.cocoonSet(ns, "f");
        // Another holder first: the release removes its own finalizer by its index.
        await admin.patch(cs, { metadata: { finalizers: [HOLD, FINALIZER] } }, PatchType.merge);
        const owner = await admin.get(paths.pod(ns, "f-0"));
        await admin.create(paths.configMaps(ns), configMap("held", owner, [HOLD]));
        await admin.delete(cs);
        // The release deleted the held object and waits for it: its copy of the CocoonSet
        // still lists the other finalizer first, so its own at index 1.
        await waitForObject(
          admin,
          paths.configMaps(ns),
          "held",
          (o) => o?.metadata.deletionTimestamp !== undefined,
          { timeoutMs: STARTUP_MS, description: `${ns}/held deleted by the release` },
        );
        await admin.patch(cs, { metadata: { finalizers: [FINALIZER] } }, PatchType.merge);
        await admin.patch(
          `${paths.configMaps(ns)}/held`,
          { metadata: { finalizers: null } },
          PatchType.merge,
        );
      }),
      // A fleet expired with action delete is deleted (the shortest expiry is a minute).
      "cocoonsets delete": afterSync(async (ns) => {
        await createCocoonSet(ns, "f", { replicas: 0, expiry: { after: "1m", action: "delete" } });
      }),
      "cocoonsets list": nothing,
      "cocoonsets watch": nothing,
      "cocoonsets patch": newFleet,
      "cocoonsets/status patch": newFleet,
      "cocoonsets/finalizers update": newFleet,
      "pods get": afterSync(async (ns) => {
        await admin.create(paths.pods(ns), {
          apiVersion: "v1",
          kind: "Pod",
          metadata: { name: toolboxPodName("f", "tools") },
          spec: { nodeSelector: NOWHERE, containers: [{ name: "main", image: IMAGE }] },
        });
        await createCocoonSet(ns, "f", { toolboxes: [{ name: "tools", image: IMAGE }] });
      }),
      "pods list": nothing,
      "pods watch": nothing,
      "pods create": newFleet,
      "pods delete": afterSync(async (ns) => {
        await convergedFleet(ns);
        await patchSpec(ns, "f", { agent: { replicas: 0 } });
      }),
      "pods patch": afterSync(async (ns) => {
        await admin.create(paths.cocoonSets(ns), exhaustedCocoonSet(ns, "f"));
        const { pods } = await waitForConverged(ns, "f", { replicas: 1 });
        await failPod(ns, "f-1", pods.find((p: Pod) => p.metadata?.name === "f-1")!.metadata!.uid!);
      }),
      "jobs list": reapOne(paths.jobs, expiredJob("old")),
      // A held object stays after its delete: release watches until it is gone.
      "jobs watch": releaseWith((o) => [
        paths.jobs(o.metadata.namespace!),
        expiredJob("w", o, [HOLD]),
      ]),
      "jobs delete": reapOne(paths.jobs, expiredJob("old")),
      "configmaps list": reapOne(paths.configMaps, configMap("old")),
      "configmaps watch": releaseWith((o) => [
        paths.configMaps(o.metadata.namespace!),
        configMap("w", o, [HOLD]),
      ]),
      "configmaps delete": reapOne(paths.configMaps, configMap("old")),
      "events create": afterSync(async (ns) => {
        await convergedFleet(ns);
        const f1 = await admin.get(paths.pod(ns, "f-1"));
        await failPod(ns, "f-1", f1.metadata.uid!);
      }),
      "customresourcedefinitions get": nothing,
      "cocoonhibernations get": afterSync(async (ns) => {
        await admin.create(paths.cocoonHibernations(ns), hibernation("h", "absent"));
      }),
      // The idle policy's CR of a sub-agent idle for a minute while its main agent is used.
      "cocoonhibernations create": afterSync(async (ns) => {
        await createCocoonSet(ns, "f", { replicas: 1, idle: { after: "1m" } });
        await waitForConverged(ns, "f", { replicas: 1 });
        await markActivity(admin, ns, "f", ["f-0"], "test", new Date());
      }),
      // The idle policy's CR that asks Wake goes once its fleet is suspended.
      "cocoonhibernations delete": afterSync(async (ns) => {
        const cs = await createCocoonSet(ns, "f", {
          replicas: 1,
          suspend: true,
          idle: { after: "1m" },
        });
        const owner = { apiVersion: cs.apiVersion, kind: cs.kind, name: "f", uid: cs.metadata.uid };
        await admin.create(paths.cocoonHibernations(ns), {
          ...hibernation("f-1-idle", "f-1"),
          metadata: { name: "f-1-idle", ownerReferences: [{ ...owner, controller: true }] },
          spec: { podRef: { name: "f-1" }, desire: "Wake" },
        });
      }),
      "cocoonhibernations list": nothing,
      "cocoonhibernations watch": nothing,
      // The first reconcile adds the finalizer.
      "cocoonhibernations patch": afterSync(async (ns) => {
        await admin.create(paths.cocoonHibernations(ns), hibernation("h", "absent"));
      }),
      // With the finalizer on, a CR whose pod is missing is written Pending.
      "cocoonhibernations/status patch": afterSync(async (ns) => {
        await admin.create(paths.cocoonHibernations(ns), hibernation("h", "absent"));
      }),
      // The node cache lists and watches the nodes from the start (a migration's target and
      // the main agent's node are read from it).
      "nodes list": nothing,
      "nodes watch": nothing,
      // The members' activity Leases: the informer lists and watches them at start.
      "leases list": nothing,
      "leases watch": nothing,
      "own-namespace leases get": nothing,
      "own-namespace leases create": nothing,
      // It creates the Lease, then renews it: an update.
      "own-namespace leases update": nothing,
      // The shard gate lists and watches the Leases before any reconcile.
      "own-namespace leases list": nothing,
      "own-namespace leases watch": nothing,
    };
    /** The denial each removal must produce (the owner-reference check words it its own way). */
    const denialOf = (verb: string, resource: string): RegExp =>
      resource === "cocoonsets/finalizers"
        ? /cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on/
        : new RegExp(`cannot ${verb} resource "${resource.replace("/", "\\/")}"`);

    const granted: { where: "cluster" | "lease"; rule: number; verb: string }[] = [];
    controllerRules().forEach((r, i) => {
      for (const verb of r.verbs) granted.push({ where: "cluster", rule: i, verb });
    });
    leaderElectionRules().forEach((r, i) => {
      for (const verb of r.verbs) granted.push({ where: "lease", rule: i, verb });
    });
    const keyOf = (g: (typeof granted)[number]) => {
      const rules = g.where === "cluster" ? controllerRules() : leaderElectionRules();
      const where = g.where === "lease" ? "own-namespace " : "";
      return `${where}${rules[g.rule].resources.join(",")} ${g.verb}`;
    };
    assert.deepEqual(
      granted.map(keyOf).sort(),
      Object.keys(scenarios).sort(),
      "exactly one scenario per granted verb",
    );

    // The ClusterRole's reads of the activity Leases cover the controller's own namespace
    // too: the Lease Role's list and watch are shown needed with them taken away as well.
    const clusterLeaseReads = (verb: string): PolicyRule[] => {
      const rules = controllerRules();
      const i = rules.findIndex((r) => r.resources.includes("leases"));
      return ["list", "watch"].includes(verb) ? without(rules, i, verb) : rules;
    };
    const without = (rules: PolicyRule[], index: number, verb: string): PolicyRule[] =>
      rules.flatMap((r, i) => {
        if (i !== index) return [r];
        const verbs = r.verbs.filter((v) => v !== verb);
        return verbs.length ? [{ ...r, verbs }] : [];
      });
    const accessOf = (g: (typeof granted)[number], ns: string, rbac: Rbac): Access => {
      const rules = g.where === "cluster" ? controllerRules() : leaderElectionRules();
      const r = rules[g.rule];
      const a = access(r.apiGroups[0], r.resources[0], g.verb, ns);
      if (["customresourcedefinitions", "nodes"].includes(r.resources[0])) delete a.namespace;
      if (g.where === "lease") a.namespace = rbac.sysNs;
      if (r.resourceNames) a.name = r.resourceNames[0];
      return a;
    };

    // Each verb gets an identity of its own (so the removals do not meet) and a controller
    // on its scenario's namespace only (so the controllers do not meet either).
    const proven: string[] = [];
    const limit = pLimit(4);
    await Promise.all(
      granted.map((g) =>
        limit(async () => {
          const key = keyOf(g);
          const resource = key.split(" ").at(-2) ?? "";
          const rbac = await installRbac(c);
          await setRules(
            paths.clusterRole(rbac.clusterRole.metadata.name!),
            rbac.clusterRole,
            g.where === "cluster"
              ? without(controllerRules(), g.rule, g.verb)
              : clusterLeaseReads(g.verb),
          );
          await setRules(
            `${paths.roles(rbac.sysNs)}/${SA}`,
            rbac.leaseRole,
            g.where === "lease"
              ? without(leaderElectionRules(), g.rule, g.verb)
              : leaderElectionRules(),
          );
          const scope = await scenarioNamespace("ctl-no");
          await untilAllowed(rbac.sysNs, accessOf(g, scope.ns, rbac), false);

          const proc = await start(c, rbac, `without ${key}`, [], [scope.ns]);
          const began = Date.now();
          let failure: Error | undefined;
          try {
            await scenarios[key](scope.ns, proc);
            const line = await proc.waitForLog(
              `the denial of ${key}`,
              (l) => denialOf(g.verb, resource).test(textOf(l)),
              { timeoutMs: STARTUP_MS },
            );
            proven.push(`${key}: "${line.msg}" after ${Date.now() - began} ms`);
          } catch (e) {
            failure = e instanceof Error ? e : new Error(String(e));
          }
          const exit = await proc.stop();
          await scope.drop();
          if (failure) throw failure;
          assert.deepEqual(exit, { code: 0, signal: null }, proc.tail());
        }),
      ),
    );
    t.diagnostic(proven.sort().join("\n"));
    assert.equal(proven.length, granted.length);
  });
});
