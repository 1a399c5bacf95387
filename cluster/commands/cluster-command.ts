/** `cocoonset-dev cluster up|down|status|env`: the embedded local cluster. */
import type { Command } from "commander";
import {
  assertOwnStateDir,
  assertSupportedPlatform,
  clusterDown,
  clusterStatus,
  clusterUp,
  defaultStateDir,
  parseNodeAllocatable,
  readState,
  resolveStateDir,
} from "../local-cluster.js";
import { ensureToolchain } from "../toolchain.js";
import { action, CliError, parsePositiveInt, printJson } from "../../cli/common.js";

const stateDirHelp =
  "state directory (default: $COCOONSET_CLUSTER_DIR or ~/.local/state/pulumi-cocoonset/cluster)";

/** Registers the cluster commands. */
export function registerCluster(program: Command): void {
  const cl = program
    .command("cluster")
    .description(
      "the embedded local cluster: etcd, kube-apiserver, controllers and kwok nodes on loopback",
    );
  cl.command("up")
    .description(
      "start the cluster and its OCI registry (building missing binaries first) and wait until its nodes are Ready; reports the running one if already up, and starts again, on the same ports and with etcd's data, the components of one that stopped",
    )
    .option("--state-dir <dir>", stateDirHelp)
    .option("--nodes <n>", "number of simulated nodes", parsePositiveInt, 2)
    .option(
      "--apiserver-arg <flag>",
      "extra kube-apiserver flag, e.g. --apiserver-arg=--feature-gates=Foo=true (repeatable)",
      (v: string, prev: string[] = []) => [...prev, v],
    )
    .option(
      "--node-allocatable <spec>",
      "allocatable (and capacity) of the simulated nodes, [NODE:]RESOURCE=QUANTITY[,...], e.g. cpu=4,memory=8Gi,pods=20 for every node or kwok-node-1:cpu=2 for one (repeatable; merged over cpu=1000,memory=1Ti,pods=10000,ephemeral-storage=10Ti; applied to a running cluster too). A pod bound to a node over it fails as a kubelet refuses it (OutOfcpu, OutOfmemory, OutOfpods, ...)",
      (v: string, prev: string[] = []) => [...prev, v],
    )
    .option(
      "--reset",
      "stop the cluster in the state directory and delete its data (every namespace and object), then start a new one; without it the data is kept unless etcd cannot use it",
    )
    .option("--json", "print the cluster's kubeconfig path and server as JSON")
    .action(
      action(
        async (opts: {
          stateDir?: string;
          nodes: number;
          json?: boolean;
          apiserverArg?: string[];
          reset?: boolean;
          nodeAllocatable?: string[];
        }) => {
          const nodeAllocatable = parseNodeAllocatable(opts.nodeAllocatable ?? []);
          // Refuse a wrong OS or a folder that is not the cluster's before building anything.
          assertSupportedPlatform();
          assertOwnStateDir(resolveStateDir(opts.stateDir ?? defaultStateDir()));
          await ensureToolchain({ for: "cluster" });
          const st = await clusterUp({
            stateDir: opts.stateDir,
            nodes: opts.nodes,
            apiserverArgs: opts.apiserverArg,
            reset: opts.reset,
            nodeAllocatable,
          });
          if (opts.json)
            return printJson({
              kubeconfig: st.kubeconfig,
              server: st.server,
              registry: st.registry,
              reused: st.reused,
              restarted: st.restarted,
              nodes: st.nodes,
            });
          const what =
            st.restarted.length > 0
              ? `cluster restarted (${st.restarted.join(", ")}; its data kept)`
              : st.reused
                ? "cluster already running"
                : "cluster up";
          process.stdout.write(
            `${what}: ${st.server}\nkubeconfig: ${st.kubeconfig}\n${st.registry ? `registry: ${st.registry}\n` : ""}run: export KUBECONFIG=${st.kubeconfig}\n`,
          );
        },
      ),
    );
  cl.command("down")
    .description("stop every process the cluster started and remove its state directory")
    .option("--state-dir <dir>", stateDirHelp)
    .option("--json", "print what was stopped as JSON")
    .action(
      action(async (opts: { stateDir?: string; json?: boolean }) => {
        const r = await clusterDown(opts.stateDir ?? defaultStateDir());
        if (opts.json) return printJson(r);
        process.stdout.write(
          r.stopped.length ? `stopped ${r.stopped.join(", ")}\n` : "no cluster was running\n",
        );
      }),
    );
  cl.command("status")
    .description(
      "say which components run, whether the apiserver answers and where the registry is (exit 1 when not running)",
    )
    .option("--state-dir <dir>", stateDirHelp)
    .option("--json", "print as JSON")
    .action(
      action(async (opts: { stateDir?: string; json?: boolean }) => {
        const st = await clusterStatus(resolveStateDir(opts.stateDir ?? defaultStateDir()));
        if (!st.running || !st.healthy) process.exitCode = 1;
        if (opts.json) return printJson(st);
        if (st.components.length === 0)
          return void process.stdout.write(`no cluster in ${st.stateDir}\n`);
        process.stdout.write(
          `server: ${st.server} (${st.healthy ? "ready" : "not answering"})\nkubeconfig: ${st.kubeconfig}\n${st.registry ? `registry: ${st.registry}\n` : ""}`,
        );
        for (const c of st.components)
          process.stdout.write(
            `  ${c.name.padEnd(24)} pid ${c.pid} ${c.alive ? "running" : "stopped"}  log ${c.log}\n`,
          );
      }),
    );
  cl.command("env")
    .description(
      "print `export KUBECONFIG=<path>` and `export COCOONSET_REGISTRY=127.0.0.1:<port>` for the running cluster (eval it in a shell)",
    )
    .option("--state-dir <dir>", stateDirHelp)
    .action(
      action(async (opts: { stateDir?: string }) => {
        const dir = resolveStateDir(opts.stateDir ?? defaultStateDir());
        const st = readState(dir);
        if (!st) throw new CliError(`no cluster in ${dir}: run \`cocoonset-dev cluster up\``);
        process.stdout.write(`export KUBECONFIG=${st.kubeconfig}\n`);
        if (st.registry) process.stdout.write(`export COCOONSET_REGISTRY=${st.registry}\n`);
      }),
    );
}
