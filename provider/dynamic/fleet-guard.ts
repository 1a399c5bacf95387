/**
 * The Fleet's claim guard: a Fleet creates its CocoonSet, or refuses, and it alone deletes it.
 *
 * pulumi-kubernetes applies a custom resource with server-side apply, which takes over an
 * object of the same name that already exists. Without this guard a second stack (or a
 * second Fleet of the same program) declaring the same CocoonSet would take over the first
 * one's fleet, and its `pulumi destroy` would delete it. The guard is registered before the
 * CocoonSet; its `check` (run by `pulumi preview` and again by `up`, before the CocoonSet is
 * applied) and its `create` read the CocoonSet and refuse one this Fleet's state holds no
 * token for (provider/dynamic/ownership.ts). The same `check` sends the pods the deploy would
 * create to the apiserver as dry runs and forecasts them against the nodes (dry-run.ts), so
 * what admission or a node would refuse stops `up` before the CocoonSet is written.
 *
 * Guarantees: the guard keeps an ownership token among its inputs (drawn by its first
 * `check`, handed on by every later one) and the CocoonSet carries it; the CocoonSet resource
 * never deletes (it is retained), the slots resource deletes the fleet only while the
 * CocoonSet carries its token, and the guard's own `delete` deletes a CocoonSet left without
 * slots under the same rule. The guard's outputs carry no kubeconfig read from a file.
 * Caveats: two stacks whose `pulumi up` create the same new CocoonSet at the same instant can
 * both pass the read; the CocoonSet is applied with `pulumi.com/patchForce` (the program's
 * spec wins over a kubectl edit), so the second apply wins.
 */
import {
  CRD_NAME,
  describeValue,
  formatFailure,
  prefixedProperty,
  stableJson,
  validateCocoonSetSpec,
  type CocoonSet,
  type CocoonSetSpec,
} from "../../engine/spec/index.js";
import { KubeClient, paths, type KubeObject } from "../../engine/kube/index.js";
import { BrandedError } from "../../engine/kube/branded-error.js";
import { deleteFleet } from "../../engine/execute/index.js";
import { type CapacityCheck, dryRunRefusals } from "./dry-run.js";
import { missingNamespaceReason } from "./namespace-check.js";
import { fleetPreflight } from "./preflight.js";
import { kubeconfigChanged, kubeconfigOfState, storedKubeconfig } from "./outputs.js";
import { UNKNOWN } from "./slots.js";
import {
  CREATED_BY,
  deleteDecision,
  fleetClaimProblem,
  shortToken,
  tokenFor,
  tokenOf,
} from "./ownership.js";

export { CREATED_BY };

/** Inputs of the Fleet's claim guard. */
export interface FleetGuardInputs {
  /** Kubeconfig YAML (a secret input; among the outputs only when no file holds it). */
  kubeconfig: string;
  /** The file the kubeconfig was read from, if it was (see provider/dynamic/outputs.ts). */
  kubeconfigFile?: string;
  /** The context chosen in that file, if any. */
  kubeconfigContext?: string;
  /** Namespace of the CocoonSet. */
  namespace: string;
  /** Name of the CocoonSet. */
  name: string;
  /** `<project>/<stack>/<component name>` of this Fleet (named in messages only). */
  owner: string;
  /** Whether the Fleet may take over a CocoonSet it did not create (`adoptCocoonSet`). */
  adopt?: boolean;
  /**
   * Whether the CocoonSet CRD must already be in the cluster: true when the Fleet has no
   * Operator in its program (an Operator installs the CRD in the same deploy).
   */
  requireCrd?: boolean;
  /**
   * The ownership token: set by `check` (the state's, else a new one), never by the program;
   * the CocoonSet carries it in its `cocoonset.cocoonstack.io/owner-token` annotation.
   */
  ownerToken?: string;
  /** The spec, for the dry runs and the capacity forecast of `check`. */
  spec?: CocoonSetSpec;
  /** Sub-agent creates in flight (dry runs in flight, too). */
  fanOut?: number;
  /** What `check` does with the slots the nodes would refuse. @default "refuse" */
  capacityCheck?: CapacityCheck;
}

/** Outputs of the guard: the inputs, the kubeconfig kept as its file if it has one. */
export type FleetGuardOutputs = Omit<FleetGuardInputs, "kubeconfig"> & { kubeconfig?: string };

/** A CocoonSet this Fleet may not claim. */
export class CocoonSetClaimError extends BrandedError {}

/** What the guard found in the cluster: the CocoonSet (if any) and whether its CRD exists. */
export interface ClaimView {
  crdInstalled: boolean;
  cocoonSet?: Pick<CocoonSet, "metadata">;
}

/**
 * Why this Fleet may not claim the CocoonSet it declares, or undefined when it may. Pure: the
 * decision the guard's `check` and `create` both take from one read of the cluster.
 * `existing`: the guard's state existed before this deploy (see ownership.ts).
 */
export function claimProblem(
  view: ClaimView,
  p: Pick<FleetGuardInputs, "namespace" | "name" | "owner" | "adopt" | "requireCrd"> & {
    ownerToken: string;
    existing: boolean;
  },
): string | undefined {
  if (!view.crdInstalled) {
    return p.requireCrd
      ? `[operator] the CocoonSet CRD ${CRD_NAME} is not installed in the cluster, and this Fleet has no \`operator\` to install it: add an Operator to the program (\`new Operator(...)\`, passed as the Fleet's \`operator\`), or install the controller and its CRD first (\`cocoonset manifests\` or another stack's Operator)`
      : undefined;
  }
  return fleetClaimProblem(view.cocoonSet, `${p.namespace}/${p.name}`, {
    owner: p.owner,
    token: p.ownerToken,
    existing: p.existing,
    adopt: p.adopt === true,
  });
}

/** Reads what {@link claimProblem} decides on. */
export async function readClaimView(
  client: KubeClient,
  namespace: string,
  name: string,
): Promise<ClaimView> {
  const crd = await client.getOrUndefined<KubeObject>(paths.crd(CRD_NAME));
  if (!crd) return { crdInstalled: false };
  const cocoonSet = await client.getOrUndefined<CocoonSet>(paths.cocoonSet(namespace, name));
  return { crdInstalled: true, ...(cocoonSet ? { cocoonSet } : {}) };
}

/** Whether every input the claim decision needs is known (not a preview placeholder). */
function known(news: Record<string, unknown>): news is Record<string, unknown> & FleetGuardInputs {
  return ["kubeconfig", "namespace", "name", "owner"].every(
    (k) => typeof news[k] === "string" && news[k] !== UNKNOWN && news[k] !== "",
  );
}

/** Whether a value holds a preview placeholder at any depth. */
function containsUnknown(v: unknown): boolean {
  if (v === UNKNOWN) return true;
  if (Array.isArray(v)) return v.some(containsUnknown);
  if (v && typeof v === "object") return Object.values(v).some(containsUnknown);
  return false;
}

/** Whether the old inputs are those of a guard that existed before this deploy. */
function existed(olds: unknown): boolean {
  return typeof (olds as Record<string, unknown> | undefined)?.owner === "string";
}

/**
 * Guard `check`, run by `pulumi preview` and by `up` before the CocoonSet is applied: keeps the
 * ownership token (the state's, else a new one), then the claim decision and, when the deploy
 * would create pods, their dry runs and capacity forecast, as check failures. A cluster that
 * cannot be asked is no failure here (the CocoonSet's own apply reports it); `create` asks
 * the claim again and fails closed.
 */
export async function fleetGuardCheck(
  olds: unknown,
  given: Record<string, unknown>,
): Promise<{ inputs: Record<string, unknown>; failures: { property: string; reason: string }[] }> {
  const news: Record<string, unknown> = { ...given, ownerToken: tokenFor(olds) };
  const failures: { property: string; reason: string }[] = [];
  if (news.adopt !== undefined && typeof news.adopt !== "boolean" && news.adopt !== UNKNOWN) {
    failures.push({
      property: "adopt",
      reason: `[adoptCocoonSet] must be a boolean (got ${describeValue(news.adopt)})`,
    });
  }
  if (news.spec !== undefined && !containsUnknown(news.spec)) {
    // A spec holding Outputs is known only now: refused here, naming the field, before the
    // CocoonSet's apply would fail on it in the apiserver's words (and retry).
    const v = validateCocoonSetSpec(news.spec);
    if (!v.ok)
      for (const f of v.failures)
        failures.push({
          property: "",
          reason: formatFailure({ ...f, property: prefixedProperty("spec", f.property) }),
        });
  }
  if (failures.length > 0 || !known(news)) return { inputs: news, failures };
  if (wouldCreatePods(olds, news) || !existed(olds)) {
    // The rights this deploy uses and the nodes of its pool, as `cocoonset doctor` checks them:
    // refused here, each with what to ask for, rather than by the first write that lacks one.
    const pre = await fleetPreflight(
      news.kubeconfig,
      news.namespace,
      news.spec && !containsUnknown(news.spec) ? news.spec : undefined,
      news.capacityCheck,
    );
    for (const line of pre.warnings) process.stderr.write(`warning: ${line}\n`);
    for (const reason of pre.refusals) failures.push({ property: "", reason });
    if (pre.refusals.length > 0) return { inputs: news, failures };
  }
  let claimed = false;
  try {
    const problem = await askClaim(news, existed(olds), 15_000);
    if (problem) failures.push({ property: "", reason: problem });
    else claimed = true;
  } catch {
    // Unreadable kubeconfig, unreachable or forbidden: the deploy reports it; `create` asks
    // again and fails closed.
  }
  if (claimed && wouldCreatePods(olds, news)) {
    // Here, before the CocoonSet is applied, rather than in the slots resource's check (which
    // runs after it): a refused `up`, with or without a preview, writes nothing.
    const found = await dryRunRefusals({
      kubeconfig: news.kubeconfig,
      namespace: news.namespace,
      name: news.name,
      spec: news.spec!,
      fanOut: news.fanOut,
      capacityCheck: news.capacityCheck,
    });
    for (const reason of found.refusals) failures.push({ property: "", reason });
    // A check has no warnings of its own to return: a warning is a line of its own, prefixed
    // as Pulumi prefixes them.
    for (const line of found.warnings) process.stderr.write(`warning: ${line}\n`);
  }
  return { inputs: news, failures };
}

/**
 * Whether `check` sends the new pods as dry runs: the spec is known and valid enough to plan,
 * and the guard is new or the spec changed (a deploy that changes neither creates no pod,
 * unless live drift has to be repaired; that pod was admitted before).
 */
function wouldCreatePods(olds: unknown, news: FleetGuardInputs): boolean {
  if (news.spec === undefined || containsUnknown(news.spec)) return false;
  if (news.kubeconfig === UNKNOWN) return false;
  const old = (olds ?? {}) as Record<string, unknown>;
  return (
    old.spec === undefined ||
    old.namespace !== news.namespace ||
    old.name !== news.name ||
    stableJson(old.spec) !== stableJson(news.spec)
  );
}

/** The claim decision against the cluster, from one read of it. */
async function askClaim(
  inputs: FleetGuardInputs,
  existing: boolean,
  timeoutMs: number,
): Promise<string | undefined> {
  const client = KubeClient.fromString(inputs.kubeconfig, { requestTimeoutMs: timeoutMs });
  try {
    return claimProblem(await readClaimView(client, inputs.namespace, inputs.name), {
      ...inputs,
      ownerToken: inputs.ownerToken ?? "",
      existing,
    });
  } finally {
    client.close();
  }
}

/**
 * The claim decision against the cluster, failing closed; then the namespace. The guard runs
 * before the CocoonSet, and after everything the Fleet waits for (a Namespace resource whose
 * name it was given, its `dependsOn`), so a namespace missing now is missing for good: said
 * here, naming the field, instead of the CocoonSet's apply retrying for a minute. A namespace
 * given as text was asked about at preview already; one given as an Output was unknown then.
 */
async function assertClaim(inputs: FleetGuardInputs, existing: boolean): Promise<void> {
  if (!inputs.ownerToken) {
    throw new CocoonSetClaimError(
      "[ownerToken] the claim guard was given no ownership token (its check sets one)",
    );
  }
  const problem = await askClaim(inputs, existing, 30_000);
  if (problem) throw new CocoonSetClaimError(problem);
  const missing = await missingNamespaceReason(
    inputs.kubeconfig,
    inputs.namespace,
    "namespace",
    "create it first, or give the Fleet the name of the Namespace resource that creates it (`namespace: ns.metadata.name`), or that resource in the Fleet's `dependsOn`, so the Fleet is created after it",
  );
  if (missing) throw new CocoonSetClaimError(missing);
}

/** Guard `create`: the claim decision, then the guard exists (its id is the CocoonSet's). */
export async function fleetGuardCreate(
  inputs: FleetGuardInputs,
): Promise<{ id: string; outs: FleetGuardOutputs }> {
  await assertClaim(inputs, false);
  return { id: `${inputs.namespace}/${inputs.name}`, outs: storedKubeconfig(inputs) };
}

/** Guard `update` (the CocoonSet, owner, token, spec or adoption changed): the same decision. */
export async function fleetGuardUpdate(
  _id: string,
  _olds: FleetGuardOutputs,
  news: FleetGuardInputs,
): Promise<{ outs: FleetGuardOutputs }> {
  await assertClaim(news, true);
  return { outs: storedKubeconfig(news) };
}

/**
 * Guard `diff`: what is claimed, the token, or where the kubeconfig comes from. The spec,
 * `fanOut` and `capacityCheck` are read by `check` only, which runs on every deploy (and a
 * deploy without changes still stores the new inputs), so they change nothing here.
 */
export function fleetGuardDiff(
  _id: string,
  olds: FleetGuardOutputs,
  news: FleetGuardInputs,
): { changes: boolean } {
  const keys = ["namespace", "name", "owner", "adopt", "requireCrd", "ownerToken"] as const;
  return {
    changes:
      keys.some((k) => stableJson(olds[k]) !== stableJson(news[k])) ||
      kubeconfigChanged(olds, news),
  };
}

/**
 * Guard `delete`, the last of the Fleet's deletes: the slots resource has released the fleet
 * by then. A CocoonSet still there that carries this guard's token (the slots resource was
 * never created, or is retained) is deleted and released; one that carries another token was
 * handed over (an adopting Fleet, another stack) and is left alone.
 */
export async function fleetGuardDelete(props: FleetGuardOutputs): Promise<void> {
  if (!props.ownerToken) return; // a guard of an earlier version: it never deleted anything
  const client = KubeClient.fromString(kubeconfigOfState(props), { requestTimeoutMs: 30_000 });
  try {
    const cs = await client.getOrUndefined<CocoonSet>(paths.cocoonSet(props.namespace, props.name));
    const decision = deleteDecision(cs, props.ownerToken);
    if (decision === "gone") return;
    if (decision !== "delete") {
      console.log(
        `cocoonset: leaving the CocoonSet ${props.namespace}/${props.name}: it carries ${
          tokenOf(cs) ? `the ownership token ${shortToken(tokenOf(cs)!)}…` : "no ownership token"
        }, not this Fleet's ${shortToken(props.ownerToken)}…, so another resource holds it now`,
      );
      return;
    }
    await deleteFleet(client, props.namespace, props.name, { timeoutMs: 120_000 });
  } finally {
    client.close();
  }
}
