/**
 * Pure decisions of the orphan reaper: given one object and the time, say
 * why it should be deleted, or nothing to keep it. No I/O.
 */
import { LABELS, MANAGED_BY } from "../spec/index.js";
import type { KubeObject } from "../kube/index.js";

/** Label every ephemeral object the engine makes carries. */
export const MANAGED_BY_LABEL = LABELS.managedBy;
/** Value of {@link MANAGED_BY_LABEL} for the project's objects. */
export const MANAGED_BY_VALUE = MANAGED_BY;
/** Component label of prompt ConfigMaps. */
export const COMPONENT_LABEL = "app.kubernetes.io/component";
/** Value of {@link COMPONENT_LABEL} that marks a prompt ConfigMap. */
export const PROMPT_DATA_COMPONENT = "prompt-data";
/** Annotation holding the expiry as decimal unix seconds. */
export const EXPIRES_AT_ANNOTATION = "cocoonset.cocoonstack.io/expires-at";

/** Why the reaper deletes an object. */
export type ReapReason = "DeadlineExceeded" | "Expired";

interface Condition {
  type?: string;
  status?: string;
  reason?: string;
}

/**
 * Reads the expiry annotation as epoch milliseconds; undefined when missing or not a plain
 * decimal integer (an unreadable expiry must never delete anything).
 */
export function expiresAtMs(o: KubeObject): number | undefined {
  const raw = o.metadata.annotations?.[EXPIRES_AT_ANNOTATION];
  if (raw === undefined || !/^\d+$/.test(raw)) return undefined;
  const secs = Number(raw);
  return Number.isSafeInteger(secs) ? secs * 1000 : undefined;
}

/** True when the expiry annotation is readable and strictly before `nowMs`. */
export function isExpired(o: KubeObject, nowMs: number): boolean {
  const at = expiresAtMs(o);
  return at !== undefined && at < nowMs;
}

const isManaged = (o: KubeObject) => o.metadata.labels?.[MANAGED_BY_LABEL] === MANAGED_BY_VALUE;

/**
 * Reap decision for a Job: `DeadlineExceeded` when it failed on its active deadline, else
 * `Expired` past its expiry, else keep. Jobs without the managed label, or already being
 * deleted, are kept (a second delete would only inflate the counts).
 */
export function jobReapReason(job: KubeObject, nowMs: number): ReapReason | undefined {
  if (!isManaged(job) || job.metadata.deletionTimestamp) return undefined;
  const conds = (job.status as { conditions?: Condition[] } | undefined)?.conditions ?? [];
  if (
    conds.some((c) => c.type === "Failed" && c.status === "True" && c.reason === "DeadlineExceeded")
  )
    return "DeadlineExceeded";
  return isExpired(job, nowMs) ? "Expired" : undefined;
}

/**
 * Reap decision for a pod: kept when terminating or controlled by a Job (the Job reaps it);
 * `DeadlineExceeded` when Failed with that reason; `Expired` past its expiry whatever the
 * phase (Unknown included); else keep.
 */
export function podReapReason(pod: KubeObject, nowMs: number): ReapReason | undefined {
  if (!isManaged(pod) || pod.metadata.deletionTimestamp) return undefined;
  if ((pod.metadata.ownerReferences ?? []).some((r) => r.controller === true && r.kind === "Job"))
    return undefined;
  const status = pod.status as { phase?: string; reason?: string } | undefined;
  if (status?.phase === "Failed" && status.reason === "DeadlineExceeded") return "DeadlineExceeded";
  return isExpired(pod, nowMs) ? "Expired" : undefined;
}

/**
 * Reap decision for a ConfigMap: only prompt ConfigMaps (managed label and component
 * `prompt-data`) are reaped, when past their expiry and not already being deleted.
 */
export function configMapReapReason(cm: KubeObject, nowMs: number): ReapReason | undefined {
  if (!isManaged(cm) || cm.metadata.deletionTimestamp) return undefined;
  if (cm.metadata.labels?.[COMPONENT_LABEL] !== PROMPT_DATA_COMPONENT) return undefined;
  return isExpired(cm, nowMs) ? "Expired" : undefined;
}
