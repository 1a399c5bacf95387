/**
 * Test support for the controller's acceptance tests: CocoonSet manifests, waits on a
 * fleet's converged status and pods (watches), and reads of its events.
 */
import assert from "node:assert/strict";
import { API_VERSION } from "../../engine/kube/api-names.js";
import { parseRebuildHistory, type RebuildHistory } from "../../engine/pods/rebuild-history.js";
import {
  ANNOTATIONS,
  KIND,
  LABELS,
  type CocoonSet,
  type CocoonSetSpec,
  type Pod,
} from "../../engine/spec/index.js";
import {
  PatchType,
  paths,
  waitForList,
  waitForObject,
  type KubeClient,
  type KubeObject,
} from "../../engine/kube/index.js";
import { adminClient, isReady } from "./cluster.js";

/** The VM image most tests start with. */
export const IMAGE = "ghcr.io/cocoonstack/agent:1";
/** Annotation the simulated nodes read to drive a pod to phase Failed. */
export const SIMULATE = "cocoonset.cocoonstack.io/simulate";

/** A CocoonSet manifest. */
export function cocoonSet(ns: string, name: string, spec: CocoonSetSpec): KubeObject {
  return { apiVersion: API_VERSION, kind: KIND, metadata: { name, namespace: ns }, spec };
}

/** Creates a CocoonSet with `replicas` sub-agents (plus toolboxes) and returns it. */
/** The status condition of `type` of a CocoonSet, if it has one. */
export function statusCondition(cs: CocoonSet | undefined, type: string) {
  return cs?.status?.conditions?.find((c) => c.type === type);
}

export async function createCocoonSet(
  ns: string,
  name: string,
  spec: Partial<CocoonSetSpec> & { replicas?: number } = {},
): Promise<CocoonSet> {
  const { replicas = 0, ...rest } = spec;
  return adminClient().create<CocoonSet>(
    paths.cocoonSets(ns),
    cocoonSet(ns, name, { ...rest, agent: { image: IMAGE, ...rest.agent, replicas } }),
  );
}

/** Expected counts of a converged fleet. */
export interface Converged {
  replicas: number;
  toolboxes?: number;
}

interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
  observedGeneration?: number;
}

/** True when the CocoonSet's status says it converged to `want` at its current generation. */
export function isConverged(cs: CocoonSet | undefined, want: Converged): boolean {
  const s = cs?.status;
  if (!cs || !s) return false;
  const conds = (s.conditions ?? []) as Condition[];
  const cond = (type: string) => conds.find((c) => c.type === type)?.status;
  const agents = 1 + want.replicas;
  const toolboxes = want.toolboxes ?? 0;
  return (
    s.observedGeneration === cs.metadata.generation &&
    s.phase === "Running" &&
    s.readyAgents === agents &&
    s.desiredAgents === agents &&
    (s.readyToolboxes ?? 0) === toolboxes &&
    (s.desiredToolboxes ?? 0) === toolboxes &&
    cond("Ready") === "True" &&
    cond("Progressing") === "False"
  );
}

/**
 * Waits (watch) until the CocoonSet's status is converged to `want`, then checks the pods
 * behind it: main and sub-agents `1..replicas` exist, Ready, and nothing else is there.
 */
export async function waitForConverged(
  ns: string,
  name: string,
  want: Converged,
  timeoutMs = 60_000,
): Promise<{ cs: CocoonSet; pods: Pod[] }> {
  const client = adminClient();
  const cs = (await waitForObject(
    client,
    paths.cocoonSets(ns),
    name,
    (o) => isConverged(o as CocoonSet | undefined, want),
    { timeoutMs, description: `CocoonSet ${ns}/${name} Running with ${1 + want.replicas} agents` },
  )) as unknown as CocoonSet;
  const pods = await fleetPods(client, ns, name);
  const agents = pods.filter((p) => p.metadata?.labels?.[LABELS.role] !== "toolbox");
  const expected = Array.from({ length: want.replicas + 1 }, (_, i) => `${name}-${i}`);
  assert.deepEqual(
    agents.map((p) => p.metadata?.name).sort(),
    expected.sort(),
    "exactly the main agent and sub-agents 1..replicas exist",
  );
  for (const p of pods) assert.ok(isReady(p as KubeObject), `pod ${p.metadata?.name} is Ready`);
  const conds = (cs.status?.conditions ?? []) as Condition[];
  const ready = conds.find((c) => c.type === "Ready");
  assert.equal(ready?.reason, "AllAgentsReady");
  assert.equal(
    ready?.message,
    `${1 + want.replicas}/${1 + want.replicas} agents ready, ${want.toolboxes ?? 0}/${want.toolboxes ?? 0} toolboxes ready`,
  );
  assert.equal(conds.find((c) => c.type === "Progressing")?.reason, "Stable");
  return { cs, pods };
}

/** The CocoonSet's live pods that are not terminating. */
export async function fleetPods(client: KubeClient, ns: string, name: string): Promise<Pod[]> {
  const list = await client.list<Pod>(paths.pods(ns), {
    labelSelector: `${LABELS.name}=${name}`,
  });
  return list.items.filter((p) => !p.metadata?.deletionTimestamp);
}

/** A pod's slot label. */
export function slotOf(p: Pod): string {
  return p.metadata?.labels?.[LABELS.slot] ?? "";
}

/** The rebuild history annotation of a CocoonSet, parsed. */
export function historyOf(cs: CocoonSet | KubeObject | undefined): RebuildHistory {
  return parseRebuildHistory(cs?.metadata?.annotations?.[ANNOTATIONS.rebuildHistory]);
}

/** An events.k8s.io/v1 Event, as far as the tests read it. */
export interface EventV1 extends KubeObject {
  type?: string;
  reason?: string;
  note?: string;
  reportingController?: string;
  regarding?: { kind?: string; name?: string; uid?: string };
}

/**
 * Waits (watch) until an event with `reason` whose note matches `note` exists for the
 * named CocoonSet, and returns the matching events.
 */
export async function waitForEvent(
  ns: string,
  csName: string,
  reason: string,
  note: RegExp | string,
  timeoutMs = 60_000,
): Promise<EventV1[]> {
  const matches = (e: EventV1) =>
    e.reason === reason &&
    e.regarding?.kind === KIND &&
    e.regarding?.name === csName &&
    (typeof note === "string" ? e.note === note : note.test(e.note ?? ""));
  const items = await waitForList<EventV1>(
    adminClient(),
    paths.events(ns),
    (all) => all.some(matches),
    { timeoutMs, description: `event ${reason} "${String(note)}" on ${ns}/${csName}` },
  );
  return items.filter(matches);
}

/** Events of the namespace (events.k8s.io/v1). */
export async function listEvents(ns: string): Promise<EventV1[]> {
  return (await adminClient().list<EventV1>(paths.events(ns))).items;
}

/** Changes an annotation on a pod, which makes the controller reconcile its CocoonSet. */
export async function poke(ns: string, pod: string): Promise<void> {
  await adminClient().patch(
    paths.pod(ns, pod),
    { metadata: { annotations: { "test.cocoonstack.io/poke": String(Date.now()) } } },
    PatchType.merge,
  );
}

/** Merge-patches a CocoonSet's spec (`null` removes a field). */
export async function patchSpec(
  ns: string,
  name: string,
  spec: Record<string, unknown>,
): Promise<void> {
  await adminClient().patch(paths.cocoonSet(ns, name), { spec }, PatchType.merge);
}

/**
 * Drives a pod to phase Failed through the simulated node; the uid in the patch makes it
 * fail with 409 instead of touching a replacement of the same name.
 */
export async function failPod(ns: string, pod: string, uid: string): Promise<void> {
  await adminClient().patch(
    paths.pod(ns, pod),
    { metadata: { uid, annotations: { [SIMULATE]: "failed" } } },
    PatchType.merge,
  );
}
