/**
 * Kubeconfig files as kubectl and pulumi-kubernetes find them: `$KUBECONFIG` (a list of
 * files, merged as client-go merges them), else `~/.kube/config`, with a context chosen by
 * name.
 */
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { delimiter, join } from "node:path";
import { errorMessage } from "./branded-error.js";
import { KubeConfigError } from "./client.js";
import { loadYaml, mergeKubeconfigFiles } from "./kubeconfig.js";

/**
 * The file a kubeconfig is read from when none is given: `$KUBECONFIG` (the whole list, see
 * {@link readKubeconfigFile}), else `~/.kube/config`.
 */
export function defaultKubeconfigFile(): string {
  return process.env.KUBECONFIG?.split(delimiter).some(Boolean)
    ? process.env.KUBECONFIG
    : join(homedir(), ".kube", "config");
}

/**
 * Reads a kubeconfig file, or a list of them as `$KUBECONFIG` holds (merged as client-go
 * merges them: {@link mergeKubeconfigFiles}); the error names the file and `why` it was read.
 */
export function readKubeconfigFile(file: string, why: string): string {
  try {
    const files = file.split(delimiter).filter(Boolean);
    if (files.length > 1) return mergeKubeconfigFiles(files).text;
    return readFileSync(file, "utf8");
  } catch (e) {
    throw new KubeConfigError(`[kubeconfig] ${why} ${file} cannot be read: ${errorMessage(e)}`, {
      cause: e,
    });
  }
}

/** The kubeconfig with its current context set to `context` (kubectl's `--context`). */
export function withContext(text: string, context: string | undefined): string {
  if (!context) return text;
  const doc = loadYaml().parse(text) as {
    contexts?: { name?: string }[];
    "current-context"?: string;
  };
  if (!doc.contexts?.some((c) => c.name === context)) {
    throw new KubeConfigError(`[context] the kubeconfig has no context named "${context}"`);
  }
  return loadYaml().stringify({ ...doc, "current-context": context });
}
