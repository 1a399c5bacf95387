/**
 * `pulumi preview` sends the pods a deploy would create as server-side dry runs: a
 * ResourceQuota and a ValidatingAdmissionPolicy that the new slots violate fail the preview
 * (and `up`, before any pod) with their own messages, naming the slots. Real pulumi CLI,
 * local backend, embedded cluster (its resource-quota controller measures the quota); the
 * pods are read from the cluster.
 */
import type { Stack } from "@pulumi/pulumi/automation/index.js";
import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { LABELS, ROLES } from "../../engine/spec/index.js";
import { KubeApiError, paths, waitForObject, type KubeObject } from "../../engine/kube/index.js";
import { adminClient, suffix, withNamespace } from "../support/cluster.js";
import { programStack, repoRoot, failure } from "../support/pulumi.js";

const program = join(repoRoot, "tests", "e2e", "programs", "fleet");
const VAP_API = "/apis/admissionregistration.k8s.io/v1";

const quotasPath = (ns: string) => `/api/v1/namespaces/${ns}/resourcequotas`;

/** Names of the fleet's pods in the cluster, sorted. */
async function podNames(ns: string): Promise<string[]> {
  const list = await adminClient().list(paths.pods(ns), { labelSelector: `${LABELS.name}=fleet` });
  return list.items.map((p) => p.metadata.name ?? "").sort();
}

const fleetPods = (...slots: (number | string)[]) => slots.map((s) => `fleet-${s}`).sort();

/** The refusals in a failure's output, each once, for the test's output. */
const refusals = (text: string): string =>
  [...new Set(text.split("\n").flatMap((l) => /\[slots\.[^\n]*/.exec(l) ?? []))].join("\n");

/** Sets the quota's `pods` limit and waits until the quota controller has measured it. */
async function setPodQuota(ns: string, hard: number, used: number): Promise<void> {
  const client = adminClient();
  const body = {
    apiVersion: "v1",
    kind: "ResourceQuota",
    metadata: { name: "pods-quota" },
    spec: { hard: { pods: String(hard) } },
  };
  const existing = await client.getOrUndefined(`${quotasPath(ns)}/pods-quota`);
  if (existing) await client.patch(`${quotasPath(ns)}/pods-quota`, { spec: body.spec });
  else await client.create(quotasPath(ns), body);
  await waitForObject<
    KubeObject & { status?: { hard?: Record<string, string>; used?: Record<string, string> } }
  >(
    client,
    quotasPath(ns),
    "pods-quota",
    (q) => q?.status?.hard?.pods === String(hard) && q.status.used?.pods === String(used),
    { timeoutMs: 60_000, description: `quota pods-quota measured at ${used}/${hard}` },
  );
}

/**
 * Polls until admission applies the new policy: the apiserver loads policies and bindings
 * from its own informer, and there is no event saying it has.
 */
async function untilPolicyActive(ns: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const probe = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "probe", labels: { [LABELS.role]: ROLES.toolbox } },
    spec: { containers: [{ name: "c", image: "registry.invalid/probe:1" }] },
  };
  for (;;) {
    try {
      await adminClient().create(`${paths.pods(ns)}?dryRun=All`, probe);
    } catch (e) {
      if (KubeApiError.isInstance(e) && /memory limit/.test(e.message)) return;
      throw e;
    }
    if (Date.now() > deadline) throw new Error("the ValidatingAdmissionPolicy never applied");
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function destroyOnFailure(stack: Stack, steps: () => Promise<void>): Promise<void> {
  try {
    await steps();
  } catch (e) {
    await stack.destroy().catch(() => undefined);
    throw e;
  }
}

test("preview dry-runs a scale-up's new pods: a ResourceQuota and a ValidatingAdmissionPolicy refuse them naming the slots, and nothing is created", async (t) => {
  const client = adminClient();
  await ensureCrd(client);
  const ns = await withNamespace(t, "e2e-dryrun");
  const policy = `e2e-toolbox-memory-${suffix()}`;
  const { stack } = await programStack(t, program, {
    namespace: { value: ns },
    replicas: { value: "2" },
  });
  t.after(async () => {
    await client.delete(`${VAP_API}/validatingadmissionpolicybindings/${policy}`);
    await client.delete(`${VAP_API}/validatingadmissionpolicies/${policy}`);
  });
  const config = async (replicas: number, toolboxes: unknown[] = []) => {
    await stack.setConfig("replicas", { value: String(replicas) });
    await stack.setConfig("toolboxes", { value: JSON.stringify(toolboxes) });
  };

  await destroyOnFailure(stack, async () => {
    await stack.up();
    assert.deepEqual(await podNames(ns), fleetPods(0, 1, 2));

    // Toolbox pods must set a memory limit, and the namespace is full (3 of 3 pods).
    await client.create(`${VAP_API}/validatingadmissionpolicies`, {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "ValidatingAdmissionPolicy",
      metadata: { name: policy },
      spec: {
        failurePolicy: "Fail",
        matchConstraints: {
          resourceRules: [
            { apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods"] },
          ],
          objectSelector: { matchLabels: { [LABELS.role]: ROLES.toolbox } },
        },
        validations: [
          {
            expression:
              "object.spec.containers.all(c, has(c.resources) && has(c.resources.limits) && 'memory' in c.resources.limits)",
            message: "toolbox pods must set a memory limit",
          },
        ],
      },
    });
    await client.create(`${VAP_API}/validatingadmissionpolicybindings`, {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "ValidatingAdmissionPolicyBinding",
      metadata: { name: policy },
      spec: {
        policyName: policy,
        validationActions: ["Deny"],
        matchResources: {
          namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": ns } },
        },
      },
    });
    await untilPolicyActive(ns);
    await setPodQuota(ns, 3, 3);

    // Scale-up 2 → 4 and a toolbox: slot 3 (and 4, the same pod but for its slot) meet the
    // quota, the toolbox meets the policy (admission runs the policy before the quota).
    await config(4, [{ name: "browser", image: "tools/browser:1" }]);
    const previewed = await failure(stack.preview());
    t.diagnostic(refusals(previewed));
    assert.match(
      previewed,
      /\[slots\.3\] the cluster refuses the pod of this slot \(server-side dry run of creating pod fleet-3\): [^\n]*exceeded quota: pods-quota[^\n]*; slot 4 would be refused alike/,
    );
    assert.match(
      previewed,
      /\[slots\.browser\] the cluster refuses the pod of this slot \(server-side dry run of creating pod fleet-browser\): [^\n]*toolbox pods must set a memory limit/,
    );
    assert.deepEqual(await podNames(ns), fleetPods(0, 1, 2), "preview created nothing");

    // `up` checks the same before the slots resource creates any pod.
    const upFailed = await failure(stack.up());
    assert.match(upFailed, /\[slots\.3\][^\n]*exceeded quota: pods-quota/);
    assert.match(upFailed, /\[slots\.browser\][^\n]*toolbox pods must set a memory limit/);
    assert.deepEqual(await podNames(ns), fleetPods(0, 1, 2), "up created nothing");

    // Room for one more pod: each dry run fits, but three new slots do not.
    await setPodQuota(ns, 4, 3);
    await config(5);
    const summed = await failure(stack.preview());
    t.diagnostic(refusals(summed));
    assert.match(
      summed,
      /\[slots\.4\] ResourceQuota pods-quota in namespace \S+ has pods used 3 of 4, and the pods this deploy creates add 3 \(slots 3, 4, 5\): the apiserver would refuse the creates of slots 4, 5/,
    );
    assert.doesNotMatch(summed, /\[slots\.3\]/);
    assert.deepEqual(await podNames(ns), fleetPods(0, 1, 2));

    // With room for them, preview passes and up creates exactly the new slots.
    await setPodQuota(ns, 6, 3);
    await stack.preview();
    await stack.up();
    assert.deepEqual(await podNames(ns), fleetPods(0, 1, 2, 3, 4, 5));
  });

  const destroyed = await stack.destroy();
  assert.equal(destroyed.summary.result, "succeeded");
  assert.deepEqual(await podNames(ns), []);
});
