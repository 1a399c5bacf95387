/**
 * The controller as a real process under exactly the RBAC the Operator installs for an
 * all-namespaces deployment: a service account bound to `controllerClusterRole()` and, in its
 * own namespace only, `controllerLeaseRole()`.
 *
 * - A full lifecycle with leader election and a 1 s reaper interval sees no denial: create,
 *   scale up and down, fail and rebuild, a dead-letter mark, a toolbox name taken by another
 *   pod, expired Jobs, pods and ConfigMaps reaped by the controller's own loop, and deletion
 *   releasing the tree a worker left (a Job and a ConfigMap) before the finalizer goes.
 * - Then every verb of every rule is taken away in turn, and a short scenario that needs it
 *   shows the apiserver's denial in the controller's log: no granted verb is unused.
 */
import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import { DEFAULT_LEASE_NAME } from "../../controller/leader-election.js";
import {
  controllerClusterRole,
  controllerLeaseRole,
  controllerRules,
  leaderElectionRules,
  type PolicyRule,
} from "../../controller/rbac.js";
import { ensureCrd } from "../../provider/engine/index.js";
import { ANNOTATIONS, toolboxPodName, type Pod } from "../../provider/fleet/index.js";
import {
  isNotFound,
  paths,
  PatchType,
  waitForList,
  waitForObject,
  type KubeObject,
} from "../../provider/kube/index.js";
import { adminClient, isReady, suffix } from "../support/cluster.js";
import { registryAddress } from "../support/lifecycle.js";
import {
  cocoonSet,
  createCocoonSet,
  failPod,
  fleetPods,
  IMAGE,
  patchSpec,
  waitForConverged,
  waitForEvent,
} from "../support/controller-fleet.js";
import {
  Cleanup,
  controllerNamespace,
  startController,
  tempDir,
  writeTokenKubeconfig,
  type ControllerProcess,
  type LogLine,
} from "../support/controller-process.js";

before(async () => {
  await ensureCrd(adminClient());
});

const SA = "cocoonset-controller";

/** A CocoonHibernation asking `pod` to hibernate. */
function hibernation(name: string, pod: string): KubeObject {
  return {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonHibernation",
    metadata: { name },
    spec: { podRef: { name: pod }, desire: "Hibernate" },
  };
}
/** How long a controller process may take to start and sync on a loaded machine. */
const STARTUP_MS = 240_000;
const EXPIRES = "cocoonset.cocoonstack.io/expires-at";
const MANAGED = { "app.kubernetes.io/managed-by": "cocoonset" };
const PROMPT = { ...MANAGED, "app.kubernetes.io/component": "prompt-data" };
// No node carries this pool: such pods stay unbound and keep the status they were given.
const NOWHERE = { "cocoonstack.io/pool": "no-such-pool" };

/** The text of a log line's string fields (error messages keep their quotes). */
const textOf = (l: LogLine): string =>
  Object.values(l)
    .filter((v): v is string => typeof v === "string")
    .join(" ");

/** Any denial by RBAC or by the owner-reference admission check. */
const DENIAL = /cannot \w+ resource "|cannot set blockOwnerDeletion|HTTP 403/;
/**
 * A 403 that is not RBAC's: the namespace admission refusing creates in a namespace being
 * deleted. The controller watches every namespace of the shared test cluster, so another
 * test file's namespace still terminating (controller-ha.test.ts leaves a CocoonSet whose
 * pods are refused that way) shows up in its log.
 */
const TERMINATING = /unable to create new content in namespace \S+ because it is being terminated/;

/** The RBAC of one controller identity, and a kubeconfig that authenticates as it. */
interface Rbac {
  sysNs: string;
  kubeconfig: string;
  clusterRole: KubeObject;
  leaseRole: KubeObject;
}

/**
 * A service account in a fresh controller namespace, bound to exactly the generated
 * ClusterRole and the Lease Role of that namespace, with a token kubeconfig.
 */
async function installRbac(c: Cleanup): Promise<Rbac> {
  const admin = adminClient();
  const sysNs = await controllerNamespace(c, "ctl-sys");
  await admin.create(paths.serviceAccounts(sysNs), {
    apiVersion: "v1",
    kind: "ServiceAccount",
    metadata: { name: SA },
  });
  const name = `cocoonset-rbac-${suffix()}`;
  const clusterRole = controllerClusterRole(name);
  await admin.create(paths.clusterRoles(), clusterRole);
  c.defer(`delete ClusterRole ${name}`, async () => {
    await admin.delete(paths.clusterRole(name));
  });
  await admin.create(paths.clusterRoleBindings(), {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "ClusterRoleBinding",
    metadata: { name },
    roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name },
    subjects: [{ kind: "ServiceAccount", name: SA, namespace: sysNs }],
  });
  c.defer(`delete ClusterRoleBinding ${name}`, async () => {
    await admin.delete(paths.clusterRoleBinding(name));
  });
  const leaseRole = controllerLeaseRole(SA, sysNs);
  await admin.create(paths.roles(sysNs), leaseRole);
  await admin.create(paths.roleBindings(sysNs), {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "RoleBinding",
    metadata: { name: SA },
    roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: SA },
    subjects: [{ kind: "ServiceAccount", name: SA, namespace: sysNs }],
  });
  const tr = await admin.create<{ status: { token: string } }>(
    paths.serviceAccountToken(sysNs, SA),
    {
      apiVersion: "authentication.k8s.io/v1",
      kind: "TokenRequest",
      spec: { expirationSeconds: 3600 },
    },
  );
  const cluster = admin.config.getCurrentCluster()!;
  const kubeconfig = writeTokenKubeconfig(
    tempDir(c, "ctl-rbac"),
    "kubeconfig",
    cluster.server,
    cluster.caData,
    tr.status.token,
  );
  // The authorizer applies new bindings from its own cache: wait until it has.
  await untilAllowed(sysNs, access("cocoonset.cocoonstack.io", "cocoonsets", "list"), true);
  await untilAllowed(sysNs, access("coordination.k8s.io", "leases", "create", sysNs), true);
  return { sysNs, kubeconfig, clusterRole, leaseRole };
}

/** What a SubjectAccessReview asks about. */
interface Access {
  group: string;
  resource: string;
  subresource?: string;
  verb: string;
  namespace?: string;
  name?: string;
}

function access(group: string, resource: string, verb: string, namespace?: string): Access {
  const [res, sub] = resource.split("/");
  return { group, resource: res, subresource: sub, verb, namespace };
}

/** Whether the controller's service account may do `a`, as the apiserver decides now. */
async function allowed(sysNs: string, a: Access): Promise<boolean> {
  const review = await adminClient().create<{ status?: { allowed?: boolean } }>(
    "/apis/authorization.k8s.io/v1/subjectaccessreviews",
    {
      apiVersion: "authorization.k8s.io/v1",
      kind: "SubjectAccessReview",
      spec: {
        user: `system:serviceaccount:${sysNs}:${SA}`,
        groups: [
          "system:serviceaccounts",
          `system:serviceaccounts:${sysNs}`,
          "system:authenticated",
        ],
        resourceAttributes: a,
      },
    },
  );
  return review.status?.allowed === true;
}

/** Asks again until the authorizer's answer for `a` is `want` (its cache follows RBAC edits). */
async function untilAllowed(sysNs: string, a: Access, want: boolean): Promise<void> {
  for (let i = 0; i < 500; i++) if ((await allowed(sysNs, a)) === want) return;
  assert.fail(`the authorizer never said ${want ? "yes" : "no"} to ${JSON.stringify(a)}`);
}

/** Replaces a Role or ClusterRole's rules. */
async function setRules(path: string, role: KubeObject, rules: PolicyRule[]): Promise<void> {
  const admin = adminClient();
  const live = await admin.get(path);
  await admin.replace(path, {
    ...role,
    metadata: { ...role.metadata, resourceVersion: live.metadata.resourceVersion },
    rules,
  });
}

/** Starts the controller as the service account: every namespace, leader election, 1 s reaper. */
function start(
  c: Cleanup,
  rbac: Rbac,
  label: string,
  extraArgs: string[] = [],
): Promise<ControllerProcess> {
  return startController(c, {
    kubeconfig: rbac.kubeconfig,
    namespaces: [],
    leaderElect: true,
    leaderElectionNamespace: rbac.sysNs,
    extraArgs: ["--reap-interval", "1s", ...extraArgs],
    label,
  });
}

/** A namespace of its own for one scenario, removed at once by `drop`. */
async function scenarioNamespace(prefix: string): Promise<{ ns: string; drop(): Promise<void> }> {
  const admin = adminClient();
  const ns = `${prefix}-${suffix()}`.slice(0, 63);
  await admin.create(paths.namespaces(), {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: ns },
  });
  return {
    ns,
    async drop() {
      /** What a scenario may leave finalized; `what` names the kinds a controller finalizes. */
      const held: { list: string; one: (n: string) => string; what?: string }[] = [
        { list: paths.jobs(ns), one: (n) => paths.job(ns, n) },
        { list: paths.configMaps(ns), one: (n) => paths.configMap(ns, n) },
        { list: paths.cocoonSets(ns), one: (n) => paths.cocoonSet(ns, n), what: "CocoonSet" },
        {
          list: paths.cocoonHibernations(ns),
          one: (n) => paths.cocoonHibernation(ns, n),
          what: "CocoonHibernation",
        },
      ];
      for (const { list, one } of held) {
        for (const o of (await admin.list(list)).items) {
          if (!o.metadata.finalizers?.length) continue;
          await admin.patch(
            one(o.metadata.name ?? ""),
            { metadata: { finalizers: null } },
            PatchType.merge,
          );
        }
      }
      await admin.delete(paths.namespace(ns));
      // The next scenario's controller watches every namespace and would put its finalizer
      // back on a CocoonSet or CocoonHibernation still here, then stop with the finalizer
      // left (and the namespace stuck terminating): lift it again until the namespace holds
      // neither, so no scenario leaves one behind.
      for (const { list, one, what } of held) {
        if (!what) continue;
        await waitForList(
          admin,
          list,
          (items) => {
            for (const o of items) {
              if (!o.metadata.finalizers?.length) continue;
              void admin
                .patch(one(o.metadata.name ?? ""), { metadata: { finalizers: null } })
                .catch(() => undefined);
            }
            return items.length === 0;
          },
          { timeoutMs: 60_000, description: `no ${what} left in ${ns}` },
        );
      }
    },
  };
}

const nowS = () => Math.floor(Date.now() / 1000);

/** A finalizer that keeps a released object present, so release has to watch it go. */
const HOLD = "example.com/hold";

function expiredJob(name: string, owner?: KubeObject, finalizers?: string[]): KubeObject {
  return {
    apiVersion: "batch/v1",
    kind: "Job",
    metadata: {
      name,
      finalizers,
      labels: owner ? undefined : MANAGED,
      annotations: owner ? undefined : { [EXPIRES]: String(nowS() - 60) },
      ownerReferences: owner ? [ownerRef(owner)] : undefined,
    },
    spec: {
      backoffLimit: 0,
      template: {
        spec: {
          restartPolicy: "Never",
          nodeSelector: NOWHERE,
          containers: [{ name: "main", image: "registry.invalid/never-pulled" }],
        },
      },
    },
  };
}

function expiredPod(name: string): KubeObject {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, labels: MANAGED, annotations: { [EXPIRES]: String(nowS() - 60) } },
    spec: {
      nodeSelector: NOWHERE,
      containers: [{ name: "main", image: "registry.invalid/never-pulled" }],
    },
  };
}

function configMap(name: string, owner?: KubeObject, finalizers?: string[]): KubeObject {
  return {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: {
      name,
      finalizers,
      labels: owner ? undefined : PROMPT,
      annotations: owner ? undefined : { [EXPIRES]: String(nowS() - 60) },
      ownerReferences: owner ? [ownerRef(owner)] : undefined,
    },
    data: { prompt: "hello" },
  };
}

/** An owner reference a worker in an agent pod would set on what it starts. */
function ownerRef(owner: KubeObject) {
  return {
    apiVersion: "v1",
    kind: "Pod",
    name: owner.metadata.name!,
    uid: owner.metadata.uid!,
    blockOwnerDeletion: false,
  };
}

/** A CocoonSet whose slot 1 already used up its rebuilds: a failure marks it dead-letter. */
function exhaustedCocoonSet(ns: string, name: string): KubeObject {
  const cs = cocoonSet(ns, name, { agent: { image: IMAGE, replicas: 1 } });
  cs.metadata.annotations = {
    [ANNOTATIONS.rebuildHistory]: JSON.stringify({
      "1": { count: 4, lastDeleted: new Date().toISOString() },
    }),
  };
  return cs;
}

describe(
  "cocoonset controller under exactly the generated ClusterRole",
  { timeout: 900_000 },
  () => {
    test("a full lifecycle with leader election and the reaper loop on meets no denial", async (t) => {
      const c = new Cleanup(t);
      const admin = adminClient();
      const rbac = await installRbac(c);
      const proc = await start(c, rbac, "cluster-role");
      await proc.synced(STARTUP_MS);
      const lease = await admin.get<{ spec?: { holderIdentity?: string } }>(
        paths.lease(rbac.sysNs, DEFAULT_LEASE_NAME),
      );
      assert.match(lease.spec?.holderIdentity ?? "", /./, "it leads on the Lease of its namespace");

      const ns = await controllerNamespace(c, "ctl-cr");
      // Create and scale.
      await createCocoonSet(ns, "life", { replicas: 2 });
      await waitForConverged(ns, "life", { replicas: 2 });
      await patchSpec(ns, "life", { agent: { replicas: 4 } });
      await waitForConverged(ns, "life", { replicas: 4 });
      await patchSpec(ns, "life", { agent: { replicas: 3 } });
      const { pods } = await waitForConverged(ns, "life", { replicas: 3 });

      // Fail and rebuild: history written, pod replaced, event posted.
      const victim = pods.find((p) => p.metadata?.name === "life-2")!;
      await failPod(ns, "life-2", victim.metadata!.uid!);
      await waitForObject(
        admin,
        paths.pods(ns),
        "life-2",
        (p) => !!p && p.metadata.uid !== victim.metadata?.uid && isReady(p),
        { description: "slot 2 rebuilt" },
      );
      await waitForEvent(ns, "life", "SubAgentRebuilding", "slot 2 attempt 1/4");
      await waitForConverged(ns, "life", { replicas: 3 });

      // A slot out of rebuilds is marked dead-letter (a pod patch).
      await admin.create(paths.cocoonSets(ns), exhaustedCocoonSet(ns, "spent"));
      const spent = await waitForConverged(ns, "spent", { replicas: 1 });
      const spentUid = spent.pods.find((p) => p.metadata?.name === "spent-1")!.metadata!.uid!;
      await failPod(ns, "spent-1", spentUid);
      await waitForObject(
        admin,
        paths.pods(ns),
        "spent-1",
        (p) => p?.metadata.annotations?.[ANNOTATIONS.deadLetter] === "true",
        { description: "slot 1 of spent marked dead-letter" },
      );

      // A toolbox whose name another pod holds: the controller reads that pod and says so.
      await admin.create(paths.pods(ns), {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: toolboxPodName("squat", "tools") },
        spec: { nodeSelector: NOWHERE, containers: [{ name: "main", image: IMAGE }] },
      });
      await createCocoonSet(ns, "squat", { toolboxes: [{ name: "tools", image: IMAGE }] });
      await proc.waitForLog("the toolbox name conflict", (l) =>
        /already exists and is not this CocoonSet's toolbox/.test(textOf(l)),
      );

      // The reaper loop: objects that expire after its first pass are reaped by a later one.
      await proc.waitForLog("a first reap pass", (l) => l.msg === "reap pass done");
      const job = await admin.create(paths.jobs(ns), expiredJob("old-job"));
      const pod = await admin.create(paths.pods(ns), expiredPod("old-pod"));
      const cm = await admin.create(paths.configMaps(ns), configMap("old-prompt"));
      const uids = new Set([job, pod, cm].map((o) => o.metadata.uid));
      for (const collection of [paths.jobs(ns), paths.pods(ns), paths.configMaps(ns)]) {
        await waitForList(
          admin,
          collection,
          (items) => !items.some((o) => uids.has(o.metadata.uid)),
          {
            description: `the expired object in ${collection} reaped`,
          },
        );
      }
      for (const [kind, name] of [
        ["job", "old-job"],
        ["pod", "old-pod"],
        ["configmap", "old-prompt"],
      ])
        await proc.waitForLog(
          `the reaper's log of ${kind} ${name}`,
          (l) => l.msg === `reaped ${kind}` && l.namespace === ns && l.name === name,
        );
      assert.ok((await proc.metric("cocoonset_reap_deleted_total", { reason: "Expired" })) >= 3);

      // Deletion releases what a worker in an agent pod left, then removes the finalizer.
      const agent = await admin.get<KubeObject>(paths.pod(ns, "life-1"));
      const workerJob = await admin.create(paths.jobs(ns), expiredJob("work", agent));
      await admin.create(paths.configMaps(ns), configMap("work-data", agent));
      for (const name of ["life", "spent", "squat"]) await admin.delete(paths.cocoonSet(ns, name));
      await waitForList(admin, paths.cocoonSets(ns), (items) => items.length === 0, {
        timeoutMs: 90_000,
        description: "every CocoonSet released and gone",
      });
      for (const name of ["life", "spent", "squat"])
        assert.deepEqual(await fleetPods(admin, ns, name), [], `no pod of ${name} is left`);
      assert.equal(
        await admin
          .getOrUndefined(paths.job(ns, "work"))
          .then((j) => (j?.metadata.uid === workerJob.metadata.uid ? j : undefined)),
        undefined,
        "the worker's Job is released",
      );
      assert.equal(await admin.getOrUndefined(paths.configMap(ns, "work-data")), undefined);
      assert.ok((await proc.metric("cocoonset_release_deleted_total", { kind: "job" })) >= 1);

      // Nothing was denied, and SIGTERM gives the Lease back (an update it is allowed).
      assert.deepEqual(
        proc.logs((l) => DENIAL.test(textOf(l)) && !TERMINATING.test(textOf(l))),
        [],
        "the generated ClusterRole and Lease Role cover every call",
      );
      const from = proc.lines.length;
      assert.deepEqual(await proc.stop(), { code: 0, signal: null }, proc.tail());
      assert.ok(
        proc.lines.slice(from).some((l) => l.msg === "released the lease"),
        `the Lease is released\n${proc.tail()}`,
      );
    });

    test("each verb of each rule is needed: without it a short scenario logs the denial", async (t) => {
      const c = new Cleanup(t);
      const admin = adminClient();
      const rbac = await installRbac(c);
      const clusterRolePath = paths.clusterRole(rbac.clusterRole.metadata.name!);
      const leaseRolePath = `${paths.roles(rbac.sysNs)}/${SA}`;

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
        "cocoonsets get": newFleet,
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
          await failPod(
            ns,
            "f-1",
            pods.find((p: Pod) => p.metadata?.name === "f-1")!.metadata!.uid!,
          );
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
        // A migration reads its target node first (the controller has a registry for it).
        "nodes get": afterSync(async (ns) => {
          await convergedFleet(ns);
          await patchSpec(ns, "f", { nodeName: "no-such-node" });
        }),
        "leases get": nothing,
        "leases create": nothing,
        // It creates the Lease, then renews it: an update.
        "leases update": nothing,
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
        return `${rules[g.rule].resources.join(",")} ${g.verb}`;
      };
      assert.deepEqual(
        granted.map(keyOf).sort(),
        Object.keys(scenarios).sort(),
        "exactly one scenario per granted verb",
      );

      const without = (rules: PolicyRule[], index: number, verb: string): PolicyRule[] =>
        rules.flatMap((r, i) => {
          if (i !== index) return [r];
          const verbs = r.verbs.filter((v) => v !== verb);
          return verbs.length ? [{ ...r, verbs }] : [];
        });
      const accessOf = (g: (typeof granted)[number], ns: string): Access => {
        const rules = g.where === "cluster" ? controllerRules() : leaderElectionRules();
        const r = rules[g.rule];
        const a = access(r.apiGroups[0], r.resources[0], g.verb, ns);
        if (["customresourcedefinitions", "nodes"].includes(r.resources[0])) delete a.namespace;
        if (g.where === "lease") a.namespace = rbac.sysNs;
        if (r.resourceNames) a.name = r.resourceNames[0];
        return a;
      };

      const proven: string[] = [];
      let restore: Access | undefined;
      for (const g of granted) {
        const key = keyOf(g);
        const [resource] = key.split(" ");
        await setRules(
          clusterRolePath,
          rbac.clusterRole,
          g.where === "cluster" ? without(controllerRules(), g.rule, g.verb) : controllerRules(),
        );
        await setRules(
          leaseRolePath,
          rbac.leaseRole,
          g.where === "lease"
            ? without(leaderElectionRules(), g.rule, g.verb)
            : leaderElectionRules(),
        );
        const scope = await scenarioNamespace("ctl-no");
        const denied = accessOf(g, scope.ns);
        await untilAllowed(rbac.sysNs, denied, false);
        if (restore) await untilAllowed(rbac.sysNs, restore, true);
        restore = denied;
        // Each run starts with no Lease unless its scenario makes one.
        try {
          await admin.delete(paths.lease(rbac.sysNs, DEFAULT_LEASE_NAME));
        } catch (e) {
          if (!isNotFound(e)) throw e;
        }

        const proc = await start(
          c,
          rbac,
          `without ${key}`,
          key === "nodes get" ? ["--oci-registry", registryAddress()] : [],
        );
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
      }
      t.diagnostic(proven.join("\n"));
      assert.equal(proven.length, granted.length);
    });
  },
);
