/**
 * The Fleet's claim guard: a Fleet creates its CocoonSet, or refuses.
 *
 * pulumi-kubernetes applies a custom resource with server-side apply, which takes over an
 * object of the same name that already exists. Without this guard a second stack (or a
 * second Fleet of the same program) declaring the same CocoonSet would take over the first
 * one's fleet, and its `pulumi destroy` would delete it. The guard is registered before the
 * CocoonSet; its `check` (run by `pulumi preview` and again by `up`) and its `create` read
 * the CocoonSet and refuse one that another Fleet, or no Pulumi stack, created.
 *
 * Guarantees: a CocoonSet is claimed only when it does not exist yet, when it carries this
 * Fleet's own stamp (`<project>/<stack>/<name>`), or when the program asks for it with
 * `adoptCocoonSet`. The guard's outputs carry no credential (the kubeconfig is an input only).
 * Caveats: two stacks whose `pulumi up` create the same new CocoonSet at the same instant can
 * both pass the read; the CocoonSet is applied with `pulumi.com/patchForce` (the program's
 * spec wins over a kubectl edit), so the second apply wins.
 */
import { CRD_NAME, describeValue, type CocoonSet } from "../../engine/spec/index.js";
import { KubeClient, paths, type KubeObject } from "../../engine/kube/index.js";
import { BrandedError } from "../../engine/kube/branded-error.js";
import { withoutKubeconfig } from "./outputs.js";

/** Annotation on a CocoonSet naming the Fleet (`<project>/<stack>/<name>`) that created it. */
export const CREATED_BY = "cocoonset.cocoonstack.io/created-by";

/** Label pulumi-kubernetes puts on every object it creates. */
const PULUMI_MANAGED = { key: "app.kubernetes.io/managed-by", value: "pulumi" } as const;

/** The placeholder Pulumi sends for values not known during preview. */
const UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9";

/** Inputs of the Fleet's claim guard. */
export interface FleetGuardInputs {
  /** Kubeconfig YAML (a secret input; never returned as an output). */
  kubeconfig: string;
  /** Namespace of the CocoonSet. */
  namespace: string;
  /** Name of the CocoonSet. */
  name: string;
  /** `<project>/<stack>/<component name>` of this Fleet. */
  owner: string;
  /** Whether the Fleet may take over a CocoonSet it did not create (`adoptCocoonSet`). */
  adopt?: boolean;
  /**
   * Whether the CocoonSet CRD must already be in the cluster: true when the Fleet has no
   * Operator in its program (an Operator installs the CRD in the same deploy).
   */
  requireCrd?: boolean;
}

/** Outputs of the guard: the inputs without the kubeconfig. */
export type FleetGuardOutputs = Omit<FleetGuardInputs, "kubeconfig">;

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
 */
export function claimProblem(
  view: ClaimView,
  p: Pick<FleetGuardInputs, "namespace" | "name" | "owner" | "adopt" | "requireCrd">,
): string | undefined {
  const id = `${p.namespace}/${p.name}`;
  if (!view.crdInstalled) {
    return p.requireCrd
      ? `[operator] the CocoonSet CRD ${CRD_NAME} is not installed in the cluster, and this Fleet has no \`operator\` to install it: add an Operator to the program (\`new Operator(...)\`, passed as the Fleet's \`operator\`), or install the controller and its CRD first (\`cocoonset manifests\` or another stack's Operator)`
      : undefined;
  }
  const live = view.cocoonSet;
  if (!live) return undefined;
  const stamp = live.metadata.annotations?.[CREATED_BY];
  if (stamp === p.owner) return undefined;
  if (stamp) {
    return `[name] the CocoonSet ${id} is held by the Fleet ${stamp}; a Fleet creates its own CocoonSet and never takes over another's (its \`pulumi destroy\` would delete that fleet): give this Fleet another \`name\` or namespace, or remove the Fleet from that stack first`;
  }
  if (p.adopt) return undefined;
  const byPulumi = live.metadata.labels?.[PULUMI_MANAGED.key] === PULUMI_MANAGED.value;
  const holder = byPulumi
    ? "was created by a Pulumi stack that did not record its owner (a Fleet of an earlier pulumi-cocoonset, or another Pulumi program)"
    : "was not created by Pulumi (applied with kubectl or another tool)";
  return `[adoptCocoonSet] the CocoonSet ${id} exists and ${holder}; a Fleet does not take over a CocoonSet it did not create unless the program says so: set \`adoptCocoonSet: true\` on the Fleet to adopt it (this stack then manages it, and \`pulumi destroy\` deletes it and its pods), or give this Fleet another \`name\``;
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

/**
 * Guard `check`, run by `pulumi preview` and by `up` before the CocoonSet is applied: the
 * claim decision, as a check failure. A cluster that cannot be asked is no failure here (the
 * CocoonSet's own apply reports it); `create` asks again and fails closed.
 */
export async function fleetGuardCheck(
  _olds: unknown,
  news: Record<string, unknown>,
): Promise<{ inputs: Record<string, unknown>; failures: { property: string; reason: string }[] }> {
  const failures: { property: string; reason: string }[] = [];
  if (news.adopt !== undefined && typeof news.adopt !== "boolean" && news.adopt !== UNKNOWN) {
    failures.push({
      property: "adopt",
      reason: `[adoptCocoonSet] must be a boolean (got ${describeValue(news.adopt)})`,
    });
  }
  if (failures.length > 0 || !known(news)) return { inputs: news, failures };
  try {
    const problem = await askClaim(news, 15_000);
    if (problem) failures.push({ property: "", reason: problem });
  } catch {
    // Unreadable kubeconfig, unreachable or forbidden: the deploy reports it; `create` asks
    // again and fails closed.
  }
  return { inputs: news, failures };
}

/** The claim decision against the cluster, from one read of it. */
async function askClaim(inputs: FleetGuardInputs, timeoutMs: number): Promise<string | undefined> {
  const client = KubeClient.fromString(inputs.kubeconfig, { requestTimeoutMs: timeoutMs });
  try {
    return claimProblem(await readClaimView(client, inputs.namespace, inputs.name), inputs);
  } finally {
    client.close();
  }
}

/** The claim decision against the cluster, failing closed. */
async function assertClaim(inputs: FleetGuardInputs): Promise<void> {
  const problem = await askClaim(inputs, 30_000);
  if (problem) throw new CocoonSetClaimError(problem);
}

/** Guard `create`: the claim decision, then the guard exists (its id is the owner). */
export async function fleetGuardCreate(
  inputs: FleetGuardInputs,
): Promise<{ id: string; outs: FleetGuardOutputs }> {
  await assertClaim(inputs);
  return { id: `${inputs.namespace}/${inputs.name}`, outs: withoutKubeconfig(inputs) };
}

/** Guard `update` (the CocoonSet, owner or adoption changed): the same decision. */
export async function fleetGuardUpdate(
  _id: string,
  _olds: FleetGuardOutputs,
  news: FleetGuardInputs,
): Promise<{ outs: FleetGuardOutputs }> {
  await assertClaim(news);
  return { outs: withoutKubeconfig(news) };
}
