/**
 * The engine's preview: the plan a pass would carry out now, read from the cluster by the
 * pass's own reads (`planLive`), without changing anything. `cocoonset plan` prints it.
 * Behaviour: docs/behaviour.md §3 and §8.
 */
import type { Plan } from "../plan/index.js";
import { planPass } from "../planner/index.js";
import type { CocoonSet } from "../spec/index.js";
import type { KubeClient } from "../kube/index.js";
import { planLive } from "./live-plan.js";
import type { SnapshotRegistry } from "./snapshots.js";
import { applyPlanToPods } from "./simulate.js";
import { namespaceOf } from "../kube/objects.js";
import { listCocoonSetsVisible } from "./pass-reads.js";

/**
 * The plan of a CocoonSet not created yet. A pass creates the main agent first and the rest
 * once it is Ready; showing only the main agent would hide what the spec asks for, so this
 * also plans the pass after a (simulated) Ready main agent and shows both.
 */
function planNewFleet(cs: CocoonSet, nowMs: number, fleets?: readonly CocoonSet[]): Plan {
  const planned: CocoonSet = {
    ...cs,
    metadata: { ...cs.metadata, uid: "not-created-yet", generation: 1 },
  };
  const first = planPass({ cocoonSet: planned, pods: [], nowMs, fleets });
  // Refused outright (a VM name another fleet holds): nothing follows.
  if (first.refusals.length > 0 && !first.mutatesPods) return { ...first, status: undefined };
  const after = applyPlanToPods([], first, { nowMs });
  const next = planPass({ cocoonSet: planned, pods: after.pods, nowMs });
  return {
    ...next,
    steps: [...first.steps, ...next.steps],
    refusals: [...first.refusals, ...next.refusals],
    requeueAfterMs: first.requeueAfterMs,
    mutatesPods: true,
    status: undefined,
  };
}

/**
 * What a pass would do now for `cs`: against its live pods when it exists (`exists`), else
 * the plan of a new fleet (it owns nothing yet, so every member would be created).
 */
export async function previewPlan(
  client: KubeClient,
  cs: CocoonSet,
  opts: { exists: boolean; nowMs?: number; registry?: SnapshotRegistry },
): Promise<Plan> {
  const nowMs = opts.nowMs ?? Date.now();
  if (!opts.exists)
    return planNewFleet(cs, nowMs, await listCocoonSetsVisible(client, namespaceOf(cs)));
  return (await planLive(client, cs, { registry: opts.registry, now: () => nowMs })).plan;
}
