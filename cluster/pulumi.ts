/**
 * Running the toolchain's `pulumi` CLI against a local file backend: the environment every
 * caller (demo, e2e tests, benchmarks) needs, and an Automation API command for it.
 */
import { PulumiCommand } from "@pulumi/pulumi/automation/index.js";
import { dirname } from "node:path";
import { requireBinary, toolchainPath } from "./toolchain.js";

/**
 * Environment of a pulumi run: the toolchain first on PATH, a local file backend, an empty
 * passphrase, no update checks and no plugin downloads.
 */
export function pulumiEnv(
  home: string,
  backend: string,
  kubeconfig: string,
): Record<string, string> {
  return {
    PATH: toolchainPath(),
    PULUMI_HOME: home,
    PULUMI_BACKEND_URL: `file://${backend}`,
    PULUMI_CONFIG_PASSPHRASE: "",
    PULUMI_SKIP_UPDATE_CHECK: "true",
    PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION: "true",
    PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK: "true",
    KUBECONFIG: kubeconfig,
  };
}

/**
 * The Automation API's handle on the toolchain's `pulumi`. The CLI is spawned with
 * process.env merged with a stack's envVars, so the toolchain PATH is set here too.
 */
export async function toolchainPulumiCommand(): Promise<PulumiCommand> {
  process.env.PATH = toolchainPath();
  return PulumiCommand.get({
    root: dirname(dirname(requireBinary("pulumi"))),
    skipVersionCheck: true,
  });
}
