/**
 * What a controller expects its cache to show after its own writes, as Kubernetes'
 * ReplicaSet controller keeps it: a pod a pass created or deleted is *expected* until the
 * pod watch shows that write (the new pod's uid appears; the deleted uid turns terminating
 * or disappears) or the expectation expires. A pass that plans from the cache skips every
 * slot with an outstanding expectation, so a cache that lags behind the pass's own writes
 * can neither create a slot twice nor count one failure twice (a second delete of a Failed
 * pod would write a second rebuild-history entry and bring the dead letter closer).
 *
 * Pure bookkeeping with an injected clock; the controller feeds it the pod watch's events
 * and the pass's creates, deletes and annotation patches. Keys are per fleet (`namespace/name`) and per pod name
 * (a slot's pod name is fixed, so the name is the slot).
 */

/** How long an expectation waits for its watch event before the cache is trusted again. */
export const EXPECTATION_TTL_MS = 5 * 60_000;

/** One write the cache has not shown yet. */
interface Expectation {
  kind: "create" | "delete" | "patch";
  /** The uid the write created, deleted or patched. */
  uid: string;
  /** A patch's: the resourceVersion the apiserver answered it with. */
  resourceVersion?: string;
  /** When the write was made (the clock's milliseconds). */
  at: number;
}

/** A pod as the watch shows it, enough to settle an expectation. */
export interface ObservedPod {
  name: string;
  uid: string;
  /** The pod has a deletionTimestamp. */
  terminating: boolean;
  /** Its resourceVersion (settles a patch). */
  resourceVersion?: string;
}

/**
 * Whether `seen` is the version `written` or a later one. The watch delivers a pod's versions
 * in order, so the written one itself is the usual answer; after a relist the cache may skip
 * to a later one, which the apiserver's versions (etcd revisions, decimal) order.
 */
export function showsVersion(seen: string | undefined, written: string | undefined): boolean {
  if (seen === undefined || written === undefined) return false;
  if (seen === written) return true;
  return /^\d+$/.test(seen) && /^\d+$/.test(written) && BigInt(seen) > BigInt(written);
}

/** Outstanding writes per fleet and pod name. */
export class PodExpectations {
  private readonly fleets = new Map<string, Map<string, Expectation>>();

  constructor(
    private readonly now: () => number = Date.now,
    private readonly ttlMs: number = EXPECTATION_TTL_MS,
  ) {}

  /** The pass created `pod` (the apiserver's answer, so its uid is known). */
  expectCreated(fleet: string, pod: { name: string; uid: string }): void {
    this.slotsOf(fleet).set(pod.name, { kind: "create", uid: pod.uid, at: this.now() });
  }

  /** The pass deleted the pod `pod.uid` (the delete was accepted). */
  expectDeleted(fleet: string, pod: { name: string; uid: string }): void {
    this.slotsOf(fleet).set(pod.name, { kind: "delete", uid: pod.uid, at: this.now() });
  }

  /**
   * The pass patched the pod `pod.uid` (an annotation such as the hibernate request), and the
   * apiserver answered with `pod.resourceVersion`: expected until the watch shows that version,
   * so a pass never plans on the pod as it was before (a migration would take the snapshot
   * its own request produced for a leftover and drop it).
   */
  expectPatched(fleet: string, pod: { name: string; uid: string; resourceVersion: string }): void {
    this.slotsOf(fleet).set(pod.name, {
      kind: "patch",
      uid: pod.uid,
      resourceVersion: pod.resourceVersion,
      at: this.now(),
    });
  }

  /** The pod watch added or updated `pod`: settles the expectation it shows. */
  observe(fleet: string, pod: ObservedPod): void {
    const slots = this.fleets.get(fleet);
    const e = slots?.get(pod.name);
    if (!slots || !e) return;
    // A create is seen when its uid appears; a delete when its uid is terminating; a patch
    // when its uid shows the version written (or a later one, or terminates). A pod of the
    // same name with another uid is not evidence for any.
    const settled =
      e.uid === pod.uid &&
      (e.kind === "create" ||
        pod.terminating ||
        (e.kind === "patch" && showsVersion(pod.resourceVersion, e.resourceVersion)));
    if (settled) this.drop(fleet, slots, pod.name);
  }

  /** The pod watch shows `pod` gone: settles a delete of it, and a create of it (it came and went). */
  observeGone(fleet: string, pod: { name: string; uid: string }): void {
    const slots = this.fleets.get(fleet);
    const e = slots?.get(pod.name);
    if (slots && e && e.uid === pod.uid) this.drop(fleet, slots, pod.name);
  }

  /**
   * The pod names of `fleet` with an outstanding expectation; expired ones are dropped (the
   * cache is trusted again after {@link ttlMs}, as a missed watch event must not stall a slot
   * for ever).
   */
  outstanding(fleet: string): ReadonlySet<string> {
    const slots = this.fleets.get(fleet);
    if (!slots) return new Set();
    const now = this.now();
    for (const [name, e] of slots) if (now - e.at >= this.ttlMs) slots.delete(name);
    if (slots.size === 0) this.fleets.delete(fleet);
    return new Set(slots.keys());
  }

  /** Milliseconds until the oldest outstanding expectation of `fleet` expires, if any. */
  nextExpiryMs(fleet: string): number | undefined {
    const slots = this.fleets.get(fleet);
    if (!slots || slots.size === 0) return undefined;
    const now = this.now();
    return Math.max(0, Math.min(...[...slots.values()].map((e) => e.at + this.ttlMs - now)));
  }

  /** The fleet is gone: its expectations with it. */
  forget(fleet: string): void {
    this.fleets.delete(fleet);
  }

  private slotsOf(fleet: string): Map<string, Expectation> {
    let slots = this.fleets.get(fleet);
    if (!slots) this.fleets.set(fleet, (slots = new Map<string, Expectation>()));
    return slots;
  }

  private drop(fleet: string, slots: Map<string, Expectation>, name: string): void {
    slots.delete(name);
    if (slots.size === 0) this.fleets.delete(fleet);
  }
}
