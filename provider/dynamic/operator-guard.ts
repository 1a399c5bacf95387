/**
 * The install guard of the Operator component: one Operator per cluster. Before the CRD is
 * applied, it reads the CocoonSet CRD; when another Operator's stamp is on it, `pulumi up`
 * fails with a message saying which one, instead of two stacks silently fighting over the
 * CRD and the controller.
 */
import { CRD_NAME } from "../fleet/index.js";
import { KubeClient, paths, type KubeObject } from "../kube/index.js";

/** Annotation on the CRD naming the Operator that installed it. */
export const INSTALLED_BY = "cocoonset.cocoonstack.io/installed-by";

/** Inputs of the guard resource. */
export interface OperatorGuardInputs {
  /** Kubeconfig YAML (a secret input). */
  kubeconfig: string;
  /** `<project>/<stack>/<component name>` of this Operator. */
  owner: string;
}

/** Fails when the CRD carries another Operator's stamp; returns the stamp found, if any. */
export async function assertSingleOperator(
  inputs: OperatorGuardInputs,
): Promise<string | undefined> {
  const client = KubeClient.fromString(inputs.kubeconfig, { requestTimeoutMs: 30_000 });
  try {
    const crd = await client.getOrUndefined<KubeObject>(paths.crd(CRD_NAME));
    const other = crd?.metadata.annotations?.[INSTALLED_BY];
    if (other && other !== inputs.owner) {
      throw new Error(
        `[Operator] the CocoonSet CRD ${CRD_NAME} is already installed by the Operator ${other}; a cluster takes one Operator: pass that one to your Fleets, or omit \`operator\` when the controller is managed elsewhere`,
      );
    }
    return other;
  } finally {
    client.close();
  }
}

/** Guard `create`: checks, then records this Operator as the owner. */
export async function guardCreate(
  inputs: OperatorGuardInputs,
): Promise<{ id: string; outs: OperatorGuardInputs }> {
  await assertSingleOperator(inputs);
  return { id: inputs.owner, outs: inputs };
}

/** Guard `update`: the same check (the stamp or the cluster may have changed). */
export async function guardUpdate(
  _id: string,
  _olds: OperatorGuardInputs,
  news: OperatorGuardInputs,
): Promise<{ outs: OperatorGuardInputs }> {
  await assertSingleOperator(news);
  return { outs: news };
}
