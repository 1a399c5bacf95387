/**
 * Deletion of a CocoonSet: the owner release of its tree, the teardown of its VMs' snapshot
 * tags, then its finalizer (`finalizeDeletion`); `deleteFleet` for a caller that deletes it.
 * Behaviour: docs/behaviour.md §3.13.
 */
import { deleteVmNamesStash, teardownTags, teardownVmNames } from "../snapshots/index.js";
import {
  attributedView,
  standaloneCandidates,
  standaloneHold,
  type StandaloneHold,
  vmsFreeToDrop as dropDecision,
} from "../attribution/index.js";
import {
  ANNOTATIONS,
  FINALIZER,
  KIND,
  type CocoonHibernation,
  type CocoonSet,
  type Pod,
} from "../spec/index.js";
import { HIBERNATION_FINALIZER } from "../spec/hibernation-schema.js";
import {
  isConflict,
  isNotFound,
  PatchType,
  paths,
  WaitTimeoutError,
  type KubeClient,
} from "../kube/index.js";
import {
  deleteOwnedTree,
  releasedLine,
  type ReleaseMetrics,
  type ReleaseResult,
} from "../release/index.js";
import { dropSnapshotTags, type SnapshotRegistry } from "./snapshots.js";
import { noOutcome, runActions } from "./actions.js";
import { finalizerActions, type ObjectsGone } from "../plan/index.js";
import { errorMessage } from "../kube/branded-error.js";
import { namespaceOf } from "../kube/objects.js";
import {
  listCocoonSetsVisible,
  listFleetPods,
  listHibernationsVisible,
  readCocoonSet,
} from "./pass-reads.js";
import { awaitPassWait, hibernatingMembers } from "./converge.js";
import { createdRecords, forgetCreated } from "./created.js";

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
      const path = paths.cocoonSet(namespaceOf(cs), cs.metadata.name ?? "");
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
  const releaseOpts = {
    timeoutMs: Math.max(1000, deadline - Date.now()),
    metrics: opts.metrics,
    log: opts.log,
    pvcs: opts.pvcs,
  };
  const releaseDeadline = Date.now() + releaseOpts.timeoutMs;
  const { result, wait } = await deleteOwnedTree(
    client,
    { kind: KIND, name: cs.metadata.name ?? "", uid: cs.metadata.uid ?? "" },
    namespaceOf(cs),
    releaseOpts,
  );
  // The tree gone: the plan wait `objects-gone`, through the one awaiter.
  await awaitPassWait(client, cs, wait, releaseDeadline, {});
  releasedLine(releaseOpts, namespaceOf(cs), wait, result);
  const released: FinalizeResult = result;
  // The fleet's own CocoonHibernations (the idle policy's `<pod>-idle`) go with it: their
  // pods are gone, their VM names are the fleet's, and their finalizer (which drops the
  // tag) needs a controller that a destroy may be about to remove.
  await releaseOwnHibernations(client, cs, opts.log);
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
  await releaseFinalizer(
    client,
    { kind: "CocoonSet", object: cs },
    cs.metadata.name ?? "",
    FINALIZER,
    opts.log,
  );
  forgetCreated(cs);
  return released;
}

/**
 * Removes `finalizer` from `subject` as a plan action, through the one executor, as a pass's
 * setup adds it.
 */
async function releaseFinalizer(
  client: KubeClient,
  subject: Parameters<typeof runActions>[0]["subject"],
  podName: string,
  finalizer: string,
  log: FinalizeOptions["log"],
): Promise<void> {
  await runActions(
    {
      client,
      subject,
      hooks: {
        log: (level, msg, fields) => log?.(level === "error" ? "warn" : level, msg, fields),
      },
      outcome: noOutcome(),
    },
    { podName, decision: "release" },
    finalizerActions(subject.object.metadata, finalizer, "released"),
  );
}

/** Whether `h` is owned by the CocoonSet `cs` (the idle policy's CRs are). */
function ownedBy(h: CocoonHibernation, cs: CocoonSet): boolean {
  return (h.metadata.ownerReferences ?? []).some((r) => r.uid === cs.metadata.uid);
}

/**
 * Releases the CocoonHibernations the CocoonSet owns: their finalizer off (through the one
 * executor, as a plan action) and each deleted by uid. The tags of their VMs are the fleet's,
 * dropped with its own (vmsFreeToDrop does not count them as holders).
 */
async function releaseOwnHibernations(
  client: KubeClient,
  cs: CocoonSet,
  log: FinalizeOptions["log"],
): Promise<void> {
  const ns = namespaceOf(cs);
  const own = (await listHibernationsVisible(client, ns)).filter(
    (h) => namespaceOf(h) === ns && ownedBy(h, cs),
  );
  for (const h of own) {
    const name = h.metadata.name ?? "";
    await releaseFinalizer(
      client,
      { kind: "CocoonHibernation", object: h },
      h.spec?.podRef?.name ?? name,
      HIBERNATION_FINALIZER,
      log,
    );
    try {
      await client.delete(paths.cocoonHibernation(ns, name), { uid: h.metadata.uid });
    } catch (e) {
      if (!isNotFound(e) && !isConflict(e)) throw e;
    }
  }
}

/** How long a deletion waits at most for the hibernations in flight before it goes on. */
const TEARDOWN_HIBERNATION_WAIT_MS = 60_000;

/**
 * Waits until no pod of the fleet is hibernating (teardown.ts): the typed wait
 * `hibernations-done`, through the one awaiter of plan waits, at most
 * {@link TEARDOWN_HIBERNATION_WAIT_MS} and never past `deadline`: a snapshot pushed after the
 * tags were dropped would outlive the fleet. On timeout it goes on and says so.
 */
async function waitForHibernationsInFlight(
  client: KubeClient,
  cs: CocoonSet,
  deadline: number,
  log: FinalizeOptions["log"],
): Promise<void> {
  // Members as the engine recorded them (engine/attribution), the node agent's report of theirs.
  const first = hibernatingMembers(cs, await listFleetPods(client, cs));
  if (first.length === 0) return;
  log?.("info", "waiting for the hibernations in flight before the deletion", {
    pods: first.join(","),
  });
  try {
    await awaitPassWait(
      client,
      cs,
      { kind: "hibernations-done", pods: first },
      Math.min(deadline, Date.now() + TEARDOWN_HIBERNATION_WAIT_MS),
      {},
    );
  } catch (e) {
    if (!WaitTimeoutError.isInstance(e)) throw e;
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
  const ns = namespaceOf(cs);
  try {
    const fleets = await listCocoonSetsVisible(client, ns);
    const hibernations = (await listHibernationsVisible(client, ns))
      .filter(
        (h) => !h.metadata.deletionTimestamp && (h.status?.vmName ?? "") !== "" && !ownedBy(h, cs),
      )
      .map((h) => ({
        namespace: namespaceOf(h),
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
  // The CocoonSet gone (another finalizer may hold it): the same plan wait, by uid.
  const gone: ObjectsGone = {
    kind: "objects-gone",
    owner: `CocoonSet ${namespace}/${name}`,
    ownerUid: cs.metadata.uid ?? "",
    timeoutMs,
    sets: [{ kind: "cocoonset", uids: [cs.metadata.uid ?? ""], ownerUids: [] }],
  };
  await awaitPassWait(client, cs, gone, Math.max(deadline, Date.now() + 1000), {});
  return released;
}
