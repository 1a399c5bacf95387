// Drift detection: rebuild the desired VM description and compare it field
// by field with what the pod carries. No hash, so an operator-built pod and an engine-built
// pod with the same meaning compare equal, and the result names what differs.
//
// Not compared, on purpose: nodeName, affinity, tolerations, labels and replicas. A
// sub-agent's fork-from and every pod's VM name are taken from the pod itself.
// Behaviour: docs/behaviour.md §3.3.
import { ANNOTATIONS, ANNOTATION_TRUE, NODE_LABELS } from "../spec/constants.js";
import type { CocoonSet, EnvFromSource, ToolboxSpec, VMOptions } from "../spec/generated/types.js";
import type { Pod } from "../spec/kube-types.js";
import {
  agentVM,
  nodePoolOf,
  staticToolboxAnnotations,
  toolboxVM,
  vmAnnotations,
  type VMDescription,
} from "./pod-builder.js";
import { isTerminal } from "./pod-state.js";
import { quantitiesEqual } from "../spec/quantity.js";
import { contentToken, FrozenMemo } from "../spec/frozen.js";

/** How a VM field is compared: as text, as a `"true"` flag, or as a quantity. */
export type Compare = "text" | "flag" | "quantity";

/** The VM description fields a pod carries as annotations, and how drift compares each. */
export const VM_FIELDS: readonly [field: string, annotation: string, compare: Compare][] = [
  ["image", ANNOTATIONS.image, "text"],
  ["mode", ANNOTATIONS.mode, "text"],
  ["os", ANNOTATIONS.os, "text"],
  ["backend", ANNOTATIONS.backend, "text"],
  ["connType", ANNOTATIONS.connType, "text"],
  ["network", ANNOTATIONS.network, "text"],
  ["storage", ANNOTATIONS.storage, "quantity"],
  ["managed", ANNOTATIONS.managed, "flag"],
  ["forcePull", ANNOTATIONS.forcePull, "flag"],
  ["noDirectIO", ANNOTATIONS.noDirectIO, "flag"],
  ["probePort", ANNOTATIONS.probePort, "text"],
  ["snapshotPolicy", ANNOTATIONS.snapshotPolicy, "text"],
  ["forkFrom", ANNOTATIONS.forkFrom, "text"],
];

const COMPARED_RESOURCES = ["cpu", "memory"] as const;

function same(compare: Compare, want: string | undefined, got: string | undefined): boolean {
  switch (compare) {
    case "flag":
      return (want === ANNOTATION_TRUE) === (got === ANNOTATION_TRUE);
    case "quantity":
      return quantitiesEqual(want || undefined, got || undefined);
    default:
      return (want ?? "") === (got ?? "");
  }
}

function vmDrift(want: VMDescription, pod: Pod): string[] {
  const desired = vmAnnotations(want);
  const actual = pod.metadata?.annotations ?? {};
  return VM_FIELDS.filter(([, key, compare]) => !same(compare, desired[key], actual[key])).map(
    ([field]) => field,
  );
}

// The apiserver defaults a missing request to the limit, per resource; both sides are read
// that way so a spec with only limits (or limits for some resources) does not drift forever.
function resourceDrift(options: VMOptions, pod: Pod): string[] {
  const specLimits = options.resources?.limits ?? {};
  const specRequests = options.resources?.requests ?? {};
  const got = pod.spec?.containers?.[0]?.resources ?? {};
  const gotLimits = got.limits ?? {};
  const gotRequests = got.requests ?? {};
  const out: string[] = [];
  for (const resource of COMPARED_RESOURCES) {
    if (!quantitiesEqual(specLimits[resource], gotLimits[resource])) {
      out.push(`resources.limits.${resource}`);
    }
    const wantRequest = specRequests[resource] ?? specLimits[resource];
    const gotRequest = gotRequests[resource] ?? gotLimits[resource];
    if (!quantitiesEqual(wantRequest, gotRequest)) out.push(`resources.requests.${resource}`);
  }
  return out;
}

function canonicalEnvFrom(list: readonly EnvFromSource[] | undefined): string {
  return JSON.stringify(list ?? [], (_key, value: unknown) =>
    value !== null && typeof value === "object" && !Array.isArray(value)
      ? Object.fromEntries(
          Object.entries(value as Record<string, unknown>)
            .filter(([, v]) => v !== undefined && v !== null)
            .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
        )
      : value,
  );
}

function placementDrift(cs: CocoonSet, pod: Pod): string[] {
  const out: string[] = [];
  const selector = pod.spec?.nodeSelector ?? {};
  if (selector[NODE_LABELS.pool] !== nodePoolOf(cs)) out.push("nodePool");
  const wantClass = cs.spec.snapshotCompatibilityClass ?? "";
  const gotClass = selector[NODE_LABELS.snapshotClass] ?? "";
  // A pod created before the class was set is adopted as long as it is healthy; once it
  // is terminal it is replaced by one that carries the class.
  const adopted = gotClass === "" && wantClass !== "" && !isTerminal(pod);
  if (gotClass !== wantClass && !adopted) out.push("snapshotCompatibilityClass");
  return out;
}

/**
 * Fields in which an agent pod differs from what `cs` asks for; empty means no drift.
 * @param slot 0 for the main agent, the slot number for a sub-agent
 */
export function agentDrift(cs: CocoonSet, slot: number, pod: Pod): readonly string[] {
  return AGENT_DRIFT.get(pod, specContext(cs, slot), () => computeAgentDrift(cs, slot, pod));
}

/** What a drift is kept with: the spec's content, and the member. */
function specContext(cs: CocoonSet, member: number | string): readonly unknown[] | undefined {
  const spec = contentToken(cs.spec);
  return spec === undefined ? undefined : [spec, member];
}

/** {@link agentDrift} per frozen pod, while the spec and the slot are the same. */
const AGENT_DRIFT = new FrozenMemo<Pod, readonly string[]>();
/** {@link toolboxDrift} per frozen pod, while the spec and the toolbox are the same. */
const TOOLBOX_DRIFT = new FrozenMemo<Pod, readonly string[]>();

function computeAgentDrift(cs: CocoonSet, slot: number, pod: Pod): string[] {
  const annotations = pod.metadata?.annotations ?? {};
  const forkFrom = slot > 0 ? annotations[ANNOTATIONS.forkFrom] : undefined;
  const agent = cs.spec.agent;
  const out = [
    ...vmDrift(agentVM(cs, annotations[ANNOTATIONS.vmName] ?? "", forkFrom), pod),
    ...resourceDrift(agent, pod),
  ];
  // The apiserver fills an empty service account with "default".
  if ((pod.spec?.serviceAccountName || "default") !== (agent.serviceAccountName || "default")) {
    out.push("serviceAccountName");
  }
  if (canonicalEnvFrom(pod.spec?.containers?.[0]?.envFrom) !== canonicalEnvFrom(agent.envFrom)) {
    out.push("envFrom");
  }
  return [...out, ...placementDrift(cs, pod)];
}

/** Fields in which a toolbox pod differs from its spec; empty means no drift. */
export function toolboxDrift(cs: CocoonSet, toolbox: ToolboxSpec, pod: Pod): readonly string[] {
  return TOOLBOX_DRIFT.get(pod, specContext(cs, toolbox.name), () =>
    computeToolboxDrift(cs, toolbox, pod),
  );
}

function computeToolboxDrift(cs: CocoonSet, toolbox: ToolboxSpec, pod: Pod): string[] {
  const annotations = pod.metadata?.annotations ?? {};
  const vm = toolboxVM(cs, toolbox, annotations[ANNOTATIONS.vmName] ?? "");
  const out = [...vmDrift(vm, pod), ...resourceDrift(toolbox, pod), ...placementDrift(cs, pod)];
  if (!vm.managed) {
    const want = staticToolboxAnnotations(toolbox);
    if ((want[ANNOTATIONS.vmID] ?? "") !== (annotations[ANNOTATIONS.vmID] ?? "")) {
      out.push("staticVMID");
    }
    if ((want[ANNOTATIONS.vmIP] ?? "") !== (annotations[ANNOTATIONS.vmIP] ?? "")) {
      out.push("staticIP");
    }
    const vncPort = Number.parseInt(annotations[ANNOTATIONS.vncPort] ?? "", 10);
    if ((Number.isNaN(vncPort) ? 0 : vncPort) !== (toolbox.vncPort ?? 0)) out.push("vncPort");
  }
  return out;
}
