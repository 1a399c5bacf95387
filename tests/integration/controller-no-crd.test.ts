/**
 * `cocoonset controller` as a real process on the shared cluster without the CRD: not ready
 * (503 with the reason, the log says why) but healthy, and ready once the CRD is installed.
 * It removes the CRD, so `scripts/test.mjs` runs this file alone.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { adminClient, testKubeconfig } from "../support/cluster.js";
import { Cleanup, controllerNamespace, startController } from "../support/controller-process.js";
import { removeCrd } from "../support/crd.js";

describe("cocoonset controller without the CRD", { timeout: 240_000 }, () => {
  test("on a cluster without the CRD, /readyz stays 503 with the reason and the log says why; installing it makes the controller ready", async (t) => {
    const c = new Cleanup(t);
    await removeCrd();
    c.defer("install the CRD again", async () => {
      await ensureCrd(adminClient());
    });
    const ns = await controllerNamespace(c, "ctl-no-crd");
    const proc = await startController(c, {
      kubeconfig: testKubeconfig(),
      namespaces: [ns],
      label: "no-crd",
    });
    const warned = await proc.waitForLog(
      "CRD not available",
      (l) => l.msg === "CocoonSet CRD not available; not ready",
    );
    assert.equal(warned.reason, "CRD cocoonsets.cocoonset.cocoonstack.io is not installed");
    const ready = await proc.probe("/readyz");
    assert.equal(ready.status, 503);
    assert.equal(ready.body.trim(), "CRD cocoonsets.cocoonset.cocoonstack.io is not installed");
    assert.equal((await proc.probe("/healthz")).status, 200, "the process itself is healthy");
    assert.equal(proc.running, true, "a missing CRD does not crash the controller");

    await ensureCrd(adminClient());
    await proc.synced();
    const after = await proc.probe("/readyz");
    assert.deepEqual(after, { status: 200, body: "ok\n" });
  });
});
