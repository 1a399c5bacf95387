/**
 * What the engine-backed resources return as outputs. Pulumi hands a resource's outputs back
 * to the program in the RegisterResource reply, which `pulumi up --debug` and `-v=9` logs
 * print in full (Pulumi masks only the values it knows as secrets: the stack's secret
 * config). So no output carries a kubeconfig the program read from a file: a resource whose
 * `delete` needs none keeps it as an input only, and one whose `delete` needs the cluster
 * keeps the file's path and context and reads the file again (docs/pulumi.md, "Credentials").
 */
import { KubeConfigError, readKubeconfigFile, withContext } from "../../engine/kube/index.js";

/** The inputs without the kubeconfig, as a resource's outputs. */
export function withoutKubeconfig<T extends { kubeconfig?: unknown }>(
  inputs: T,
): Omit<T, "kubeconfig"> {
  const outs: Partial<T> = { ...inputs };
  delete outs.kubeconfig;
  return outs as Omit<T, "kubeconfig">;
}

/** Where a resource's kubeconfig came from, as its inputs say. */
export interface KubeconfigSource {
  /** The kubeconfig's text (a secret input). */
  kubeconfig?: string;
  /** The file the text was read from, when it was read from one. */
  kubeconfigFile?: string;
  /** The context chosen in that file (the provider's `context`), if any. */
  kubeconfigContext?: string;
}

/**
 * The outputs of a resource whose `delete` or `read` needs the cluster: a kubeconfig read from
 * a file is kept as that file's path (and context); only a kubeconfig given as text, which no
 * file holds, stays among the outputs (a secret, as the Kubernetes provider keeps its own).
 */
export function storedKubeconfig<T extends KubeconfigSource>(inputs: T): T {
  return inputs.kubeconfigFile ? (withoutKubeconfig(inputs) as T) : inputs;
}

/** The kubeconfig text of a resource's stored outputs (see {@link storedKubeconfig}). */
export function kubeconfigOfState(props: KubeconfigSource): string {
  if (typeof props.kubeconfig === "string") return props.kubeconfig;
  if (!props.kubeconfigFile) {
    throw new KubeConfigError(
      "[kubeconfig] the stored outputs name no kubeconfig and no kubeconfig file",
    );
  }
  return withContext(
    readKubeconfigFile(props.kubeconfigFile, "was read by the last `pulumi up`, and"),
    props.kubeconfigContext,
  );
}

/** Whether two states reach the cluster through different kubeconfigs (a change to store). */
export function kubeconfigChanged(olds: KubeconfigSource, news: KubeconfigSource): boolean {
  if (news.kubeconfigFile || olds.kubeconfigFile) {
    return (
      olds.kubeconfigFile !== news.kubeconfigFile ||
      (olds.kubeconfigContext ?? "") !== (news.kubeconfigContext ?? "")
    );
  }
  return olds.kubeconfig !== news.kubeconfig;
}
