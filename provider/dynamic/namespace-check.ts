/**
 * The cluster read `pulumi preview` makes so that a missing namespace is refused before
 * anything is created: the slots resource's and the Operator guard's `check` call it.
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
