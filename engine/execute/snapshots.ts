/**
 * The registry facts of a pass: which `<vm>:hibernate` snapshot tags exist, asked before the
 * pass plans (the planner is pure and reads them as an input, `PlanInput.snapshots`).
 * Behaviour: docs/behaviour.md §3.15.
 */
import pLimit from "p-limit";
import type { SnapshotFacts } from "../lifecycle/index.js";
import type { TeardownTag } from "../snapshots/index.js";
import { SNAPSHOT_TAGS } from "../spec/index.js";
import { errorMessage } from "../kube/branded-error.js";

/**
 * What the engine asks of a snapshot registry: whether a tag exists (HEAD of its manifest),
 * and, at a deletion, to drop one (a missing tag counts as dropped).
 */
export interface SnapshotRegistry {
  hasManifest(name: string, reference: string): Promise<boolean>;
  deleteManifest(name: string, reference: string): Promise<void>;
}

/** HEAD requests in flight at once while gathering the facts of one pass. */
const SNAPSHOT_PROBE_CONCURRENCY = 8;

/**
 * Asks the registry for the `:hibernate` tag of each VM: the VMs whose tag it has, and the
 * first failure (naming the VM), if any. After a failure no further VM is asked; the tags
 * confirmed before it are still given, so a caller that keeps them (the suspend gate's memory,
 * pass-reads.ts) makes progress though its pass fails closed.
 */
export async function probeHibernateTags(
  registry: SnapshotRegistry,
  vms: readonly string[],
): Promise<{ hibernate: Set<string>; error?: string }> {
  const limit = pLimit(SNAPSHOT_PROBE_CONCURRENCY);
  const hibernate = new Set<string>();
  const errors: string[] = [];
  await Promise.all(
    vms.map((vm) =>
      limit(async () => {
        if (errors.length > 0) return;
        try {
          if (await registry.hasManifest(vm, SNAPSHOT_TAGS.hibernate)) hibernate.add(vm);
        } catch (e) {
          errors.push(`probe hibernate snapshot ${vm}: ${errorMessage(e)}`);
        }
      }),
    ),
  );
  return errors.length > 0 ? { hibernate, error: errors.sort()[0] } : { hibernate };
}

/**
 * The pass's facts of the registry: the VMs whose `:hibernate` tag exists, or, when any
 * request failed, `{ error }` naming the VM, so the pass fails closed: the planner changes no
 * pod on a partial answer.
 */
export function snapshotFacts(probed: { hibernate: Set<string>; error?: string }): SnapshotFacts {
  return probed.error !== undefined ? { error: probed.error } : { hibernate: probed.hibernate };
}

/**
 * Drops the deletion's tags, one request at a time per VM, several VMs at once. Best effort:
 * a failed request is reported in the answer (and the caller goes on), never retried, as a
 * registry that refuses deletes would otherwise hold the CocoonSet forever.
 */
export async function dropSnapshotTags(
  registry: SnapshotRegistry,
  tags: readonly TeardownTag[],
): Promise<{ dropped: TeardownTag[]; failed: { tag: TeardownTag; error: string }[] }> {
  const limit = pLimit(SNAPSHOT_PROBE_CONCURRENCY);
  const dropped: TeardownTag[] = [];
  const failed: { tag: TeardownTag; error: string }[] = [];
  await Promise.all(
    tags.map((t) =>
      limit(async () => {
        try {
          await registry.deleteManifest(t.vm, t.tag);
          dropped.push(t);
        } catch (e) {
          failed.push({ tag: t, error: errorMessage(e) });
        }
      }),
    ),
  );
  return { dropped, failed };
}
