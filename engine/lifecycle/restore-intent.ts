// What the CocoonSet pass needs to know of the CocoonHibernations targeting its pods: which
// new pods restore from their `:hibernate` snapshot, and which hibernate requests an
// unsuspend must leave in place. Pure; the executor lists the CRs and asks the registry
// (engine/execute/pass.ts). Behaviour: docs/behaviour.md §3.18.
import { classifyPods } from "../pods/classify.js";
import { ANNOTATIONS, ANNOTATION_TRUE } from "../spec/constants.js";
import type { CocoonSet } from "../spec/generated/types.js";
import type { Pod } from "../spec/kube-types.js";
import { agentPodName, toolboxPodName, vmNameFor } from "../pods/pod-builder.js";
import { isTerminal } from "../pods/pod-state.js";
import type { Refusal } from "../plan/plan-types.js";
import { asksHibernate, suspendsRetaining, type SnapshotFacts } from "./suspend.js";
import { restoreIntended, type HibernationTarget } from "../snapshots/hibernation-targets.js";
import { namespaceOf } from "../kube/objects.js";
import { effectiveSuspend } from "../spec/defaults.js";

export {
  hibernationHeld,
  hibernationTargets,
  restoreIntended,
  type HibernationTarget,
} from "../snapshots/hibernation-targets.js";

/** The CocoonSet's member pod names with their VM names: agents by slot, then toolboxes. */
function memberNames(cs: CocoonSet): { pod: string; vm: string }[] {
  const ns = namespaceOf(cs);
  const name = cs.metadata.name ?? "";
  const out: { pod: string; vm: string }[] = [];
  for (let slot = 0; slot <= (cs.spec.agent?.replicas ?? 0); slot++)
    out.push({ pod: agentPodName(name, slot), vm: vmNameFor(ns, name, slot) });
  for (const tb of cs.spec.toolboxes ?? [])
    out.push({ pod: toolboxPodName(name, tb.name), vm: vmNameFor(ns, name, tb.name) });
  return out;
}

/**
 * Whether the pass should list the namespace's CocoonHibernations at all: some member pod
 * may be built (missing or terminal), or an unsuspend may withdraw a hibernate request, or a
 * suspend still asks a pod to hibernate. A steady fleet, suspended or not, asks nothing.
 */
export function needsHibernationTargets(cs: CocoonSet, pods: readonly Pod[]): boolean {
  // A suspend that still asks a pod to hibernate checks that no CR of it is being deleted.
  if (effectiveSuspend(cs))
    return pods.some((p) => !asksHibernate(p) && !p.metadata?.deletionTimestamp);
  const present = new Map<string, Pod>();
  for (const p of pods)
    if (p.metadata?.name && !p.metadata.deletionTimestamp) present.set(p.metadata.name, p);
  if (pods.some(asksHibernate)) return true;
  return memberNames(cs).some(({ pod }) => {
    const p = present.get(pod);
    return !p || isTerminal(p);
  });
}

/**
 * The VMs whose `:hibernate` tag the pass must know because a pod of theirs may be built
 * with restore intent: members with a restorable CR whose pod is missing or terminal.
 * (A retain suspend's own main-agent probe is in `snapshotProbes`.)
 */
export function restoreProbes(
  cs: CocoonSet,
  pods: readonly Pod[],
  targets: readonly HibernationTarget[],
): string[] {
  if (targets.length === 0 || suspendsRetaining(cs)) return [];
  const owned = classifyPods(cs, pods);
  const byName = new Map<string, Pod>();
  for (const p of [owned.main, ...owned.subAgents.values(), ...owned.toolboxes.values()])
    if (p?.metadata?.name) byName.set(p.metadata.name, p);
  return memberNames(cs)
    .filter(({ pod }) => {
      const p = byName.get(pod);
      return restoreIntended(targets, pod) && (!p || isTerminal(p));
    })
    .map(({ vm }) => vm)
    .sort();
}

/**
 * Marks a pod about to be created to restore from `<vm>:hibernate` when a CR says its VM
 * is hibernated and the tag exists; when the tag is gone, the pod boots fresh and `lost`
 * names the VM (docs/behaviour.md §3.20). Fails closed: a registry that did not answer yields an
 * refusal instead of a pod (a fresh boot a later hibernate would push over the real snapshot).
 * Without registry facts nothing is marked (no registry: no restore, as upstream).
 */
export function applyRestoreIntent(
  pod: Pod & { metadata: { name: string } },
  targets: readonly HibernationTarget[] | undefined,
  facts: SnapshotFacts | undefined,
): { pod: Pod; lost?: string } | { refusal: Refusal } {
  if (!facts || !targets || !restoreIntended(targets, pod.metadata.name)) return { pod };
  if ("error" in facts) {
    return {
      refusal: {
        kind: "registry-unanswered",
        need: "restore",
        registryError: facts.error,
        podName: pod.metadata.name,
        message: `pod ${pod.metadata.name}: a CocoonHibernation says its VM is hibernated, and the snapshot registry did not answer: ${facts.error}`,
      },
    };
  }
  const vm = pod.metadata.annotations?.[ANNOTATIONS.vmName] ?? "";
  // The CR recorded the VM hibernated and its snapshot is gone: a fresh boot, reported.
  if (!facts.hibernate.has(vm)) return { pod, lost: vm };
  return {
    pod: {
      ...pod,
      metadata: {
        ...pod.metadata,
        annotations: {
          ...pod.metadata.annotations,
          [ANNOTATIONS.restoreFromHibernate]: ANNOTATION_TRUE,
        },
      },
    },
  };
}
