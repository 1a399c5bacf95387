// A member whose pod name another pod holds (`kubectl run web-1` next to the fleet `web`):
// the engine can never create that pod, so the slot is reported as blocked, by what, and
// the rest of the fleet goes on. Pure; the executor reads the holders
// (engine/execute/pass.ts). Behaviour: docs/behaviour.md §3.21.
import { classifyPods, isOwnedPod } from "../pods/classify.js";
import { ANNOTATION_TRUE, ANNOTATIONS, LABELS, MANAGED_BY } from "../spec/constants.js";
import type { CocoonSet } from "../spec/generated/types.js";
import type { Pod } from "../spec/kube-types.js";
import { agentPodName, toolboxPodName } from "../pods/pod-builder.js";
import { isReady, isTerminal } from "../pods/pod-state.js";
import { asksHibernate, suspendsRetaining } from "./suspend.js";

/** How often a pass looks again at a blocked slot (no watch covers a pod it does not own). */
export const BLOCKED_POLL_MS = 10_000;

/** The pod that holds `podName` and is not this CocoonSet's, if any. */
export function foreignHolder(
  cs: CocoonSet,
  pods: readonly Pod[],
  podName: string,
): Pod | undefined {
  return pods.find((p) => p.metadata?.name === podName && !isOwnedPod(cs, p));
}

/** Who controls a pod, for messages: `ReplicaSet/web-7d9` or `no controller`. */
function controllerOf(pod: Pod): string {
  const ref = pod.metadata?.ownerReferences?.find((r) => r.controller === true);
  return ref ? `${ref.kind}/${ref.name}` : "no controller";
}

/**
 * Whether a pod is one the controller created for `cs` and can follow: the fleet's own
 * (its name label and controller uid, {@link isOwnedPod}) and carrying the managed-by label
 * that the controller's pod cache selects on. A pod that names the CocoonSet as its
 * controller without these labels is someone else's: an ownerReference is anyone's to write.
 */
export function isFollowedMember(cs: CocoonSet, pod: Pod): boolean {
  const labels = pod.metadata?.labels ?? {};
  return (
    isOwnedPod(cs, pod) &&
    labels[LABELS.name] === cs.metadata.name &&
    labels[LABELS.managedBy] === MANAGED_BY
  );
}

/** Who holds a name, for messages: the pod's controller, or what it claims and lacks. */
function holderOf(cs: CocoonSet, holder: Pod): string {
  const ref = holder.metadata?.ownerReferences?.find((r) => r.controller === true);
  const claimsThis = ref !== undefined && ref.uid !== undefined && ref.uid === cs.metadata.uid;
  if (!claimsThis) return controllerOf(holder);
  const labels = holder.metadata?.labels ?? {};
  const missing = [
    labels[LABELS.name] === cs.metadata.name ? "" : `${LABELS.name}=${cs.metadata.name ?? ""}`,
    labels[LABELS.managedBy] === MANAGED_BY ? "" : `${LABELS.managedBy}=${MANAGED_BY}`,
  ].filter((x) => x !== "");
  return `its ownerReference names this CocoonSet, but it lacks the label(s) ${missing.join(", ")} that the CocoonSet's pods carry: the controller did not create it`;
}

/** The Warning's and the condition's text for one blocked member. */
export function blockedMessage(member: string, holder: Pod, cs?: CocoonSet): string {
  const name = holder.metadata?.name ?? "";
  const who = cs ? holderOf(cs, holder) : controllerOf(holder);
  return `${member}: pod ${name} already exists and is not this CocoonSet's (${who}); the slot stays empty until that pod is deleted or renamed`;
}

/**
 * The agent pod names the next pass may create and did not list (pods without the fleet's
 * label are not listed): the executor reads each, so a holder that is not the fleet's is
 * seen before a create meets it. Slot 0 while the main agent is missing; the missing
 * sub-agent slots once the main agent is Ready (sub-agents wait for it otherwise). A
 * suspended fleet creates no sub-agent.
 */
export function agentNamesToCheck(cs: CocoonSet, pods: readonly Pod[]): string[] {
  const listed = new Set(pods.map((p) => p.metadata?.name ?? ""));
  const name = cs.metadata.name ?? "";
  const owned = classifyPods(cs, pods);
  const missing = (slot: number) => !listed.has(agentPodName(name, slot));
  if (!owned.main) return missing(0) ? [agentPodName(name, 0)] : [];
  const main = owned.main;
  if (cs.spec.suspend === true || suspendsRetaining(cs)) return [];
  if (!isReady(main) || isTerminal(main) || asksHibernate(main)) return [];
  const out: string[] = [];
  for (let slot = 1; slot <= (cs.spec.agent?.replicas ?? 0); slot++)
    if (missing(slot)) out.push(agentPodName(name, slot));
  return out;
}

/**
 * The names a pass must see the holders of before it plans (§3.21): each declared toolbox's
 * pod name and each agent name the pass may create ({@link agentNamesToCheck}) that no listed
 * pod has, toolboxes first.
 */
export function namesToRead(cs: CocoonSet, listed: readonly Pod[]): string[] {
  const present = new Set(listed.map((p) => p.metadata?.name));
  const toolboxes = (cs.spec.toolboxes ?? [])
    .map((tb) => toolboxPodName(cs.metadata.name ?? "", tb.name))
    .filter((name) => !present.has(name));
  return [...new Set([...toolboxes, ...agentNamesToCheck(cs, listed)])];
}

/**
 * The node the next pass binds new sub-agents to, for the executor to read (placement.ts):
 * the main agent's node, when it is Ready and some sub-agent slot has no pod listed, or a
 * terminal one that is not dead-lettered (its rebuild creates the replacement in the same
 * pass). Undefined when the pass creates no sub-agent.
 */
export function placementNodeToRead(cs: CocoonSet, pods: readonly Pod[]): string | undefined {
  const owned = classifyPods(cs, pods);
  const main = owned.main;
  const node = main?.spec?.nodeName ?? "";
  if (!main || node === "") return undefined;
  const name = cs.metadata.name ?? "";
  const subAgent = agentNamesToCheck(cs, pods).some((n) => n !== agentPodName(name, 0));
  const rebuilt = [...owned.subAgents.values()].some(
    (p) => isTerminal(p) && p.metadata?.annotations?.[ANNOTATIONS.deadLetter] !== ANNOTATION_TRUE,
  );
  return subAgent || (rebuilt && isReady(main) && !isTerminal(main)) ? node : undefined;
}
