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
 * and the pass's creates, deletes and annotation patches. Keys are per fleet
 * (`namespace/name`) and per pod name (a slot's pod name is fixed, so the name is the slot).
 */

/** How long an expectation waits for its watch event before the cache is trusted again. */
export const EXPECTATION_TTL_MS = 5 * 60_000;

/** A pod write the apiserver accepted, as the engine's `podWritten` hook reports it. */
export interface PodWrite {
  kind: "create" | "delete" | "patch";
  name: string;
  /** The uid the write created, deleted or patched. */
  uid: string;
  /** A patch's: the resourceVersion the apiserver answered it with. */
  resourceVersion?: string;
}

/** One write the cache has not shown yet, and when it was made (the clock's milliseconds). */
type Expectation = PodWrite & { at: number };

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

/**
 * Whether the watch has already shown `write`, so that nothing is left to expect. The
 * apiserver's answer and the watch's events travel on separate connections: the watch may
 * deliver the write, and everything after it up to the pod's deletion, before the answer
 * reaches the pass. `cached` is the pod the cache holds under the write's name now; `gone`
 * says whether the watch has shown the write's uid deleted, which shows every write to it.
 */
export function shownByWatch(
  write: PodWrite,
  cached: ObservedPod | undefined,
  gone: boolean,
): boolean {
  if (gone) return true;
  const same = cached?.uid === write.uid;
  switch (write.kind) {
    case "create":
      return same;
    case "delete":
      // A pod the cache never held is one no pass plans on: nothing to hold back.
      return !same || cached.terminating;
    case "patch":
      return (
        same && (cached.terminating || showsVersion(cached.resourceVersion, write.resourceVersion))
      );
  }
}

/** How many gone pod uids are remembered (a write's answer comes back within moments). */
const GONE_UIDS_KEPT = 4096;

/** Outstanding writes per fleet and pod name. */
export class PodExpectations {
  private readonly fleets = new Map<string, Map<string, Expectation>>();
  /** The uids the watch last showed gone, oldest first (see {@link shownByWatch}). */
  private readonly goneUids = new Set<string>();

  constructor(
    private readonly now: () => number = Date.now,
    private readonly ttlMs: number = EXPECTATION_TTL_MS,
  ) {}

  /**
   * The pass made `write` for `fleet`: expected until the pod watch shows it, unless it
   * already has (`cached`: the pod the cache holds under `write.name` now). A patch whose
   * answer carried no version is never expected: nothing could settle it but the TTL.
   */
  expect(fleet: string, write: PodWrite, cached: ObservedPod | undefined): void {
    if (!write.uid || (write.kind === "patch" && !write.resourceVersion)) return;
    if (shownByWatch(write, cached, this.goneUids.has(write.uid))) return;
    this.slotsOf(fleet).set(write.name, { ...write, at: this.now() });
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

  /**
   * The pod watch shows `pod` gone: settles every write to it (a create of a pod that came
   * and went included), and any such write whose answer comes later.
   */
  observeGone(fleet: string, pod: { name: string; uid: string }): void {
    if (pod.uid) {
      this.goneUids.add(pod.uid);
      if (this.goneUids.size > GONE_UIDS_KEPT)
        this.goneUids.delete(this.goneUids.values().next().value!);
    }
    const slots = this.fleets.get(fleet);
    const e = slots?.get(pod.name);
    if (slots && e && e.uid === pod.uid) this.drop(fleet, slots, pod.name);
  }

  /**
   * The pod names of `fleet` with an outstanding expectation; expired ones are dropped (the
   * cache is trusted again after {@link ttlMs}, as a missed watch event must not stall a slot
   * for ever) and handed to `onExpired`, so that the caller says so.
   */
  outstanding(fleet: string, onExpired?: (write: PodWrite) => void): ReadonlySet<string> {
    const slots = this.fleets.get(fleet);
    if (!slots) return new Set();
    const now = this.now();
    for (const [name, e] of slots) {
      if (now - e.at < this.ttlMs) continue;
      slots.delete(name);
      onExpired?.(e);
    }
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
