/**
 * The kubeconfig components hand to their dynamic resources. It is the one their Kubernetes
 * resources use, so the two can never reach different clusters: the `kubeconfig` (and
 * `context`) of the Kubernetes provider the component is given, else the stack's
 * `kubernetes:kubeconfig` (and `kubernetes:context`) config as the default provider reads it,
 * else `$KUBECONFIG`, else `~/.kube/config`. When it is read from a file, the resources whose
 * destroy needs the cluster keep the file's path rather than its text among their outputs
 * (provider/dynamic/outputs.ts).
 */
import * as pulumi from "@pulumi/pulumi";
import {
  defaultKubeconfigFile,
  readKubeconfigFile,
  withContext,
} from "../engine/kube/kubeconfig-file.js";

export { withContext };

/** Reads `$KUBECONFIG` (its files merged), else `~/.kube/config`; the error names the file. */
function defaultKubeconfig(): string {
  return readKubeconfigFile(defaultKubeconfigFile(), "not given and");
}

/** Whether a kubeconfig value is the text of one rather than a path to it. */
function isKubeconfigText(value: string): boolean {
  const v = value.trim();
  return v.includes("\n") || v.startsWith("{") || v.startsWith("apiVersion");
}

/** The file a kubeconfig value names (or a `:`-separated list of them, as in `$KUBECONFIG`). */
function fileOf(value: string): string {
  return value.trim();
}

/**
 * The text of a kubeconfig given as pulumi-kubernetes takes it: the contents of the file, or
 * the path to it (a `:`-separated list as in `$KUBECONFIG`: the files merged as kubectl
 * merges them).
 */
function kubeconfigText(value: string): string {
  return isKubeconfigText(value) ? value : readKubeconfigFile(fileOf(value), "names a file, and");
}

/** A kubeconfig as resolved: its text, and the file and context it came from when a file. */
export interface ResolvedKubeconfig {
  text: string;
  file?: string;
  context?: string;
}

/** Resolves a kubeconfig value (text, a path, or nothing for the default file) and context. */
export function resolveKubeconfig(
  value: string | undefined,
  context: string | undefined,
): ResolvedKubeconfig {
  if (value && isKubeconfigText(value)) return { text: withContext(value, context) };
  const file = value ? fileOf(value) : defaultKubeconfigFile();
  const text = value ? kubeconfigText(value) : defaultKubeconfig();
  return { text: withContext(text, context), file, ...(context ? { context } : {}) };
}

/** What a Kubernetes provider object exposes of its configuration (its outputs). */
interface KubernetesProviderOutputs {
  kubeconfig?: pulumi.Output<string | undefined>;
  context?: pulumi.Output<string | undefined>;
}

/** The inputs a component gives its dynamic resources to reach the cluster. */
export interface KubeconfigInputs {
  /** The kubeconfig's text, a secret. */
  kubeconfig: pulumi.Output<string>;
  /** The file it was read from, if it was. */
  kubeconfigFile: pulumi.Output<string | undefined>;
  /** The context chosen in that file, if any. */
  kubeconfigContext: pulumi.Output<string | undefined>;
}

/**
 * The kubeconfig the Kubernetes children of `component` reach (see the module comment), or
 * the text `given` to the component. Unknown during a preview where the provider's
 * kubeconfig is not known yet.
 */
export function kubeconfigInputs(
  component: pulumi.Resource,
  given?: pulumi.Input<string>,
): KubeconfigInputs {
  let resolved: pulumi.Output<ResolvedKubeconfig>;
  if (given !== undefined) {
    resolved = pulumi.output(given).apply((text) => ({ text }));
  } else {
    const provider: (pulumi.ProviderResource & KubernetesProviderOutputs) | undefined =
      component.getProvider("kubernetes::CustomResource");
    const config = new pulumi.Config("kubernetes");
    const source = provider
      ? pulumi.all([provider.kubeconfig, provider.context])
      : pulumi.all([config.getSecret("kubeconfig"), config.get("context")]);
    resolved = source.apply(([kc, context]) => resolveKubeconfig(kc || undefined, context));
  }
  return {
    kubeconfig: pulumi.secret(resolved.apply((r) => r.text)),
    // A path and a context name are no credentials: kept in the clear.
    kubeconfigFile: pulumi.unsecret(resolved.apply((r) => r.file)),
    kubeconfigContext: pulumi.unsecret(resolved.apply((r) => r.context)),
  };
}
