// A pod its node refused: the kubelet's admission turned it down before it ran (phase
// Failed, the kubelet's reason and message), as opposed to a pod that ran and failed. The
// engine binds sub-agents to their main agent's node itself (`spec.nodeName`, no scheduler),
// so a node without room refuses them; the pass reports why instead of rebuilding silently.
// Behaviour: docs/behaviour.md §3.6.
import { MAX_REBUILD_ATTEMPTS } from "../spec/constants.js";
import type { NodeRefusal } from "../spec/generated/types.js";
import type { Pod } from "../spec/kube-types.js";

export type { NodeRefusal };

/**
 * The reasons a kubelet's admission writes on a pod it rejects, other than `OutOf<resource>`:
 * a node selector or affinity its node's labels no longer match, and an admission handler
 * that failed (a device plugin that could not allocate). Reasons a pod gets once it ran
 * (`Evicted`, `DeadlineExceeded`, ...) are not refusals.
 */
const ADMISSION_REASONS: ReadonlySet<string> = new Set([
  "NodeAffinity",
  "UnexpectedAdmissionError",
]);

/** Whether `reason` is one a kubelet gives a pod it refused to admit. */
export function isAdmissionRefusalReason(reason: string | undefined): boolean {
  if (!reason) return false;
  return /^OutOf.+/.test(reason) || ADMISSION_REASONS.has(reason);
}

/** The node's refusal of `pod`, when its node refused it; undefined for any other pod. */
export function nodeRefusal(pod: Pod): NodeRefusal | undefined {
  const status = pod.status;
  const node = pod.spec?.nodeName;
  if (status?.phase !== "Failed" || !node || !isAdmissionRefusalReason(status.reason))
    return undefined;
  return { node, reason: status.reason as string, message: status.message ?? "" };
}

/** `node N refused it (OutOfcpu: Pod was rejected: ...)`. */
export function refusedIt(r: NodeRefusal): string {
  return `node ${r.node} refused it (${r.message ? `${r.reason}: ${r.message}` : r.reason})`;
}

/**
 * The Warning `NodeRefused` for a refused sub-agent, posted once per refused pod by the step
 * that acts on it: what the node said, and what follows (the rebuild `attempt`, or none
 * left: dead-letter). The attempt keeps the reports of one slot's pods apart.
 */
export function nodeRefusedMessage(
  slot: number,
  podName: string,
  r: NodeRefusal,
  attempt: number | "dead-letter",
): string {
  const what = r.message ? `${r.reason}: ${r.message}` : r.reason;
  const next =
    attempt === "dead-letter"
      ? `no rebuild left (${MAX_REBUILD_ATTEMPTS} done): left in dead-letter`
      : `rebuilding it, attempt ${attempt}/${MAX_REBUILD_ATTEMPTS}`;
  return `slot ${slot}: node ${r.node} refused pod ${podName} (${what}); ${next}`;
}

/** The Normal `SubAgentRebuilding` message: `slot N attempt k/4`, and the node's reason. */
export function rebuildingMessage(slot: number, attempt: number, r?: NodeRefusal): string {
  const base = `slot ${slot} attempt ${attempt}/${MAX_REBUILD_ATTEMPTS}`;
  return r ? `${base} (node ${r.node} refused it: ${r.reason})` : base;
}

/** The Warning `SubAgentDeadLetter` message, naming the node's refusal when there is one. */
export function deadLetterMessage(slot: number, podName: string, r?: NodeRefusal): string {
  const why = r ? `: ${refusedIt(r)}` : "";
  return `slot ${slot} exhausted ${MAX_REBUILD_ATTEMPTS} rebuilds${why}; pod ${podName} left in dead-letter`;
}
