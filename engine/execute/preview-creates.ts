// What a deploy would create, for the server-side dry runs `pulumi preview` sends: every pod
// the engine's passes would create from now until the fleet is converged, found by running
// the engine's own planner (and so its pod builder) against a simulated cluster, then grouped
// by pod shape so that pods differing only by their slot are sent once. Pure: no I/O.
import pLimit from "p-limit";
import { API_VERSION } from "../kube/api-names.js";
import { ANNOTATIONS, KIND, LABELS } from "../spec/index.js";
import { withSpecDefaults } from "../spec/index.js";
import type { CocoonSet, CocoonSetSpec } from "../spec/index.js";
import type { Pod, PodManifest } from "../spec/index.js";
import { planPass } from "../planner/index.js";
import type { PlanTarget, Refusal } from "../plan/index.js";
import { applyPlanToPods } from "./simulate.js";
import { stableJson } from "../spec/index.js";

/**
 * The uid a CocoonSet that does not exist yet is planned with. Pods carry it in their
 * ownerReference, which the apiserver requires to be non-empty; the real uid is only known
 * once the CocoonSet is created.
 */
export const NOT_CREATED_UID = "00000000-0000-0000-0000-000000000000";

/**
 * The node a main agent created by the simulation is given. Sub-agents are bound to the
 * main agent's node, which the scheduler picks only once the main agent is created, so the
 * sub-agent pods of a preview that also creates the main agent carry no node.
 */
const PREVIEW_NODE = "cocoonset-preview.invalid";

/** One pod a deploy would create. */
export interface SlotCreate {
  /** Key of the slot in the slots resource: the slot number, or the toolbox name. */
  slot: string;
  /** The pod, as the engine builds it. */
  pod: PodManifest;
}

/** What converging the fleet would do to its pods. */
export interface PreviewCreates {
  /** Pods created, in the order the engine creates them (each pod once). */
  creates: SlotCreate[];
  /** Live pods the engine would delete and not get back (drifted or rebuilt slots come back as creates). */
  removed: Pod[];
  /** What the plans refused (a toolbox name held by another pod, ...), each once. */
  refusals: Refusal[];
}

/** The slot key of a plan target, as the slots resource keys its slots. */
function slotKey(target: PlanTarget): string {
  return target.role === "toolbox" ? target.name : String(target.slot);
}

/**
 * The CocoonSet a deploy of `spec` would leave in the cluster: the live one with the new spec
 * (its generation one higher when the spec changes, as the apiserver counts it), or, when
 * there is none yet, a new one (generation 1, uid {@link NOT_CREATED_UID}).
 */
export function plannedCocoonSet(
  namespace: string,
  name: string,
  spec: CocoonSetSpec,
  live: CocoonSet | undefined,
): CocoonSet {
  if (!live) {
    return {
      apiVersion: API_VERSION,
      kind: KIND,
      metadata: { name, namespace, uid: NOT_CREATED_UID, generation: 1 },
      spec: structuredClone(spec),
    };
  }
  const changed = stableJson(withSpecDefaults(live.spec)) !== stableJson(withSpecDefaults(spec));
  const generation = (live.metadata.generation ?? 1) + (changed ? 1 : 0);
  return {
    ...structuredClone(live),
    metadata: { ...structuredClone(live.metadata), generation },
    spec: structuredClone(spec),
  };
}

/** Inputs of {@link previewCreates}. */
export interface PreviewInput {
  /** The CocoonSet as the deploy would leave it ({@link plannedCocoonSet}). */
  cocoonSet: CocoonSet;
  /** Its live pods (listed by name label). */
  pods: readonly Pod[];
  nowMs: number;
  fanOut?: number;
  /** Passes planned at most. @default 10 (a fleet converges in at most four) */
  maxPasses?: number;
}

/**
 * Every pod the engine would create converging the fleet, pass after pass, as `pulumi up`
 * runs them: a pass is planned with the engine's planner, its actions applied to a simulated
 * cluster where created pods come up Ready at once, until a pass changes no pod. So a new
 * fleet yields its main agent and then everything that waits for it, an image change every
 * rebuilt pod, and a scale-up the added slots. Time stands still: a slot in rebuild backoff
 * is not created.
 */
export function previewCreates(input: PreviewInput): PreviewCreates {
  // Neither the planner nor the simulation changes what it is given.
  let cs = input.cocoonSet;
  let pods: readonly Pod[] = input.pods;
  const creates: SlotCreate[] = [];
  const seen = new Set<string>();
  const refusals = new Map<string, Refusal>();
  const deletedUids = new Set<string>();
  for (let round = 0; round < (input.maxPasses ?? 10); round++) {
    const plan = planPass({ cocoonSet: cs, pods, nowMs: input.nowMs, fanOut: input.fanOut });
    for (const r of plan.refusals) if (!refusals.has(r.message)) refusals.set(r.message, r);
    for (const step of plan.steps) {
      for (const action of step.actions) {
        if (action.kind === "delete-pod") deletedUids.add(action.uid);
        if (action.kind !== "create-pod" || seen.has(action.pod.metadata.name)) continue;
        seen.add(action.pod.metadata.name);
        let pod = action.pod;
        if (pod.spec.nodeName === PREVIEW_NODE) {
          pod = { ...pod, spec: { ...pod.spec } };
          delete pod.spec.nodeName;
        }
        creates.push({ slot: slotKey(step.target), pod });
      }
    }
    if (!plan.mutatesPods) break;
    const applied = applyPlanToPods(pods, plan, { nowMs: input.nowMs, nodeName: PREVIEW_NODE });
    if (applied.historyValue !== undefined) {
      cs = {
        ...cs,
        metadata: {
          ...cs.metadata,
          annotations: {
            ...cs.metadata.annotations,
            [ANNOTATIONS.rebuildHistory]: applied.historyValue,
          },
        },
      };
    }
    pods = applied.pods;
  }
  const createdNames = new Set(creates.map((c) => c.pod.metadata.name));
  const removed = input.pods.filter(
    (p) =>
      deletedUids.has(p.metadata?.uid ?? "") && !createdNames.has(p.metadata?.name ?? "\u0000"),
  );
  return {
    creates,
    removed: removed.map((p) => structuredClone(p)),
    refusals: [...refusals.values()],
  };
}

/** The placeholder a pod's slot-specific values are replaced with in its shape. */
const SLOT_PLACEHOLDER = "<slot>";

/**
 * The shape of a pod: the pod with what differs from slot to slot replaced by a placeholder
 * — its name, its slot label and its VM name annotation (the engine derives all three from the
 * slot and nothing else). Every other field (role, image and VM annotations, fork source,
 * resources, node, owner, generation) is part of the shape, so two pods of one shape are
 * judged alike by admission unless a policy looks at a pod's name or slot.
 */
export function podShape(pod: PodManifest): string {
  const { labels, annotations } = pod.metadata;
  // Plain JSON (key order as built): the engine builds every pod with the same key order, and
  // pods alike but for key order would only get a dry run each, never share a wrong one.
  return JSON.stringify({
    ...pod,
    metadata: {
      ...pod.metadata,
      name: SLOT_PLACEHOLDER,
      labels: LABELS.slot in labels ? { ...labels, [LABELS.slot]: SLOT_PLACEHOLDER } : labels,
      annotations:
        ANNOTATIONS.vmName in annotations
          ? { ...annotations, [ANNOTATIONS.vmName]: SLOT_PLACEHOLDER }
          : annotations,
    },
  });
}

/** Creates of one shape: the first is sent, the others share its answer. */
export interface ShapeGroup {
  shape: string;
  /** In creation order; `creates[0]` is the one sent. */
  creates: SlotCreate[];
}

/** Groups creates by {@link podShape}, in order of each shape's first create. */
export function groupByShape(creates: readonly SlotCreate[]): ShapeGroup[] {
  const groups = new Map<string, ShapeGroup>();
  for (const c of creates) {
    const shape = podShape(c.pod);
    const group = groups.get(shape);
    if (group) group.creates.push(c);
    else groups.set(shape, { shape, creates: [c] });
  }
  return [...groups.values()];
}

/**
 * Sends one pod per shape through `send` (the dry-run create), at most `concurrency` at a
 * time, and returns each group with its answer, in group order.
 */
export async function sendOnePerShape<T>(
  groups: readonly ShapeGroup[],
  concurrency: number,
  send: (create: SlotCreate) => Promise<T>,
): Promise<{ group: ShapeGroup; answer: T }[]> {
  const limit = pLimit(Math.max(1, Math.floor(concurrency)));
  return Promise.all(
    groups.map((group) => limit(async () => ({ group, answer: await send(group.creates[0]) }))),
  );
}
