/**
 * The cluster reads `pulumi preview` makes so that a missing namespace, or a kind of object
 * the cluster does not serve (a CRD of another project), is refused before anything is
 * created: the slots resource's and the Operator guard's `check` call them.
 */
import { KubeClient, paths } from "../../engine/kube/index.js";

/**
 * Asks the cluster `kubeconfig` reaches for a check failure reason. A cluster that cannot be
 * asked (a kubeconfig that does not load, unreachable, no permission) is no reason to fail the
 * check: the deploy that follows reports that itself.
 */
async function askCluster(
  kubeconfig: string,
  ask: (client: KubeClient) => Promise<string | undefined>,
): Promise<string | undefined> {
  let client: KubeClient;
  try {
    client = KubeClient.fromString(kubeconfig, { requestTimeoutMs: 15_000 });
  } catch {
    return undefined;
  }
  try {
    return await ask(client);
  } catch {
    return undefined;
  } finally {
    client.close();
  }
}

/** A check failure reason when the namespace does not exist, else undefined. */
export function missingNamespaceReason(
  kubeconfig: string,
  namespace: string,
  field: string,
  hint: string,
): Promise<string | undefined> {
  return askCluster(kubeconfig, async (client) => {
    const found = await client.getOrUndefined(paths.namespace(namespace));
    return found
      ? undefined
      : `[${field}] namespace "${namespace}" does not exist in the cluster; ${hint}`;
  });
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
 * list the kind, else undefined.
 */
export function missingKindReason(
  kubeconfig: string,
  required: RequiredKind,
): Promise<string | undefined> {
  return askCluster(kubeconfig, async (client) => {
    const list = await client.getOrUndefined<{ resources?: { kind?: string; name?: string }[] }>(
      `/apis/${required.apiVersion}`,
    );
    const served = (list?.resources ?? []).some(
      (r) => r.kind === required.kind && !r.name?.includes("/"),
    );
    return served
      ? undefined
      : `[${required.field}] the cluster does not serve ${required.apiVersion} ${required.kind}: the CRD ${required.crd} is not installed; ${required.hint}`;
  });
}
