/**
 * The components' refusal of bad arguments: a program error Pulumi prints without a stack
 * (a `RunError`) that also keeps each problem as a property path and a reason, so the package
 * provider can hand them to the engine as input property errors, which every language's host
 * prints per property instead of as a traceback.
 */
import * as pulumi from "@pulumi/pulumi";

/** One refused argument: the property path (`spec.agent.replicas`) and the rule it breaks. */
export interface ArgumentProblem {
  propertyPath: string;
  reason: string;
}

/**
 * A problem as the components write it, `[path] reason`, as a property path and a reason (a
 * problem without a path is the whole resource's: path "").
 */
function argumentProblem(text: string): ArgumentProblem {
  const m = /^\[([^\]]*)\]\s*(.*)$/s.exec(text);
  return m ? { propertyPath: m[1], reason: m[2] } : { propertyPath: "", reason: text };
}

const BRAND = "__cocoonsetArgumentsError";

/** A component's arguments refused, with every problem found. */
export class ArgumentsError extends pulumi.RunError {
  readonly [BRAND] = true;
  /** Each problem as a property path and a reason. */
  readonly problems: ArgumentProblem[];

  /**
   * @param component what refused, e.g. `Fleet coder`
   * @param problems each `[path] reason`
   */
  constructor(component: string, problems: readonly string[]) {
    super(`${component}: ${problems.join("; ")}`);
    this.problems = problems.map(argumentProblem);
  }

  /** Whether `e` is one (also one made by another copy of the package). */
  static isInstance(e: unknown): e is ArgumentsError {
    return typeof e === "object" && e !== null && (e as Record<string, unknown>)[BRAND] === true;
  }
}
