/**
 * Who owns a VM name. The scheme `vk-<namespace>-<cocoonset>-<member>` is the peer's and the
 * node agents rely on it, so it stays; but a dash may sit in the namespace, the CocoonSet's
 * name or a toolbox's name, so two fleets can derive the same VM name (namespace `q-x` fleet
 * `yy` and namespace `q` fleet `x-yy` both give `vk-q-x-yy-0`). A VM name, and its snapshot
 * tags in the registry, belong to exactly one live fleet: the planners read the cluster's
 * CocoonSets as a pure input and refuse a fleet, a hibernation or a tag delete that would act
 * on a VM another fleet holds. Pure; behaviour: docs/behaviour.md §2.7.
 */
import { ANNOTATIONS, KIND, LABELS, ROLES } from "../spec/constants.js";
import type { CocoonSet } from "../spec/generated/types.js";
import type { Pod } from "../spec/kube-types.js";
import { agentPodName, toolboxPodName, vmNameFor } from "../pods/pod-builder.js";
import { parseDeleteVmNames } from "./teardown.js";

/** Status condition type of a fleet refused for a VM name another fleet holds. */
export const VM_NAME_CONDITION = "VMNamesAvailable";
/** Event reason (Warning) of that refusal, and of a CocoonHibernation refused for its VM name. */
export const VM_NAME_CONFLICT_REASON = "VMNameConflict";

/** A fleet as `namespace/name`. */
export function fleetKey(cs: CocoonSet): string {
  return `${cs.metadata.namespace ?? "default"}/${cs.metadata.name ?? ""}`;
}

/** The VM names the spec asks for: slots 0..replicas, then the toolboxes. */
export function desiredVmNames(cs: CocoonSet): string[] {
  const ns = cs.metadata.namespace ?? "default";
  const name = cs.metadata.name ?? "";
  const out: string[] = [];
  const replicas = Math.max(0, Math.floor(Number(cs.spec?.agent?.replicas ?? 0)) || 0);
  for (let slot = 0; slot <= replicas; slot++) out.push(vmNameFor(ns, name, slot));
  for (const tb of cs.spec?.toolboxes ?? []) out.push(vmNameFor(ns, name, tb.name));
  return out;
}

/**
 * The VM names a fleet has acted on: those of its status (pods it ran) and of its stash (a
 * slot release's or a deletion's). Evidence that the fleet holds a name, not just asks for it.
 */
export function usedVmNames(cs: CocoonSet): Set<string> {
  const out = new Set<string>();
  for (const a of cs.status?.agents ?? []) if (a.vmName) out.add(a.vmName);
  for (const t of cs.status?.toolboxes ?? []) if (t.vmName) out.add(t.vmName);
  for (const n of parseDeleteVmNames(cs.metadata.annotations?.[ANNOTATIONS.deleteVmNames]))
    out.add(n);
  return out;
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
  /** The fleet that holds it, `namespace/name`. */
  holder: string;
}

/**
 * The first VM name `cs` asks for that another live fleet of `fleets` holds (claims it and
 * outranks `cs`), or undefined. `fleets` may contain `cs` itself (by namespace and name).
 */
export function vmNameClash(cs: CocoonSet, fleets: readonly CocoonSet[]): VmNameClash | undefined {
  const mine = claimedVmNames(cs);
  const wanted = desiredVmNames(cs);
  const others = fleets
    .filter((o) => live(o) && !sameFleet(o, cs))
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

/** The refusal's message, naming both fleets. */
export function vmNameClashMessage(cs: CocoonSet, clash: VmNameClash): string {
  return `VM name ${clash.vm} of CocoonSet ${fleetKey(cs)} is already held by CocoonSet ${clash.holder} (VM names are vk-<namespace>-<cocoonset>-<member>, so the two collide); nothing is created for ${fleetKey(cs)}: rename one of them`;
}

/** The live fleets of `fleets` that claim `vm`, as `namespace/name`, sorted. */
export function vmNameHolders(vm: string, fleets: readonly CocoonSet[]): string[] {
  return fleets
    .filter((f) => live(f) && claimedVmNames(f).has(vm))
    .map(fleetKey)
    .sort();
}

/**
 * The VMs of a deletion's tag clean-up that no other live fleet has acted on (its status or
 * stash names them): a fleet being deleted never drops a tag a live fleet still holds. A fleet
 * that only asks for the name (one refused for it, or a new fleet of the same name) holds no
 * tag of it: those are the deleted fleet's and go.
 */
export function vmNamesFreeToDrop(
  cs: CocoonSet,
  vms: readonly string[],
  fleets: readonly CocoonSet[],
): { drop: string[]; kept: { vm: string; holders: string[] }[] } {
  const others = fleets.filter(
    (f) => live(f) && !(sameFleet(f, cs) && f.metadata.uid === cs.metadata.uid),
  );
  const drop: string[] = [];
  const kept: { vm: string; holders: string[] }[] = [];
  for (const vm of vms) {
    const holders = others
      .filter((f) => usedVmNames(f).has(vm))
      .map(fleetKey)
      .sort();
    if (holders.length > 0) kept.push({ vm, holders });
    else drop.push(vm);
  }
  return { drop, kept };
}

/** The VM name a pod's CocoonHibernation may act on, or why none. */
export type PodVmAttribution = { vm: string } | { refusal: string };

/**
 * The VM name the controller can attribute to a pod of the CR's namespace: a pod whose
 * controller is a CocoonSet of that namespace (same uid) must carry the name that fleet
 * derives for its slot label; any other pod must carry its own derived name,
 * `vk-<namespace>-<pod>`. Either way the name must not be held by a fleet other than the
 * pod's own. The annotation is anyone's to write, so it is only believed when it says what
 * the controller would have named the VM itself.
 */
export function attributePodVm(pod: Pod, fleets: readonly CocoonSet[]): PodVmAttribution {
  const ns = pod.metadata?.namespace ?? "default";
  const podName = pod.metadata?.name ?? "";
  const vm = pod.metadata?.annotations?.[ANNOTATIONS.vmName] ?? "";
  const ref = (pod.metadata?.ownerReferences ?? []).find((r) => r.controller && r.kind === KIND);
  let owner: CocoonSet | undefined;
  let expected: string;
  if (ref) {
    // Being deleted or not: it is still the pod's owner.
    owner = fleets.find(
      (f) =>
        (f.metadata.namespace ?? "default") === ns &&
        f.metadata.name === ref.name &&
        f.metadata.uid === ref.uid,
    );
    if (!owner) {
      return {
        refusal: `pod ${ns}/${podName} names CocoonSet ${ref.name} (uid ${ref.uid}) as its controller, which does not exist in ${ns}; its VM name ${vm} cannot be attributed`,
      };
    }
    const labels = pod.metadata?.labels ?? {};
    const member = labels[LABELS.slot] ?? "";
    const role = labels[LABELS.role];
    const wellFormed =
      member !== "" && (role === ROLES.toolbox ? true : /^(0|[1-9]\d*)$/.test(member));
    expected = wellFormed ? vmNameFor(ns, ref.name, member) : "";
    if (expected === "" || !desiredOrUsed(owner, expected)) {
      return {
        refusal: `pod ${ns}/${podName} is not a member of CocoonSet ${ns}/${ref.name} (slot label "${member}"); its VM name ${vm} cannot be attributed`,
      };
    }
  } else {
    expected = `vk-${ns}-${podName}`;
  }
  if (vm !== expected) {
    return {
      refusal: `pod ${ns}/${podName} carries ${ANNOTATIONS.vmName}=${vm}, but its VM is ${expected}; only that name is acted on`,
    };
  }
  const holders = vmNameHolders(
    vm,
    fleets.filter((f) => !owner || !(sameFleet(f, owner) && f.metadata.uid === owner.metadata.uid)),
  );
  if (holders.length > 0) {
    return {
      refusal: `VM name ${vm} of pod ${ns}/${podName} is held by CocoonSet ${holders.join(", ")}; it is not acted on`,
    };
  }
  return { vm };
}

function desiredOrUsed(cs: CocoonSet, vm: string): boolean {
  return claimedVmNames(cs).has(vm);
}

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
