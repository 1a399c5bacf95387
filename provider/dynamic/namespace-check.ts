/**
 * The cluster reads `pulumi preview` makes so that a missing namespace, or a kind of object
 * the cluster does not serve (a CRD of another project), is refused before anything is
 * created: the slots resource's and the Operator guard's `check` call them.
 */
import { KubeClient, paths } from "../../engine/kube/index.js";

/**
 * A check failure reason when the namespace does not exist, else undefined. A cluster that
 * cannot be asked (unreachable, no permission) is no reason to fail the check: the deploy that
 * follows reports that itself.
 */
export async function missingNamespaceReason(
  kubeconfig: string,
  namespace: string,
  field: string,
  hint: string,
): Promise<string | undefined> {
  let client: KubeClient;
  try {
    client = KubeClient.fromString(kubeconfig, { requestTimeoutMs: 15_000 });
  } catch {
    return undefined;
  }
  try {
    const found = await client.getOrUndefined(paths.namespace(namespace));
    return found
      ? undefined
      : `[${field}] namespace "${namespace}" does not exist in the cluster; ${hint}`;
  } catch {
    return undefined;
  } finally {
    client.close();
  }
}

/** A kind the Operator creates objects of that the cluster may not serve, by its argument. */
export interface RequiredKind {
  /** The argument that asks for those objects, e.g. `serviceMonitor`. */
  field: string;
  /** `group/version`, e.g. `monitoring.coreos.com/v1`. */
  apiVersion: string;
  kind: string;
  /** The CRD that serves it, e.g. `servicemonitors.monitoring.coreos.com`. */
  crd: string;
  /** What to do about it, appended to the reason. */
  hint: string;
}

/**
 * A check failure reason when the cluster's discovery (`GET /apis/<group>/<version>`) does not
 * list the kind, else undefined. As for namespaces, a cluster that cannot be asked is no
 * reason to fail the check.
 */
export async function missingKindReason(
  kubeconfig: string,
  required: RequiredKind,
): Promise<string | undefined> {
  let client: KubeClient;
  try {
    client = KubeClient.fromString(kubeconfig, { requestTimeoutMs: 15_000 });
  } catch {
    return undefined;
  }
  try {
    const list = await client.getOrUndefined<{ resources?: { kind?: string; name?: string }[] }>(
      `/apis/${required.apiVersion}`,
    );
    const served = (list?.resources ?? []).some(
      (r) => r.kind === required.kind && !r.name?.includes("/"),
    );
    return served
      ? undefined
      : `[${required.field}] the cluster does not serve ${required.apiVersion} ${required.kind}: the CRD ${required.crd} is not installed; ${required.hint}`;
  } catch {
    return undefined;
  } finally {
    client.close();
  }
}
