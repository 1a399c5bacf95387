/**
 * Marking a member in use: its activity Lease (engine/idle/activity.ts) applied with this
 * renewal time, one server-side apply per member (created the first time), labelled with the
 * fleet's name so the controller's Lease watch selects it: what a wake from the CLI is to do, and
 * what an agent, a sidecar or a gateway does with its own client (docs/lifecycle-design.md).
 */
import { paths, type KubeClient } from "../kube/index.js";
import { microTime } from "../kube/objects.js";
import { activityLeaseName } from "../idle/index.js";
import { LABELS } from "../spec/index.js";

/** Renews the activity Lease of each pod's member at `now`, as `holder`. */
export async function markActivity(
  client: KubeClient,
  namespace: string,
  cocoonSet: string,
  pods: readonly string[],
  holder: string,
  now: Date,
): Promise<void> {
  await Promise.all(
    pods.map((pod) => {
      const name = activityLeaseName(pod);
      const body = {
        apiVersion: "coordination.k8s.io/v1",
        kind: "Lease",
        metadata: { name, namespace, labels: { [LABELS.name]: cocoonSet } },
        spec: { holderIdentity: holder, renewTime: microTime(now.getTime()) },
      };
      return client.patch(
        `${paths.lease(namespace, name)}?fieldManager=${encodeURIComponent(holder)}&force=true`,
        body,
        "application/apply-patch+yaml",
      );
    }),
  );
}
