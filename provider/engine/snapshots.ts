/**
 * The registry facts of a pass: which `<vm>:hibernate` snapshot tags exist, asked before the
 * pass plans (the planner is pure and reads them as an input, `PlanInput.snapshots`).
 * Behaviour: docs/behaviour.md §3.15.
 */
import pLimit from "p-limit";
import { SNAPSHOT_TAGS, type SnapshotFacts } from "../fleet/index.js";

/** What the engine asks a snapshot registry: whether a tag exists (HEAD of its manifest). */
export interface SnapshotRegistry {
  hasManifest(name: string, reference: string): Promise<boolean>;
}

/** HEAD requests in flight at once while gathering the facts of one pass. */
export const SNAPSHOT_PROBE_CONCURRENCY = 8;

/**
 * Asks the registry for the `:hibernate` tag of each VM and returns the facts. Any failed
 * request turns the whole answer into `{ error }` (naming the VM), so the pass fails closed:
 * the planner changes no pod on a partial answer.
 */
export async function gatherSnapshotFacts(
  registry: SnapshotRegistry,
  vms: readonly string[],
): Promise<SnapshotFacts> {
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
          errors.push(`probe hibernate snapshot ${vm}: ${(e as Error).message}`);
        }
      }),
    ),
  );
  return errors.length > 0 ? { error: errors.sort()[0] } : { hibernate };
}
