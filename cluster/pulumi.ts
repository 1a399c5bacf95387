/**
 * Running the toolchain's `pulumi` CLI against a local file backend: the environment every
 * caller (demo, e2e tests, benchmarks) needs, and an Automation API command for it.
 */
import type { PulumiCommand } from "@pulumi/pulumi/automation/index.js";
import { existsSync, mkdirSync, symlinkSync } from "node:fs";
import { delimiter, dirname, join } from "node:path";
import {
  loadPins,
  locate,
  requireBinary,
  toolchainPath,
  type BinaryName,
} from "./toolchain-pins.js";

/**
 * The toolchain's plugins Pulumi would otherwise download (`pulumi install` and `pulumi new`
 * install the plugins a program's language host lists, with no regard for PATH): linked
 * into `home`/plugins as `pulumi plugin install` lays them out, so they count as installed
 * and `pulumi plugin ls` lists them. Links, not copies: the provider is over 100 MB.
 */
function linkPlugins(home: string): void {
  const pins = loadPins();
  const ver = (group: string) => {
    const g = pins.groups[group];
    return (g.stamp ?? g.version).replace(/^v/, "");
  };
  const plugins: [string, string, BinaryName][] = [
    ["resource-kubernetes", ver("pulumi-kubernetes"), "pulumi-resource-kubernetes"],
    ["language-nodejs", ver("pulumi-language-nodejs"), "pulumi-language-nodejs"],
    ["language-python", ver("pulumi-language-python"), "pulumi-language-python"],
    ["language-go", ver("pulumi-language-go"), "pulumi-language-go"],
  ];
  for (const [plugin, version, binary] of plugins) {
    const found = locate(binary, pins).path;
    if (!found) continue;
    const dir = join(home, "plugins", `${plugin}-v${version}`);
    mkdirSync(dir, { recursive: true });
    if (!existsSync(join(dir, binary))) symlinkSync(found, join(dir, binary));
  }
}

/**
 * Environment of a pulumi run: the toolchain first on PATH (`pulumi`, its plugins and
 * Pulumi's language hosts, then the Node that runs this process, which the Node.js host and
 * its dynamic-provider script start as `node`), a local file backend, an empty passphrase,
 * no update checks and no plugin downloads ({@link linkPlugins}). A link to the toolchain's
 * `pulumi` sits in `home`/bin, for {@link toolchainPulumiCommand}.
 */
export function pulumiEnv(
  home: string,
  backend: string,
  kubeconfig: string,
): Record<string, string> {
  const homeBin = join(home, "bin");
  mkdirSync(homeBin, { recursive: true });
  const cli = join(homeBin, "pulumi");
  if (!existsSync(cli)) symlinkSync(requireBinary("pulumi"), cli);
  linkPlugins(home);
  return {
    PATH: [homeBin, toolchainPath()].join(delimiter),
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
 * to {@link pulumiEnv}, that root is `home`, whose `bin` holds the link to `pulumi`; without
 * it, the toolchain's own folder.
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
