/**
 * The guards' preflight (provider/dynamic/preflight.ts) against the embedded cluster, as
 * `pulumi preview` and `up` run it in their `check`: a caller without a right the deploy uses
 * is refused naming each resource and its verbs, before anything is written; a Fleet whose
 * pool has no node is refused naming the pool and what to run (a warning only with
 * `capacityCheck: off`); an Operator's check asks the rights for each object it writes.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { paths } from "../../engine/kube/index.js";
import { fleetGuardCheck, guardCheck } from "../../provider/dynamic/index.js";
import { operatorObjects, teardownOrder } from "../../sdk/operator-objects.js";
import { adminClient, suffix, testKubeconfig, withNamespace } from "../support/cluster.js";
import { serviceAccountKubeconfig } from "../support/service-account.js";

const adminKubeconfig = () => readFileSync(testKubeconfig(), "utf8");

const fleetInputs = (kubeconfig: string, namespace: string, extra: object = {}) => ({
  kubeconfig,
  namespace,
  name: "coder",
  owner: "proj/dev/coder",
  spec: { agent: { replicas: 1, image: "agents/coder:1" } },
  ...extra,
});

test("a Fleet's check refuses a caller without the rights its deploy uses, each resource with its verbs, and writes nothing", async (t) => {
  const client = adminClient();
  await ensureCrd(client);
  const ns = await withNamespace(t, "preflight-rbac");
  // Reads only: enough to look, not to deploy.
  const kubeconfig = await serviceAccountKubeconfig(ns, "reader", [
    { apiGroups: [""], resources: ["pods"], verbs: ["get", "list", "watch"] },
    { apiGroups: ["cocoonset.cocoonstack.io"], resources: ["cocoonsets"], verbs: ["get", "list"] },
  ]);
  const { failures } = await fleetGuardCheck(undefined, fleetInputs(kubeconfig, ns));
  const reasons = failures.map((f) => f.reason);
  assert.ok(
    reasons.some((r) =>
      r.startsWith(
        `you cannot create, delete, patch pods in namespace ${ns}: pulumi up creates the agents' pods (and preview sends them as dry runs), destroy deletes them; ask for a Role (or ClusterRole) bound to you with verbs create, delete, patch on pods`,
      ),
    ),
    reasons.join("\n"),
  );
  assert.ok(
    reasons.some((r) =>
      r.startsWith(
        `you cannot create, patch cocoonsets.cocoonset.cocoonstack.io in namespace ${ns}`,
      ),
    ),
    reasons.join("\n"),
  );
  // Only destroy needs delete, and jobs and configmaps only for the release: no refusal for them.
  assert.ok(!reasons.some((r) => /jobs\.batch|configmaps/.test(r)), reasons.join("\n"));
  const admin = adminClient();
  assert.equal((await admin.list(paths.pods(ns))).items.length, 0, "nothing written");
});

test("a Fleet's check refuses a pool with no node, naming the pool and the node agent; capacityCheck off only warns", async (t) => {
  const client = adminClient();
  await ensureCrd(client);
  const ns = await withNamespace(t, "preflight-pool");
  const pool = `empty-${suffix()}`;
  const spec = { nodePool: pool, agent: { replicas: 1, image: "agents/coder:1" } };
  const refused = await fleetGuardCheck(undefined, fleetInputs(adminKubeconfig(), ns, { spec }));
  assert.deepEqual(
    refused.failures.map((f) => f.reason),
    [
      `no node in pool ${pool} (label cocoonstack.io/pool=${pool}): the agents' pods would stay Pending; run vk-cocoon nodes for the pool and label them: kubectl label node NODE cocoonstack.io/pool=${pool}`,
    ],
  );
  const off = await fleetGuardCheck(
    undefined,
    fleetInputs(adminKubeconfig(), ns, { spec, capacityCheck: "off" }),
  );
  assert.deepEqual(off.failures, []);
  // The default pool has nodes: nothing refused.
  const fine = await fleetGuardCheck(undefined, fleetInputs(adminKubeconfig(), ns));
  assert.deepEqual(fine.failures, []);
});

test("an Operator's check asks the rights for each object it writes and refuses the missing ones", async (t) => {
  const ns = await withNamespace(t, "preflight-operator");
  const kubeconfig = await serviceAccountKubeconfig(ns, "deployer", [
    {
      apiGroups: ["apps"],
      resources: ["deployments"],
      verbs: ["get", "create", "patch", "delete"],
    },
    { apiGroups: [""], resources: ["serviceaccounts"], verbs: ["get", "create", "patch"] },
  ]);
  const objects = teardownOrder(operatorObjects("op", { namespace: ns, createNamespace: false }));
  const { failures } = await guardCheck(undefined, { kubeconfig, owner: "proj/dev/op", objects });
  const reasons = failures.map((f) => f.reason);
  assert.ok(
    reasons.some((r) =>
      r.startsWith(
        "you cannot get, create, patch customresourcedefinitions.apiextensions.k8s.io (cluster-wide): the Operator's CustomResourceDefinition",
      ),
    ),
    reasons.join("\n"),
  );
  assert.ok(
    reasons.some((r) =>
      r.startsWith(
        "you cannot get, create, patch clusterroles.rbac.authorization.k8s.io (cluster-wide)",
      ),
    ),
    reasons.join("\n"),
  );
  // Granted: no line for them; delete of serviceaccounts is destroy's, a warning.
  assert.ok(!reasons.some((r) => /deployments\.apps|serviceaccounts/.test(r)), reasons.join("\n"));
});
