/** Test support: runs the built `cocoonset` CLI as a user would, without inherited config. */
import { spawn } from "node:child_process";
import { CLI_MAIN } from "./controller-process.js";

/** What one CLI run produced. */
export interface CliResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `cocoonset <args>` to its end. `KUBECONFIG` and `COCOONSET_*` variables of the test
 * process are dropped; `env` adds variables.
 */
export function cocoonset(
  args: string[],
  env: Record<string, string> = {},
  timeoutMs = 120_000,
): Promise<CliResult> {
  const base = { ...process.env };
  for (const k of Object.keys(base))
    if (k.startsWith("COCOONSET_") || k === "KUBECONFIG") delete base[k];
  const child = spawn(process.execPath, [CLI_MAIN, ...args], {
    env: { ...base, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
  child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
  const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
  return new Promise((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
  });
}
