/**
 * The guards of the Operator component.
 *
 * - The install guard: one Operator per cluster. Before the CRD is applied, it reads the
 *   CocoonSet CRD; when another Operator's stamp is on it, `pulumi up` fails with a message
 *   saying which one, instead of two stacks silently fighting over the CRD and the
 *   controller. A CRD with no stamp (applied by hand) holds CocoonSets no stack of this
 *   user may manage: it is adopted only when the Operator names it in `adoptCrd`.
 * - The CRD guard: deleted before the CRD and the controller. Deleting the CRD deletes every
 *   CocoonSet in the cluster, and with no controller left their finalizers would hold the
 *   destroy forever: it refuses while any CocoonSet is left, unless the CRD is kept.
 */
import { CRD_NAME } from "../../engine/spec/index.js";
import { KubeClient, paths, type KubeObject } from "../../engine/kube/index.js";
import { BrandedError } from "../../engine/kube/branded-error.js";
import { missingKindReason, missingNamespaceReason, type RequiredKind } from "./namespace-check.js";
import {
  kubeconfigChanged,
  kubeconfigOfState,
  storedKubeconfig,
  withoutKubeconfig,
} from "./outputs.js";

/** Annotation on the CRD naming the Operator that installed it. */
export const INSTALLED_BY = "cocoonset.cocoonstack.io/installed-by";

/** Inputs of the guard resource. */
export interface OperatorGuardInputs {
  /** Kubeconfig YAML (a secret input). */
  kubeconfig: string;
  /** `<project>/<stack>/<component name>` of this Operator. */
  owner: string;
  /** The CRD's name when the Operator may adopt a CRD it did not install. */
  adoptCrd?: string;
  /**
   * Namespaces the Operator puts objects in without creating them (its own namespace with
   * `createNamespace: false`, the watched namespaces), by the argument that names each.
   */
  requiredNamespaces?: { field: string; namespace: string }[];
  /**
   * Kinds of objects the Operator creates that the cluster serves only with another project's
   * CRD (the Prometheus Operator's ServiceMonitor), by the argument that asks for them.
   */
  requiredKinds?: RequiredKind[];
}

/** The placeholder Pulumi sends for values not known during preview. */
const UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9";

/**
 * Guard `check`, run by `pulumi preview` and `up`: every namespace the Operator needs but does
 * not create must exist, and every kind it creates objects of must be served (its CRD
 * installed), else preview fails naming the argument, before anything is created.
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
  const kinds = news.requiredKinds;
  if (typeof news.kubeconfig === "string" && news.kubeconfig !== UNKNOWN && Array.isArray(kinds)) {
    for (const item of kinds as RequiredKind[]) {
      const missing = await missingKindReason(news.kubeconfig, item);
      if (missing) failures.push({ property: "", reason: missing });
    }
  }
  return { inputs: news, failures };
}

/**
 * The install guard refused: the CRD belongs to another Operator or to nobody, or deleting
 * it would delete CocoonSets that are left.
 */
export class CrdGuardError extends BrandedError {}

/** Fails when the CRD carries another Operator's stamp; returns the stamp found, if any. */
export async function assertSingleOperator(
  inputs: OperatorGuardInputs,
): Promise<string | undefined> {
  const client = KubeClient.fromString(inputs.kubeconfig, { requestTimeoutMs: 30_000 });
  try {
    const crd = await client.getOrUndefined<KubeObject>(paths.crd(CRD_NAME));
    const other = crd?.metadata.annotations?.[INSTALLED_BY];
    if (other && other !== inputs.owner) {
      throw new CrdGuardError(
        `[Operator] the CocoonSet CRD ${CRD_NAME} is already installed by the Operator ${other}; a cluster takes one Operator: pass that one to your Fleets, or omit \`operator\` when the controller is managed elsewhere (if that Operator's stack is gone and kept the CRD, remove the annotation with \`kubectl annotate crd ${CRD_NAME} ${INSTALLED_BY}-\` and adopt it with \`adoptCrd\`)`,
      );
    }
    if (crd && !other && inputs.adoptCrd !== CRD_NAME) {
      throw new CrdGuardError(
        `[adoptCrd] the CocoonSet CRD ${CRD_NAME} exists and no Operator installed it (it was applied by hand or by another tool), so it may hold CocoonSets that no stack of yours manages; to have this Operator adopt it, set \`adoptCrd: "${CRD_NAME}"\` on the Operator: an adopted CRD is kept when the Operator is destroyed`,
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
): Promise<{ id: string; outs: Omit<OperatorGuardInputs, "kubeconfig"> }> {
  await assertSingleOperator(inputs);
  return { id: inputs.owner, outs: withoutKubeconfig(inputs) };
}

/** Guard `update`: the same check (the stamp or the cluster may have changed). */
export async function guardUpdate(
  _id: string,
  _olds: OperatorGuardInputs,
  news: OperatorGuardInputs,
): Promise<{ outs: Omit<OperatorGuardInputs, "kubeconfig"> }> {
  await assertSingleOperator(news);
  return { outs: withoutKubeconfig(news) };
}

/** Inputs of the CRD guard resource. */
export interface CrdGuardInputs {
  /** Kubeconfig YAML (a secret input; among the outputs only when no file holds it). */
  kubeconfig: string;
  /** The file the kubeconfig was read from, if it was (see provider/dynamic/outputs.ts). */
  kubeconfigFile?: string;
  /** The context chosen in that file, if any. */
  kubeconfigContext?: string;
  /** `<project>/<stack>/<component name>` of the Operator. */
  owner: string;
  /** Why the CRD is kept on destroy (`retainCrdOnDelete` or `adoptCrd`); empty when it is deleted. */
  retain: string;
  /** Version of the stored provider code. */
  providerVersion: string;
}

/** Names of CocoonSets (`ns/name`) that hold up a CRD deletion, the first ten. */
function named(items: KubeObject[]): string {
  const names = items.map((o) => `${o.metadata.namespace}/${o.metadata.name}`).sort();
  return names.length > 10
    ? `${names.slice(0, 10).join(", ")} and ${names.length - 10} more`
    : names.join(", ");
}

/** Outputs of the CRD guard: what its `delete` needs, the kubeconfig kept as its file if it has one. */
export type CrdGuardOutputs = Omit<CrdGuardInputs, "kubeconfig"> & { kubeconfig?: string };

/** CRD guard `create`: nothing to do until the destroy; stores what the check will need. */
export function crdGuardCreate(inputs: CrdGuardInputs): { id: string; outs: CrdGuardOutputs } {
  return { id: inputs.owner, outs: storedKubeconfig(inputs) };
}

/** CRD guard `update`: stores the new inputs. */
export function crdGuardUpdate(
  _id: string,
  _olds: CrdGuardOutputs,
  news: CrdGuardInputs,
): { outs: CrdGuardOutputs } {
  return { outs: storedKubeconfig(news) };
}

/** CRD guard `diff`: a change when any stored input, or the kubeconfig's source, differs. */
export function crdGuardDiff(
  _id: string,
  olds: CrdGuardOutputs,
  news: CrdGuardInputs,
): { changes: boolean } {
  const keys = ["owner", "retain", "providerVersion"] as const;
  return { changes: keys.some((k) => olds[k] !== news[k]) || kubeconfigChanged(olds, news) };
}

/**
 * CRD guard `delete`: runs before the CRD and the controller are deleted. When the CRD is
 * kept, says so (with what is left); otherwise fails while any CocoonSet exists, naming them.
 */
export async function crdGuardDelete(props: CrdGuardOutputs): Promise<void> {
  const client = KubeClient.fromString(kubeconfigOfState(props), { requestTimeoutMs: 30_000 });
  try {
    const crd = await client.getOrUndefined<KubeObject>(paths.crd(CRD_NAME));
    if (!crd) return;
    const left = (await client.list(paths.cocoonSets())).items;
    if (props.retain) {
      console.log(
        `cocoonset: keeping the CocoonSet CRD ${CRD_NAME} (${props.retain})` +
          (left.length > 0
            ? `; ${left.length} CocoonSet(s) are left in the cluster: ${named(left)}`
            : "; no CocoonSet is left") +
          `; delete it with \`kubectl delete crd ${CRD_NAME}\` once no CocoonSet is left`,
      );
      return;
    }
    if (left.length > 0) {
      throw new CrdGuardError(
        `[Operator] refusing to delete the CocoonSet CRD ${CRD_NAME}: ${left.length} CocoonSet(s) are left in the cluster (${named(left)}); deleting the CRD deletes them, and with no controller left to release them their finalizers would hold the destroy forever. Destroy the stacks that own them first, or set \`retainCrdOnDelete: true\` on the Operator and run \`pulumi up\` to keep the CRD when the Operator is destroyed`,
      );
    }
  } finally {
    client.close();
  }
}
