/** `cocoonset-dev toolchain ensure|check|env|status`. */
import type { Command } from "commander";
import { CHECK_BINARIES, checkToolchain } from "../toolchain-check.js";
import { ensureToolchainReport, toolchainStatus } from "../toolchain.js";
import { locate, toolchainPath } from "../toolchain-pins.js";
import { action, printJson } from "../../cli/common.js";

/** Registers the toolchain commands. */
export function registerToolchain(program: Command): void {
  const tc = program
    .command("toolchain")
    .description(
      "find or build the pinned etcd, Kubernetes, kwok, registry and Pulumi binaries, Pulumi's language hosts included (cluster/toolchain.json)",
    );
  tc.command("ensure")
    .description(
      "find each pinned binary (COCOONSET_BIN_DIR, KUBEBUILDER_ASSETS, the cache, PATH), else take it from its project's release archive when toolchain.json pins its sha256 (COCOONSET_RELEASE_BASE_URL: a mirror, or none), else build it once from Go modules into the cache, one folder per group of cluster/toolchain.json (COCOONSET_TOOLCHAIN_DIR overrides where); after placing anything, runs `toolchain check` once on a throwaway cluster (a toolchain found whole is not checked again)",
    )
    .option(
      "--only <names...>",
      "only these binaries, or the binaries of these groups (e.g. kubernetes, pulumi-yaml) (default: all)",
    )
    .option(
      "--for <command>",
      "only the groups this command needs (the needs of cluster/toolchain.json): cluster (what `cluster up` runs), demo (that and pulumi, its Kubernetes provider and Node.js host), test (every group and the Python virtualenv)",
    )
    .option("--json", "print where each binary is as JSON")
    .action(
      action(async (opts: { only?: string[]; for?: string; json?: boolean }) => {
        const { located, placed } = await ensureToolchainReport({
          only: opts.only,
          for: opts.for,
        });
        if (placed.length > 0) {
          const say = (l: string) => process.stderr.write(l + "\n");
          const absent = CHECK_BINARIES.filter((b) => !locate(b).path);
          if (absent.length > 0)
            say(
              `toolchain: built ${placed.join(", ")}; not checked: the check needs ${absent.join(", ")} too`,
            );
          else {
            say(
              `toolchain: built ${placed.join(", ")}; checking the toolchain once (cocoonset-dev toolchain check)`,
            );
            await checkToolchain({ force: true, progress: say });
          }
        }
        if (opts.json) printJson(located);
        else
          for (const l of located)
            process.stdout.write(`${l.name.padEnd(30)} ${l.path} (${l.source})\n`);
      }),
    );
  tc.command("check")
    .description(
      "check that the toolchain's pulumi, pulumi-kubernetes provider and Node.js and YAML language hosts work together: a TypeScript program (a ConfigMap and a Deployment with 2 Ready pods, a no-change preview, one update, destroy) and a Pulumi YAML program (a ConfigMap, destroy) run against a cluster and their objects are read back; a pass is recorded in the toolchain's cache folder, so a later check of the same pins says it was done already",
    )
    .option(
      "--kubeconfig <path>",
      "the cluster to run against (default: a throwaway embedded cluster, stopped afterwards)",
    )
    .option("--force", "run even when this toolchain was checked already")
    .action(
      action(async (opts: { kubeconfig?: string; force?: boolean }) => {
        await checkToolchain({ kubeconfig: opts.kubeconfig, force: opts.force });
      }),
    );
  tc.command("env")
    .description(
      'print shell exports that put the toolchain (pulumi, its plugins, kubectl) and Node >= 22 first on PATH: eval "$(cocoonset-dev toolchain env)"',
    )
    .action(
      action(async () => {
        const path = toolchainPath().replaceAll("'", "'\\''");
        process.stdout.write(
          `export PATH='${path}'\nexport PULUMI_SKIP_UPDATE_CHECK=true\nexport PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true\n`,
        );
      }),
    );
  tc.command("status")
    .description("say where each binary is, or that it is missing, without building anything")
    .option("--json", "print as JSON")
    .action(
      action(async (opts: { json?: boolean }) => {
        const st = toolchainStatus();
        if (st.binaries.some((b) => !b.path)) process.exitCode = 1;
        if (opts.json) return printJson(st);
        process.stdout.write(`cache: ${st.cacheDir}\n`);
        for (const l of st.binaries) {
          process.stdout.write(
            `${l.name.padEnd(30)} ${l.path ? `${l.path} (${l.source})` : "missing"}\n`,
          );
        }
        process.stdout.write("groups:\n");
        for (const g of st.groups)
          process.stdout.write(
            `  ${g.name.padEnd(28)} ${g.dir} (${g.built.length ? `holds ${g.built.join(", ")}` : "empty"}${g.source ? `; ${g.source.includes("release archive") ? g.source.replaceAll("\n", "; ") : `built from the ${g.source}`}` : ""})\n`,
          );
      }),
    );
}
