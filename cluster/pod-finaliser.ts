/**
 * The pod finaliser of the embedded cluster: the part of a kubelet that removes a pod once
 * it has been asked to stop. kwok simulates the rest of the node (binding, status) but not
 * this: its stage `delete` action deletes by name with grace 0 and no precondition, so a
 * stale delete still sitting in its queue removes whatever pod carries that name by the time
 * it runs — the fresh replacement a controller just created. This loop deletes exactly the
 * pod that was terminating: a grace-0 delete with a uid precondition, as a kubelet sends.
 *
 * Guarantees:
 * - it only deletes pods that have a deletionTimestamp, are bound to a node this cluster
 *   simulates (annotation `kwok.x-k8s.io/node=fake`) and still have a grace period above 0
 *   (0 means the final delete was already accepted and only finalizers hold the pod);
 * - every delete carries the pod's uid: a pod recreated under the same name is never touched
 *   (the apiserver answers 409, which counts as done);
 * - a pod held by finalizers is left to the apiserver, which removes it when they are gone;
 * - transient errors are retried with a backoff (100 ms doubling to 5 s) while the pod of
 *   that uid is still there and terminating.
 */
import { Informer } from "../controller/informer.js";
import { paths, type KubeClient, type KubeObject } from "../engine/kube/index.js";
import { FAKE_NODE_ANNOTATION } from "./local-cluster.js";
import { errorMessage } from "../engine/kube/branded-error.js";

/** The fields of a pod the finaliser reads. */
export interface TerminatingPod extends KubeObject {
  metadata: KubeObject["metadata"] & { deletionGracePeriodSeconds?: number };
  spec?: { nodeName?: string };
}

/** Options of {@link startPodFinaliser}. */
export interface PodFinaliserOptions {
  client: KubeClient;
  /** One line per delete and per error. @default silent */
  log?: (line: string) => void;
  /** Deletes in flight at most. @default 16 */
  concurrency?: number;
}

/** A running finaliser. */
export interface PodFinaliser {
  /** Resolves once the node and pod caches are filled. */
  synced(): Promise<void>;
  /** Final deletes the apiserver accepted so far. */
  deleted(): number;
  stop(): Promise<void>;
}

/** Whether the finaliser owes `pod` its final delete, given the names of simulated nodes. */
export function needsFinalDelete(
  pod: TerminatingPod,
  simulatedNodes: ReadonlySet<string>,
): boolean {
  const m = pod.metadata;
  if (!m.deletionTimestamp || !m.uid || !m.name || !m.namespace) return false;
  if (m.deletionGracePeriodSeconds === 0) return false;
  const node = pod.spec?.nodeName;
  return node !== undefined && node !== "" && simulatedNodes.has(node);
}

/** Starts watching nodes and pods and deleting terminating pods by uid. */
export function startPodFinaliser(opts: PodFinaliserOptions): PodFinaliser {
  const { client } = opts;
  const log = opts.log ?? (() => undefined);
  const concurrency = Math.max(1, opts.concurrency ?? 16);
  const nodes = new Informer<KubeObject>({ client, path: paths.nodes() });
  const pods = new Informer<TerminatingPod>({ client, path: paths.allPods() });
  const simulated = new Set<string>();
  // uid → the pod as last seen; a uid is queued once and forgotten when the pod is gone.
  const pending = new Map<string, TerminatingPod>();
  const queue: string[] = [];
  const inFlight = new Set<string>();
  const timers = new Set<NodeJS.Timeout>();
  let accepted = 0;
  let stopped = false;

  const consider = (pod: TerminatingPod) => {
    const uid = pod.metadata.uid ?? "";
    if (!needsFinalDelete(pod, simulated)) return;
    const known = pending.has(uid);
    pending.set(uid, pod);
    if (!known) {
      queue.push(uid);
      pump();
    }
  };
  const forget = (pod: TerminatingPod) => pending.delete(pod.metadata.uid ?? "");

  const finalDelete = async (uid: string, attempt: number): Promise<void> => {
    const pod = pending.get(uid);
    if (!pod || stopped) return;
    const { namespace = "", name = "" } = pod.metadata;
    try {
      if (await client.delete(paths.pod(namespace, name), { uid, gracePeriodSeconds: 0 })) {
        accepted++;
        log(`deleted pod ${namespace}/${name} uid ${uid}`);
      }
      pending.delete(uid);
    } catch (e) {
      const delay = Math.min(5000, 100 * 2 ** attempt);
      log(
        `deleting pod ${namespace}/${name} uid ${uid} failed (${errorMessage(e)}); retry in ${delay} ms`,
      );
      const timer = setTimeout(() => {
        timers.delete(timer);
        const current = pods.get(`${namespace}/${name}`);
        if (current?.metadata.uid !== uid || !needsFinalDelete(current, simulated)) {
          pending.delete(uid);
          return;
        }
        void run(uid, attempt + 1);
      }, delay);
      timers.add(timer);
    }
  };

  const run = async (uid: string, attempt: number): Promise<void> => {
    inFlight.add(uid);
    try {
      await finalDelete(uid, attempt);
    } finally {
      inFlight.delete(uid);
      pump();
    }
  };

  function pump(): void {
    while (!stopped && inFlight.size < concurrency && queue.length > 0) {
      const uid = queue.shift() as string;
      if (pending.has(uid)) void run(uid, 0);
    }
  }

  const isSimulated = (n: KubeObject) => n.metadata.annotations?.[FAKE_NODE_ANNOTATION] === "fake";
  nodes.addHandlers({
    onAdd(n) {
      if (!isSimulated(n)) return;
      simulated.add(n.metadata.name ?? "");
      // Pods bound before the node was seen.
      for (const p of pods.list()) if (p.spec?.nodeName === n.metadata.name) consider(p);
    },
    onUpdate(_, n) {
      if (isSimulated(n)) simulated.add(n.metadata.name ?? "");
      else simulated.delete(n.metadata.name ?? "");
    },
    onDelete(n) {
      simulated.delete(n.metadata.name ?? "");
    },
  });
  pods.addHandlers({
    onAdd: consider,
    onUpdate: (_, p) => consider(p),
    onDelete: forget,
  });
  nodes.start();
  pods.start();

  return {
    async synced() {
      await nodes.waitForSync();
      await pods.waitForSync();
    },
    deleted: () => accepted,
    async stop() {
      stopped = true;
      for (const t of timers) clearTimeout(t);
      timers.clear();
      await Promise.all([nodes.stop(), pods.stop()]);
    },
  };
}
