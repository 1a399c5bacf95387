/**
 * The CocoonSet lifecycle around passes: the finalizer, deletion (owner release), and
 * `converge` — passes repeated until nothing is left to do now, waiting for the main agent
 * to be Ready in between (what `pulumi up` runs).
 * Behaviour: docs/behaviour.md §3.13.
 */
import { unschedulableMessage, MIGRATE_POLL_MS } from "../lifecycle/index.js";
import type { MigrationDecision } from "../plan/index.js";
import { isReady, isTerminal, vmLive, agentPodName } from "../pods/index.js";
import {
  deleteVmNamesStash,
  hibernationsInFlight,
  teardownTags,
  teardownVmNames,
} from "../snapshots/index.js";
import {
  attributedView,
  standaloneCandidates,
  standaloneHold,
  type StandaloneHold,
  vmsFreeToDrop as dropDecision,
} from "../attribution/index.js";
import { ANNOTATIONS, FINALIZER, KIND, type CocoonSet, type Pod } from "../spec/index.js";
import {
  isNotFound,
  PatchType,
  paths,
  waitForList,
  waitForObject,
  WaitTimeoutError,
  type KubeClient,
} from "../kube/index.js";
import { release, type ReleaseMetrics, type ReleaseResult } from "../release/index.js";
import {
  listCocoonSetsVisible,
  createdRecords,
  forgetCreated,
  listHibernationsVisible,
  listFleetPods,
  podSelector,
  readCocoonSet,
  runPass,
  type PassOptions,
  type PassResult,
} from "./pass.js";
import { dropSnapshotTags, type SnapshotRegistry } from "./snapshots.js";
import { addFinalizerTo, removeFinalizerFrom } from "./finalizer.js";
import { BrandedError, errorMessage } from "../kube/branded-error.js";

/** Adds the finalizer when missing (finalizer.ts: a JSON patch that tests the list first). */
export async function ensureFinalizer(client: KubeClient, cs: CocoonSet): Promise<CocoonSet> {
  const path = paths.cocoonSet(cs.metadata.namespace ?? "default", cs.metadata.name ?? "");
  return addFinalizerTo(client, path, cs, FINALIZER);
}

/**
 * Removes only this project's finalizer (finalizer.ts), another controller's never; when
 * the list changed under it (the controller and `pulumi destroy` finishing together), it
 * reads again and retries; a CocoonSet already gone means done.
 */
export async function removeFinalizer(client: KubeClient, cs: CocoonSet): Promise<void> {
  const path = paths.cocoonSet(cs.metadata.namespace ?? "default", cs.metadata.name ?? "");
  await removeFinalizerFrom(client, path, cs, FINALIZER);
}

/** Options of {@link finalizeDeletion}. */
export interface FinalizeOptions {
  /** Overall deadline of the release. @default 120000 */
  timeoutMs?: number;
  metrics?: ReleaseMetrics;
  log?: (level: "info" | "warn" | "debug", msg: string, fields?: Record<string, unknown>) => void;
  /** Release the tree's PersistentVolumeClaims too (the release option of that name). @default true */
  pvcs?: boolean;
  /**
   * The snapshot registry: with it, once the pods are gone, the VMs' `:hibernate` tags and
   * the `:latest` tags the snapshot policy does not keep are dropped. Without it the
   * registry is left as it is.
   */
  registry?: SnapshotRegistry;
}

/** What {@link finalizeDeletion} did. */
export interface FinalizeResult extends ReleaseResult {
  /** Registry tags dropped and not dropped (only with a registry). */
  snapshotTags?: { dropped: number; failed: number };
}

/**
 * Releases everything the CocoonSet owns (its pods and, recursively, what they own), waits
 * until it is gone, drops the VMs' snapshot tags when a registry is given, then removes the
 * finalizer. The VM names are stashed on the CocoonSet before its pods go, so a run cut
 * short between the two still finds them. A tag that cannot be dropped is logged and left:
 * the finalizer does not wait on the registry.
 */
export async function finalizeDeletion(
  client: KubeClient,
  cs: CocoonSet,
  opts: FinalizeOptions = {},
): Promise<FinalizeResult> {
  let vms: string[] = [];
  const timeoutMs = opts.timeoutMs ?? 120_000;
  const deadline = Date.now() + timeoutMs;
  if (opts.registry) {
    await waitForHibernationsInFlight(client, cs, deadline, opts.log);
    // The record, plus what this process created and has not recorded yet (pass.ts).
    const pods = await listFleetPods(client, cs);
    vms = teardownVmNames(attributedView(cs, pods, createdRecords(cs)), pods);
    const stash = deleteVmNamesStash(cs, vms);
    if (stash !== undefined) {
      const path = paths.cocoonSet(cs.metadata.namespace ?? "default", cs.metadata.name ?? "");
      try {
        await client.patch(
          path,
          { metadata: { annotations: { [ANNOTATIONS.deleteVmNames]: stash } } },
          PatchType.merge,
        );
      } catch (e) {
        if (!isNotFound(e)) throw e;
      }
    }
  }
  const released: FinalizeResult = await release(
    client,
    { kind: KIND, name: cs.metadata.name ?? "", uid: cs.metadata.uid ?? "" },
    cs.metadata.namespace ?? "default",
    {
      timeoutMs: Math.max(1000, deadline - Date.now()),
      metrics: opts.metrics,
      log: opts.log,
      pvcs: opts.pvcs,
    },
  );
  if (opts.registry) {
    const { drop, kept } = await vmsFreeToDrop(client, cs, vms);
    for (const k of kept) {
      opts.log?.("warn", "kept the snapshot tags of a VM name another fleet holds", {
        vm: k.vm,
        holders: k.holders.join(","),
      });
    }
    const { dropped, failed } = await dropSnapshotTags(opts.registry, teardownTags(cs, drop));
    for (const f of failed) {
      opts.log?.("warn", "could not drop a snapshot tag; it is left in the registry", {
        vm: f.tag.vm,
        tag: f.tag.tag,
        error: f.error,
      });
    }
    released.snapshotTags = { dropped: dropped.length, failed: failed.length };
  }
  await removeFinalizer(client, cs);
  forgetCreated(cs);
  return released;
}

/** How long a deletion waits at most for the hibernations in flight before it goes on. */
export const TEARDOWN_HIBERNATION_WAIT_MS = 60_000;

/**
 * Waits (watch) until no pod of the fleet is hibernating (teardown.ts), at most
 * {@link TEARDOWN_HIBERNATION_WAIT_MS} and never past `deadline`: a snapshot pushed after the
 * tags were dropped would outlive the fleet. On timeout it goes on and says so.
 */
async function waitForHibernationsInFlight(
  client: KubeClient,
  cs: CocoonSet,
  deadline: number,
  log: FinalizeOptions["log"],
): Promise<void> {
  const ns = cs.metadata.namespace ?? "default";
  const name = cs.metadata.name ?? "";
  // Members as the engine recorded them (engine/attribution), the node agent's report of theirs.
  const inFlight = (pods: readonly Pod[]) =>
    hibernationsInFlight(attributedView(cs, pods, createdRecords(cs)), pods);
  const first = inFlight(await listFleetPods(client, cs));
  if (first.length === 0) return;
  log?.("info", "waiting for the hibernations in flight before the deletion", {
    pods: first.join(","),
  });
  try {
    await waitForList<Pod>(client, paths.pods(ns), (items) => inFlight(items).length === 0, {
      labelSelector: podSelector(name),
      timeoutMs: Math.max(1000, Math.min(TEARDOWN_HIBERNATION_WAIT_MS, deadline - Date.now())),
      description: `the hibernations in flight of CocoonSet ${ns}/${name} to end`,
    });
  } catch (e) {
    if (!(e instanceof WaitTimeoutError)) throw e;
    log?.("warn", "hibernations still in flight; the deletion goes on and their tags may stay", {
      pods: first.join(","),
    });
  }
}

/**
 * The VMs whose tags the deletion may drop: those no one else holds (engine/attribution): no
 * other live fleet recorded it, no CocoonHibernation recorded it, no standalone pod runs it
 * under its own name. When the holders cannot be read, none: a tag left behind is better
 * than another fleet's, namespace's or pod's lost.
 */
async function vmsFreeToDrop(
  client: KubeClient,
  cs: CocoonSet,
  vms: readonly string[],
): Promise<ReturnType<typeof dropDecision>> {
  if (vms.length === 0) return { drop: [], kept: [] };
  const ns = cs.metadata.namespace ?? "default";
  try {
    const fleets = await listCocoonSetsVisible(client, ns);
    const hibernations = (await listHibernationsVisible(client, ns))
      .filter((h) => !h.metadata.deletionTimestamp && (h.status?.vmName ?? "") !== "")
      .map((h) => ({
        namespace: h.metadata.namespace ?? "default",
        name: h.metadata.name ?? "",
        vm: h.status?.vmName ?? "",
      }));
    const standalone: StandaloneHold[] = [];
    for (const vm of vms) {
      for (const c of standaloneCandidates(vm)) {
        const pod = await client.getOrUndefined<Pod>(paths.pod(c.namespace, c.name));
        const hold = pod && standaloneHold(pod, fleets);
        if (hold) standalone.push(hold);
      }
    }
    return dropDecision(cs, vms, { fleets, hibernations, standalone });
  } catch (e) {
    return {
      drop: [],
      kept: vms.map((vm) => ({ vm, holders: [`unknown (${errorMessage(e)})`] })),
    };
  }
}

/**
 * Deletes a CocoonSet and everything it owns, and returns once all of it is gone. Works
 * whether or not a controller runs: the controller may do part of the work concurrently.
 */
export async function deleteFleet(
  client: KubeClient,
  namespace: string,
  name: string,
  opts: FinalizeOptions = {},
): Promise<FinalizeResult | undefined> {
  const timeoutMs = opts.timeoutMs ?? 120_000;
  const deadline = Date.now() + timeoutMs;
  const cs = await readCocoonSet(client, namespace, name);
  if (!cs) return undefined;
  // Deleting first stops any controller from recreating pods while they are released.
  await client.delete(paths.cocoonSet(namespace, name), {
    propagationPolicy: "Background",
    uid: cs.metadata.uid,
  });
  const released = await finalizeDeletion(client, cs, { ...opts, timeoutMs });
  await waitForObject(
    client,
    paths.cocoonSets(namespace),
    name,
    (o) => o === undefined || o.metadata.uid !== cs.metadata.uid,
    {
      timeoutMs: Math.max(1000, deadline - Date.now()),
      description: `CocoonSet ${namespace}/${name} to be gone`,
    },
  );
  return released;
}

/** Thrown when the main agent does not become Ready in time, or fails. */
export class MainAgentNotReadyError extends BrandedError {
  constructor(message: string) {
    super(message);
  }
}

/** Thrown when the CocoonSet to converge does not exist. */
export class CocoonSetNotFoundError extends BrandedError {}

/** Options of {@link converge}. */
export interface ConvergeOptions extends PassOptions {
  /** Deadline for the whole convergence, main agent wait included. @default 300000 */
  timeoutMs?: number;
  /** Passes at most (a guard against a plan that never settles). @default 20 */
  maxPasses?: number;
}

/**
 * Runs passes until one changes nothing: after a pass that created or deleted pods the
 * next runs at once; while the main agent is not Ready it waits for it (watch), failing
 * with a readable message on timeout or when the main agent is terminal. Sub-agents in
 * rebuild backoff are left to the controller (the result reports the wait).
 */
export async function converge(
  client: KubeClient,
  namespace: string,
  name: string,
  opts: ConvergeOptions = {},
): Promise<PassResult> {
  const deadline = Date.now() + (opts.timeoutMs ?? 300_000);
  const maxPasses = opts.maxPasses ?? 20;
  // Remembered across the passes of this call, so a vanishing slot is backed off here too.
  opts = { ...opts, createLogs: opts.createLogs ?? new Map() };
  let last: PassResult | undefined;
  for (let pass = 1; pass <= maxPasses; pass++) {
    const cs = await readCocoonSet(client, namespace, name);
    if (!cs) {
      throw new CocoonSetNotFoundError(
        `CocoonSet ${namespace}/${name} does not exist (with Pulumi, the Fleet component creates it before its slots)`,
      );
    }
    last = await runPass(client, cs, opts);
    // A conflict means someone else (the controller) wrote first: re-read and plan again.
    if (last.failures.length > 0 && !last.conflicted) return last;
    if (last.conflicted) continue;
    const mainStep = last.plan.steps.find((s) => s.target.role === "main");
    if (mainStep?.decision === "main-failed") {
      throw new MainAgentNotReadyError(
        `main agent pod ${namespace}/${mainStep.podName} failed; it is not rebuilt automatically (delete it or change the spec)`,
      );
    }
    if (mainStep?.decision === "create" && !last.created.includes(mainStep.podName)) {
      // The create met a pod of that name: one still terminating (wait until it is gone,
      // then create), or another writer's (then wait for it to be Ready).
      await waitForSameNamePod(client, namespace, mainStep.podName, deadline, opts);
      continue;
    }
    if (mainStep?.decision === "wait-wake") {
      // A slot-release wake: wait (watch) until the restored VM is live, then go on.
      const full = mainStep.actions.find((a) => a.kind === "event");
      if (full && full.kind === "event") throw new MainAgentNotReadyError(full.message);
      await waitForWake(client, cs, deadline);
      continue;
    }
    if (mainStep?.decision === "wait-main" || mainStep?.decision === "create") {
      await waitForMainReady(client, cs, deadline);
      continue;
    }
    if (last.requeueAfterMs === 0) continue;
    if (mainStep && MIGRATION_WAITS.has(mainStep.decision)) {
      // A migration to spec.nodeName in flight: it polls the registry, so wait (watch) for
      // the next change of the main agent's pod, at most one poll interval, then plan again.
      // These passes wait on the node agent, not on work of ours: the deadline bounds them.
      if (Date.now() >= deadline) return last;
      await waitForPodChange(
        client,
        namespace,
        mainStep.podName,
        Math.min(deadline - Date.now(), last.requeueAfterMs ?? MIGRATE_POLL_MS),
      );
      pass--;
      continue;
    }
    if (last.stalled) {
      // Same-name pods are still terminating: wait (watch) until they are gone, then go on.
      await waitForList(
        client,
        paths.pods(namespace),
        (items) => !items.some((p) => p.metadata.deletionTimestamp),
        {
          labelSelector: podSelector(name),
          timeoutMs: Math.max(1000, deadline - Date.now()),
          description: `terminating pods of CocoonSet ${namespace}/${name} to be gone`,
        },
      );
      continue;
    }
    return last;
  }
  return last!;
}

/** The migration steps after which a pass waits on the node agent (docs/behaviour.md §3.17). */
const MIGRATION_WAITS: ReadonlySet<string> = new Set<MigrationDecision>([
  "migrate",
  "migrate-drop-stale",
  "wait-migration",
  "migrate-evict",
  "migrate-restore",
  "migrate-wake",
]);

/**
 * Waits (watch) until the named pod changes (appears, goes, or gets a new resourceVersion),
 * at most `timeoutMs`; returns either way.
 */
async function waitForPodChange(
  client: KubeClient,
  namespace: string,
  podName: string,
  timeoutMs: number,
): Promise<void> {
  const key = (p: Pod | undefined) =>
    p ? `${p.metadata?.uid}/${p.metadata?.resourceVersion}` : "gone";
  const seen = key(await client.getOrUndefined<Pod>(paths.pod(namespace, podName)));
  try {
    await waitForObject<Pod>(client, paths.pods(namespace), podName, (p) => key(p) !== seen, {
      timeoutMs: Math.max(100, timeoutMs),
      description: `a change of pod ${namespace}/${podName}`,
    });
  } catch (e) {
    if (!(e instanceof WaitTimeoutError)) throw e;
  }
}

/**
 * Waits (watch) until the pod of this name is gone or is not terminating. Its create met it
 * while it was terminating: the next pass creates it again, or finds another writer's.
 */
async function waitForSameNamePod(
  client: KubeClient,
  namespace: string,
  podName: string,
  deadline: number,
  opts: ConvergeOptions,
): Promise<void> {
  opts.hooks?.log?.(
    "info",
    "pod of the same name is still terminating; waiting for it to be gone",
    {
      pod: podName,
    },
  );
  await waitForObject<Pod>(
    client,
    paths.pods(namespace),
    podName,
    (pod) => pod === undefined || !pod.metadata?.deletionTimestamp,
    {
      timeoutMs: Math.max(1000, deadline - Date.now()),
      description: `terminating pod ${namespace}/${podName} to be gone`,
    },
  );
}

/**
 * Waits (watch) until a waking main agent's VM is live, or it is unschedulable (no seat in
 * the pool) or terminal: the next pass reports which.
 */
async function waitForWake(client: KubeClient, cs: CocoonSet, deadline: number): Promise<void> {
  const ns = cs.metadata.namespace ?? "default";
  const podName = agentPodName(cs.metadata.name ?? "", 0);
  await waitForObject<Pod>(
    client,
    paths.pods(ns),
    podName,
    (pod) =>
      pod === undefined ||
      vmLive(pod) ||
      isTerminal(pod) ||
      unschedulableMessage(pod) !== undefined,
    {
      timeoutMs: Math.max(1000, deadline - Date.now()),
      description: `main agent pod ${ns}/${podName} to be restored from its snapshot`,
    },
  );
}

/** Waits (watch) until the main agent pod is Ready; fails when it is terminal or on timeout. */
export async function waitForMainReady(
  client: KubeClient,
  cs: CocoonSet,
  deadline: number,
): Promise<Pod> {
  const ns = cs.metadata.namespace ?? "default";
  const podName = agentPodName(cs.metadata.name ?? "", 0);
  const timeoutMs = Math.max(1000, deadline - Date.now());
  let terminal: Pod | undefined;
  try {
    const pod = await waitForObject<Pod>(
      client,
      paths.pods(ns),
      podName,
      (pod) => {
        if (pod && isTerminal(pod)) terminal = pod;
        return pod !== undefined && (isReady(pod) || isTerminal(pod));
      },
      { timeoutMs, description: `main agent pod ${ns}/${podName} to be Ready` },
    );
    if (terminal) {
      throw new MainAgentNotReadyError(
        `main agent pod ${ns}/${podName} failed (phase ${terminal.status?.phase ?? "unknown"}); sub-agents fork from it, so nothing else was created`,
      );
    }
    return pod!;
  } catch (e) {
    if (MainAgentNotReadyError.isInstance(e)) throw e;
    const current = await client.getOrUndefined<Pod>(paths.pod(ns, podName));
    const state = current
      ? `it exists (phase ${current.status?.phase ?? "unknown"}, node ${current.spec?.nodeName ?? "none"}, not Ready)`
      : "it does not exist";
    throw new MainAgentNotReadyError(
      `main agent pod ${ns}/${podName} was not Ready within ${Math.round(timeoutMs / 1000)}s: ${state}; is a node with label cocoonstack.io/pool=${cs.spec.nodePool ?? "default"} available?`,
    );
  }
}
