// Human and JSON renderings of a plan, for `cocoonset plan` and for logs.
import { MAX_REBUILD_ATTEMPTS } from "../spec/constants.js";
import type { NodeRefusal } from "../pods/node-refusal.js";
import type { Decision, Plan, PlanStep, PlanTarget } from "./plan-types.js";

function targetLabel(target: PlanTarget): string {
  switch (target.role) {
    case "main":
      return "main";
    case "sub-agent":
      return `slot ${target.slot}`;
    case "toolbox":
      return `toolbox ${target.name}`;
  }
}

function describeStep(step: PlanStep): string {
  const drift = (step.drift ?? []).join(", ");
  const r = step.nodeRefusal;
  const refused = r ? `node ${r.node} refused it: ${r.reason}` : "";
  const describe: Record<Decision, () => string> = {
    create: () => "create",
    "delete-drifted": () => `delete (drift: ${drift})`,
    "delete-terminal": () => "delete (terminal)",
    "scale-down": () => "delete (scale-down)",
    "delete-extra": () => "delete (not in spec)",
    rebuild: () =>
      `rebuild (attempt ${step.attempt ?? 0}/${MAX_REBUILD_ATTEMPTS}${r ? `; ${refused}` : ""})`,
    "dead-letter": () => (r ? `dead-letter (${refused})` : "dead-letter"),
    "reset-dead-letter": () => `delete (leaves dead-letter; drift: ${drift})`,
    "wait-backoff": () =>
      `wait ${Math.ceil((step.waitMs ?? 0) / 1000)}s (backoff${r ? `; ${refused}` : ""})`,
    "wait-vanished": () =>
      `wait ${Math.ceil((step.waitMs ?? 0) / 1000)}s (its pod keeps vanishing after creation)`,
    "wait-main": () => "wait (not ready; sub-agents and toolboxes wait for it)",
    "main-failed": () => "failed (no automatic rebuild)",
    recovered: () => "recovered (Ready again)",
    hibernate: () => "hibernate (suspend)",
    "wait-hibernation": () =>
      step.why ? `wait (hibernating: ${step.why.replace(/^[^:]*: /, "")})` : "wait (hibernating)",
    wake: () => "wake (unsuspend)",
    "release-stash": () => "record the VM names and the node hint (slot release)",
    release: () => "delete (slot release: VM hibernated, seat freed)",
    "wake-restore": () => "create, restoring from its snapshot (wake)",
    "wait-wake": () =>
      step.actions.some((a) => a.kind === "event")
        ? "wait (wake: unschedulable, no capacity)"
        : "wait (wake: restoring)",
    "wake-complete": () => "drop its snapshot tag (wake done)",
    "wait-release": () => "wait (released pod still terminating)",
    blocked: () => `blocked: ${(step.why ?? "").replace(/^[^:]*: /, "")}`,
    "wait-placement": () => `wait (placement: ${(step.why ?? "").replace(/^[^:]*: /, "")})`,
    stalled: () => `no progress within the deadline: ${step.why ?? ""}`,
    migrate: () => "hibernate (migration to spec.nodeName)",
    "migrate-drop-stale": () => "drop a stale snapshot tag (migration)",
    "wait-migration": () =>
      step.why
        ? `wait (migration: ${step.why.replace(/^\[spec\.nodeName\] /, "")})`
        : "wait (migration)",
    "migrate-evict": () => "delete on the old node (migration: snapshot taken)",
    "migrate-restore": () => "create on spec.nodeName, restoring its snapshot (migration)",
    "migrate-wake": () => "wake in place (migration)",
    "migrate-complete": () => "drop the snapshot tag (migration: restored VM live)",
    "refuse-vm-names": () => "refused (a VM name is held by another fleet; see the error)",
    "migrate-retarget": () => "delete the unbound restore pod pinned to the old target (migration)",
    "migrate-refused": () =>
      `migration refused: ${(step.why ?? "").replace(/^\[spec\.nodeName\] /, "")}`,
  };
  return `${targetLabel(step.target)}: ${describe[step.decision]()}`;
}

function order(step: PlanStep): [number, number, string] {
  const t = step.target;
  if (t.role === "toolbox") return [2, 0, t.name];
  return [t.role === "main" ? 0 : 1, t.slot, ""];
}

/** Steps sorted for display: main, then sub-agents by slot, then toolboxes by name. */
function stepsInSlotOrder(plan: Plan): PlanStep[] {
  return [...plan.steps].sort((a, b) => {
    const [ga, sa, na] = order(a);
    const [gb, sb, nb] = order(b);
    return ga - gb || sa - sb || (na < nb ? -1 : na > nb ? 1 : 0);
  });
}

/**
 * One line per member that would change, in slot order, then one `error:` line per error;
 * `no changes` when the fleet is converged.
 */
export function renderPlan(plan: Plan): string {
  const lines = stepsInSlotOrder(plan).map(describeStep);
  lines.push(...plan.refusals.map((r) => `error: ${r.message}`));
  return lines.length > 0 ? lines.join("\n") : "no changes";
}

/** One member's change in {@link PlanJSON}. */
export interface PlanChangeJSON {
  target: string;
  role: PlanTarget["role"];
  slot?: number;
  name?: string;
  decision: Decision;
  podName: string;
  summary: string;
  drift?: string[];
  attempt?: number;
  waitMs?: number;
  /** blocked, migrate-refused: what stops it. */
  why?: string;
  /** rebuild, wait-backoff, dead-letter: the node's refusal of the sub-agent's pod. */
  nodeRefusal?: NodeRefusal;
}

/** The JSON document `cocoonset plan --json` prints. */
export interface PlanJSON {
  cocoonSet: { namespace: string; name: string };
  changes: PlanChangeJSON[];
  errors: string[];
  requeueAfterMs: number | null;
}

/** A JSON-ready summary of the plan (no pod bodies), changes in slot order. */
export function planToJSON(plan: Plan): PlanJSON {
  return {
    cocoonSet: { namespace: plan.cocoonSet.namespace, name: plan.cocoonSet.name },
    changes: stepsInSlotOrder(plan).map((step) => {
      const t = step.target;
      return {
        target: targetLabel(t),
        role: t.role,
        ...(t.role === "toolbox" ? { name: t.name } : { slot: t.slot }),
        decision: step.decision,
        podName: step.podName,
        summary: describeStep(step).slice(targetLabel(t).length + 2),
        ...(step.drift ? { drift: step.drift } : {}),
        ...(step.attempt !== undefined ? { attempt: step.attempt } : {}),
        ...(step.waitMs !== undefined ? { waitMs: step.waitMs } : {}),
        ...(step.why !== undefined ? { why: step.why } : {}),
        ...(step.nodeRefusal ? { nodeRefusal: step.nodeRefusal } : {}),
      };
    }),
    errors: plan.refusals.map((r) => r.message),
    requeueAfterMs: plan.requeueAfterMs ?? null,
  };
}

/** How a member is named in messages. */
export function memberLabel(target: PlanTarget): string {
  if (target.role === "main") return "main agent";
  return target.role === "sub-agent" ? `slot ${target.slot}` : `toolbox ${target.name}`;
}
