/**
 * The Operator's guards (what its dynamic resources run in `up` and `destroy`) against the
 * embedded cluster: the install guard adopts a CRD it did not install only when told to by
 * name, and never one another Operator installed; the CRD guard refuses to let the CRD go
 * while CocoonSets are left, naming them, unless the CRD is kept; the install guard's check
 * refuses a ServiceMonitor the cluster does not serve (no Prometheus Operator CRD).
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import {
  assertSingleOperator,
  crdGuardCreate,
  crdGuardDelete,
  fleetGuardCreate,
  guardCheck,
  guardCreate,
  INSTALLED_BY,
} from "../../provider/dynamic/index.js";
import { OWNER_TOKEN } from "../../provider/dynamic/ownership.js";
import { operatorObjects, requiredKinds, SERVICE_MONITOR_CRD } from "../../sdk/operator-objects.js";
import { API_VERSION } from "../../engine/kube/api-names.js";
import { CRD_NAME, KIND } from "../../engine/spec/index.js";
import { isNotFound, paths, waitForObject, type KubeObject } from "../../engine/kube/index.js";
import { adminClient, testKubeconfig, withNamespace } from "../support/cluster.js";
import { removeCrd } from "../support/crd.js";

const kubeconfig = () => readFileSync(testKubeconfig(), "utf8");
const MINE = "a".repeat(32);
const THEIRS = "b".repeat(32);

test("the install guard refuses a CRD no Operator installed unless adoptCrd names it, and one another Operator installed in any case", async (t) => {
  const client = adminClient();
  await removeCrd();
  t.after(removeCrd);
  const owner = "proj/dev/cocoonset";

  assert.equal(await assertSingleOperator({ kubeconfig: kubeconfig(), owner }), undefined);

  await ensureCrd(client); // applied by hand: no stamp
  await assert.rejects(
    assertSingleOperator({ kubeconfig: kubeconfig(), owner }),
    new RegExp(
      `^CrdGuardError: \\[adoptCrd\\] the CocoonSet CRD ${CRD_NAME.replace(/\./g, "\\.")} exists and no Operator installed it`,
    ),
  );
  await assert.rejects(
    assertSingleOperator({ kubeconfig: kubeconfig(), owner, adoptCrd: "cocoonsets" }),
    /\[adoptCrd\]/,
    "only the CRD's exact name opts in",
  );
  assert.equal(
    await assertSingleOperator({ kubeconfig: kubeconfig(), owner, adoptCrd: CRD_NAME }),
    undefined,
  );

  // Another Operator's CRD, by its token: refused whatever the names, taken over only by name.
  await client.patch(paths.crd(CRD_NAME), {
    metadata: { annotations: { [INSTALLED_BY]: "other/prod/cocoonset", [OWNER_TOKEN]: THEIRS } },
  });
  assert.equal(
    await assertSingleOperator(
      { kubeconfig: kubeconfig(), owner: "proj/dev/cocoonset", ownerToken: THEIRS },
      true,
    ),
    "other/prod/cocoonset",
    "its own token passes, under any name (a renamed stack)",
  );
  await assert.rejects(
    assertSingleOperator({
      kubeconfig: kubeconfig(),
      owner: "other/prod/cocoonset",
      ownerToken: MINE,
    }),
    /already installed by the Operator other\/prod\/cocoonset \(ownership token bbbbbbbb…\).*add an alias.*adoptCrd/,
    "the same name with another token (another backend, a re-created stack) is refused",
  );
  assert.equal(
    await assertSingleOperator({
      kubeconfig: kubeconfig(),
      owner,
      ownerToken: MINE,
      adoptCrd: CRD_NAME,
    }),
    "other/prod/cocoonset",
    "adoptCrd takes it over",
  );
});

test("the install guard and the Fleet's claim guard keep a kubeconfig read from a file out of their outputs (Pulumi hands outputs back to the program, and --debug logs print them)", async (t) => {
  const client = adminClient();
  await ensureCrd(client);
  const ns = await withNamespace(t, "guard-outs");
  const owner = "proj/dev/cocoonset";
  const credential = kubeconfig();
  await client.patch(paths.crd(CRD_NAME), {
    metadata: { annotations: { [INSTALLED_BY]: owner } },
  });
  t.after(() =>
    client.patch(paths.crd(CRD_NAME), { metadata: { annotations: { [INSTALLED_BY]: null } } }),
  );
  const file = testKubeconfig();
  const install = await guardCreate({
    kubeconfig: credential,
    kubeconfigFile: file,
    owner,
    ownerToken: MINE,
    adoptCrd: CRD_NAME,
  });
  assert.deepEqual(install.outs, {
    kubeconfigFile: file,
    owner,
    ownerToken: MINE,
    adoptCrd: CRD_NAME,
  });
  const claim = await fleetGuardCreate({
    kubeconfig: credential,
    kubeconfigFile: file,
    namespace: ns,
    name: "coder",
    owner: "proj/dev/coder",
    requireCrd: true,
    ownerToken: MINE,
  });
  assert.deepEqual(claim.outs, {
    kubeconfigFile: file,
    namespace: ns,
    name: "coder",
    owner: "proj/dev/coder",
    requireCrd: true,
    ownerToken: MINE,
  });
});

test("the CRD guard refuses to let the CRD go while CocoonSets are left, naming them; a kept CRD is reported with what is left", async (t) => {
  const client = adminClient();
  await removeCrd();
  t.after(removeCrd);
  const owner = "proj/dev/cocoonset";
  // As a Fleet given the default kubeconfig stores it: its file, read again by each delete.
  const { outs } = crdGuardCreate({
    kubeconfig: kubeconfig(),
    kubeconfigFile: testKubeconfig(),
    owner,
    retain: "",
    providerVersion: "test",
  });
  assert.equal(outs.kubeconfig, undefined, "no kubeconfig text among the outputs");
  const props = { ...outs, kubeconfigFile: testKubeconfig() };

  await crdGuardDelete({ ...props, retain: "" }); // no CRD: nothing to guard

  await ensureCrd(client);
  const ns = await withNamespace(t, "crd-guard");
  for (const name of ["b-fleet", "a-fleet"]) {
    await client.create(paths.cocoonSets(ns), {
      apiVersion: API_VERSION,
      kind: KIND,
      metadata: { name, namespace: ns },
      spec: { agent: { replicas: 0, image: "agents/coder:1" } },
    });
  }
  await assert.rejects(
    crdGuardDelete({ ...props, retain: "" }),
    new RegExp(
      `^CrdGuardError: \\[Operator\\] refusing to delete the CocoonSet CRD \\S+: 2 CocoonSet\\(s\\) are left in the cluster \\(${ns}/a-fleet, ${ns}/b-fleet\\).*\`retainCrdOnDelete: true\``,
    ),
  );
  const crd = await client.get<KubeObject>(paths.crd(CRD_NAME));
  assert.equal(crd.metadata.deletionTimestamp, undefined, "the guard deletes nothing");

  const logged: string[] = [];
  t.mock.method(console, "log", (line: string) => void logged.push(line));
  await crdGuardDelete({ ...props, retain: "retainCrdOnDelete" });
  t.mock.restoreAll();
  assert.equal(logged.length, 1);
  assert.match(
    logged[0],
    new RegExp(
      `^cocoonset: keeping the CocoonSet CRD \\S+ \\(retainCrdOnDelete\\); 2 CocoonSet\\(s\\) are left in the cluster: ${ns}/a-fleet, ${ns}/b-fleet; delete it with \`kubectl delete crd \\S+\` once no CocoonSet is left$`,
    ),
  );

  for (const name of ["a-fleet", "b-fleet"]) await client.delete(paths.cocoonSet(ns, name));
  await crdGuardDelete({ ...props, retain: "" }); // nothing left: the CRD may go
});

/** Deletes the ServiceMonitor CRD (when there) and waits (watch) until it is gone. */
async function removeServiceMonitorCrd(): Promise<void> {
  const client = adminClient();
  await client.delete(paths.crd(SERVICE_MONITOR_CRD)).catch((e: unknown) => {
    if (!isNotFound(e)) throw e;
  });
  await waitForObject(client, paths.crds(), SERVICE_MONITOR_CRD, (o) => o === undefined, {
    timeoutMs: 60_000,
    description: `CRD ${SERVICE_MONITOR_CRD} to be gone`,
  });
}

test("serviceMonitor: the install guard's check refuses while the cluster serves no ServiceMonitor, naming the CRD; with the CRD installed it passes and the apiserver takes the Operator's ServiceMonitor", async (t) => {
  const client = adminClient();
  const ns = await withNamespace(t, "guard-monitor");
  await removeServiceMonitorCrd();
  t.after(removeServiceMonitorCrd);
  const objects = operatorObjects("mon", {
    namespace: ns,
    createNamespace: false,
    serviceMonitor: true,
  });
  assert.deepEqual(
    requiredKinds(operatorObjects("plain", { namespace: ns })),
    [],
    "no ServiceMonitor asked, none required",
  );
  // What the Operator hands its install guard; `check` runs at `pulumi preview` and `up`.
  const inputs = {
    kubeconfig: kubeconfig(),
    owner: "proj/dev/mon",
    requiredKinds: requiredKinds(objects),
    adoptCrd: CRD_NAME, // the CocoonSet CRD's own decision is not what this test is about
  };

  const refused = await guardCheck(undefined, inputs);
  assert.equal(refused.failures.length, 1, JSON.stringify(refused.failures));
  assert.equal(
    refused.failures[0].reason,
    "[serviceMonitor] the cluster does not serve monitoring.coreos.com/v1 ServiceMonitor: the CRD servicemonitors.monitoring.coreos.com is not installed; install the Prometheus Operator (or its CRDs) first, or leave `serviceMonitor` off (`metricsService: true` makes the Service alone)",
  );

  // A minimal ServiceMonitor CRD, as the Prometheus Operator's serves the kind.
  await client.create(paths.crds(), {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: SERVICE_MONITOR_CRD },
    spec: {
      group: "monitoring.coreos.com",
      scope: "Namespaced",
      names: {
        plural: "servicemonitors",
        singular: "servicemonitor",
        kind: "ServiceMonitor",
        listKind: "ServiceMonitorList",
      },
      versions: [
        {
          name: "v1",
          served: true,
          storage: true,
          schema: {
            openAPIV3Schema: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
          },
        },
      ],
    },
  });
  await waitForObject<
    KubeObject & { status?: { conditions?: { type: string; status: string }[] } }
  >(
    client,
    paths.crds(),
    SERVICE_MONITOR_CRD,
    (o) => !!o?.status?.conditions?.some((c) => c.type === "Established" && c.status === "True"),
    { timeoutMs: 60_000, description: `CRD ${SERVICE_MONITOR_CRD} Established` },
  );
  const passed = await guardCheck(undefined, inputs);
  assert.deepEqual(passed.failures, [], "the cluster serves the kind now");

  const monitor = objects.serviceMonitor!.object;
  await client.create(`/apis/monitoring.coreos.com/v1/namespaces/${ns}/servicemonitors`, monitor);
  const stored = await client.get<KubeObject & { spec?: unknown }>(
    `/apis/monitoring.coreos.com/v1/namespaces/${ns}/servicemonitors/${monitor.metadata.name}`,
  );
  assert.deepEqual(stored.spec, monitor.spec, "the ServiceMonitor as the Operator makes it");
});
