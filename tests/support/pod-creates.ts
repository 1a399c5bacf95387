/**
 * Test support: counts pod creates by watching pods (an informer on a label selector) and
 * collecting the distinct uids it sees; a pod deleted and created again under the same name
 * has a new uid, so every create counts once, whoever made it.
 */
import { Informer } from "../../controller/informer.js";
import type { Pod } from "../../provider/fleet/index.js";
import { paths, type KubeClient, type KubeObject } from "../../provider/kube/index.js";

/** A running create counter. */
export interface PodCreates {
  /** Every uid seen so far. */
  readonly uids: ReadonlySet<string>;
  /** Uids seen so far that are not in `before`. */
  since(before: ReadonlySet<string>): string[];
  /** Resolves once the first list is in. */
  synced(): Promise<void>;
  /** Called on each new uid (after the first list). */
  onCreate?: (pod: Pod) => void;
  stop(): Promise<void>;
}

/** Starts counting the creates of the pods in `ns` that match `labelSelector`. */
export function countPodCreates(client: KubeClient, ns: string, labelSelector: string): PodCreates {
  const informer = new Informer<KubeObject>({ client, path: paths.pods(ns), labelSelector });
  const uids = new Set<string>();
  const counter: PodCreates = {
    uids,
    since: (before) => [...uids].filter((u) => !before.has(u)),
    synced: () => informer.waitForSync(),
    stop: () => informer.stop(),
  };
  const see = (o: KubeObject) => {
    const uid = o.metadata.uid ?? "";
    if (uid === "" || uids.has(uid)) return;
    uids.add(uid);
    counter.onCreate?.(o);
  };
  informer.addHandlers({ onAdd: see, onUpdate: (_, o) => see(o) });
  informer.start();
  return counter;
}
