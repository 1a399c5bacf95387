/**
 * Test support for the controller's RBAC tests: a service account bound to exactly
 * `controllerClusterRole()` and, in its own namespace, `controllerLeaseRole()`; what the
 * apiserver's authorizer says about it; and the objects the scenarios create.
 */
import assert from "node:assert/strict";
import {
  controllerClusterRole,
  controllerLeaseRole,
  type PolicyRule,
} from "../../controller/rbac.js";
import { ANNOTATIONS } from "../../engine/spec/index.js";
import { paths, PatchType, waitForList, type KubeObject } from "../../engine/kube/index.js";
import { adminClient, suffix } from "./cluster.js";
import { cocoonSet, IMAGE } from "./controller-fleet.js";
import { bindRoleAndRequestToken } from "./service-account.js";
import {
  Cleanup,
  controllerNamespace,
  startController,
  tempDir,
  writeTokenKubeconfig,
  type ControllerProcess,
  type LogLine,
} from "./controller-process.js";

export const SA = "cocoonset-controller";

/** A CocoonHibernation asking `pod` to hibernate. */
export function hibernation(name: string, pod: string): KubeObject {
  return {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonHibernation",
    metadata: { name },
    spec: { podRef: { name: pod }, desire: "Hibernate" },
  };
}
/** How long a controller process may take to start and sync on a loaded machine. */
export const STARTUP_MS = 240_000;
const EXPIRES = "cocoonset.cocoonstack.io/expires-at";
const MANAGED = { "app.kubernetes.io/managed-by": "cocoonset" };
const PROMPT = { ...MANAGED, "app.kubernetes.io/component": "prompt-data" };
// No node carries this pool: such pods stay unbound and keep the status they were given.
export const NOWHERE = { "cocoonstack.io/pool": "no-such-pool" };

/** The text of a log line's string fields (error messages keep their quotes). */
export const textOf = (l: LogLine): string =>
  Object.values(l)
    .filter((v): v is string => typeof v === "string")
    .join(" ");

/** The RBAC of one controller identity, and a kubeconfig that authenticates as it. */
export interface Rbac {
  sysNs: string;
  kubeconfig: string;
  clusterRole: KubeObject;
  leaseRole: KubeObject;
}

/**
 * A service account in a fresh controller namespace, bound to exactly the generated
 * ClusterRole and the Lease Role of that namespace, with a token kubeconfig.
 */
export async function installRbac(c: Cleanup): Promise<Rbac> {
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
  const token = await bindRoleAndRequestToken(admin, sysNs, SA, 3600);
  const cluster = admin.config.getCurrentCluster()!;
  const kubeconfig = writeTokenKubeconfig(
    tempDir(c, "ctl-rbac"),
    "kubeconfig",
    cluster.server,
    cluster.caData,
    token,
  );
  // The authorizer applies new bindings from its own cache: wait until it has.
  await untilAllowed(sysNs, access("cocoonset.cocoonstack.io", "cocoonsets", "list"), true);
  await untilAllowed(sysNs, access("coordination.k8s.io", "leases", "create", sysNs), true);
  return { sysNs, kubeconfig, clusterRole, leaseRole };
}

/** What a SubjectAccessReview asks about. */
export interface Access {
  group: string;
  resource: string;
  subresource?: string;
  verb: string;
  namespace?: string;
  name?: string;
}

export function access(group: string, resource: string, verb: string, namespace?: string): Access {
  const [res, sub] = resource.split("/");
  return { group, resource: res, subresource: sub, verb, namespace };
}

/** Whether the controller's service account may do `a`, as the apiserver decides now. */
export async function allowed(sysNs: string, a: Access): Promise<boolean> {
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
export async function untilAllowed(sysNs: string, a: Access, want: boolean): Promise<void> {
  // Bounded in time, not in questions: with several identities edited at once, the
  // authorizer's cache can take longer than a fixed number of quick answers.
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) if ((await allowed(sysNs, a)) === want) return;
  assert.fail(`the authorizer never said ${want ? "yes" : "no"} to ${JSON.stringify(a)} in 60 s`);
}

/** Replaces a Role or ClusterRole's rules. */
export async function setRules(path: string, role: KubeObject, rules: PolicyRule[]): Promise<void> {
  const admin = adminClient();
  const live = await admin.get(path);
  await admin.replace(path, {
    ...role,
    metadata: { ...role.metadata, resourceVersion: live.metadata.resourceVersion },
    rules,
  });
}

/**
 * Starts the controller as the service account with leader election and a 1 s reaper, on
 * `namespaces` (every namespace when empty, as the Operator deploys it).
 */
export function start(
  c: Cleanup,
  rbac: Rbac,
  label: string,
  extraArgs: string[] = [],
  namespaces: string[] = [],
): Promise<ControllerProcess> {
  return startController(c, {
    kubeconfig: rbac.kubeconfig,
    namespaces,
    leaderElect: true,
    leaderElectionNamespace: rbac.sysNs,
    extraArgs: ["--reap-interval", "1s", ...extraArgs],
    label,
  });
}

/** A namespace of its own for one scenario, removed at once by `drop`. */
export async function scenarioNamespace(
  prefix: string,
): Promise<{ ns: string; drop(): Promise<void> }> {
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
export const HOLD = "example.com/hold";

export function expiredJob(name: string, owner?: KubeObject, finalizers?: string[]): KubeObject {
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

export function expiredPod(name: string): KubeObject {
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

export function configMap(name: string, owner?: KubeObject, finalizers?: string[]): KubeObject {
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
export function exhaustedCocoonSet(ns: string, name: string): KubeObject {
  const cs = cocoonSet(ns, name, { agent: { image: IMAGE, replicas: 1 } });
  cs.metadata.annotations = {
    [ANNOTATIONS.rebuildHistory]: JSON.stringify({
      "1": { count: 4, lastDeleted: new Date().toISOString() },
    }),
  };
  return cs;
}
