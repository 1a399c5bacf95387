/**
 * The kubeconfig text components hand to their dynamic resources. It is the one their
 * Kubernetes resources use, so the two can never reach different clusters: the `kubeconfig`
 * (and `context`) of the Kubernetes provider the component is given, else the stack's
 * `kubernetes:kubeconfig` (and `kubernetes:context`) config as the default provider reads it,
 * else `$KUBECONFIG`, else `~/.kube/config`.
 */
import * as pulumi from "@pulumi/pulumi";
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { parse, stringify } from "yaml";
import { errorMessage } from "../provider/kube/branded-error.js";

/** Reads `$KUBECONFIG` (its first file), else `~/.kube/config`; the error names the file. */
export function defaultKubeconfig(): string {
  const file =
    process.env.KUBECONFIG?.split(":").find(Boolean) ?? join(homedir(), ".kube", "config");
  return readKubeconfigFile(file, "not given and");
}

function readKubeconfigFile(file: string, why: string): string {
  try {
    return readFileSync(file, "utf8");
  } catch (e) {
    // Plain Error: a bad argument of the user's program, which Pulumi reports by its message
    // (with the file error as its cause); no caller tells it apart from other failures.
    throw new Error(`[kubeconfig] ${why} ${file} cannot be read: ${errorMessage(e)}`, {
      cause: e,
    });
  }
}

/**
 * The text of a kubeconfig given as pulumi-kubernetes takes it: the contents of the file, or
 * the path to it (a `:`-separated list as in `$KUBECONFIG` uses its first file).
 */
export function kubeconfigText(value: string): string {
  const v = value.trim();
  if (v.includes("\n") || v.startsWith("{") || v.startsWith("apiVersion")) return value;
  const file = v.split(":").find(Boolean) ?? v;
  return readKubeconfigFile(file, "names a file, and");
}

/** The kubeconfig with its current context set to `context` (the provider's `context` option). */
export function withContext(text: string, context: string | undefined): string {
  if (!context) return text;
  const doc = parse(text) as { contexts?: { name?: string }[]; "current-context"?: string };
  if (!doc.contexts?.some((c) => c.name === context)) {
    // Plain Error: a bad argument of the user's program, reported by Pulumi (as above).
    throw new Error(`[context] the kubeconfig has no context named "${context}"`);
  }
  return stringify({ ...doc, "current-context": context });
}

/** What a Kubernetes provider object exposes of its configuration (its outputs). */
interface KubernetesProviderOutputs {
  kubeconfig?: pulumi.Output<string | undefined>;
  context?: pulumi.Output<string | undefined>;
}

/**
 * The kubeconfig the Kubernetes children of `component` reach (see the module comment), as a
 * secret output. Unknown during a preview where the provider's kubeconfig is not known yet.
 */
export function kubeconfigOf(component: pulumi.Resource): pulumi.Output<string> {
  const provider: (pulumi.ProviderResource & KubernetesProviderOutputs) | undefined =
    component.getProvider("kubernetes::CustomResource");
  if (provider) {
    return pulumi.secret(
      pulumi
        .all([provider.kubeconfig, provider.context])
        .apply(([kc, context]) =>
          withContext(kc ? kubeconfigText(kc) : defaultKubeconfig(), context),
        ),
    );
  }
  const config = new pulumi.Config("kubernetes");
  return pulumi.secret(
    pulumi
      .all([config.getSecret("kubeconfig"), config.get("context")])
      .apply(([kc, context]) =>
        withContext(kc ? kubeconfigText(kc) : defaultKubeconfig(), context),
      ),
  );
}
