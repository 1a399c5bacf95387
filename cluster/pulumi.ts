/**
 * Running the toolchain's `pulumi` CLI against a local file backend: the environment every
 * caller (demo, e2e tests, benchmarks) needs, and an Automation API command for it.
 */
import type { PulumiCommand } from "@pulumi/pulumi/automation/index.js";
import { existsSync, symlinkSync } from "node:fs";
import { delimiter, dirname, join } from "node:path";
import { requireBinary, toolchainPath } from "./toolchain-pins.js";
import { writeLanguageHostShim } from "./toolchain-shims.js";

/**
 * Environment of a pulumi run: the toolchain first on PATH, a local file backend, an empty
 * passphrase, no update checks and no plugin downloads.
 *
 * The toolchain is shared by every checkout on the machine, and its language host shim
 * falls back to the checkout that built it. So a shim for this checkout is written into
 * `home`/bin and put ahead of it on PATH: a program with no pulumi-cocoonset of its own
 * (an e2e scratch project, a repository example) runs under this checkout's host. A link
 * to the toolchain's `pulumi` sits next to it, for {@link toolchainPulumiCommand}.
 */
export function pulumiEnv(
  home: string,
  backend: string,
  kubeconfig: string,
): Record<string, string> {
  const hostDir = join(home, "bin");
  writeLanguageHostShim(hostDir);
  const cli = join(hostDir, "pulumi");
  if (!existsSync(cli)) symlinkSync(requireBinary("pulumi"), cli);
  return {
    PATH: [hostDir, toolchainPath()].join(delimiter),
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
 *
 * The Automation API puts the `bin` folder of its root first on PATH. With the `home` given
 * to {@link pulumiEnv}, that root is `home`, whose `bin` holds the link to `pulumi` and this
 * checkout's language host shim; without it, the toolchain's own folder.
 *
 * `@pulumi/pulumi` is imported here, on first use, not at module load: every `cocoonset`
 * command (the controller too) imports this module, and the SDK costs tens of MiB of memory
 * and about a second of start-up to a process that never runs pulumi.
 */
export async function toolchainPulumiCommand(home?: string): Promise<PulumiCommand> {
  process.env.PATH = toolchainPath();
  const { PulumiCommand } = await import("@pulumi/pulumi/automation/index.js");
  return PulumiCommand.get({
    root: home ?? dirname(dirname(requireBinary("pulumi"))),
    skipVersionCheck: true,
  });
}
