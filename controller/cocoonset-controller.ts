/**
 * The CocoonSet controller, declared once: it reconciles CocoonSets, owns their pods, waits
 * for the CRD before it starts, and reaps expired objects as a periodic task. The generic
 * manager (`runtime.ts`) runs it beside the CocoonHibernation controller
 * (`hibernation-controller.ts`); the reconcile itself is the engine's pass
 * (`cocoonset-reconciler.ts`).
 * Behaviour: docs/behaviour.md §6.
 */
import {
  COCOONSET_API,
  isForbidden,
  isNotFound,
  paths,
  type KubeClient,
  type KubeObject,
} from "../engine/kube/index.js";
import { reapNamespace } from "../engine/release/index.js";
import { OciRegistry } from "../engine/registry/oci.js";
import { GuardedRegistry } from "../engine/registry/guard.js";
import { readCaBundle } from "../engine/registry/ca.js";
import { dockerKeychain } from "../engine/registry/keychain.js";
import { isReady } from "../engine/pods/index.js";
import { LABELS } from "../engine/spec/index.js";
import { CocoonSetReconciler, type CocoonSetReconcilerOptions } from "./cocoonset-reconciler.js";
import type { Kind } from "./cache.js";
import { CocoonSetMetrics, registerRegistryMetrics } from "./cocoonset-metrics.js";
import { FleetCache, FLEET_POD_INDEXES } from "./fleet-cache.js";
import { activityLeaseKind, activityLeases, idleHibernations } from "./idle-activity.js";
import { keepNameOnly, trimPodForCache } from "./informer.js";
import { hibernationController, hibernationKind } from "./hibernation-controller.js";
import { nodeKind } from "./node-kind.js";
import { HibernationReconciler } from "./hibernation-reconciler.js";
import type { CheckResult } from "./health.js";
import { logWithFields } from "./logger.js";
import type { Logger } from "./types.js";
import type { ControllerOptions } from "./options.js";
import { COCOONSET_CRD_NAME } from "./rbac.js";
import { Manager, type Controller, type ControllerRuntime, type Watch } from "./runtime.js";
import type {
  ControllerMetrics,
  HibernationMetrics,
  ObjectKey,
  ReconcileContext,
  Reconciler,
} from "./types.js";
import { errorMessage } from "../engine/kube/branded-error.js";

/**
 * Long-lived watches per watched namespace (or per cluster): CocoonSets, pods,
 * CocoonHibernations, activity Leases; the shard labeller's of the CocoonSets, pods and
 * CocoonHibernations without a bucket; and, sharded or namespaced, every CocoonSet's name
 * (one watch in all: counted per scope, it leaves more room).
 */
export const WATCHES_PER_SCOPE = 8;
/** Sockets left for requests beside the watches (the KubeClient's default pool size). */
export const REQUEST_SOCKETS = 32;

/**
 * The controller client's socket pool: each informer's watch holds a socket for as long as
 * it runs, so the pool is the watches plus room for the reconciles' requests. (A fixed pool
 * smaller than the watches starves every request once enough namespaces are watched.)
 */
export function controllerSockets(namespaces: number): number {
  return Math.max(1, namespaces) * WATCHES_PER_SCOPE + REQUEST_SOCKETS;
}

/** Label selector of the pods the controller watches. */
export const MANAGED_POD_SELECTOR = `${LABELS.managedBy}=cocoonset`;

/** The CocoonSet key a pod belongs to: its controller ownerReference, else its name label. */
export function ownerKeyOfPod(pod: KubeObject): ObjectKey | undefined {
  const ns = pod.metadata.namespace;
  if (!ns) return undefined;
  const ref = pod.metadata.ownerReferences?.find(
    (r) => r.controller === true && r.kind === "CocoonSet",
  );
  if (ref) return { namespace: ns, name: ref.name };
  const byLabel = pod.metadata.labels?.[LABELS.name];
  return byLabel ? { namespace: ns, name: byLabel } : undefined;
}

interface PodLike {
  status?: { phase?: string };
}

const podReady = (p: KubeObject): boolean => isReady(p);

function sameMap(a?: Record<string, string>, b?: Record<string, string>): boolean {
  const ka = Object.keys(a ?? {});
  if (ka.length !== Object.keys(b ?? {}).length) return false;
  return ka.every((k) => a?.[k] === b?.[k]);
}

/** True when a pod update matters to its CocoonSet: phase, Ready, deletion, labels or annotations. */
export function podChangeMatters(oldPod: KubeObject, newPod: KubeObject): boolean {
  return (
    (oldPod as PodLike).status?.phase !== (newPod as PodLike).status?.phase ||
    podReady(oldPod) !== podReady(newPod) ||
    oldPod.metadata.deletionTimestamp !== newPod.metadata.deletionTimestamp ||
    !sameMap(oldPod.metadata.labels, newPod.metadata.labels) ||
    !sameMap(oldPod.metadata.annotations, newPod.metadata.annotations)
  );
}

/**
 * True when a CocoonSet update needs a reconcile: a spec change (generation) or a deletion.
 * Status and annotation writes (the engine's own) do not trigger one.
 */
export function cocoonSetChangeMatters(oldCs: KubeObject, newCs: KubeObject): boolean {
  return (
    oldCs.metadata.generation !== newCs.metadata.generation ||
    oldCs.metadata.deletionTimestamp !== newCs.metadata.deletionTimestamp
  );
}

/**
 * Whether the CocoonSet API is installed and served, and if not, why. Reads the CRD object
 * (its Established condition) when allowed, else API discovery.
 */
export async function checkCrd(client: KubeClient, log?: Logger): Promise<CheckResult> {
  try {
    const crd = await client.getOrUndefined<KubeObject>(paths.crd(COCOONSET_CRD_NAME));
    if (!crd) return { ok: false, reason: `CRD ${COCOONSET_CRD_NAME} is not installed` };
    const conds =
      (crd.status as { conditions?: { type: string; status: string }[] } | undefined)?.conditions ??
      [];
    if (!conds.some((c) => c.type === "Established" && c.status === "True"))
      return { ok: false, reason: `CRD ${COCOONSET_CRD_NAME} is not Established yet` };
    return { ok: true, reason: `CRD ${COCOONSET_CRD_NAME} is established` };
  } catch (e) {
    if (!isForbidden(e)) throw e;
    log?.debug({ err: errorMessage(e) }, "cannot read the CRD object; asking API discovery");
  }
  // No access to the CRD object (namespaced Role): API discovery is open to every user.
  try {
    const group = await client.get<{ resources?: { name: string }[] }>(`/apis/${COCOONSET_API}`);
    return group.resources?.some((r) => r.name === "cocoonsets")
      ? { ok: true, reason: `${COCOONSET_API} cocoonsets is served` }
      : { ok: false, reason: `${COCOONSET_API} does not serve cocoonsets` };
  } catch (e) {
    if (isNotFound(e)) return { ok: false, reason: `${COCOONSET_API} is not served (CRD missing)` };
    throw e;
  }
}

/** What the CocoonSet controller runs: the reconcile logic and, optionally, one reaper pass. */
export interface ControllerDeps {
  reconciler: Reconciler<ControllerMetrics>;
  /** One orphan reaper pass over a namespace. Receives a context for logs and metrics. */
  reap?: (namespace: string, ctx: ReconcileContext<ControllerMetrics>) => Promise<unknown>;
  /** The CocoonHibernation reconciler; with it the manager also runs that controller. */
  hibernation?: Reconciler<HibernationMetrics>;
  /** The reconciler's informer-backed reads: the session's CocoonSet and pod caches feed it. */
  cache?: FleetCache;
  /** The guarded snapshot registry: its series and its `/readyz/registry` check. */
  registry?: GuardedRegistry;
}

/**
 * The snapshot registry client of resolved options (`--oci-registry`, its CA bundle and
 * insecure flag), credentials from the Docker keychain; undefined without a registry.
 * @throws CaBundleError when the CA bundle file cannot be read or holds no certificate
 */
export function registryClientOf(
  options: Partial<
    Pick<
      ControllerOptions,
      | "ociRegistry"
      | "ociRegistryCaFile"
      | "ociRegistryInsecure"
      | "ociRegistryDockerConfig"
      | "ociRegistryTimeoutMs"
    >
  >,
): OciRegistry | undefined {
  if (!options.ociRegistry) return undefined;
  return new OciRegistry(options.ociRegistry, {
    insecure: options.ociRegistryInsecure,
    ca: options.ociRegistryCaFile
      ? readCaBundle(options.ociRegistryCaFile, "--oci-registry-ca-file")
      : undefined,
    // The Docker keychain, reading the named folder's config.json (else $DOCKER_CONFIG's).
    keychain: dockerKeychain(
      options.ociRegistryDockerConfig
        ? { env: { ...process.env, DOCKER_CONFIG: options.ociRegistryDockerConfig } }
        : {},
    ),
    timeoutMs: options.ociRegistryTimeoutMs,
  });
}

/** How long a reconcile waits for one registry call before it requeues instead. */
export const REGISTRY_WAIT_MS = 2_000;

/** Registry requests in flight at once, whatever the number of workers. */
export const REGISTRY_CONCURRENCY = 4;

/**
 * The controller's registry: the client of {@link registryClientOf} behind a circuit breaker,
 * a bound on requests in flight and a wait budget (engine/registry/guard.ts), so a registry
 * that hangs holds no reconcile worker for its timeout.
 */
export function guardedRegistryOf(
  options: Parameters<typeof registryClientOf>[0],
): GuardedRegistry | undefined {
  const client = registryClientOf(options);
  if (!client) return undefined;
  return new GuardedRegistry(client, {
    // The host only: a registry address never carries credentials into a message.
    name: client.host,
    concurrency: REGISTRY_CONCURRENCY,
    waitMs: Math.min(REGISTRY_WAIT_MS, options.ociRegistryTimeoutMs ?? REGISTRY_WAIT_MS),
  });
}

/** The reconciler's options from the controller's resolved options. */
export function reconcilerOptionsOf(
  options: Pick<
    ControllerOptions,
    "fanoutConcurrency" | "ociRegistry" | "hibernateTimeoutMs" | "wakeTimeoutMs"
  > &
    Partial<
      Pick<
        ControllerOptions,
        | "ociRegistryCaFile"
        | "ociRegistryInsecure"
        | "ociRegistryDockerConfig"
        | "ociRegistryTimeoutMs"
      >
    >,
): CocoonSetReconcilerOptions {
  return {
    fanOut: options.fanoutConcurrency,
    registry: guardedRegistryOf(options),
    hibernateTimeoutMs: options.hibernateTimeoutMs,
    wakeTimeoutMs: options.wakeTimeoutMs,
  };
}

/** The engine's reconciler and the orphan reaper, on one client. */
export function cocoonSetControllerDeps(
  client: KubeClient,
  opts: CocoonSetReconcilerOptions = {},
): ControllerDeps {
  const cache = opts.cache ?? new FleetCache(client, { now: opts.now });
  return {
    cache,
    registry: opts.registry instanceof GuardedRegistry ? opts.registry : undefined,
    reconciler: new CocoonSetReconciler(client, { ...opts, cache }),
    hibernation: new HibernationReconciler(client, {
      registry: opts.registry,
      hibernateTimeoutMs: opts.hibernateTimeoutMs,
      wakeTimeoutMs: opts.wakeTimeoutMs,
      now: opts.now,
      reads: cache.reads,
    }),
    reap: (namespace, ctx) =>
      reapNamespace(client, namespace, {
        log: (level, msg, fields) => logWithFields(ctx.log, level, msg, fields),
        metrics: { reapDeleted: (kind, reason) => ctx.metrics.reapDeleted(kind, reason) },
      }),
  };
}

/**
 * The CocoonSets the cache watches: a shard's, selected by the bucket label (the Fleet sets
 * it; the shard labeller labels those written without it); its bucket is its own name's.
 */
export const cocoonSetKind: Kind = {
  name: "cocoonsets",
  path: (ns) => paths.cocoonSets(ns),
  sharded: true,
  bucketFromName: true,
};

/**
 * Every CocoonSet of the cluster by name, metadata only, for a process whose cache of
 * {@link cocoonSetKind} holds part of them (a shard's buckets, a controller's namespaces):
 * whose VM names may collide with a fleet's (fleet-cache.ts). An account that may not list
 * CocoonSets in every namespace (a controller bound by Roles) is refused it, and those reads
 * go to the apiserver instead, as they did before the cache.
 */
export const cocoonSetNamesKind: Kind = {
  name: "cocoonset-names",
  path: (ns) => paths.cocoonSets(ns),
  partialOnly: true,
  optional: true,
  metadataOnly: true,
  // A name never changes: the status writes of every fleet are not decoded here.
  skipUpdates: true,
  transform: keepNameOnly,
};

/** The managed pods the cache watches, indexed by their CocoonSet (`FLEET_POD_INDEXES`). */
export const podKind: Kind = {
  name: "pods",
  path: (ns) => (ns === undefined ? "/api/v1/pods" : paths.pods(ns)),
  labelSelector: MANAGED_POD_SELECTOR,
  sharded: true,
  // Held trimmed to what the engine reads: the fleets' pods are most of the controller's memory.
  transform: trimPodForCache,
  indexes: FLEET_POD_INDEXES,
};

/** A managed pod's change enqueues its owner CocoonSet's key. */
export const ownedPods: Watch = {
  kind: podKind,
  map: (pod) => {
    const key = ownerKeyOfPod(pod);
    return key ? [key] : [];
  },
  updateMatters: podChangeMatters,
};

/**
 * `/readyz/registry`: 503 while the snapshot registry is unanswered (its breaker open or
 * half-open). Informational: `/readyz` itself names it but stays 200, since the controller
 * still serves every fleet that does not need the registry (docs/controller.md).
 */
export function registryCheck(guard: GuardedRegistry): () => CheckResult {
  return () => {
    const s = guard.status();
    return { ok: !s.unanswered, reason: s.reason };
  };
}

/** The CocoonSet controller, for the manager. */
export function cocoonSetController(
  deps: ControllerDeps,
  opts: Pick<ControllerOptions, "reapIntervalMs">,
): Controller<ControllerMetrics> {
  const cache = deps.cache;
  return {
    name: "cocoonset",
    for: cocoonSetKind,
    updateMatters: cocoonSetChangeMatters,
    // The activity Leases and the idle policy's CocoonHibernations enqueue their fleet.
    watches: [ownedPods, activityLeases, idleHibernations],
    // A pass reads the CocoonHibernations, the nodes and (sharded or namespaced) every fleet's
    // name too.
    reads: [hibernationKind, nodeKind, cocoonSetNamesKind],
    reconciler: deps.reconciler,
    metrics: (registry) => {
      if (deps.registry) registerRegistryMetrics(registry, deps.registry);
      return new CocoonSetMetrics(registry);
    },
    checks: deps.registry ? { registry: registryCheck(deps.registry) } : undefined,
    attach: cache
      ? (shared) =>
          cache.attach(shared.kind(cocoonSetKind.name), shared.kind(podKind.name), {
            hibernations: shared.kind(hibernationKind.name),
            nodes: shared.kind(nodeKind.name),
            names: shared.kind(cocoonSetNamesKind.name),
            leases: shared.kind(activityLeaseKind.name),
          })
      : undefined,
    ready: (client, log) => checkCrd(client, log),
    readyPending: `checking CRD ${COCOONSET_CRD_NAME}`,
    notReadyMessage: "CocoonSet CRD not available; not ready",
    tasks: deps.reap ? [{ name: "reap", intervalMs: opts.reapIntervalMs, run: deps.reap }] : [],
  };
}

/**
 * The manager of this project's controllers: the CocoonSet controller and, with
 * `deps.hibernation`, the CocoonHibernation controller.
 */
export function controllerManager(
  opts: ControllerOptions,
  deps: ControllerDeps,
  runtime: ControllerRuntime = {},
): Manager {
  const manager = new Manager(opts, runtime).add(cocoonSetController(deps, opts));
  if (deps.hibernation)
    manager.add(
      hibernationController(deps.hibernation, {
        kind: podKind,
        updateMatters: podChangeMatters,
      }),
    );
  return manager;
}

/**
 * Runs the controllers until SIGTERM/SIGINT (or `runtime.signal`), then shuts down cleanly.
 * Rejects only for start-up failures (a server that cannot bind).
 */
export function runController(
  opts: ControllerOptions,
  deps: ControllerDeps,
  runtime: ControllerRuntime = {},
): Promise<void> {
  return controllerManager(opts, deps, runtime).start();
}
