/**
 * Validation of the Operator's arguments before anything is registered. The values that
 * become controller flags go through the controller's own parsers (controller/options.ts), so
 * the component refuses exactly what the controller would refuse at start (where a bad value
 * would make the Deployment restart forever while `pulumi up` waits for it).
 */
import * as pulumi from "@pulumi/pulumi";
import {
  parseCountOption,
  parseLogLevelOption,
  parseNamespaceOption,
  parseReapIntervalOption,
  parseRegistryOption,
  parseTransitionTimeoutOption,
} from "../controller/options.js";
import { describeValue, namespaceNameProblem } from "../provider/fleet/index.js";
import { plainHttpProblem } from "../provider/registry/address.js";
import { parseCaBundle } from "../provider/registry/ca.js";
import type { OperatorArgs } from "./operator.js";

const WHITESPACE = /[ \t\n\v\f\r]/;

/** Every problem with the arguments, one `[field] rule (got value)` line each. */
export function operatorArgumentProblems(args: OperatorArgs): string[] {
  const out: string[] = [];
  const bad = (field: string, rule: string, value: unknown) =>
    out.push(`[${field}] ${rule} (got ${describeValue(value)})`);
  const parsed = (field: string, value: unknown, parser: (text: string) => unknown) => {
    try {
      parser(String(value));
    } catch (e) {
      bad(field, (e as Error).message, value);
    }
  };

  if (args.namespace !== undefined) {
    const problem = namespaceNameProblem(args.namespace);
    if (problem) bad("namespace", problem, args.namespace);
  }
  for (const field of ["createNamespace", "leaderElect", "skipAwait"] as const) {
    const v = args[field];
    if (v !== undefined && typeof v !== "boolean") bad(field, "must be true or false", v);
  }
  if (typeof args.image === "string" && (args.image === "" || WHITESPACE.test(args.image))) {
    bad("image", "must be an image reference with no whitespace", args.image);
  }
  for (const field of ["concurrency", "fanoutConcurrency"] as const) {
    const v = args[field];
    if (v === undefined) continue;
    if (typeof v !== "number") bad(field, "must be a number", v);
    else parsed(field, v, parseCountOption);
  }
  const durations = [
    ["reapInterval", parseReapIntervalOption],
    ["hibernateTimeout", parseTransitionTimeoutOption],
    ["wakeTimeout", parseTransitionTimeoutOption],
  ] as const;
  for (const [field, parser] of durations) {
    const v = args[field];
    if (v === undefined) continue;
    if (typeof v !== "string") bad(field, "must be a string such as 5m", v);
    else parsed(field, v, parser);
  }
  if (args.logLevel !== undefined) {
    if (typeof args.logLevel !== "string") bad("logLevel", "must be a string", args.logLevel);
    else parsed("logLevel", args.logLevel, parseLogLevelOption);
  }
  if (args.ociRegistry !== undefined) {
    if (typeof args.ociRegistry !== "string")
      bad("ociRegistry", "must be a string host[:port][/prefix]", args.ociRegistry);
    else parsed("ociRegistry", args.ociRegistry, parseRegistryOption);
  }
  if (args.ociRegistryInsecure !== undefined && typeof args.ociRegistryInsecure !== "boolean")
    bad("ociRegistryInsecure", "must be true or false", args.ociRegistryInsecure);
  if (typeof args.ociRegistry === "string") {
    const plain = plainHttpProblem(args.ociRegistry, args.ociRegistryInsecure === true);
    if (plain)
      bad(
        "ociRegistry",
        plain.replace("the registry's insecure flag", "ociRegistryInsecure: true"),
        args.ociRegistry,
      );
  }
  if (args.ociRegistryCa !== undefined) {
    if (typeof args.ociRegistryCa !== "string")
      bad("ociRegistryCa", "must be PEM text", args.ociRegistryCa);
    else parsed("ociRegistryCa", args.ociRegistryCa, parseCaBundle);
  }
  if (args.watchNamespaces !== undefined) {
    if (!Array.isArray(args.watchNamespaces)) {
      bad("watchNamespaces", "must be a list of namespace names", args.watchNamespaces);
    } else {
      args.watchNamespaces.forEach((ns: unknown, i) => {
        if (typeof ns !== "string") bad(`watchNamespaces[${i}]`, "must be a string", ns);
        else parsed(`watchNamespaces[${i}]`, ns, parseNamespaceOption);
      });
    }
  }
  return out;
}

/** Throws a clean (stack-less) program error listing every problem, if there is one. */
export function assertOperatorArguments(name: string, args: OperatorArgs): void {
  const problems = operatorArgumentProblems(args);
  if (problems.length > 0) {
    throw new pulumi.RunError(`Operator ${name}: ${problems.join("; ")}`);
  }
}
