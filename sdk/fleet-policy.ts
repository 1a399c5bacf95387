/**
 * The Fleet's lifecycle policy arguments, `idle`, `expiry` and `hooks`: the CocoonSet's
 * `spec.idle`, `spec.expiry` and `spec.hooks` given beside the spec (either place, not both),
 * merged into the spec the Fleet applies. Pure, apart from the Pulumi input types.
 * Behaviour: docs/lifecycle.md.
 */
import type * as pulumi from "@pulumi/pulumi";
import type { CocoonSetSpec, ExpirySpec, HooksSpec, IdleSpec } from "../engine/spec/index.js";

/** A value whose fields, at any depth, may be Pulumi inputs (Outputs or promises). */
export type DeepInput<T> = T extends (infer U)[]
  ? pulumi.Input<DeepInput<U>[]>
  : T extends object
    ? pulumi.Input<{ [K in keyof T]: DeepInput<T[K]> }>
    : pulumi.Input<T>;

/** The Fleet's policy arguments once resolved (FleetArgs says what each does). */
export interface FleetPolicy {
  idle?: IdleSpec;
  expiry?: ExpirySpec;
  hooks?: HooksSpec;
}

/** The policy fields, the same name as an argument and in the spec. */
export const POLICY_FIELDS = ["idle", "expiry", "hooks"] as const;

/** Each policy field given both as an argument and in the spec: one problem naming it. */
export function policyProblems(spec: Partial<CocoonSetSpec>, policy: FleetPolicy): string[] {
  return POLICY_FIELDS.filter((f) => policy[f] !== undefined && spec[f] !== undefined).map(
    (f) => `[${f}] is given twice, as the Fleet's \`${f}\` and as \`spec.${f}\`; keep one of them`,
  );
}

/** The spec with the policy arguments that are given set in it (as it is without any). */
export function withPolicy(spec: CocoonSetSpec, policy: FleetPolicy): CocoonSetSpec {
  if (POLICY_FIELDS.every((f) => policy[f] === undefined)) return spec;
  const out: CocoonSetSpec = { ...spec };
  if (policy.idle !== undefined) out.idle = policy.idle;
  if (policy.expiry !== undefined) out.expiry = policy.expiry;
  if (policy.hooks !== undefined) out.hooks = policy.hooks;
  return out;
}

/**
 * Whether the spec's hook URL carries credentials (`https://user:token@host/…`): the Fleet then
 * keeps the spec as a secret (encrypted in the state, masked in previews and `--debug`), as
 * it keeps `registryCredentials`. A URL that does not parse is judged by an `@` before its path.
 */
export function hooksUrlHasCredentials(spec: Partial<CocoonSetSpec> | undefined): boolean {
  const url = spec?.hooks?.url;
  if (typeof url !== "string") return false;
  try {
    const u = new URL(url);
    return u.username !== "" || u.password !== "";
  } catch {
    return /^[^/]*\/\/[^/?#]*@/.test(url);
  }
}
