// Which VMs' `<vm>:hibernate` tags a pass asks the registry about before planning: the
// suspend gate's, a slot release's and a migration's together. Kept apart from the planners
// it gathers from, so that none of them imports another through it.
import { classifyPods } from "../pods/classify.js";
import type { CocoonSet } from "../spec/generated/types.js";
import type { Pod } from "../spec/kube-types.js";
import { migrationProbes } from "../lifecycle/migrate.js";
import { vmNameFor } from "../pods/pod-builder.js";
import { isTerminal } from "../pods/pod-state.js";
import { slotReleaseProbes } from "../lifecycle/slot-release.js";
import { gateProbes, suspendsRetaining } from "../lifecycle/suspend.js";
import { namespaceOf } from "../kube/objects.js";
import { suspendView } from "../spec/defaults.js";

/**
 * The VMs whose `<vm>:hibernate` tag the next pass consults, sorted: what the executor asks
 * the registry (one HEAD each) before planning. Only a retain suspend consults tags: the
 * main agent's VM when the main agent is missing (its restore intent), else each owned pod
 * the node agent reports hibernated for this generation (the last part of the gate, so a
 * VM still hibernating costs no request). A fleet that is not suspended asks nothing but
 * the main agent's tag while a migration consults it (migrate.ts): the unsuspend only
 * needs to know that a registry is configured. A terminal main agent is
 * triaged first and asks nothing either.
 */
export function snapshotProbes(fleet: CocoonSet, pods: readonly Pod[]): string[] {
  // The effective suspend, as the planner reads it.
  const cs = suspendView(fleet);
  const owned = classifyPods(cs, pods);
  // The release policy's suspend and wake (engine/lifecycle/slot-release.ts) and a migration
  // (engine/lifecycle/migrate.ts) ask for their own.
  if (!suspendsRetaining(cs))
    return [...new Set([...slotReleaseProbes(cs, pods), ...migrationProbes(cs, owned)])].sort();
  if (!owned.main) return [vmNameFor(namespaceOf(cs), cs.metadata.name ?? "", 0)];
  if (isTerminal(owned.main)) return [];
  return gateProbes(cs, [owned.main, ...owned.subAgents.values(), ...owned.toolboxes.values()]);
}
