/**
 * Kubernetes Events through the `events.k8s.io/v1` API, reported by
 * `cocoonset-controller`.
 *
 * Guarantees: `event()` never rejects (a failed post is logged at warn); an identical event
 * (same object uid, reason and note) within the dedup window is skipped, so a hot loop
 * cannot flood the apiserver.
 *
 * @see https://kubernetes.io/docs/reference/kubernetes-api/cluster-resources/event-v1/
 */
import { randomBytes } from "node:crypto";
import type { Logger } from "pino";
import { paths, type KubeClient, type ObjectLike } from "../engine/kube/index.js";
import type { EventRecorder as EventRecorderContract, EventType } from "./types.js";
import { errorMessage } from "../engine/kube/branded-error.js";
import { safeText } from "../engine/spec/index.js";

/** The `reportingController` of every event. */
export const REPORTING_CONTROLLER = "cocoonset-controller";

/** Options of {@link KubeEventRecorder}. */
export interface EventRecorderOptions {
  client: KubeClient;
  /** `reportingInstance`: the controller identity (hostname + suffix). */
  identity: string;
  log: Logger;
  /** @default Date.now */
  now?: () => number;
  /** Window in which identical events are skipped. @default 60000 */
  dedupWindowMs?: number;
}

import { microTime } from "../engine/kube/objects.js";
export { microTime };

/** Cuts a string to at most `max` UTF-8 bytes without splitting a character. */
function truncateBytes(s: string, max: number): string {
  if (Buffer.byteLength(s) <= max) return s;
  let out = s;
  while (Buffer.byteLength(out) > max - 3) out = out.slice(0, -1);
  return `${out}...`;
}

/** Posts events for the controller. */
export class KubeEventRecorder implements EventRecorderContract {
  private readonly client: KubeClient;
  private readonly identity: string;
  private readonly log: Logger;
  private readonly now: () => number;
  private readonly windowMs: number;
  private readonly recent = new Map<string, number>();

  constructor(opts: EventRecorderOptions) {
    this.client = opts.client;
    this.identity = opts.identity;
    this.log = opts.log;
    this.now = opts.now ?? Date.now;
    this.windowMs = opts.dedupWindowMs ?? 60_000;
  }

  /** {@inheritDoc EventRecorder.event} */
  async event(
    regarding: ObjectLike,
    type: EventType,
    reason: string,
    note: string,
    action: string = reason,
  ): Promise<void> {
    const meta = regarding.metadata ?? {};
    const namespace = meta.namespace ?? "default";
    const name = meta.name ?? "";
    const t = this.now();
    const dedupKey = `${meta.uid ?? `${namespace}/${name}`}\u0000${reason}\u0000${note}`;
    this.prune(t);
    const last = this.recent.get(dedupKey);
    if (last !== undefined && t - last < this.windowMs) return;
    this.recent.set(dedupKey, t);
    const body = {
      apiVersion: "events.k8s.io/v1",
      kind: "Event",
      metadata: {
        // Same shape as the apiserver's own recorders: object name plus a unique suffix.
        name: `${name.slice(0, 220)}.${t.toString(16)}${randomBytes(3).toString("hex")}`,
        namespace,
      },
      eventTime: microTime(t),
      type,
      reason: reason.slice(0, 128),
      action: action.slice(0, 128),
      // Whatever a value in it holds, the note cannot act on a terminal or show a credential.
      note: truncateBytes(safeText(note), 1024),
      reportingController: REPORTING_CONTROLLER,
      reportingInstance: this.identity.slice(0, 128),
      regarding: {
        apiVersion: regarding.apiVersion,
        kind: regarding.kind,
        name,
        namespace,
        uid: meta.uid,
        resourceVersion: meta.resourceVersion,
      },
    };
    try {
      await this.client.create(paths.events(namespace), body);
    } catch (e) {
      // Let a later identical event retry instead of being swallowed by the dedup window.
      this.recent.delete(dedupKey);
      this.log.warn({ err: errorMessage(e), reason, namespace, name }, "could not post an event");
    }
  }

  private prune(t: number): void {
    if (this.recent.size < 1000) return;
    for (const [k, at] of this.recent) if (t - at >= this.windowMs) this.recent.delete(k);
  }
}
