// Installs this project's CRDs (CocoonSet, CocoonHibernation) on the test cluster and waits
// until they are served. `scripts/test.mjs` runs it once per tier, before the files that run
// concurrently (they only read the CRD), after the ones that remove or replace it.
//   COCOONSET_TEST_KUBECONFIG=… node dist/scripts/ensure-crd.js
import { ensureCrd } from "../engine/execute/install-crd.js";
import { KubeClient } from "../engine/kube/index.js";

const kubeconfig = process.env.COCOONSET_TEST_KUBECONFIG;
if (!kubeconfig) {
  process.stderr.write("COCOONSET_TEST_KUBECONFIG is not set\n");
  process.exit(2);
}
const client = new KubeClient({ kubeconfig });
try {
  const { action } = await ensureCrd(client);
  process.stdout.write(`CRD ${action}\n`);
} finally {
  client.close();
}
