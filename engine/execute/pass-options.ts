/**
 * What a caller gives a pass: its options, the hooks through which the engine reports what
 * it did, and the create logs the caller keeps between passes.
 */
import { type SlotCreateLog } from "../pods/index.js";
import { type CocoonSet } from "../spec/index.js";
import { type SnapshotRegistry } from "./snapshots.js";
import { type Reader } from "./reader.js";

/** Hooks through which the engine reports what it did (events, metrics, logs, progress). */
export interface EngineHooks {
  /** An event on the CocoonSet (the controller posts it to the events API). */
  event?(cs: CocoonSet, type: "Normal" | "Warning", reason: string, message: string): void;
  /**
   * A counter increment, e.g. `subagent_rebuild_total`; `labels` are the ones besides
   * namespace and cocoonset (a slot-release wake's `placement`).
   */
  metric?(name: string, cs: CocoonSet, labels?: Record<string, string>): void;
  /** One line per decision that changed the cluster. */
  log?(level: "info" | "warn" | "debug", msg: string, fields?: Record<string, unknown>): void;
  /** Progress of a fan-out: `done` of `total` creates settled. */
  progress?(done: number, total: number): void;
  /**
   * A create met a pod of the same name that is not this CocoonSet's (409, then one GET of
   * that name). With this hook the pass reports it here instead of failing the step, and asks
   * to run again at once: the caller's next read must include that pod (its reads then plan
   * the slot as blocked, §3.21, or refuse the toolbox). The controller sets it, since it
   * creates before it reads a name; without it the pass behaves as before (the name was read
   * before planning).
   */
  nameHeld?(podName: string): void;
  /**
   * A pod write the apiserver accepted: a create (the new pod's uid), a delete (the uid
   * deleted) or an annotation patch (the resourceVersion it answered with). The controller
   * expects its pod watch to show it (controller/expectations.ts).
   */
  podWritten?(
    kind: "create" | "delete" | "patch",
    pod: { name: string; uid: string; resourceVersion?: string },
  ): void;
}

/**
 * The engine's memory of its own recent sub-agent creates, by CocoonSet uid: what lets a
 * pass back off a slot whose pod keeps vanishing right after creation (engine/pods/vanish.ts).
 * It lives as long as the caller keeps it (the controller process, one `pulumi up`).
 */
export type CreateLogs = Map<string, SlotCreateLog>;

/** Options of {@link runPass}. */
export interface PassOptions {
  /**
   * Where the pass reads the cluster from: every read it makes goes through it.
   * @default the fresh reads of the pass's client (`freshReader`)
   */
  reads?: Reader;
  /**
   * Pod names the pass must not act on: writes of an earlier pass its reads do not show yet
   * (the controller's expectations, controller/expectations.ts). Their steps are held back,
   * the status is not written from such a view, and the pass is requeued after
   * `heldBackRequeueMs`. @default none
   */
  outstanding?: ReadonlySet<string>;
  /** Requeue delay of a pass that held steps back. @default {@link STALLED_REQUEUE_MS} */
  heldBackRequeueMs?: number;
  /**
   * The CocoonSet came from a cache that may be behind the apiserver: the end-of-pass status
   * write carries its resourceVersion as a precondition, so a view another writer has
   * overtaken writes no status; the write meets 409 and the result says `conflicted` (as a
   * rebuild history write always does), for the caller to plan again on a fresh read.
   * @default false (a fresh read: the status is merged without a precondition)
   */
  cocoonSetFromCache?: boolean;
  /** Create logs to read and update; without it every missing slot is created at once. */
  createLogs?: CreateLogs;
  /** Maximum sub-agent creates in flight. @default 8 */
  fanOut?: number;
  /** Clock. @default Date.now */
  now?: () => number;
  hooks?: EngineHooks;
  /**
   * The finalizer the caller keeps on the CocoonSet (the controller's): the plan adds it, as
   * its setup, when missing. @default none
   */
  finalizer?: string;
  /** Plan only: perform nothing. */
  dryRun?: boolean;
  /**
   * The snapshot registry (the node agent's `OCI_REGISTRY`). With it, `spec.suspend` is
   * acted on: the pass asks it which `:hibernate` tags exist before planning. Without it
   * `suspend` is stored and not acted on (docs/behaviour.md §3.15).
   */
  registry?: SnapshotRegistry;
  /**
   * Stops the pass: once aborted, no further action starts (those in flight finish), no status
   * is written, and the result carries an error saying so. The controller aborts it when it
   * shuts down and the grace period for in-flight work has run out.
   */
  signal?: AbortSignal;
}
