/**
 * The pod finaliser as a process of its own, started and stopped by `cocoonset-dev cluster up`
 * and `down` like the cluster's other components: `node pod-finaliser-main.js --kubeconfig
 * FILE`. It logs one line per final delete to stdout (the component's log) and `synced`
 * once its caches are filled; SIGTERM stops it.
 */
import { KubeClient } from "../engine/kube/index.js";
import { POD_FINALISER_SYNCED } from "./local-cluster.js";
import { startPodFinaliser } from "./pod-finaliser.js";

async function main(): Promise<void> {
  const i = process.argv.indexOf("--kubeconfig");
  const kubeconfig = i > 0 ? process.argv[i + 1] : undefined;
  if (!kubeconfig) {
    process.stderr.write("pod-finaliser: [--kubeconfig] is required\n");
    process.exit(2);
  }
  const say = (line: string) =>
    process.stdout.write(`${new Date().toISOString()} pod-finaliser: ${line}\n`);
  const finaliser = startPodFinaliser({ client: new KubeClient({ kubeconfig }), log: say });
  const stop = () => {
    void finaliser.stop().then(() => process.exit(0));
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  await finaliser.synced();
  process.stdout.write(`${POD_FINALISER_SYNCED}\n`);
}

await main();
