/** The kubeconfig text components hand to their dynamic resources. */
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

/** Reads `$KUBECONFIG` (its first file), else `~/.kube/config`; the error names the file. */
export function defaultKubeconfig(): string {
  const file =
    process.env.KUBECONFIG?.split(":").find(Boolean) ?? join(homedir(), ".kube", "config");
  try {
    return readFileSync(file, "utf8");
  } catch (e) {
    throw new Error(`[kubeconfig] not given and ${file} cannot be read: ${(e as Error).message}`, {
      cause: e,
    });
  }
}
