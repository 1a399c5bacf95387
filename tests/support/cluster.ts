/**
 * Test support for the integration and e2e tiers: the shared embedded cluster started by
 * `scripts/test.mjs` (one per run), a client for it, and a namespace per test.
 */
import { randomBytes } from "node:crypto";
import type { TestContext } from "node:test";
import { KubeClient, paths, waitForObject, type KubeObject } from "../../engine/kube/index.js";

/** Path of the shared cluster's admin kubeconfig. */
export function testKubeconfig(): string {
  const p = process.env.COCOONSET_TEST_KUBECONFIG;
  if (!p) {
    throw new Error(
      "COCOONSET_TEST_KUBECONFIG is not set: run integration tests through `npm test` (or `npm run test:integration`), which starts the embedded cluster",
    );
  }
  return p;
}

/** State directory of the shared cluster. */
export function testClusterDir(): string {
  const d = process.env.COCOONSET_TEST_CLUSTER_DIR;
  if (!d) throw new Error("COCOONSET_TEST_CLUSTER_DIR is not set: run tests through `npm test`");
  return d;
}

let shared: KubeClient | undefined;

/** An admin client for the shared cluster. */
export function adminClient(): KubeClient {
  shared ??= new KubeClient({ kubeconfig: testKubeconfig() });
  return shared;
}

/** A short random suffix for object names. */
export function suffix(): string {
  return randomBytes(3).toString("hex");
}

/**
 * Creates a fresh namespace for a test and deletes it when the test ends (without waiting:
 * the namespace controller finishes it in the background).
 */
export async function withNamespace(t: TestContext, prefix: string): Promise<string> {
  const name = `${prefix}-${suffix()}`.slice(0, 63);
  const client = adminClient();
  await client.create(paths.namespaces(), {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name },
  });
  t.after(async () => {
    if (process.env.COCOONSET_KEEP_NAMESPACES) return;
    await client.delete(paths.namespace(name));
  });
  return name;
}

/** Condition helper: true when a pod-like object has condition Ready=True. */
export function isReady(o: KubeObject | undefined): boolean {
  const conds = (o?.status as { conditions?: { type: string; status: string }[] } | undefined)
    ?.conditions;
  return conds?.some((c) => c.type === "Ready" && c.status === "True") ?? false;
}

/** Waits until a pod reports the given phase (and returns it). */
export async function waitForPodPhase(
  ns: string,
  name: string,
  phase: string,
  timeoutMs = 60_000,
): Promise<KubeObject> {
  const pod = await waitForObject(
    adminClient(),
    paths.pods(ns),
    name,
    (p) => (p?.status as { phase?: string } | undefined)?.phase === phase,
    { timeoutMs, description: `pod ${ns}/${name} to be ${phase}` },
  );
  return pod!;
}
