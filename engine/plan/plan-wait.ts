/**
 * What a pass leaves to wait for, typed: a step that cannot finish in this pass states what
 * the next one needs (its `wait`: a pod Ready, a pod gone, a VM live, the node agent's next
 * report, or nothing that waiting can change), and {@link passWait} settles it with what the
 * pass did. One awaiter (engine/execute/converge.ts) waits for it, for `pulumi up`, its
 * suspend and wake, the readiness of the fleet and a deletion (its hibernations in flight, its
 * owner tree gone) alike, each wait with its deadline and a description of what it waited for.
 */
import type { Plan, StepWait } from "./plan-types.js";

/** What the loop does after a pass. */
export type PassWait =
  | StepWait
  /** The pod gone, or no longer terminating: a create met it while it went. */
  | { kind: "pod-gone"; pod: string }
  /** The fleet's terminating pods gone: every create met one. */
  | { kind: "terminating-gone" }
  /** The next pass at once: this one changed pods. */
  | { kind: "next-pass" }
  /**
   * A deletion's: the node agent done with the members' hibernations in flight (`pods`), so
   * that no snapshot is pushed after the fleet's tags are dropped.
   */
  | { kind: "hibernations-done"; pods: readonly string[] }
  /** An owner release's: what it deleted gone ({@link ObjectsGone}). */
  | ObjectsGone
  /**
   * Nothing of the plan's: a caller with a goal of its own waits for any change of the
   * fleet's pods since `since` (their versions as the pass read them), at most `maxMs`.
   */
  | { kind: "none"; maxMs?: number; since?: string };

/** Objects of one kind an owner release waits for: those it deleted, and those they own. */
export interface GoneSet {
  /** The kind as the release's messages name it: `job`, `pod`, `configmap`. */
  kind: string;
  /** The uids of the objects deleted. */
  uids: readonly string[];
  /** Owners' uids: an object they own is waited for too (a pod a deleted Job started late). */
  ownerUids: readonly string[];
}

/**
 * An owner release's wait (engine/release): every object it deleted gone from the owner's
 * namespace, by uid, so that a replacement of the same name is not waited for.
 */
export interface ObjectsGone {
  kind: "objects-gone";
  /** The owner, `Kind namespace/name`, as the messages name it. */
  owner: string;
  /** Its uid. */
  ownerUid: string;
  /** The release's time limit, which a timeout names. */
  timeoutMs: number;
  /** What is waited for, by kind. */
  sets: readonly GoneSet[];
}

/** What a pass did, as far as its wait depends on it. */
export interface PassOutcome {
  /** The pods it created. */
  created: readonly string[];
  /** Every create met a pod of the same name. */
  stalled?: boolean;
  /** The planner's requeue delay after the pass (0: at once). */
  requeueAfterMs?: number;
}

/** The wait the plan states: its main agent's first step's (the fleet waits on its main agent). */
function statedWait(plan: Plan): StepWait | undefined {
  return plan.steps.find((s) => s.target.role === "main")?.wait;
}

/** The wait after a pass: the plan's, settled with what the pass did. */
export function passWait(plan: Plan, outcome: PassOutcome): PassWait {
  const stated = statedWait(plan);
  if (stated?.kind === "stuck" || stated?.kind === "vm-live") return stated;
  if (stated?.kind === "pod-ready") {
    if (stated.created && !outcome.created.includes(stated.pod))
      return { kind: "pod-gone", pod: stated.pod };
    return stated;
  }
  if (outcome.requeueAfterMs === 0) return { kind: "next-pass" };
  if (stated?.kind === "pod-change")
    return { ...stated, maxMs: outcome.requeueAfterMs ?? stated.maxMs };
  if (outcome.stalled) return { kind: "terminating-gone" };
  return outcome.requeueAfterMs === undefined
    ? { kind: "none" }
    : { kind: "none", maxMs: outcome.requeueAfterMs };
}

/** What a wait waits for, in words (a timeout's message names it). */
export function describeWait(wait: PassWait, fleet: string): string {
  switch (wait.kind) {
    case "pod-ready":
      return `pod ${wait.pod} of CocoonSet ${fleet} to be Ready`;
    case "vm-live":
      return `pod ${wait.pod} of CocoonSet ${fleet} to be restored from its snapshot`;
    case "pod-change":
      return `a change of pod ${wait.pod} of CocoonSet ${fleet}`;
    case "pod-gone":
      return `terminating pod ${wait.pod} of CocoonSet ${fleet} to be gone`;
    case "terminating-gone":
      return `terminating pods of CocoonSet ${fleet} to be gone`;
    case "stuck":
      return wait.message;
    case "next-pass":
      return `the next pass of CocoonSet ${fleet}`;
    case "hibernations-done":
      return `the hibernations in flight of CocoonSet ${fleet} to end (${wait.pods.join(", ")})`;
    case "objects-gone":
      return `${wait.sets.map((g) => `${g.kind}s`).join(", ") || "the objects"} of ${wait.owner} to be gone`;
    case "none":
      return `a change of the pods of CocoonSet ${fleet}`;
  }
}
