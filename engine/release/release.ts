/**
 * Owner release: delete what an owner owns, in a safe order, and wait with
 * watches until all of it is gone. Selection is pure ({@link selectOwnedTree}); this file
 * only lists, deletes and waits.
 * Behaviour: docs/behaviour.md §4.
 */
import pLimit from "p-limit";
import {
  isForbidden,
  paths,
  waitForList,
  WaitTimeoutError,
  type KubeClient,
  type KubeObject,
} from "../kube/index.js";
import { type GoneSet, type ObjectsGone } from "../plan/index.js";
import { namespaceNameProblem, objectNameProblem } from "../spec/index.js";
import { ReleaseError, ReleaseTimeoutError, type RemainingObject } from "./errors.js";
import {
  describeRemaining,
  formatRemaining,
  selectOwnedTree,
  type ListedObjects,
} from "./select.js";
import { errorMessage } from "../kube/branded-error.js";

/** The owner whose tree is released: any object, given by kind, name and uid. */
export interface ReleaseOwner {
  kind: string;
  name: string;
  uid: string;
}

/** Structured log hook shared by release and the reaper. */
export type ReleaseLog = (
  level: "info" | "warn" | "debug",
  msg: string,
  fields?: Record<string, unknown>,
) => void;

/** Metric hook: feeds `cocoonset_release_deleted_total{kind}`. */
export interface ReleaseMetrics {
  releaseDeleted(kind: string, n: number): void;
}

/** Options of {@link release}. */
export interface ReleaseOptions {
  /** One overall deadline for deleting and waiting. @default 60000 */
  timeoutMs?: number;
  /**
   * The owner is a Pod that must exist with this uid (a worker releasing at boot); the
   * release is refused otherwise. @default false
   */
  expectAlivePod?: boolean;
  /**
   * Refuse (deleting nothing) when an owner of a kind this package can read (Pod,
   * CocoonSet, Job) exists under its name with another uid: the uid is then most likely a
   * typo. An owner that no longer exists is released as usual. @default false
   */
  refuseReplacedOwner?: boolean;
  /** Structured logs. */
  log?: ReleaseLog;
  /** Metrics. */
  metrics?: ReleaseMetrics;
  /** Deletes in flight at once. @default 16 */
  concurrency?: number;
  /**
   * Also list and delete the tree's PersistentVolumeClaims. The controller turns this off
   * (its RBAC grants nothing on claims): a claim owned by a released pod is then left to the
   * garbage collector. @default true
   */
  pvcs?: boolean;
}

/** Objects of the owner's tree released, by kind (deleted here or already gone). */
export interface ReleaseResult {
  jobs: number;
  pods: number;
  configMaps: number;
  pvcs?: number;
}

/** A kind as the API spells it: `Pod`, `CocoonSet`, `Job` (not `pod` or `pods`). */
const KIND = /^[A-Z][A-Za-z0-9]*$/;

const got = (v: string) => ` (got ${JSON.stringify(v.length > 80 ? `${v.slice(0, 80)}…` : v)})`;

/**
 * Checks the owner alone: no field empty, its name a DNS-1123 subdomain, its kind spelled as
 * the API does. A name that could never exist would otherwise reach a request path.
 * @throws ReleaseError naming the first bad field, e.g. `[owner.uid] must not be empty`
 */
export function validateReleaseOwner(owner: ReleaseOwner): void {
  const fields: [string, unknown][] = [
    ["owner.kind", owner?.kind],
    ["owner.name", owner?.name],
    ["owner.uid", owner?.uid],
  ];
  for (const [field, value] of fields) {
    if (typeof value !== "string" || value.trim() === "")
      throw new ReleaseError(`[${field}] must not be empty`);
  }
  const nameProblem = objectNameProblem(owner.name);
  if (nameProblem) throw new ReleaseError(`[owner.name] ${nameProblem}${got(owner.name)}`);
  if (!KIND.test(owner.kind)) {
    throw new ReleaseError(
      `[owner.kind] must be a kind as the API spells it, such as Pod, Job or CocoonSet${got(owner.kind)}`,
    );
  }
}

/**
 * Checks the owner and namespace before any request: the owner as
 * {@link validateReleaseOwner} does, and the namespace a DNS-1123 label.
 * @throws ReleaseError naming the first bad field, e.g. `[namespace] must not be empty`
 */
export function validateRelease(owner: ReleaseOwner, namespace: string): void {
  validateReleaseOwner(owner);
  if (typeof namespace !== "string" || namespace.trim() === "")
    throw new ReleaseError("[namespace] must not be empty");
  const nsProblem = namespaceNameProblem(namespace);
  if (nsProblem) throw new ReleaseError(`[namespace] ${nsProblem}${got(namespace)}`);
}

const noLog: ReleaseLog = () => undefined;

/**
 * Deletes the owner's tree in `namespace` — Jobs (Background propagation) first, then pods,
 * then ConfigMaps and PVCs best effort — and waits until it is gone.
 *
 * Guarantees: nothing outside the tree is deleted (every delete carries a uid precondition,
 * so a same-name replacement survives); input and a Pod owner expected alive are checked
 * before any delete; waiting uses watches under one overall timeout.
 *
 * Caveats: PVCs are deleted but not waited for (pvc-protection holds them while a pod
 * mounts them); a 403 on listing Jobs or PVCs skips that kind.
 *
 * @throws ReleaseError on bad input or a wrong Pod owner (nothing deleted)
 * @throws ReleaseTimeoutError naming what is still present when the deadline passes
 */
export async function release(
  client: KubeClient,
  owner: ReleaseOwner,
  namespace: string,
  opts: ReleaseOptions = {},
): Promise<ReleaseResult> {
  const deadline = Date.now() + (opts.timeoutMs ?? DEFAULT_TIMEOUT_MS);
  const { result, wait } = await deleteOwnedTree(client, owner, namespace, opts);
  await awaitObjectsGone(client, namespace, wait, deadline);
  releasedLine(opts, namespace, wait, result);
  return result;
}

/** The release's overall time limit when none is given. */
const DEFAULT_TIMEOUT_MS = 60_000;

/**
 * The deletes of {@link release}, without its wait: what was deleted, and the typed wait for
 * it to be gone (`objects-gone`, engine/plan). A caller with a fleet waits for it through the
 * one awaiter of plan waits (engine/execute/converge.ts), then logs {@link releasedLine}.
 *
 * @throws ReleaseError on bad input or a wrong Pod owner (nothing deleted)
 */
export async function deleteOwnedTree(
  client: KubeClient,
  owner: ReleaseOwner,
  namespace: string,
  opts: ReleaseOptions = {},
): Promise<{ result: ReleaseResult; wait: ObjectsGone }> {
  validateRelease(owner, namespace);
  const log = opts.log ?? noLog;
  const ns = namespace;
  if (opts.expectAlivePod && owner.kind === "Pod") await checkAlivePod(client, owner, ns);
  else if (opts.refuseReplacedOwner) await checkNotReplaced(client, owner, ns);

  const tree = selectOwnedTree(owner.uid, await listNamespace(client, ns, log, opts.pvcs ?? true));
  log("info", "releasing owner tree", {
    namespace: ns,
    owner: `${owner.kind}/${owner.name}`,
    ownerUid: owner.uid,
    jobs: tree.jobs.length,
    pods: tree.pods.length,
    configMaps: tree.configMaps.length,
    pvcs: tree.pvcs.length,
  });

  const limit = pLimit(opts.concurrency ?? 16);
  const run = (
    items: KubeObject[],
    path: (name: string) => string,
    background: boolean,
  ): Promise<PromiseSettledResult<KubeObject>[]> =>
    Promise.allSettled(
      items.map((o) =>
        limit(async () => {
          await client.delete(path(o.metadata.name!), {
            uid: o.metadata.uid,
            propagationPolicy: background ? "Background" : undefined,
          });
          return o;
        }),
      ),
    );
  const fulfilled = (rs: PromiseSettledResult<KubeObject>[]) =>
    rs.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
  const firstError = (rs: PromiseSettledResult<KubeObject>[]) =>
    rs.find((r): r is PromiseRejectedResult => r.status === "rejected")?.reason as unknown;

  // A live Job would start new pods, so Jobs go first; their pods follow with the rest.
  const jobRes = await run(tree.jobs, (n) => paths.job(ns, n), true);
  const jobs = fulfilled(jobRes);
  report(opts, "job", jobs.length);
  if (firstError(jobRes) !== undefined) throw firstError(jobRes);

  const podRes = await run(tree.pods, (n) => paths.pod(ns, n), false);
  const pods = fulfilled(podRes);
  report(opts, "pod", pods.length);
  if (firstError(podRes) !== undefined) throw firstError(podRes);

  const cmRes = await run(tree.configMaps, (n) => paths.configMap(ns, n), false);
  const configMaps = fulfilled(cmRes);
  report(opts, "configmap", configMaps.length);
  logFailures(log, ns, "configmap", tree.configMaps, cmRes);

  const pvcRes = await run(tree.pvcs, (n) => paths.pvc(ns, n), false);
  const pvcs = fulfilled(pvcRes);
  report(opts, "pvc", pvcs.length);
  logFailures(log, ns, "pvc", tree.pvcs, pvcRes);

  const result: ReleaseResult = {
    jobs: jobs.length,
    pods: pods.length,
    configMaps: configMaps.length,
  };
  if (tree.pvcs.length) result.pvcs = pvcs.length;
  const uids = (items: KubeObject[]) => items.map((o) => o.metadata.uid!);
  // A pod a deleted Job started after the list is part of the tree too: it is waited for.
  const sets: GoneSet[] = [
    { kind: "job", uids: uids(jobs), ownerUids: [] },
    { kind: "pod", uids: uids(pods), ownerUids: uids(jobs) },
    { kind: "configmap", uids: uids(configMaps), ownerUids: [] },
  ].filter((g) => g.uids.length > 0 || g.ownerUids.length > 0);
  const wait: ObjectsGone = {
    kind: "objects-gone",
    owner: `${owner.kind} ${ns}/${owner.name}`,
    ownerUid: owner.uid,
    timeoutMs: opts.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    sets,
  };
  return { result, wait };
}

/** Logs that a release's tree is gone (after its wait). */
export function releasedLine(
  opts: ReleaseOptions,
  namespace: string,
  wait: ObjectsGone,
  result: ReleaseResult,
): void {
  (opts.log ?? noLog)("info", "released owner tree", {
    namespace,
    ownerUid: wait.ownerUid,
    ...result,
  });
}

function report(opts: ReleaseOptions, kind: string, n: number): void {
  if (n > 0) opts.metrics?.releaseDeleted(kind, n);
}

function logFailures(
  log: ReleaseLog,
  ns: string,
  kind: string,
  items: KubeObject[],
  results: PromiseSettledResult<KubeObject>[],
): void {
  results.forEach((r, i) => {
    if (r.status === "rejected")
      log("warn", `best-effort delete of ${kind} failed`, {
        namespace: ns,
        name: items[i].metadata.name,
        error: r.reason instanceof Error ? r.reason.message : String(r.reason),
      });
  });
}

async function checkAlivePod(client: KubeClient, owner: ReleaseOwner, ns: string): Promise<void> {
  const pod = await client.getOrUndefined(paths.pod(ns, owner.name));
  if (!pod) {
    throw new ReleaseError(
      `pod ${ns}/${owner.name} not found: an ownerReference only holds inside its owner's namespace, so nothing was deleted`,
    );
  }
  if (pod.metadata.uid !== owner.uid) {
    throw new ReleaseError(
      `pod ${ns}/${owner.name} has uid ${pod.metadata.uid ?? "(none)"}, not the given uid ${owner.uid}: the caller names another pod, so nothing was deleted`,
    );
  }
}

const OWNER_PATHS: Record<string, (ns: string, name: string) => string> = {
  Pod: paths.pod,
  CocoonSet: paths.cocoonSet,
  Job: paths.job,
};

async function checkNotReplaced(
  client: KubeClient,
  owner: ReleaseOwner,
  ns: string,
): Promise<void> {
  const path = OWNER_PATHS[owner.kind];
  if (!path) return;
  const live = await client.getOrUndefined(path(ns, owner.name));
  if (live && live.metadata.uid !== owner.uid) {
    throw new ReleaseError(
      `${owner.kind} ${ns}/${owner.name} exists with uid ${live.metadata.uid ?? "(none)"}, not the given uid ${owner.uid}: check [owner.uid] (an owner that no longer exists is released by its uid); nothing was deleted`,
    );
  }
}

async function listNamespace(
  client: KubeClient,
  ns: string,
  log: ReleaseLog,
  withPvcs: boolean,
): Promise<ListedObjects> {
  const [jobs, pods, configMaps, pvcs] = await Promise.all([
    client.list(paths.jobs(ns)).then(
      (l) => l.items,
      (e: unknown) => {
        if (!isForbidden(e)) throw e;
        log("warn", "not allowed to list Jobs: releasing without them", {
          namespace: ns,
          error: errorMessage(e),
        });
        return [];
      },
    ),
    client.list(paths.pods(ns)).then((l) => l.items),
    client.list(paths.configMaps(ns)).then((l) => l.items),
    (withPvcs ? client.list(paths.pvcs(ns)) : Promise.resolve({ items: [] })).then(
      (l) => l.items,
      (e: unknown) => {
        if (!isForbidden(e)) throw e;
        log("debug", "not allowed to list PVCs: skipping them", {
          namespace: ns,
          error: errorMessage(e),
        });
        return [];
      },
    ),
  ]);
  return { jobs, pods, configMaps, pvcs };
}

/**
 * Waits (watches, one per kind) until every object of an owner release's wait is gone from
 * `namespace`, until `deadline`: the `objects-gone` wait of the one awaiter of plan waits
 * (engine/execute/converge.ts), and {@link release}'s own.
 *
 * @throws ReleaseTimeoutError naming what is still present when the deadline passes
 */
export async function awaitObjectsGone(
  client: KubeClient,
  namespace: string,
  wait: ObjectsGone,
  deadline: number,
): Promise<void> {
  const ns = namespace;
  const kinds = wait.sets.map((g) => ({
    kind: g.kind,
    path: GONE_PATHS[g.kind](ns),
    uids: new Set(g.uids),
    owners: new Set(g.ownerUids),
  }));
  const present = (o: KubeObject, k: (typeof kinds)[number]) =>
    k.uids.has(o.metadata.uid ?? "") ||
    (o.metadata.ownerReferences ?? []).some((r) => k.owners.has(r.uid));
  const results = await Promise.allSettled(
    kinds.map((k) =>
      waitForList(client, k.path, (items) => !items.some((o) => present(o, k)), {
        timeoutMs: Math.max(1, deadline - Date.now()),
        description: `${k.kind}s of ${wait.owner} to be gone`,
      }),
    ),
  );
  const remaining: RemainingObject[] = [];
  for (const [i, r] of results.entries()) {
    if (r.status === "fulfilled") continue;
    if (!WaitTimeoutError.isInstance(r.reason)) throw r.reason;
    const k = kinds[i];
    // The waits above listed KubeObjects.
    const last = (r.reason as WaitTimeoutError<KubeObject>).last;
    for (const o of last) if (present(o, k)) remaining.push(describeRemaining(k.kind, o));
  }
  if (remaining.length === 0) return;
  throw new ReleaseTimeoutError(
    `release of ${wait.owner} (uid ${wait.ownerUid}) timed out after ${wait.timeoutMs} ms; still present: ${remaining
      .map((r) => formatRemaining(ns, r))
      .join("; ")}`,
    remaining,
  );
}

/** The list path of each kind an owner release waits for. */
const GONE_PATHS: Record<string, (ns: string) => string> = {
  job: paths.jobs,
  pod: paths.pods,
  configmap: paths.configMaps,
  cocoonset: paths.cocoonSets,
};
