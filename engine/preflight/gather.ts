/**
 * `cocoonset doctor`'s reading of a cluster and a registry: every fact `findings.ts` judges,
 * each read on its own, so one refusal (a right the caller lacks, a registry that does not
 * answer) is a fact about that part and never hides the others. Read-only, except the
 * registry's push probe, which starts an upload and cancels it.
 */
import { CRD_NAME, cocoonHibernationCrd, cocoonSetCrd } from "../spec/index.js";
import { HIBERNATION_CRD_NAME } from "../spec/index.js";
import { isSubset } from "../execute/install-crd.js";
import { errorMessage } from "../kube/branded-error.js";
import { KubeApiError, paths, type KubeClient, type KubeObject } from "../kube/index.js";
import { RegistryError, type OciRegistry } from "../registry/oci.js";
import type { Keychain } from "../registry/keychain.js";
import { NODE_LABELS } from "../spec/index.js";
import { OPERATOR_LABELS } from "../spec/index.js";
import {
  nodeKind,
  requiredAccess,
  type AccessCheck,
  type AccessFact,
  type ControllerFact,
  type CrdFact,
  type DoctorFacts,
  type NodeFact,
  type RegistryCall,
  type RegistryFact,
} from "./findings.js";

/** The snapshot registry to check, opened by the caller (flags, CA, keychain). */
export interface RegistryTarget {
  address: string;
  from: string;
  client: OciRegistry;
  keychain: Keychain;
}

/** Options of {@link gatherDoctorFacts}. */
export interface GatherOptions {
  /** The namespace a Fleet would be deployed to. */
  namespace: string;
  /** The namespace an Operator would install its controller in. */
  operatorNamespace: string;
  /** The node pools the fleet selects. */
  pools: string[];
  /** The registry given by the caller; else the controller's `--oci-registry`, opened by `open`. */
  registry?: RegistryTarget;
  /** Opens the registry a controller Deployment names (with the caller's keychain). */
  open?: (address: string) => Omit<RegistryTarget, "from">;
}

/** A short reason for a failed call: the HTTP status and the apiserver's message. */
function why(e: unknown): string {
  if (KubeApiError.isInstance(e)) return e.status === 0 ? e.message : `HTTP ${e.status}`;
  return errorMessage(e);
}

async function readCrd(client: KubeClient, name: string, spec: unknown): Promise<CrdFact> {
  try {
    const live = await client.getOrUndefined<KubeObject & { spec?: unknown }>(paths.crd(name));
    if (!live) return { name, state: "missing" };
    return { name, state: isSubset(spec, live.spec) ? "matches" : "differs" };
  } catch (e) {
    return { name, state: "unreadable", error: why(e) };
  }
}

interface Deployment extends KubeObject {
  spec?: {
    replicas?: number;
    template?: {
      spec?: {
        containers?: {
          image?: string;
          args?: string[];
          env?: { name: string; value?: string }[];
        }[];
      };
    };
  };
  status?: { readyReplicas?: number; updatedReplicas?: number };
}

/** The `--oci-registry` (or `OCI_REGISTRY`) a controller Deployment runs with. */
function controllerRegistry(d: Deployment): string | undefined {
  for (const c of d.spec?.template?.spec?.containers ?? []) {
    const args = c.args ?? [];
    for (let i = 0; i < args.length; i++) {
      const m = /^--oci-registry(?:=(.*))?$/.exec(args[i]);
      if (m) return m[1] ?? args[i + 1];
    }
    const env = c.env?.find((e) => e.name === "OCI_REGISTRY")?.value;
    if (env) return env;
  }
  return undefined;
}

async function readControllers(
  client: KubeClient,
): Promise<{ facts: DoctorFacts["controllers"]; registry?: string }> {
  const labelSelector = Object.entries(OPERATOR_LABELS)
    .map(([k, v]) => `${k}=${v}`)
    .join(",");
  try {
    const list = await client.list<Deployment>("/apis/apps/v1/deployments", { labelSelector });
    const deployments: ControllerFact[] = list.items.map((d) => ({
      namespace: d.metadata.namespace ?? "",
      name: d.metadata.name ?? "",
      image: d.spec?.template?.spec?.containers?.[0]?.image ?? "",
      replicas: d.spec?.replicas ?? 1,
      readyReplicas: d.status?.readyReplicas ?? 0,
      updatedReplicas: d.status?.updatedReplicas ?? 0,
    }));
    const registry = list.items.map(controllerRegistry).find((r) => r !== undefined);
    return { facts: { deployments }, registry };
  } catch (e) {
    return { facts: { error: why(e) } };
  }
}

interface SelfSubjectAccessReview {
  status?: { allowed?: boolean; reason?: string };
}

/** Asks the apiserver each right (a SelfSubjectAccessReview each, all at once). */
export async function readAccess(
  client: KubeClient,
  checks: readonly AccessCheck[],
): Promise<AccessFact[]> {
  return Promise.all(
    checks.map(async (check): Promise<AccessFact> => {
      const review = await client.create<SelfSubjectAccessReview>(
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        {
          apiVersion: "authorization.k8s.io/v1",
          kind: "SelfSubjectAccessReview",
          spec: {
            resourceAttributes: {
              verb: check.verb,
              group: check.group,
              resource: check.resource,
              ...(check.subresource ? { subresource: check.subresource } : {}),
              ...(check.namespace ? { namespace: check.namespace } : {}),
            },
          },
        },
      );
      return {
        check,
        allowed: review.status?.allowed === true,
        ...(review.status?.reason ? { reason: review.status.reason } : {}),
      };
    }),
  );
}

interface Node extends KubeObject {
  spec?: { taints?: { key: string }[]; unschedulable?: boolean };
  status?: {
    allocatable?: Record<string, string>;
    conditions?: { type: string; status: string }[];
  };
}

/** Each pool's nodes (one LIST by the pool label each), or why they could not be listed. */
export async function readPools(
  client: KubeClient,
  pools: readonly string[],
): Promise<DoctorFacts["pools"]> {
  return Promise.all(
    pools.map(async (pool) => {
      try {
        const list = await client.list<Node>(paths.nodes(), {
          labelSelector: `${NODE_LABELS.pool}=${pool}`,
        });
        const nodes: NodeFact[] = list.items.map((n) => ({
          name: n.metadata.name ?? "",
          kind: nodeKind(n),
          ready:
            n.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false,
          unschedulable: n.spec?.unschedulable === true,
          allocatable: n.status?.allocatable ?? {},
        }));
        return { pool, nodes };
      } catch (e) {
        return { pool, nodes: { error: why(e) } };
      }
    }),
  );
}

/** The outcome of one registry call. */
async function attempt(fn: () => Promise<unknown>): Promise<RegistryCall> {
  try {
    await fn();
    return { ok: true };
  } catch (e) {
    if (RegistryError.isInstance(e)) return { ok: false, status: e.status, error: e.message };
    return { ok: false, status: 0, error: errorMessage(e) };
  }
}

/** The repository the probes use under the registry's prefix; nothing is ever written there. */
const PROBE_REPOSITORY = "cocoonset-doctor-probe";

async function readRegistry(target: RegistryTarget): Promise<RegistryFact> {
  const { client, keychain } = target;
  const ping = await attempt(async () => {
    const status = await client.ping();
    if (status !== 200 && status !== 401)
      throw new RegistryError(`GET /v2/ answered HTTP ${status}`, status);
  });
  let credentials: RegistryFact["credentials"];
  try {
    credentials = (await keychain.resolve(client.host)) !== undefined;
  } catch (e) {
    credentials = { error: errorMessage(e) };
  }
  const fact: RegistryFact = {
    address: target.address,
    host: client.host,
    from: target.from,
    ping,
    credentials,
  };
  if (!ping.ok) return fact;
  fact.pull = await attempt(() => client.listTags(PROBE_REPOSITORY));
  if (fact.pull.ok) fact.push = await attempt(() => client.probePush(PROBE_REPOSITORY));
  return fact;
}

/** Reads everything `cocoonset doctor` reports on. */
export async function gatherDoctorFacts(
  client: KubeClient,
  opts: GatherOptions,
): Promise<DoctorFacts> {
  const base = { server: client.server, source: client.source, namespace: opts.namespace };
  let version: string;
  try {
    version = (await client.get<{ gitVersion?: string }>("/version")).gitVersion ?? "unknown";
  } catch (e) {
    const registry = opts.registry ? await readRegistry(opts.registry) : undefined;
    return {
      ...base,
      apiServer: { error: why(e) },
      crds: [],
      controllers: { deployments: [] },
      access: [],
      pools: [],
      ...(registry ? { registry } : {}),
    };
  }
  const [crds, controllers, access, pools] = await Promise.all([
    Promise.all([
      readCrd(client, CRD_NAME, cocoonSetCrd.spec),
      readCrd(client, HIBERNATION_CRD_NAME, cocoonHibernationCrd.spec),
    ]),
    readControllers(client),
    readAccess(client, requiredAccess(opts.namespace, opts.operatorNamespace)),
    readPools(client, opts.pools),
  ]);
  let target = opts.registry;
  if (!target && controllers.registry && opts.open)
    target = {
      ...opts.open(controllers.registry),
      from: "the controller's --oci-registry",
    };
  const registry = target ? await readRegistry(target) : undefined;
  return {
    ...base,
    apiServer: { version },
    crds,
    controllers: controllers.facts,
    access,
    pools,
    ...(registry ? { registry } : {}),
  };
}
