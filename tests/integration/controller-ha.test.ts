/**
 * Acceptance tests of `cocoonset controller` as a real process: two replicas with leader
 * election (only the leader writes; a SIGTERM hands the Lease over), and the controller
 * under the generated RBAC (a namespaced Role from controller/rbac.ts and a service-account
 * token): convergence, rebuild and deletion work, and a Role missing one verb fails visibly.
 */
import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import { DEFAULT_LEASE_NAME, type Lease } from "../../controller/leader-election.js";
import { controllerRole } from "../../controller/rbac.js";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import type { CocoonSet, Pod } from "../../engine/spec/index.js";
import { paths, waitForObject } from "../../engine/kube/index.js";
import { adminClient, isReady, testKubeconfig } from "../support/cluster.js";
import { bindRoleAndRequestToken } from "../support/service-account.js";
import {
  createCocoonSet,
  failPod,
  fleetPods,
  historyOf,
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
} from "../support/controller-process.js";

before(async () => {
  await ensureCrd(adminClient());
});

/** The identity a controller process logged at start. */
async function identityOf(proc: ControllerProcess): Promise<string> {
  const line = await proc.waitForLog("controller starting", (l) => l.msg === "controller starting");
  return String(line.identity);
}

/** Whether the service account may `verb` `resource` in `ns`, as the apiserver decides now. */
async function allowed(ns: string, sa: string, verb: string, resource: string): Promise<boolean> {
  const review = await adminClient().create<{ status?: { allowed?: boolean } }>(
    "/apis/authorization.k8s.io/v1/subjectaccessreviews",
    {
      apiVersion: "authorization.k8s.io/v1",
      kind: "SubjectAccessReview",
      spec: {
        user: `system:serviceaccount:${ns}:${sa}`,
        groups: ["system:serviceaccounts", `system:serviceaccounts:${ns}`, "system:authenticated"],
        resourceAttributes: { namespace: ns, verb, resource },
      },
    },
  );
  return review.status?.allowed === true;
}

/** What the controller logs once when it may not watch the nodes (controller/informer.ts). */
const NODES_REFUSED = "not allowed to watch; reading these objects afresh instead";

describe("cocoonset controller: leader election and RBAC", { timeout: 240_000 }, () => {
  test("with two replicas only the leader writes; on SIGTERM it exits 0, releases the Lease, and the standby takes over", async (t) => {
    const c = new Cleanup(t);
    const ns = await controllerNamespace(c, "ctl-leader");
    const client = adminClient();
    const start = (label: string) =>
      startController(c, {
        kubeconfig: testKubeconfig(),
        namespaces: [ns],
        leaderElect: true,
        leaderElectionNamespace: ns,
        label,
      });
    const a = await start("replica-a");
    const b = await start("replica-b");
    const ids = new Map([
      [a, await identityOf(a)],
      [b, await identityOf(b)],
    ]);
    const leader = await Promise.race(
      [a, b].map((p) =>
        p.waitForLog("became leader", (l) => l.msg === "became leader").then(() => p),
      ),
    );
    const standby = leader === a ? b : a;
    const leaderId = ids.get(leader)!;
    const standbyId = ids.get(standby)!;
    const lease = await client.get<Lease>(paths.lease(ns, DEFAULT_LEASE_NAME));
    assert.equal(lease.spec?.holderIdentity, leaderId);

    await leader.synced();
    await createCocoonSet(ns, "ha", { replicas: 3 });
    const converged = await waitForConverged(ns, "ha", { replicas: 3 });
    const created = await leader.createdPods(converged.pods.map((p) => p.metadata!.name!));
    assert.equal(created.length, 4, "one create per pod");
    assert.deepEqual(
      standby.logs((l) => l.msg === "created pod"),
      [],
      "the standby wrote nothing",
    );
    assert.deepEqual(
      standby.logs((l) => l.msg === "became leader"),
      [],
    );
    const leaseLabel = { name: "cocoonset-controller" };
    assert.equal(await standby.metric("controller_runtime_reconcile_total"), 0);
    assert.equal(await standby.metric("workqueue_adds_total"), 0);
    assert.equal(await standby.metric("leader_election_master_status", leaseLabel), 0);
    assert.equal(await leader.metric("leader_election_master_status", leaseLabel), 1);
    assert.ok(
      (await leader.metric("controller_runtime_reconcile_total", { controller: "cocoonset" })) > 0,
    );
    assert.ok((await leader.metric("workqueue_adds_total", { name: "cocoonset" })) > 0);
    // Both controllers have their series, each under its own name.
    assert.match(
      await leader.metricsText(),
      /^controller_runtime_max_concurrent_reconciles\{controller="cocoonhibernation"\} [1-9]/m,
    );
    assert.deepEqual(await standby.probe("/readyz"), {
      status: 200,
      body: "ok (standby, not leading)\n",
    });

    const exit = await leader.stop("SIGTERM");
    assert.deepEqual(exit, { code: 0, signal: null }, leader.tail());
    assert.ok(leader.logs((l) => l.msg === "released the lease").length === 1, leader.tail());
    const afterExit = await client.get<Lease>(paths.lease(ns, DEFAULT_LEASE_NAME));
    assert.notEqual(afterExit.spec?.holderIdentity, leaderId, "the Lease was released");

    await standby.waitForLog("became leader", (l) => l.msg === "became leader", {
      timeoutMs: 30_000,
    });
    await waitForObject<Lease>(
      client,
      paths.leases(ns),
      DEFAULT_LEASE_NAME,
      (o) => o?.spec?.holderIdentity === standbyId,
      { description: "the standby to hold the Lease" },
    );
    await standby.synced();
    await patchSpec(ns, "ha", { agent: { replicas: 5 } });
    await waitForConverged(ns, "ha", { replicas: 5 });
    assert.deepEqual(
      (await standby.createdPods(["ha-4", "ha-5"])).map((l) => l.pod).sort(),
      ["ha-4", "ha-5"],
      "the new leader converged the change",
    );
  });

  test("under the generated namespaced Role the controller converges, rebuilds and deletes; without pods/create it fails visibly", async (t) => {
    const c = new Cleanup(t);
    const ns = await controllerNamespace(c, "ctl-rbac");
    const client = adminClient();
    const sa = "cocoonset-controller";
    await client.create(paths.serviceAccounts(ns), {
      apiVersion: "v1",
      kind: "ServiceAccount",
      metadata: { name: sa },
    });
    const role = controllerRole(sa, ns);
    await client.create(paths.roles(ns), role);
    const token = await bindRoleAndRequestToken(client, ns, sa, 900);
    const cluster = client.config.getCurrentCluster()!;
    const kubeconfig = writeTokenKubeconfig(
      tempDir(c, "rbac"),
      "kubeconfig",
      cluster.server,
      cluster.caData,
      token,
    );
    // The service account cannot read the CRD object: the controller's CRD check falls
    // back to API discovery.
    assert.equal(
      await allowed(ns, sa, "get", "customresourcedefinitions"),
      false,
      "the Role grants nothing on CRDs",
    );

    const proc = await startController(c, { kubeconfig, namespaces: [ns], label: "rbac" });
    await proc.synced();

    // Convergence.
    await createCocoonSet(ns, "sa", { replicas: 2 });
    const { pods } = await waitForConverged(ns, "sa", { replicas: 2 });

    // Rebuild: history written, pod replaced, event posted.
    const victim = pods.find((p) => p.metadata?.name === "sa-1")!;
    await failPod(ns, "sa-1", victim.metadata!.uid!);
    await waitForObject(
      client,
      paths.pods(ns),
      "sa-1",
      (p) => !!p && p.metadata.uid !== victim.metadata?.uid && isReady(p),
      { description: "slot 1 rebuilt" },
    );
    const rebuilt = await client.get<CocoonSet>(paths.cocoonSet(ns, "sa"));
    assert.equal(historyOf(rebuilt).get(1)?.count, 1);
    await waitForEvent(ns, "sa", "SubAgentRebuilding", "slot 1 attempt 1/4");
    await waitForConverged(ns, "sa", { replicas: 2 });

    // Deletion: the tree is released and the finalizer removed.
    await client.delete(paths.cocoonSet(ns, "sa"));
    await waitForObject(client, paths.cocoonSets(ns), "sa", (o) => o === undefined, {
      timeoutMs: 90_000,
      description: "CocoonSet sa to be gone",
    });
    assert.deepEqual(await fleetPods(client, ns, "sa"), []);
    assert.deepEqual(
      proc.logs(
        (l) =>
          typeof l.err === "string" &&
          /forbidden/i.test(l.err) &&
          // Expected: a namespaced Role cannot read the cluster-scoped CRD, so the start-up
          // check falls back to API discovery and says so at debug level; nor list the nodes
          // or every namespace's CocoonSet names, so those caches stop and say so once each
          // (checked below).
          l.msg !== "cannot read the CRD object; asking API discovery" &&
          l.msg !== NODES_REFUSED,
      ),
      [],
      "the generated Role covers every call so far",
    );
    // Without the node cache, a node is read afresh (and refused too); without the names, the
    // VM-name check lists the namespace's CocoonSets afresh: each said once, not retried.
    assert.deepEqual(
      proc
        .logs((l) => l.msg === NODES_REFUSED)
        .map((l) => l.path)
        .sort(),
      [paths.nodes(), paths.cocoonSets()].sort(),
      "the node and names caches' refusals logged once each",
    );

    // Take away pods/create: a new CocoonSet cannot converge, and the controller says why.
    const rules = (role.rules as { resources: string[]; verbs: string[] }[]).map((r) =>
      r.resources.includes("pods") ? { ...r, verbs: r.verbs.filter((v) => v !== "create") } : r,
    );
    const live = await client.get<{ metadata: { resourceVersion?: string } }>(
      `${paths.roles(ns)}/${sa}`,
    );
    await client.replace(`${paths.roles(ns)}/${sa}`, {
      ...role,
      metadata: { ...role.metadata, resourceVersion: live.metadata.resourceVersion },
      rules,
    });
    // The authorizer applies Role changes from its own cache: wait until it has.
    let denied = false;
    for (let i = 0; i < 200 && !denied; i++) denied = !(await allowed(ns, sa, "create", "pods"));
    assert.equal(denied, true, "the apiserver denies pods/create");

    const from = proc.lines.length;
    await createCocoonSet(ns, "blocked", { replicas: 1 });
    const failure = await proc.waitForLog(
      "a failed reconcile of blocked",
      (l) => l.msg === "reconcile failed; requeued with backoff" && l.name === "blocked",
      { from },
    );
    assert.match(String(failure.err), /forbidden/i);
    assert.match(String(failure.err), /cannot create resource "pods"/);
    assert.ok(
      (await proc.metric("controller_runtime_reconcile_errors_total", {
        controller: "cocoonset",
      })) > 0,
    );
    assert.ok((await proc.metric("workqueue_retries_total", { name: "cocoonset" })) > 0);
    // The denied create is counted by its code.
    assert.ok(
      (await proc.metric("rest_client_requests_total", { code: "403", method: "POST" })) > 0,
    );
    assert.deepEqual(await fleetPods(client, ns, "blocked"), [], "no pod was created");
    // The status says it too, as for any refused create (ReplicaFailure FailedCreate).
    const blocked = await waitForObject<CocoonSet>(
      client,
      paths.cocoonSets(ns),
      "blocked",
      (o) => !!o?.status?.conditions?.some((c) => c.type === "ReplicaFailure"),
      { description: "the ReplicaFailure condition of blocked" },
    );
    const replicaFailure = blocked!.status!.conditions!.find((c) => c.type === "ReplicaFailure")!;
    assert.equal(replicaFailure.reason, "FailedCreate");
    assert.match(replicaFailure.message ?? "", /cannot create resource "pods"/);
    assert.equal(
      proc.lines.slice(from).filter((l) => l.msg === "created pod").length,
      0,
      proc.tail(),
    );
    const pod: Pod | undefined = await client.getOrUndefined<Pod>(paths.pod(ns, "blocked-0"));
    assert.equal(pod, undefined);
  });
});
