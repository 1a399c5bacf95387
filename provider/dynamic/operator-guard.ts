/**
 * The install guard of the Operator component: one Operator per cluster. Before the CRD is
 * applied, it reads the CocoonSet CRD; when another Operator's stamp is on it, `pulumi up`
 * fails with a message saying which one, instead of two stacks silently fighting over the
 * CRD and the controller.
 */
import { CRD_NAME } from "../fleet/index.js";
import { KubeClient, paths, type KubeObject } from "../kube/index.js";
import { missingNamespaceReason } from "./namespace-check.js";

/** Annotation on the CRD naming the Operator that installed it. */
export const INSTALLED_BY = "cocoonset.cocoonstack.io/installed-by";

/** Inputs of the guard resource. */
export interface OperatorGuardInputs {
  /** Kubeconfig YAML (a secret input). */
  kubeconfig: string;
  /** `<project>/<stack>/<component name>` of this Operator. */
  owner: string;
  /**
   * Namespaces the Operator puts objects in without creating them (its own namespace with
   * `createNamespace: false`, the watched namespaces), by the argument that names each.
   */
  requiredNamespaces?: { field: string; namespace: string }[];
}

/** The placeholder Pulumi sends for values not known during preview. */
const UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9";

/**
 * Guard `check`, run by `pulumi preview`: every namespace the Operator needs but does not
 * create must exist, else preview fails naming the argument, before anything is created.
 */
export async function guardCheck(
  _olds: unknown,
  news: Record<string, unknown>,
): Promise<{ inputs: Record<string, unknown>; failures: { property: string; reason: string }[] }> {
  const failures: { property: string; reason: string }[] = [];
  const required = news.requiredNamespaces;
  if (
    typeof news.kubeconfig === "string" &&
    news.kubeconfig !== UNKNOWN &&
    Array.isArray(required)
  ) {
    for (const item of required as unknown[]) {
      const { field, namespace } = (item ?? {}) as { field?: unknown; namespace?: unknown };
      if (typeof field !== "string" || typeof namespace !== "string" || namespace === UNKNOWN) {
        continue;
      }
      const missing = await missingNamespaceReason(
        news.kubeconfig,
        namespace,
        field,
        field === "namespace"
          ? "create it first, or leave `createNamespace` on"
          : "create it first (the Operator puts a Role in each watched namespace)",
      );
      if (missing) failures.push({ property: "", reason: missing });
    }
  }
  return { inputs: news, failures };
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
