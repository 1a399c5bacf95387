/**
 * Attribution: which pod is a fleet's member, which VM a member runs, which VMs a fleet may
 * restore, overwrite or drop. Every such decision of the engine asks this module, and its
 * inputs are only what the engine recorded itself: a CocoonSet's status subresource
 * (`status.vms`: member → VM name and the uid of the last pod the engine created for it), the
 * uids of the pods this process created and has not recorded yet, and a CocoonHibernation's
 * status. A pod's labels, annotations and ownerReferences, and a CocoonSet's annotations, are
 * anyone's to write who may write the object: they never make a pod a member or give a VM
 * its name. Pure; the trust model: docs/security.md.
 */
import { createHash } from "node:crypto";
import { ANNOTATIONS, KIND, LABELS, ROLES } from "../spec/constants.js";
import type { CocoonSet, VMRecord } from "../spec/generated/types.js";
import type { CocoonHibernation } from "../spec/generated/hibernation-types.js";
import type { Pod } from "../spec/kube-types.js";
import { keyOf, namespaceOf } from "../kube/objects.js";
import { effectiveSuspend } from "../spec/defaults.js";
import { FrozenMemo } from "../spec/frozen.js";

/** What every VM name the engine derives begins with (the node agents rely on it). */
export const VM_NAME_PREFIX = "vk-";

/** VM name of a member: `vk-<namespace>-<cs>-<member>` (the node agents rely on it). */
export function vmNameFor(namespace: string, cocoonSet: string, member: number | string): string {
  return `${VM_NAME_PREFIX}${namespace}-${cocoonSet}-${member}`;
}

/**
 * The VM name of pod `pod` of `namespace`, `vk-<namespace>-<pod>`: a standalone pod's VM, and
 * a member's too, whose pod `<cs>-<member>` runs `vk-<namespace>-<cs>-<member>`.
 */
export function podVmName(namespace: string, pod: string): string {
  return `${VM_NAME_PREFIX}${namespace}-${pod}`;
}

/**
 * Whether some member of CocoonSet `namespace/cocoonSet` could run the VM `vm`: every VM name
 * of the fleet begins `vk-<namespace>-<cocoonSet>-`. A prefix test, not a parse: with dashes in
 * names, `vk-a-b-c-1` may be the VM of `a`'s `b-c` or of `a-b`'s `c`.
 */
export function mayNameVm(namespace: string, cocoonSet: string, vm: string): boolean {
  return vm.startsWith(vmNameFor(namespace, cocoonSet, ""));
}

/**
 * Whether two fleets (namespace and name each) could ever claim one VM name: their names are
 * `vk-<stem>-<member>` with the stem `<namespace>-<name>`, so only where one stem equals the
 * other or begins it at a dash. A fleet is its own neighbour.
 */
export function mayShareVmNames(
  a: { namespace: string; name: string },
  b: { namespace: string; name: string },
): boolean {
  const x = `${a.namespace}-${a.name}`;
  const y = `${b.namespace}-${b.name}`;
  return x === y || x.startsWith(`${y}-`) || y.startsWith(`${x}-`);
}

/** Pod name of a member: `<cs>-<member>`, for agents and toolboxes alike. */
function memberPodName(cocoonSet: string, member: number | string): string {
  return `${cocoonSet}-${member}`;
}

/** A member key as the engine writes it: `0`, a slot `[1-9][0-9]*`, or a toolbox name. */
export function memberRole(member: string): "main" | "sub-agent" | "toolbox" | undefined {
  if (member === "0") return "main";
  if (/^[1-9][0-9]*$/.test(member))
    return Number.isSafeInteger(Number(member)) ? "sub-agent" : undefined;
  // Toolbox names never are all digits (the CRD refuses them): `00` is no member.
  if (/^[0-9]+$/.test(member) || !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(member)) return undefined;
  return "toolbox";
}

/** The VM the fleet's member runs, derived from what is immutable: namespace, name, member. */
export function memberVm(cs: CocoonSet, member: number | string): string {
  return vmNameFor(namespaceOf(cs), cs.metadata.name ?? "", member);
}

/**
 * The record as read from the status, entries that do not say what the engine would have
 * written (a malformed member, a VM name that is not the member's) left out.
 */
function vmRecords(cs: CocoonSet): Map<string, VMRecord> {
  const out = new Map<string, VMRecord>();
  for (const member of Object.keys(cs.status?.vms ?? {})) {
    const entry = recordOf(cs, member);
    if (entry) out.set(member, entry);
  }
  return out;
}

/**
 * One member's entry of the record, with the same checks as {@link vmRecords}: a lookup, where
 * the planner asks per pod (a whole-record scan per pod made a 1,000-pod pass quadratic).
 */
function recordOf(cs: CocoonSet, member: string): VMRecord | undefined {
  const vms = cs.status?.vms;
  if (!vms || !Object.hasOwn(vms, member)) return undefined;
  const entry = vms[member];
  if (entry === null || typeof entry !== "object") return undefined;
  if (memberRole(member) === undefined || entry.vm !== memberVm(cs, member)) return undefined;
  return entry;
}

/**
 * Whether the status was written by a version of the engine that kept no record: it has
 * been observed (`observedGeneration`) and has no `vms`. Such a fleet's pods are adopted by
 * the rules of that version once (labels and controller reference), and recorded; a new
 * CocoonSet has no status, so nothing is ever adopted into it.
 */
export function predatesRecord(cs: CocoonSet): boolean {
  return cs.status?.observedGeneration !== undefined && cs.status.vms === undefined;
}

/** The member a pod was labelled for by the engine's own pod builder, by the old rules. */
function labelledMember(cs: CocoonSet, pod: Pod): string | undefined {
  const labels = pod.metadata?.labels ?? {};
  const ref = pod.metadata?.ownerReferences?.find((r) => r.controller === true);
  if (labels[LABELS.name] !== cs.metadata.name || !ref || ref.uid !== cs.metadata.uid) return;
  const slot = labels[LABELS.slot] ?? "";
  const member =
    labels[LABELS.role] === ROLES.main
      ? "0"
      : labels[LABELS.role] === ROLES.subAgent && slot !== "0"
        ? slot
        : labels[LABELS.role] === ROLES.toolbox
          ? slot
          : "";
  const role = memberRole(member);
  if (role === undefined || (role === "toolbox") !== (labels[LABELS.role] === ROLES.toolbox))
    return undefined;
  return pod.metadata?.name === memberPodName(cs.metadata.name ?? "", member) ? member : undefined;
}

/**
 * The pod annotation that carries the token of the engine's create (its SHA-256 is recorded
 * in `status.vms` before the create). Outside the peer's `cocoonset.cocoonstack.io/` keys.
 */
export const CREATE_TOKEN_ANNOTATION = "attribution.cocoonset.cocoonstack.io/create-token";

/** The SHA-256 (hex) of a create token, as the record keeps it. */
export function tokenDigest(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}

/** Whether the pod carries the token whose digest the entry recorded. */
function carriesToken(pod: Pod, entry: VMRecord): boolean {
  const token = pod.metadata?.annotations?.[CREATE_TOKEN_ANNOTATION] ?? "";
  return !!entry.createToken && token !== "" && tokenDigest(token) === entry.createToken;
}

/**
 * The member `pod` is of `cs`, or undefined: the record names the pod's uid under a member
 * whose pod name it bears, or the pod carries the token of the create the record announced
 * for that member (the engine stopped between the create and the record of its uid: the
 * token is known to no one else until the pod exists, and then the pod holds the name).
 * Labels, ownerReferences and every other annotation are not read.
 */
export function memberOf(cs: CocoonSet, pod: Pod): string | undefined {
  // A CocoonSet that never went through {@link attributedView} (a planner's unit input) is
  // read by the old rules; the engine plans and decides only with views, which always carry
  // the record (an empty one for a new CocoonSet).
  const vms = cs.status?.vms;
  if (vms === undefined) return labelledMember(cs, pod);
  // A frozen record (the controller's cached CocoonSet) answers each frozen pod once.
  const context = Object.isFrozen(vms) ? [vms] : undefined;
  return MEMBER_OF.get(pod, context, () => recordedMember(cs, pod) ?? null) ?? undefined;
}

/** {@link memberOf} per frozen pod, while the frozen record is the same object. */
const MEMBER_OF = new FrozenMemo<Pod, string | null>();

function recordedMember(cs: CocoonSet, pod: Pod): string | undefined {
  const uid = pod.metadata?.uid ?? "";
  if (uid === "") return undefined;
  // The one member whose pod name the pod bears: `<cs>-<member>`.
  const prefix = memberPodName(cs.metadata.name ?? "", "");
  const podName = pod.metadata?.name ?? "";
  if (!podName.startsWith(prefix)) return undefined;
  const member = podName.slice(prefix.length);
  const entry = recordOf(cs, member);
  return entry && (entry.podUID === uid || carriesToken(pod, entry)) ? member : undefined;
}

/** Whether the engine recorded `pod` as a member of `cs`. */
export function isRecordedMember(cs: CocoonSet, pod: Pod): boolean {
  return memberOf(cs, pod) !== undefined;
}

/** The VM of a recorded member's pod, or "" for a pod that is not one. */
export function memberPodVm(cs: CocoonSet, pod: Pod): string {
  const member = memberOf(cs, pod);
  return member === undefined ? "" : memberVm(cs, member);
}

/**
 * The CocoonSet as a pass plans with it: its recorded VMs plus `created` (pods this process
 * created, member → record, not yet in the status it read) and, for a status that predates the
 * record ({@link predatesRecord}), the pods the old rules adopt. The result's `status.vms` is
 * what the engine knows; {@link recordUpdate} says what of it the status still lacks.
 */
export function attributedView(
  cs: CocoonSet,
  pods: readonly Pod[],
  created: ReadonlyMap<string, VMRecord> = new Map(),
): CocoonSet {
  const legacy = predatesRecord(cs);
  const tokened = tokenMembers(cs, pods);
  if (created.size === 0 && tokened.size === 0 && cs.status?.vms !== undefined) return cs;
  const vms: Record<string, VMRecord> = {};
  if (legacy) {
    // The VMs the old status names for its members stay the fleet's (its teardown needs them).
    for (const a of cs.status?.agents ?? [])
      if (a.vmName === memberVm(cs, a.slot)) vms[String(a.slot)] = { vm: a.vmName };
    for (const t of cs.status?.toolboxes ?? [])
      if (t.vmName === memberVm(cs, t.name)) vms[t.name] = { vm: t.vmName };
    const sorted = [...pods].sort((a, b) =>
      (a.metadata?.name ?? "").localeCompare(b.metadata?.name ?? ""),
    );
    for (const pod of sorted) {
      if (pod.metadata?.deletionTimestamp) continue;
      const member = labelledMember(cs, pod);
      if (member !== undefined && vms[member]?.podUID === undefined)
        vms[member] = { vm: memberVm(cs, member), podUID: pod.metadata?.uid ?? "" };
    }
  }
  Object.assign(vms, cs.status?.vms ?? {});
  for (const [member, podUID] of tokened) vms[member] = { ...vms[member], podUID };
  // A pod created for a member keeps the member's mark (the pod restores; see below).
  for (const [member, entry] of created) vms[member] = { ...vms[member], ...entry };
  return { ...cs, status: { ...emptyStatus, ...cs.status, vms } };
}

/** Members whose announced create's pod is listed under a uid the record does not have yet. */
function tokenMembers(cs: CocoonSet, pods: readonly Pod[]): Map<string, string> {
  const out = new Map<string, string>();
  if (cs.status?.vms === undefined) return out;
  for (const pod of pods) {
    const member = memberOf(cs, pod);
    const uid = pod.metadata?.uid ?? "";
    if (member !== undefined && uid !== "" && cs.status.vms[member]?.podUID !== uid)
      out.set(member, uid);
  }
  return out;
}

const emptyStatus = { readyAgents: 0, desiredAgents: 0, readyToolboxes: 0, desiredToolboxes: 0 };

/**
 * The entries of `view`'s record that `cs`'s status does not hold yet (a merge patch of
 * `status.vms`), or undefined when it holds them all.
 */
export function recordUpdate(cs: CocoonSet, view: CocoonSet): Record<string, VMRecord> | undefined {
  const have = cs.status?.vms ?? {};
  const out: Record<string, VMRecord> = {};
  for (const [member, entry] of Object.entries(view.status?.vms ?? {})) {
    const h = have[member];
    if (
      !h ||
      h.vm !== entry.vm ||
      (h.podUID ?? "") !== (entry.podUID ?? "") ||
      (h.hibernated ?? false) !== (entry.hibernated ?? false)
    )
      // A cleared mark is written as null: a merge patch keeps what it does not name.
      out[member] =
        h?.hibernated === true && entry.hibernated !== true
          ? ({ ...entry, hibernated: null } as unknown as VMRecord)
          : entry;
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

/**
 * Every VM the fleet recorded (the members it ever created a pod for, scaled away, released
 * or hibernated ones included), sorted: what its deletion cleans up and what it holds.
 */
export function recordedVms(cs: CocoonSet): string[] {
  return [...new Set([...vmRecords(cs).values()].map((e) => e.vm))].sort();
}

/** The VM names the spec asks for: slots 0..replicas, then the toolboxes. */
export function desiredVms(cs: CocoonSet): string[] {
  const replicas = Math.max(0, Math.floor(Number(cs.spec?.agent?.replicas ?? 0)) || 0);
  const out: string[] = [];
  for (let slot = 0; slot <= replicas; slot++) out.push(memberVm(cs, slot));
  for (const tb of cs.spec?.toolboxes ?? []) out.push(memberVm(cs, tb.name));
  return out;
}

/** The snapshot tags a CocoonHibernation holds: its recorded VM while it is not gone. */
export interface HibernationHold {
  namespace: string;
  name: string;
  /** `status.vmName`: written by the engine once it attributed the CR's pod. */
  vm: string;
}

/** The holds of the live CocoonHibernations that recorded a VM (deleted ones hold nothing). */
export function hibernationHolds(crs: readonly CocoonHibernation[]): HibernationHold[] {
  return crs
    .filter((h) => !h.metadata.deletionTimestamp && (h.status?.vmName ?? "") !== "")
    .map((h) => ({
      namespace: namespaceOf(h),
      name: h.metadata.name ?? "",
      vm: h.status?.vmName ?? "",
    }));
}

/** A standalone pod that runs a VM under its own derived name, `vk-<namespace>-<pod>`. */
export interface StandaloneHold {
  namespace: string;
  name: string;
  vm: string;
}

/** Everyone who may hold a VM's tags besides the fleet asking. */
export interface VmHolders {
  /** The cluster's CocoonSets (live ones hold their recorded VMs). */
  fleets: readonly CocoonSet[];
  /** CocoonHibernations with a recorded VM. @default none */
  hibernations?: readonly HibernationHold[];
  /** Standalone pods found under the names a VM could derive from ({@link standaloneCandidates}). */
  standalone?: readonly StandaloneHold[];
}

/** A fleet as `namespace/name`. */
export function fleetKey(cs: CocoonSet): string {
  return keyOf(namespaceOf(cs), cs.metadata.name ?? "");
}

/**
 * Who other than `cs` (same namespace, name and uid) holds `vm`, as `Kind ns/name`, sorted:
 * a live fleet that recorded it, a CocoonHibernation that recorded it, a standalone pod that
 * runs it under its own name and is no member of `cs`.
 */
export function otherHolders(cs: CocoonSet, vm: string, holders: VmHolders): string[] {
  const same = (f: CocoonSet) => fleetKey(f) === fleetKey(cs) && f.metadata.uid === cs.metadata.uid;
  const out: string[] = [];
  for (const f of holders.fleets) {
    if (f.metadata.deletionTimestamp || same(f)) continue;
    if (recordedVms(attributedView(f, [])).includes(vm)) out.push(`CocoonSet ${fleetKey(f)}`);
  }
  for (const h of holders.hibernations ?? [])
    if (h.vm === vm) out.push(`CocoonHibernation ${h.namespace}/${h.name}`);
  for (const p of holders.standalone ?? [])
    if (p.vm === vm && podVmName(p.namespace, p.name) === vm)
      out.push(`Pod ${p.namespace}/${p.name}`);
  return [...new Set(out)].sort();
}

/**
 * The (namespace, pod) pairs whose standalone VM name `vk-<namespace>-<pod>` is `vm`: one per
 * dash, since either side may hold dashes. What a deletion reads before it drops a tag.
 */
export function standaloneCandidates(vm: string): { namespace: string; name: string }[] {
  if (!vm.startsWith("vk-")) return [];
  const rest = vm.slice(3);
  const out: { namespace: string; name: string }[] = [];
  for (let i = rest.indexOf("-"); i > 0; i = rest.indexOf("-", i + 1)) {
    const namespace = rest.slice(0, i);
    const name = rest.slice(i + 1);
    if (name !== "") out.push({ namespace, name });
  }
  return out;
}

/**
 * A pod found under a candidate name holds its standalone VM when it runs that VM (its own
 * annotation says so) and no fleet recorded it as a member: a member's VM is its fleet's.
 */
export function standaloneHold(pod: Pod, fleets: readonly CocoonSet[]): StandaloneHold | undefined {
  const ns = namespaceOf(pod);
  const name = pod.metadata?.name ?? "";
  const vm = podVmName(ns, name);
  if (pod.metadata?.annotations?.[ANNOTATIONS.vmName] !== vm) return undefined;
  if (fleets.some((f) => namespaceOf(f) === ns && isRecordedMember(attributedView(f, []), pod)))
    return undefined;
  return { namespace: ns, name, vm };
}

/** The VMs a deletion may drop and those it keeps for another holder. */
export function vmsFreeToDrop(
  cs: CocoonSet,
  vms: readonly string[],
  holders: VmHolders,
): { drop: string[]; kept: { vm: string; holders: string[] }[] } {
  const drop: string[] = [];
  const kept: { vm: string; holders: string[] }[] = [];
  for (const vm of vms) {
    const h = otherHolders(cs, vm, holders);
    if (h.length > 0) kept.push({ vm, holders: h });
    else drop.push(vm);
  }
  return { drop, kept };
}

/** The VM a CocoonHibernation's pod may be acted on under, or why none. */
export type PodVmAttribution = { vm: string } | { refusal: string };

/**
 * The VM of a pod a CocoonHibernation targets: a pod some fleet of its namespace recorded as
 * its member runs that member's VM; any other pod is standalone and runs `vk-<ns>-<pod>`,
 * which no other live fleet may claim (have recorded, or ask for before the CR recorded it).
 * Either way the pod's own
 * annotation (what the node agent acts on) must say that name, else nothing is done.
 */
export function attributePodVm(
  pod: Pod,
  fleets: readonly CocoonSet[],
  /** The VM the asking CocoonHibernation already recorded: a fleet asking for it later holds nothing. */
  recorded = "",
): PodVmAttribution {
  const ns = namespaceOf(pod);
  const podName = pod.metadata?.name ?? "";
  const said = pod.metadata?.annotations?.[ANNOTATIONS.vmName] ?? "";
  const owner = fleets.find(
    (f) => namespaceOf(f) === ns && isRecordedMember(attributedView(f, []), pod),
  );
  const expected = owner ? memberPodVm(attributedView(owner, []), pod) : podVmName(ns, podName);
  if (said !== expected) {
    return {
      refusal: `pod ${ns}/${podName} carries ${ANNOTATIONS.vmName}=${said}, but its VM is ${expected}${owner ? ` (member of CocoonSet ${fleetKey(owner)})` : " (no CocoonSet recorded it as a member)"}; only that name is acted on`,
    };
  }
  const held = fleets
    .filter((f) => !f.metadata.deletionTimestamp && f !== owner)
    .filter(
      (f) =>
        recordedVms(attributedView(f, [])).includes(expected) ||
        (recorded !== expected && desiredVms(f).includes(expected)),
    )
    .map((f) => `CocoonSet ${fleetKey(f)}`)
    .sort();
  if (held.length > 0) {
    return {
      refusal: `VM name ${expected} of pod ${ns}/${podName} is held by ${held.join(", ")}; it is not acted on`,
    };
  }
  return { vm: expected };
}

function withoutMark(entry: VMRecord): VMRecord {
  const rest = { ...entry };
  delete rest.hibernated;
  return rest;
}

/**
 * The view with each recorded member's `hibernated` mark brought up to date from what the
 * node agent reports of the member's own pod: set once the pod reports its VM hibernated and
 * `ownTags` (the fleet's own `:hibernate` tags, as the registry answered) holds the member's
 * VM; cleared once the pod reports its VM ready and no hibernation is asked, or its VM
 * failed. A member
 * without a pod keeps its mark: its next pod restores (behaviour: docs/lifecycle.md).
 */
export function withHibernationMarks(
  cs: CocoonSet,
  pods: readonly Pod[],
  ownTags: ReadonlySet<string> | undefined,
): CocoonSet {
  const vms: Record<string, VMRecord> = { ...(cs.status?.vms ?? {}) };
  let changed = false;
  for (const pod of pods) {
    if (pod.metadata?.deletionTimestamp) continue;
    const member = memberOf(cs, pod);
    const entry = member === undefined ? undefined : vms[member];
    if (member === undefined || !entry) continue;
    const a = pod.metadata?.annotations ?? {};
    const state = a[ANNOTATIONS.lifecycleState] ?? "";
    if (state === "hibernated" && ownTags?.has(entry.vm) && entry.hibernated !== true) {
      vms[member] = { ...entry, hibernated: true };
      changed = true;
    } else if (
      entry.hibernated &&
      // Running again, or its wake failed (the snapshot is unusable; the loss is reported
      // once, by the wake): the member's next pod starts fresh.
      ((state === "ready" && a[ANNOTATIONS.hibernate] === undefined) || state === "failed")
    ) {
      vms[member] = withoutMark(entry);
      changed = true;
    }
  }
  // A member the spec no longer asks for waits for nothing: scaled up again, it starts fresh.
  const desired = new Set(desiredVms(cs));
  for (const [member, entry] of Object.entries(vms)) {
    if (entry.hibernated && !desired.has(entry.vm)) {
      vms[member] = withoutMark(entry);
      changed = true;
    }
  }
  return changed && cs.status ? { ...cs, status: { ...cs.status, vms } } : cs;
}

/**
 * The VMs of members whose record says they wait in their snapshot and that have no pod (it
 * was deleted meanwhile), sorted: a pass of a fleet that is not suspended asks the registry
 * for their tags, to restore the member's next pod from it.
 */
export function recordedWakeProbes(cs: CocoonSet, pods: readonly Pod[]): string[] {
  if (effectiveSuspend(cs)) return [];
  const present = new Set(
    pods.filter((p) => !p.metadata?.deletionTimestamp).map((p) => memberOf(cs, p)),
  );
  return [...vmRecords(cs)]
    .filter(([member, e]) => e.hibernated === true && !present.has(member))
    .map(([, e]) => e.vm)
    .sort();
}

/** Whether the record says the member's VM waits in its snapshot (see {@link withHibernationMarks}). */
export function recordedHibernated(cs: CocoonSet, member: string): string | undefined {
  const entry = recordOf(cs, member);
  return entry?.hibernated === true ? entry.vm : undefined;
}

/** Why a pod that claims to be a member is not one, for messages; "" when it makes no claim. */
export function unrecordedClaim(cs: CocoonSet, pod: Pod): string {
  const ref = pod.metadata?.ownerReferences?.find((r) => r.controller === true && r.kind === KIND);
  if (!ref || ref.uid !== cs.metadata.uid || isRecordedMember(cs, pod)) return "";
  return `it names this CocoonSet as its controller, but the engine did not create it (its uid ${pod.metadata?.uid ?? ""} is not recorded)`;
}
