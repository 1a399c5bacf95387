/**
 * Worker ownership (`ownerPod`): what a worker pod's children carry, and the
 * release a worker runs when it boots.
 * Behaviour: docs/behaviour.md §4.6.
 */
import type { KubeClient, OwnerReference } from "../kube/index.js";
import { ReleaseError } from "./errors.js";
import { release, type ReleaseOptions, type ReleaseResult } from "./release.js";

/**
 * The ownerReference a worker puts on every object it creates. `controller: false` leaves
 * the object free for a real controller; `blockOwnerDeletion: false` because setting it
 * needs update rights on pods/finalizers, which a worker should not hold.
 */
export function ownerReferenceForPod(pod: { name: string; uid: string }): OwnerReference {
  return {
    apiVersion: "v1",
    kind: "Pod",
    name: pod.name,
    uid: pod.uid,
    controller: false,
    blockOwnerDeletion: false,
  };
}

/** Who a worker is, from the downward API. */
export interface WorkerIdentity {
  namespace: string;
  podName: string;
  podUid: string;
}

/**
 * Reads the worker's identity from `POD_NAMESPACE`, `POD_NAME` and `POD_UID` (set through
 * the downward API: `metadata.namespace`, `metadata.name`, `metadata.uid`).
 * @throws ReleaseError naming the first missing variable
 */
export function workerIdentityFromEnv(
  env: Record<string, string | undefined> = process.env,
): WorkerIdentity {
  const read = (name: string) => {
    const v = env[name]?.trim();
    if (!v)
      throw new ReleaseError(
        `[${name}] must not be empty: expose it to the worker through the downward API`,
      );
    return v;
  };
  return { namespace: read("POD_NAMESPACE"), podName: read("POD_NAME"), podUid: read("POD_UID") };
}

/**
 * Releases everything the worker's own pod owns; call it when the worker boots, before it
 * creates anything.
 *
 * Why: a container restarted in the same pod keeps the pod, and so its uid, so the garbage
 * collector sees a live owner and keeps the children of the previous process running. No
 * child of the new process exists yet, so every object owned by the pod is an orphan.
 *
 * Guarantees: refuses (deleting nothing) when the pod is missing from the namespace or has
 * another uid, since an ownerReference only holds inside its owner's namespace.
 */
export async function releaseAtBoot(
  client: KubeClient,
  identity: WorkerIdentity = workerIdentityFromEnv(),
  opts: Omit<ReleaseOptions, "expectAlivePod"> = {},
): Promise<ReleaseResult> {
  return release(
    client,
    { kind: "Pod", name: identity.podName, uid: identity.podUid },
    identity.namespace,
    { ...opts, expectAlivePod: true },
  );
}
