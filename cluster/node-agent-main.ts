/**
 * The node-agent simulator as a process of its own, started and stopped by `cocoonset
 * cluster up` and `down` like the cluster's other components: `node node-agent-main.js
 * --kubeconfig FILE --registry HOST:PORT`. It logs one line per transition to stdout (the
 * component's log) and `synced` once its caches are filled; SIGTERM stops it.
 */
import { KubeClient } from "../engine/kube/index.js";
import { NODE_AGENT_SYNCED } from "./local-cluster.js";
import { startNodeAgent } from "./node-agent.js";

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
  const say = (line: string) =>
    process.stdout.write(`${new Date().toISOString()} node-agent: ${line}\n`);
  const agent = startNodeAgent({ client: new KubeClient({ kubeconfig }), registry, log: say });
  const stop = () => {
    void agent.stop().then(() => process.exit(0));
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  await agent.synced();
  process.stdout.write(`${NODE_AGENT_SYNCED}\n`);
}

await main();
