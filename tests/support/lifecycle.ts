/**
 * Test support for the lifecycle tests (suspend, snapshot teardown): the embedded cluster's
 * registry, and a namespace the node-agent simulator acts on with a controller on it.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { readState } from "../../cluster/local-cluster.js";
import { NODE_AGENT_ENABLED, NODE_AGENT_LABEL } from "../../cluster/node-agent.js";
import { desiredSlots, type SlotsInputs } from "../../provider/dynamic/index.js";
import {
  ANNOTATIONS,
  LABELS,
  type CocoonSet,
  type CocoonSetSpec,
  type Pod,
} from "../../engine/spec/index.js";
import { paths, PatchType, waitForList, waitForObject } from "../../engine/kube/index.js";
import { OCI_MANIFEST, type OciRegistry } from "../../engine/registry/oci.js";
import { adminClient, testClusterDir, testKubeconfig } from "./cluster.js";
import {
  controllerNamespace,
  startController,
  type Cleanup,
  type ControllerProcess,
} from "./controller-process.js";

/** The address of the test cluster's OCI registry, as `cluster up` recorded it. */
export function registryAddress(): string {
  const st = readState(testClusterDir());
  assert.ok(st?.registry, `the cluster in ${testClusterDir()} records its registry`);
  return st.registry;
}

/** Creates a CocoonHibernation `name` asking `desire` of pod `pod`. */
export async function createHibernation(
  ns: string,
  name: string,
  pod: string,
  desire: "Hibernate" | "Wake",
): Promise<void> {
  await adminClient().create(paths.cocoonHibernations(ns), {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonHibernation",
    metadata: { name },
    spec: { podRef: { name: pod }, desire },
  });
}

/** Opts a namespace in to the node-agent simulator. */
export async function optInNodeAgent(ns: string): Promise<void> {
  await adminClient().patch(paths.namespace(ns), {
    metadata: { labels: { [NODE_AGENT_LABEL]: NODE_AGENT_ENABLED } },
  });
}

/**
 * A namespace opted in to the node-agent simulator and a controller on it, synced; the
 * controller gets `--oci-registry REGISTRY`, or no registry when `registry` is null.
 */
export async function lifecycleNamespace(
  c: Cleanup,
  prefix: string,
  registry: string | null,
): Promise<{ ns: string; proc: ControllerProcess }> {
  const ns = await controllerNamespace(c, prefix);
  await optInNodeAgent(ns);
  const proc = await startController(c, {
    kubeconfig: testKubeconfig(),
    namespaces: [ns],
    extraArgs: registry === null ? [] : ["--oci-registry", registry],
  });
  await proc.synced();
  return { ns, proc };
}

/** True once the simulator has booted the pod's VM: lifecycle state ready, with a VM id. */
export const vmReady = (p: Pod): boolean =>
  p.metadata?.annotations?.[ANNOTATIONS.lifecycleState] === "ready" &&
  !!p.metadata?.annotations?.[ANNOTATIONS.vmID];

/** Waits (watch) until the fleet has `count` live pods, each satisfying `done`; returns them. */
export async function waitForPods(
  ns: string,
  name: string,
  count: number,
  done: (p: Pod) => boolean,
  description: string,
  timeoutMs = 60_000,
): Promise<Pod[]> {
  const live = (all: Pod[]) => all.filter((p) => !p.metadata?.deletionTimestamp);
  const items = await waitForList<Pod>(
    adminClient(),
    paths.pods(ns),
    (all) => live(all).length === count && live(all).every(done),
    { labelSelector: `${LABELS.name}=${name}`, timeoutMs, description },
  );
  return live(items);
}

/** Waits (watch) until the CocoonSet satisfies `done`; returns it. */
export function waitForSet(
  ns: string,
  name: string,
  done: (cs: CocoonSet) => boolean,
  description: string,
  timeoutMs = 90_000,
): Promise<CocoonSet> {
  return waitForObject(
    adminClient(),
    paths.cocoonSets(ns),
    name,
    (o) => o !== undefined && done(o as unknown as CocoonSet),
    { timeoutMs, description },
  ) as unknown as Promise<CocoonSet>;
}

/** Puts a small snapshot-like manifest under `vm:tag` (a stand-in for the node agent's). */
export async function pushTag(reg: OciRegistry, vm: string, tag: string): Promise<void> {
  const config = Buffer.from(JSON.stringify({ vmName: vm, tag, test: true }));
  const digest = await reg.pushBlob(vm, config);
  await reg.putManifest(
    vm,
    tag,
    JSON.stringify({
      schemaVersion: 2,
      mediaType: OCI_MANIFEST,
      config: {
        mediaType: "application/vnd.oci.image.config.v1+json",
        digest,
        size: config.length,
      },
      layers: [],
    }),
  );
}

/** The slots resource's inputs for the CocoonSet `name` of `spec`, as the Fleet passes them. */
export function slotsInputs(
  ns: string,
  name: string,
  uid: string,
  spec: CocoonSetSpec,
  extra: Partial<SlotsInputs> = {},
): SlotsInputs {
  return {
    kubeconfig: readFileSync(testKubeconfig(), "utf8"),
    namespace: ns,
    name,
    uid,
    spec,
    slots: desiredSlots(ns, name, spec),
    providerVersion: "test",
    fanOut: 8,
    timeoutSeconds: 60,
    releaseTimeoutSeconds: 60,
    ...extra,
  };
}

/** Writes the CocoonSet's spec as the Fleet's CocoonSet resource does before the slots step. */
export async function writeSpec(ns: string, name: string, spec: CocoonSetSpec): Promise<void> {
  await adminClient().patch(paths.cocoonSet(ns, name), { spec }, PatchType.merge);
}
