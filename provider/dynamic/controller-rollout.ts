/**
 * The Operator's rollout check: waits until the controller Deployment has rolled out, and
 * fails at once, with a message that says what to do, when its pods cannot pull the image or
 * cannot start its container (a generic await timeout after minutes says neither).
 */
import { KubeClient, paths, type KubeObject } from "../../engine/kube/index.js";
import { sleep } from "../../engine/kube/sleep.js";
import { BrandedError } from "../../engine/kube/branded-error.js";
import { withoutKubeconfig } from "./outputs.js";

/** How long `pulumi up` waits for the controller Deployment to roll out by default, in seconds. */
export const DEFAULT_ROLLOUT_TIMEOUT_SECONDS = 600;

/** Inputs of the rollout check resource. */
export interface ControllerRolloutInputs {
  /** Kubeconfig YAML (a secret input). */
  kubeconfig: string;
  namespace: string;
  /** Name of the controller Deployment. */
  deployment: string;
  /** The controller image (named in messages). */
  image: string;
  /** The Deployment's generation to wait for (a new one re-runs the check). */
  generation: number;
  /** @default 600 */
  timeoutSeconds?: number;
}

/** Container waiting reasons that mean the image cannot be pulled. */
export const PULL_FAILURES = [
  "ErrImagePull",
  "ImagePullBackOff",
  "InvalidImageName",
  "ErrImageNeverPull",
] as const;

/** Container waiting reasons that mean the container cannot start. */
export const START_FAILURES = [
  "CreateContainerConfigError",
  "CreateContainerError",
  "CrashLoopBackOff",
] as const;

interface ContainerStatus {
  name: string;
  image?: string;
  restartCount?: number;
  state?: { waiting?: { reason?: string; message?: string } };
}

interface DeploymentLike extends KubeObject {
  spec?: { replicas?: number };
  status?: {
    observedGeneration?: number;
    replicas?: number;
    updatedReplicas?: number;
    availableReplicas?: number;
    conditions?: { type: string; status: string; reason?: string; message?: string }[];
  };
}

/** The controller Deployment failed to roll out (an image it cannot pull or start), or timed out. */
export class RolloutError extends BrandedError {}

/** Where a rollout stands. */
export type RolloutVerdict =
  { state: "done" } | { state: "failed"; message: string } | { state: "waiting"; why: string };

/**
 * Judges a controller Deployment and its pods (pure). `image` is the image the Operator
 * set, named in messages.
 */
export function rolloutVerdict(
  deployment: DeploymentLike,
  pods: KubeObject[],
  image: string,
): RolloutVerdict {
  const name = `${deployment.metadata.namespace}/${deployment.metadata.name}`;
  for (const pod of pods) {
    if (pod.metadata.deletionTimestamp) continue;
    const st = pod.status as
      | { initContainerStatuses?: ContainerStatus[]; containerStatuses?: ContainerStatus[] }
      | undefined;
    for (const c of [...(st?.initContainerStatuses ?? []), ...(st?.containerStatuses ?? [])]) {
      const w = c.state?.waiting;
      if (!w?.reason) continue;
      const where = `pod ${pod.metadata.namespace}/${pod.metadata.name}, container ${c.name}`;
      const detail = w.message ? `: ${w.message}` : "";
      if ((PULL_FAILURES as readonly string[]).includes(w.reason)) {
        return {
          state: "failed",
          message:
            `[image] the cluster cannot pull the controller image "${c.image ?? image}" ` +
            `(${w.reason} in ${where}${detail}). Build and push it ` +
            `(\`cocoonset-dev image build --tag REGISTRY/pulumi-cocoonset/controller:VERSION\`, ` +
            `then \`podman push\` that tag), set the Operator's \`image\` to it, and add ` +
            `\`imagePullSecrets\` when the registry needs credentials`,
        };
      }
      if ((START_FAILURES as readonly string[]).includes(w.reason)) {
        return {
          state: "failed",
          message:
            `[image] the controller container of Deployment ${name} cannot start ` +
            `(${w.reason} in ${where}${detail}); see \`kubectl logs -n ${pod.metadata.namespace} ${pod.metadata.name}\``,
        };
      }
    }
  }
  const s = deployment.status ?? {};
  const deadline = s.conditions?.find(
    (c) =>
      c.type === "Progressing" && c.status === "False" && c.reason === "ProgressDeadlineExceeded",
  );
  if (deadline) {
    return {
      state: "failed",
      message: `the controller Deployment ${name} did not roll out: ${deadline.message ?? deadline.reason}`,
    };
  }
  const want = deployment.spec?.replicas ?? 1;
  const generation = deployment.metadata.generation ?? 0;
  if ((s.observedGeneration ?? 0) < generation)
    return { state: "waiting", why: "the Deployment controller has not seen the change yet" };
  if ((s.updatedReplicas ?? 0) < want)
    return { state: "waiting", why: `${s.updatedReplicas ?? 0}/${want} pods updated` };
  if ((s.availableReplicas ?? 0) < want)
    return { state: "waiting", why: `${s.availableReplicas ?? 0}/${want} pods available` };
  if ((s.replicas ?? 0) > want)
    return { state: "waiting", why: `${(s.replicas ?? 0) - want} old pods still terminating` };
  return { state: "done" };
}

/**
 * Waits until the controller Deployment has rolled out (checking every `intervalMs`);
 * throws the verdict's message when it failed, or a message listing what the pods wait on
 * after `timeoutSeconds`.
 */
export async function awaitControllerRollout(
  inputs: ControllerRolloutInputs,
  opts: { intervalMs?: number; signal?: AbortSignal } = {},
): Promise<void> {
  const client = KubeClient.fromString(inputs.kubeconfig, { requestTimeoutMs: 30_000 });
  const deadline = Date.now() + (inputs.timeoutSeconds ?? DEFAULT_ROLLOUT_TIMEOUT_SECONDS) * 1000;
  let last: string;
  try {
    for (;;) {
      const dep = await client.getOrUndefined<DeploymentLike>(
        paths.deployment(inputs.namespace, inputs.deployment),
      );
      if (dep) {
        const selector = (dep.spec as { selector?: { matchLabels?: Record<string, string> } })
          .selector?.matchLabels;
        const labelSelector = Object.entries(selector ?? {})
          .map(([k, v]) => `${k}=${v}`)
          .join(",");
        const pods = (await client.list(paths.pods(inputs.namespace), { labelSelector })).items;
        const v = rolloutVerdict(dep, pods, inputs.image);
        if (v.state === "done") return;
        if (v.state === "failed") throw new RolloutError(v.message);
        last = v.why;
      } else last = "the Deployment does not exist";
      if (Date.now() >= deadline || opts.signal?.aborted) {
        throw new RolloutError(
          `the controller Deployment ${inputs.namespace}/${inputs.deployment} did not roll out within ${inputs.timeoutSeconds ?? DEFAULT_ROLLOUT_TIMEOUT_SECONDS}s: ${last}`,
        );
      }
      await sleep(opts.intervalMs ?? 2000, opts.signal);
    }
  } finally {
    client.close();
  }
}

/** Rollout check `create`. */
export async function rolloutCreate(
  inputs: ControllerRolloutInputs,
): Promise<{ id: string; outs: Omit<ControllerRolloutInputs, "kubeconfig"> }> {
  await awaitControllerRollout(inputs);
  return { id: `${inputs.namespace}/${inputs.deployment}`, outs: withoutKubeconfig(inputs) };
}

/** Rollout check `update` (the Deployment changed). */
export async function rolloutUpdate(
  _id: string,
  _olds: Omit<ControllerRolloutInputs, "kubeconfig">,
  news: ControllerRolloutInputs,
): Promise<{ outs: Omit<ControllerRolloutInputs, "kubeconfig"> }> {
  await awaitControllerRollout(news);
  return { outs: withoutKubeconfig(news) };
}
