/**
 * Who owns a VM name. The scheme `vk-<namespace>-<cocoonset>-<member>` is the peer's and the
 * node agents rely on it, so it stays; but a dash may sit in the namespace, the CocoonSet's
 * name or a toolbox's name, so two fleets can derive the same VM name (namespace `q-x` fleet
 * `yy` and namespace `q` fleet `x-yy` both give `vk-q-x-yy-0`). A VM name, and its snapshot
 * tags in the registry, belong to exactly one live fleet: the planners read the cluster's
 * CocoonSets as a pure input and refuse a fleet, a hibernation or a tag delete that would act
 * on a VM another fleet holds. Who holds a name is what the engine recorded (engine/
 * attribution), never a prefix or an annotation. Pure; behaviour: docs/behaviour.md §2.7.
 */
import {
  attributedView,
  desiredVms,
  fleetKey,
  mayShareVmNames,
  recordedVms,
  type HibernationHold,
} from "../attribution/attribution.js";
import { namespaceOf } from "../kube/objects.js";
import { LABELS } from "../spec/constants.js";
import type { CocoonSet } from "../spec/generated/types.js";
import type { Pod } from "../spec/kube-types.js";
import { agentPodName, toolboxPodName } from "../pods/pod-builder.js";

/** Status condition type of a fleet refused for a VM name another fleet holds. */
export const VM_NAME_CONDITION = "VMNamesAvailable";
/** Event reason (Warning) of that refusal, and of a CocoonHibernation refused for its VM name. */
export const VM_NAME_CONFLICT_REASON = "VMNameConflict";

/** The VM names the spec asks for: slots 0..replicas, then the toolboxes. */
function desiredVmNames(cs: CocoonSet): string[] {
  return desiredVms(cs);
}

/**
 * The VM names a fleet has acted on: those the engine recorded in its status (engine/
 * attribution). Evidence that the fleet holds a name, not just asks for it; its annotations
 * are no evidence (anyone who may edit the CocoonSet writes them).
 */
function usedVmNames(cs: CocoonSet): Set<string> {
  return new Set(recordedVms(attributedView(cs, [])));
}

/** Every VM name a fleet claims: the ones it asks for and the ones it has acted on. */
export function claimedVmNames(cs: CocoonSet): Set<string> {
  const out = usedVmNames(cs);
  for (const n of desiredVmNames(cs)) out.add(n);
  return out;
}

function sameFleet(a: CocoonSet, b: CocoonSet): boolean {
  return fleetKey(a) === fleetKey(b);
}

const live = (cs: CocoonSet) => !cs.metadata.deletionTimestamp;

/**
 * Whether `other` comes before `cs` for the VM names they share (`shared`): a fleet that has
 * acted on one of them wins over one that has not; then the older one (a fleet not created
 * yet is the youngest); then the smaller `namespace/name`. A total order, so of two clashing
 * fleets exactly one is refused.
 */
function outranks(other: CocoonSet, cs: CocoonSet, shared: ReadonlySet<string>): boolean {
  const acted = (x: CocoonSet) => [...usedVmNames(x)].some((n) => shared.has(n));
  const a = acted(other);
  if (a !== acted(cs)) return a;
  const created = (x: CocoonSet) => x.metadata.creationTimestamp ?? "\uffff";
  const byAge = created(other).localeCompare(created(cs));
  if (byAge !== 0) return byAge < 0;
  return fleetKey(other) < fleetKey(cs);
}

/** A fleet's VM name that another live fleet holds. */
export interface VmNameClash {
  vm: string;
  /** The fleet (or CocoonHibernation) that holds it, `namespace/name`. */
  holder: string;
  /** What holds it. @default "CocoonSet" */
  holderKind?: "CocoonSet" | "CocoonHibernation";
}

/**
 * The first VM name `cs` asks for that another live fleet of `fleets` holds (claims it and
 * outranks `cs`), or undefined. `fleets` may contain `cs` itself (by namespace and name).
 */
export function vmNameClash(cs: CocoonSet, fleets: readonly CocoonSet[]): VmNameClash | undefined {
  const mine = claimedVmNames(cs);
  const wanted = desiredVmNames(cs);
  // Only a neighbour's names can meet these (mayShareVmNames): a string test per fleet
  // before any name is derived, so a pass in a cluster of a thousand fleets derives a few.
  const here = { namespace: namespaceOf(cs), name: cs.metadata.name ?? "" };
  const others = fleets
    .filter(
      (o) =>
        live(o) &&
        !sameFleet(o, cs) &&
        mayShareVmNames(here, { namespace: namespaceOf(o), name: o.metadata.name ?? "" }),
    )
    .sort((a, b) => fleetKey(a).localeCompare(fleetKey(b)));
  for (const other of others) {
    const theirs = claimedVmNames(other);
    const shared = new Set([...mine].filter((n) => theirs.has(n)));
    if (shared.size === 0 || !outranks(other, cs, shared)) continue;
    const vm = wanted.find((n) => shared.has(n)) ?? [...shared].sort()[0];
    return { vm, holder: fleetKey(other) };
  }
  return undefined;
}

/** The refusal's message, naming both holders. */
export function vmNameClashMessage(cs: CocoonSet, clash: VmNameClash): string {
  const holder = clash.holderKind ?? "CocoonSet";
  return `VM name ${clash.vm} of CocoonSet ${fleetKey(cs)} is already held by ${holder} ${clash.holder} (VM names are vk-<namespace>-<cocoonset>-<member>, so the two collide); nothing is created for ${fleetKey(cs)}: rename one of them`;
}

/**
 * The first VM name `cs` asks for, and has not recorded itself, that a live CocoonHibernation
 * recorded (a standalone pod's VM hibernated by it: `vk-acme-prod-db` of pod `db` in
 * namespace `acme-prod` is also toolbox `db` of fleet `prod` in `acme`), or undefined.
 */
export function vmHeldByHibernation(
  cs: CocoonSet,
  holds: readonly HibernationHold[],
): VmNameClash | undefined {
  const mine = usedVmNames(cs);
  for (const vm of desiredVmNames(cs)) {
    if (mine.has(vm)) continue;
    const h = holds.find((x) => x.vm === vm);
    if (h) return { vm, holder: `${h.namespace}/${h.name}`, holderKind: "CocoonHibernation" };
  }
  return undefined;
}

/** The live fleets of `fleets` that claim `vm`, as `namespace/name`, sorted. */
export function vmNameHolders(vm: string, fleets: readonly CocoonSet[]): string[] {
  return fleets
    .filter((f) => live(f) && claimedVmNames(f).has(vm))
    .map(fleetKey)
    .sort();
}

/** The VM name a pod's CocoonHibernation may act on, or why none (engine/attribution). */
export { attributePodVm, type PodVmAttribution } from "../attribution/attribution.js";

/**
 * Whether a pass must read the cluster's CocoonSets: some member pod is missing, so the pass
 * may create one (and with it claim a VM name). A fleet whose pods are all there asks nothing.
 */
export function needsVmNameCheck(cs: CocoonSet, pods: readonly Pod[]): boolean {
  const present = new Set(
    pods
      .filter(
        (p) =>
          !p.metadata?.deletionTimestamp && p.metadata?.labels?.[LABELS.name] === cs.metadata.name,
      )
      .map((p) => p.metadata?.name),
  );
  const name = cs.metadata.name ?? "";
  const replicas = Math.max(0, Math.floor(Number(cs.spec?.agent?.replicas ?? 0)) || 0);
  for (let slot = 0; slot <= replicas; slot++)
    if (!present.has(agentPodName(name, slot))) return true;
  return (cs.spec?.toolboxes ?? []).some((tb) => !present.has(toolboxPodName(name, tb.name)));
}
