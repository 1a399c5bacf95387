/**
 * The preview's capacity check (provider/dynamic/dry-run.ts) against live nodes: a new fleet
 * that no node of its pool can hold is refused (`refuse`), said as a warning (`warn`), or not
 * forecast (`off`); a kubeconfig that may not list nodes and pods cluster-wide gets one
 * warning and no failure. The fleet runs in a node pool of its own (one simulated node).
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { before, describe, test } from "node:test";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import type { CocoonSetSpec } from "../../engine/spec/index.js";
import { dryRunRefusals } from "../../provider/dynamic/dry-run.js";
import { adminClient, suffix, testKubeconfig, withNamespace } from "../support/cluster.js";
import { poolNode } from "../support/pool-node.js";
import { serviceAccountKubeconfig } from "../support/service-account.js";

const spec = (pool: string, replicas: number): CocoonSetSpec => ({
  nodePool: pool,
  agent: {
    image: "ghcr.io/cocoonstack/agent:1",
    replicas,
    resources: { requests: { cpu: "1", memory: "1Gi" } },
  },
});

describe("pulumi preview's capacity check", { timeout: 180_000 }, () => {
  before(() => ensureCrd(adminClient()));

  test("refuses, warns of or leaves alone a new fleet no node can hold, by capacityCheck", async (t) => {
    const ns = await withNamespace(t, "preview-capacity");
    const pool = `pc-${suffix()}`;
    const node = await poolNode(t, pool, { cpu: "4", memory: "16Gi", pods: "20" });
    const inputs = {
      kubeconfig: readFileSync(testKubeconfig(), "utf8"),
      namespace: ns,
      name: "fleet",
      spec: spec(pool, 5),
    };
    const line = `[slots.0] no node can hold slot 0 and the 5 pods bound next to it (slots 1–5) (1 node matches its nodeSelector, affinity and tolerations); the best, ${node}, has cpu 4 free, 6 requested`;

    assert.deepEqual(await dryRunRefusals(inputs), { refusals: [line], warnings: [] });
    assert.deepEqual(await dryRunRefusals({ ...inputs, capacityCheck: "refuse" }), {
      refusals: [line],
      warnings: [],
    });
    assert.deepEqual(await dryRunRefusals({ ...inputs, capacityCheck: "warn" }), {
      refusals: [],
      warnings: [line],
    });
    assert.deepEqual(await dryRunRefusals({ ...inputs, capacityCheck: "off" }), {
      refusals: [],
      warnings: [],
    });
    // Three sub-agents fit: nothing to say.
    assert.deepEqual(await dryRunRefusals({ ...inputs, spec: spec(pool, 3) }), {
      refusals: [],
      warnings: [],
    });
  });

  test("a kubeconfig that cannot list nodes and pods cluster-wide gets one warning, not a failure", async (t) => {
    const ns = await withNamespace(t, "preview-capacity-sa");
    const pool = `pc-${suffix()}`;
    await poolNode(t, pool, { cpu: "4", memory: "16Gi", pods: "20" });
    // What the Fleet's own checks need in its namespace, and nothing cluster-wide.
    const kubeconfig = await serviceAccountKubeconfig(ns, "fleet-deployer", [
      { apiGroups: [""], resources: ["pods"], verbs: ["get", "list", "create"] },
      { apiGroups: [""], resources: ["resourcequotas"], verbs: ["list"] },
      {
        apiGroups: ["cocoonset.cocoonstack.io"],
        resources: ["cocoonsets"],
        verbs: ["get", "list"],
      },
      // The pods' ownerReference blocks the CocoonSet's deletion, which needs this.
      {
        apiGroups: ["cocoonset.cocoonstack.io"],
        resources: ["cocoonsets/finalizers"],
        verbs: ["update"],
      },
    ]);
    const inputs = { kubeconfig, namespace: ns, name: "fleet", spec: spec(pool, 5) };
    const found = await dryRunRefusals(inputs);
    assert.deepEqual(found.refusals, []);
    assert.equal(found.warnings.length, 1, found.warnings.join("\n"));
    assert.match(
      found.warnings[0],
      /^the capacity forecast was not made: the kubeconfig cannot list the cluster's nodes and the pods bound to them \(.*forbidden.*\)/,
    );
    assert.deepEqual(await dryRunRefusals({ ...inputs, capacityCheck: "off" }), {
      refusals: [],
      warnings: [],
    });
  });
});
