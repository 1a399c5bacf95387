/**
 * The controller's logs as a user reads them: started with `:0` ports it logs the
 * addresses it bound (and they answer), and no line carries a key twice, including the
 * lines the reaper and the engine write through a reconcile's child logger.
 */
import assert from "node:assert/strict";
import { get } from "node:http";
import { test } from "node:test";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { paths } from "../../engine/kube/index.js";
import {
  EXPIRES_AT_ANNOTATION,
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
} from "../../engine/release/index.js";
import { adminClient, testKubeconfig } from "../support/cluster.js";
import { Cleanup, controllerNamespace, startController } from "../support/controller-process.js";
import { duplicateKeys } from "../support/log-keys.js";

function httpGet(address: string, path: string): Promise<{ status: number; body: string }> {
  const u = new URL(`http://${address}${path}`);
  return new Promise((resolve, reject) => {
    get(u, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    }).on("error", reject);
  });
}

test("with :0 ports the controller logs the bound addresses, and no line repeats a key", async (t) => {
  const cleanup = new Cleanup(t);
  const client = adminClient();
  await ensureCrd(client);
  const ns = await controllerNamespace(cleanup, "ctl-logs");
  // An expired ephemeral pod: the reaper's first pass deletes it and logs through its
  // child logger (bound to the namespace) with the namespace among its fields.
  await client.create(paths.pods(ns), {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: "expired",
      labels: { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE },
      annotations: { [EXPIRES_AT_ANNOTATION]: String(Math.floor(Date.now() / 1000) - 60) },
    },
    spec: { containers: [{ name: "c", image: "agents/worker:1" }] },
  });
  const ctl = await startController(cleanup, {
    kubeconfig: testKubeconfig(),
    namespaces: [ns],
    extraArgs: ["--metrics-bind-address=127.0.0.1:0", "--health-probe-bind-address=127.0.0.1:0"],
  });
  const serving = await ctl.waitForLog(
    "bound addresses",
    (l) => l.msg === "serving metrics and probes",
  );
  const probe = String(serving.healthProbeAddress);
  const metrics = String(serving.metricsAddress);
  assert.match(probe, /^127\.0\.0\.1:[1-9]\d*$/, "the real port, not 0");
  assert.match(metrics, /^127\.0\.0\.1:[1-9]\d*$/);
  assert.deepEqual(await httpGet(probe, "/healthz"), { status: 200, body: "ok\n" });
  const m = await httpGet(metrics, "/metrics");
  assert.equal(m.status, 200);
  assert.match(m.body, /cocoonset_/);

  await ctl.waitForLog("the reaper's line", (l) => l.msg === "reaped pod" && l.namespace === ns);
  const repeated = ctl.rawLines
    .map((raw) => ({ raw, dup: duplicateKeys(raw) }))
    .filter((x) => x.dup.length > 0);
  assert.deepEqual(repeated, [], "no log line carries a key twice");
});
