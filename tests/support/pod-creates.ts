/**
 * Test support: counts pod creates by watching pods (an informer on a label selector) and
 * collecting the distinct uids it sees; a pod deleted and created again under the same name
 * has a new uid, so every create counts once, whoever made it.
 */
import { Informer } from "../../controller/informer.js";
import type { Pod } from "../../engine/spec/index.js";
import { paths, type KubeClient, type KubeObject } from "../../engine/kube/index.js";

/** A running create counter. */
export interface PodCreates {
  /** Every uid seen so far. */
  readonly uids: ReadonlySet<string>;
  /** Uids seen so far that are not in `before`. */
  since(before: ReadonlySet<string>): string[];
  /** Resolves once the first list is in. */
  synced(): Promise<void>;
  /**
   * Resolves once every uid given has been seen: the counter's watch may lag behind another
   * reader's, so a count is read only after the counter has caught up with what that reader
   * saw. Rejects after `timeoutMs`, naming how many are still unseen.
   */
  seen(uids: Iterable<string>, timeoutMs: number): Promise<void>;
  /** Called on each new uid (after the first list). */
  onCreate?: (pod: Pod) => void;
  stop(): Promise<void>;
}

/** Starts counting the creates of the pods in `ns` that match `labelSelector`. */
export function countPodCreates(client: KubeClient, ns: string, labelSelector: string): PodCreates {
  const informer = new Informer<KubeObject>({ client, path: paths.pods(ns), labelSelector });
  const uids = new Set<string>();
  const waiters = new Set<() => void>();
  const counter: PodCreates = {
    uids,
    since: (before) => [...uids].filter((u) => !before.has(u)),
    synced: () => informer.waitForSync(),
    seen: (wanted, timeoutMs) => {
      const missing = new Set([...wanted].filter((u) => !uids.has(u)));
      if (missing.size === 0) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const check = () => {
          for (const u of missing) if (uids.has(u)) missing.delete(u);
          if (missing.size > 0) return;
          clearTimeout(timer);
          waiters.delete(check);
          resolve();
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(
            new Error(
              `the create counter has not seen ${missing.size} pod(s) within ${timeoutMs} ms`,
            ),
          );
        }, timeoutMs);
        waiters.add(check);
      });
    },
    stop: () => informer.stop(),
  };
  const see = (o: KubeObject) => {
    const uid = o.metadata.uid ?? "";
    if (uid === "" || uids.has(uid)) return;
    uids.add(uid);
    counter.onCreate?.(o);
    for (const check of [...waiters]) check();
  };
  informer.addHandlers({ onAdd: see, onUpdate: (_, o) => see(o) });
  informer.start();
  return counter;
}
