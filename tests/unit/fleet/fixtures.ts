// Shared builders for the fleet unit tests.
import type { SnapshotFacts } from "../../../engine/lifecycle/index.js";
import type { Plan } from "../../../engine/plan/index.js";
import { buildAgentPod, buildToolboxPod } from "../../../engine/pods/index.js";
import type { AgentSpec, ToolboxSpec } from "../../../engine/spec/generated/types.js";
import {
  ANNOTATIONS,
  type CocoonSet,
  type CocoonSetSpec,
  type Pod,
  type PodManifest,
} from "../../../engine/spec/index.js";

/** A fixed "now" for every test. */
export const NOW = Date.parse("2025-06-01T12:00:00.000Z");

/** uid of the CocoonSet built by {@link cocoonSet}. */
export const CS_UID = "uid-demo";

/** A CocoonSet `demo` in namespace `team`, generation 3, with the given spec parts. */
export function cocoonSet(
  spec: Partial<CocoonSetSpec> = {},
  agent: Partial<AgentSpec> = {},
): CocoonSet {
  return {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonSet",
    metadata: { name: "demo", namespace: "team", uid: CS_UID, generation: 3 },
    spec: { ...spec, agent: { image: "ghcr.io/acme/agent:1", ...agent } },
  };
}

/** A toolbox spec. */
export function toolbox(name: string, extra: Partial<ToolboxSpec> = {}): ToolboxSpec {
  return { name, image: `ghcr.io/acme/${name}:1`, ...extra };
}

/** A built pod as the cluster would list it: with a uid, on a node, Running and Ready. */
export function live(manifest: PodManifest, ready = true): Pod {
  const pod: Pod = structuredClone(manifest);
  pod.metadata = { ...pod.metadata, uid: `pod-uid-${manifest.metadata.name}` };
  if (pod.spec) pod.spec.nodeName ??= "node-a";
  pod.status = ready
    ? { phase: "Running", podIP: "10.1.0.7", conditions: [{ type: "Ready", status: "True" }] }
    : { phase: "Pending", conditions: [{ type: "Ready", status: "False" }] };
  return pod;
}

/** The pod in phase Failed. */
export function failed(pod: Pod): Pod {
  const out = structuredClone(pod);
  out.status = { phase: "Failed", conditions: [{ type: "Ready", status: "False" }] };
  return out;
}

/** The pod marked dead-letter. */
export function deadLettered(pod: Pod): Pod {
  const out = structuredClone(pod);
  out.metadata = {
    ...out.metadata,
    annotations: { ...out.metadata?.annotations, [ANNOTATIONS.deadLetter]: "true" },
  };
  return out;
}

/** A copy of the pod with annotations changed (undefined deletes a key). */
export function withAnnotations(pod: Pod, changes: Record<string, string | undefined>): Pod {
  const out = structuredClone(pod);
  const annotations = { ...out.metadata?.annotations };
  for (const [k, v] of Object.entries(changes)) {
    if (v === undefined) delete annotations[k];
    else annotations[k] = v;
  }
  out.metadata = { ...out.metadata, annotations };
  return out;
}

/** The main agent pod, live. */
export function mainPod(cs: CocoonSet, ready = true): Pod {
  return live(buildAgentPod(cs, 0), ready);
}

/** Sub-agent pod of `slot`, live, forked from the main agent and bound to node-a. */
export function subPod(cs: CocoonSet, slot: number): Pod {
  return live(buildAgentPod(cs, slot, { mainVMName: "vk-team-demo-0", mainNodeName: "node-a" }));
}

/** The toolbox pod, live. */
export function toolboxPod(cs: CocoonSet, spec: ToolboxSpec): Pod {
  return live(buildToolboxPod(cs, spec));
}

/** A converged fleet: main, slots 1..replicas and every toolbox, all Ready. */
export function convergedPods(cs: CocoonSet): Pod[] {
  const pods = [mainPod(cs)];
  for (let slot = 1; slot <= (cs.spec.agent.replicas ?? 0); slot++) pods.push(subPod(cs, slot));
  for (const tb of cs.spec.toolboxes ?? []) pods.push(toolboxPod(cs, tb));
  return pods;
}

/** The CocoonSet with its rebuild-history annotation set to `value`. */
export function withHistory(cs: CocoonSet, value: string): CocoonSet {
  return {
    ...cs,
    metadata: {
      ...cs.metadata,
      annotations: { ...cs.metadata.annotations, [ANNOTATIONS.rebuildHistory]: value },
    },
  };
}

/** Registry facts in which exactly these VMs have a `:hibernate` tag. */
export const tags = (...vms: string[]): SnapshotFacts => ({ hibernate: new Set(vms) });

/** Each step of a plan as `pod:decision`. */
export const decisions = (p: Plan): string[] => p.steps.map((s) => `${s.podName}:${s.decision}`);

/** A one-agent status of the given phase (what a migration plan reads). */
export const statusWith = (phase: "Running" | "Migrating") => ({
  phase,
  readyAgents: 1,
  desiredAgents: 1,
  readyToolboxes: 0,
  desiredToolboxes: 0,
});
