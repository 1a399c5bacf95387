/**
 * The preflight of a deploy, run by the Fleet's and the Operator's guard `check` (so by
 * `pulumi preview`, and by `up` before its first write, `--skip-preview` included): the
 * caller's rights for what the deploy writes (SelfSubjectAccessReviews) and, for a Fleet,
 * whether its pool has a node that can run the agents — the findings of `cocoonset doctor`
 * that block this deploy, in its words (engine/preflight/). A cluster that cannot be asked
 * refuses nothing here: the deploy reports it.
 */
import { errorMessage } from "../../engine/kube/branded-error.js";
import { KubeClient } from "../../engine/kube/index.js";
import {
  deployPreflight,
  readAccess,
  readPools,
  requiredAccess,
  type DeployPreflight,
} from "../../engine/preflight/index.js";
import type { AccessCheck } from "../../engine/preflight/findings.js";
import type { CocoonSetSpec } from "../../engine/spec/index.js";
import { DEFAULT_NODE_POOL } from "../../engine/spec/schema-source.js";
import type { ObjectRef } from "./ownership.js";

const NOTHING: DeployPreflight = { refusals: [], warnings: [] };

async function withClient(
  kubeconfig: string,
  what: string,
  fn: (client: KubeClient) => Promise<DeployPreflight>,
): Promise<DeployPreflight> {
  let client: KubeClient;
  try {
    client = KubeClient.fromString(kubeconfig, { requestTimeoutMs: 15_000 });
  } catch {
    return NOTHING;
  }
  try {
    return await fn(client);
  } catch (e) {
    process.stderr.write(
      `cocoonset: could not check ${what} (${errorMessage(e)}); the deploy goes on without\n`,
    );
    return NOTHING;
  } finally {
    client.close();
  }
}

/**
 * A Fleet's deploy in `namespace`: the Fleet's rights there and the nodes of its pool. With
 * `capacityCheck: off` a pool without nodes is a warning (the nodes may come later).
 */
export function fleetPreflight(
  kubeconfig: string,
  namespace: string,
  spec: CocoonSetSpec | undefined,
  capacityCheck: string | undefined,
): Promise<DeployPreflight> {
  return withClient(kubeconfig, `the rights and nodes for ${namespace}`, async (client) => {
    const checks = requiredAccess(namespace, "").filter((c) => c.scope !== "operator");
    const pools = spec ? [spec.nodePool || DEFAULT_NODE_POOL] : [];
    const [access, found] = await Promise.all([
      readAccess(client, checks),
      readPools(client, pools),
    ]);
    return deployPreflight(access, found, { poolsBlock: capacityCheck !== "off" });
  });
}

/**
 * The rights an Operator's objects need: create, patch (server-side apply) and get of each
 * kind where it puts one, delete for its destroy.
 */
function objectAccess(objects: readonly ObjectRef[]): AccessCheck[] {
  const seen = new Set<string>();
  const out: AccessCheck[] = [];
  for (const o of objects) {
    const group = o.apiVersion.includes("/") ? o.apiVersion.split("/")[0] : "";
    const resource = `${o.kind.toLowerCase()}s`;
    for (const verb of ["get", "create", "patch", "delete"]) {
      const key = `${group} ${resource} ${o.namespace ?? ""} ${verb}`;
      if (seen.has(key)) continue;
      seen.add(key);
      out.push({
        verb,
        group,
        resource,
        ...(o.namespace ? { namespace: o.namespace } : {}),
        for: `the Operator's ${o.kind} ${o.namespace ? `${o.namespace}/` : ""}${o.name}`,
        scope: "operator",
        ...(verb === "delete" ? { destroyOnly: true } : {}),
      });
    }
  }
  return out;
}

/** An Operator's deploy: the rights for each of its objects. */
export function operatorPreflight(
  kubeconfig: string,
  objects: readonly ObjectRef[],
): Promise<DeployPreflight> {
  return withClient(kubeconfig, "the rights for the Operator's objects", async (client) =>
    deployPreflight(await readAccess(client, objectAccess(objects)), [], { poolsBlock: true }),
  );
}
