/**
 * The node-agent simulator as a process of its own, started and stopped by `cocoonset-dev
 * cluster up` and `down` like the cluster's other components: `node node-agent-main.js
 * --kubeconfig FILE --registry HOST:PORT`, and for a registry that asks for credentials over
 * TLS the same settings the controller takes: `--registry-ca-file FILE` (PEM, trusted
 * besides the system's roots) and `--docker-config DIR` (the folder of the Docker
 * config.json its credentials come from; default `$DOCKER_CONFIG`, else `~/.docker`). With
 * `--opt-in VALUE` it acts in the namespaces labelled
 * `sim.cocoonset.cocoonstack.io/node-agent=VALUE` and leaves the kubelet's admission to the
 * cluster's own simulator. It logs one line per transition to stdout (the component's log)
 * and `synced` once its caches are filled; SIGTERM stops it.
 */
import { readFileSync } from "node:fs";
import { KubeClient } from "../engine/kube/index.js";
import { dockerKeychain } from "../engine/registry/keychain.js";
import { NODE_AGENT_SYNCED } from "./local-cluster.js";
import { NODE_AGENT_ENABLED, startNodeAgent } from "./node-agent.js";

function flag(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : undefined;
}

async function main(): Promise<void> {
  const kubeconfig = flag("--kubeconfig");
  const registry = flag("--registry");
  if (!kubeconfig || !registry) {
    process.stderr.write("node-agent: [--kubeconfig] and [--registry] are required\n");
    process.exit(2);
  }
  const caFile = flag("--registry-ca-file");
  const dockerConfig = flag("--docker-config");
  const optIn = flag("--opt-in") ?? NODE_AGENT_ENABLED;
  const say = (line: string) =>
    process.stdout.write(`${new Date().toISOString()} node-agent: ${line}\n`);
  const agent = startNodeAgent({
    client: new KubeClient({ kubeconfig }),
    registry,
    registryOptions: {
      ca: caFile ? readFileSync(caFile, "utf8") : undefined,
      keychain: dockerKeychain({
        env: dockerConfig ? { ...process.env, DOCKER_CONFIG: dockerConfig } : process.env,
      }),
    },
    optIn,
    admission: optIn === NODE_AGENT_ENABLED,
    log: say,
  });
  const stop = () => {
    void agent.stop().then(() => process.exit(0));
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  await agent.synced();
  process.stdout.write(`${NODE_AGENT_SYNCED}\n`);
}

await main();
