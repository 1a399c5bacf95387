/**
 * The kubelet's admission of pods on the embedded cluster's simulated nodes. kwok plays the
 * rest of a kubelet's part but never checks room: a pod bound by `spec.nodeName` (the
 * scheduler bypassed) to a full node would run. A real kubelet admits the pods bound to its
 * node one by one, in creation order, against its allocatable minus the requests of the
 * pods it admitted before that have not finished, and refuses one that does not fit: phase
 * `Failed`, reason `OutOf<resource>`, message `Pod was rejected: Node didn't have enough
 * resource: ...`, and a Warning event with the same reason.
 *
 * This does the same for every pod bound to a simulated node, in every namespace. An
 * admitted pod gets its `status.startTime` (the kubelet sets it when it acknowledges the
 * pod), and kwok's stages (kwok-stages.yaml) only start pods that have one, so a refused pod
 * never runs first. The node's allocatable is read from its status at each decision, so a
 * test may patch it (`cocoonset-dev cluster up --node-allocatable`, or a status patch).
 */
import { microTime } from "../controller/events.js";
import type { Informer } from "../controller/informer.js";
import {
  type CapacityPod,
  isFinished,
  kubeletFitErrors,
  outOfReason,
  rejectionMessage,
} from "../engine/capacity/index.js";
import { paths, type KubeClient, type KubeObject } from "../engine/kube/index.js";
import { errorMessage } from "../engine/kube/branded-error.js";

/** A pod as admission reads it. */
export type AdmissionPod = KubeObject & CapacityPod;

/** A node as admission reads it. */
export interface AdmissionNode extends KubeObject {
  status?: { allocatable?: Record<string, string> };
}

/** The decision on one pod: admitted, or refused with the kubelet's reason and message. */
export type AdmissionDecision = { admit: true } | { admit: false; reason: string; message: string };

/** Whether the kubelet has taken the pod in (acknowledged with a start time) or must decide. */
export function awaitsAdmission(pod: AdmissionPod): boolean {
  return (
    !pod.metadata.deletionTimestamp &&
    !pod.status?.startTime &&
    (pod.status?.phase ?? "Pending") === "Pending"
  );
}

/**
 * The kubelet's decision on `pod` (pure): `admitted` are the pods admitted on its node
 * before it that have not finished.
 */
export function admissionDecision(
  pod: AdmissionPod,
  node: AdmissionNode,
  admitted: readonly AdmissionPod[],
): AdmissionDecision {
  const errors = kubeletFitErrors(pod, node.status?.allocatable ?? {}, admitted);
  if (errors.length === 0) return { admit: true };
  return { admit: false, reason: outOfReason(errors[0]), message: rejectionMessage(errors[0]) };
}

/** Pods in the order the kubelet admits them: by creation time, then name. */
export function admissionOrder<T extends AdmissionPod>(pods: readonly T[]): T[] {
  return [...pods].sort((a, b) => {
    const ta = a.metadata.creationTimestamp ?? "";
    const tb = b.metadata.creationTimestamp ?? "";
    if (ta !== tb) return ta < tb ? -1 : 1;
    return (a.metadata.name ?? "") < (b.metadata.name ?? "") ? -1 : 1;
  });
}

/** Options of {@link KubeletAdmission}. */
export interface KubeletAdmissionOptions {
  client: KubeClient;
  nodes: Informer<AdmissionNode>;
  pods: Informer<AdmissionPod>;
  /** Whether kwok simulates the node. */
  isSimulated: (node: string) => boolean;
  log: (line: string) => void;
}

/** Admits or refuses the pods bound to simulated nodes, one node's pods at a time. */
export class KubeletAdmission {
  /** node → the uids waiting for a decision there. */
  private readonly waiting = new Map<string, Set<string>>();
  /** Nodes whose decisions are running. */
  private readonly busy = new Set<string>();
  /** uid → the decision sent, until the cache shows it (a patch answer may be newer). */
  private readonly decided = new Map<string, boolean>();
  private readonly retries = new Set<NodeJS.Timeout>();
  private stopped = false;

  constructor(private readonly o: KubeletAdmissionOptions) {}

  stop(): void {
    this.stopped = true;
    for (const t of this.retries) clearTimeout(t);
    this.retries.clear();
  }

  /** A pod was added or changed: queue it if its node must decide on it. */
  kick(pod: AdmissionPod): void {
    const node = pod.spec?.nodeName;
    const uid = pod.metadata.uid;
    if (!node || !uid || !this.o.isSimulated(node)) return;
    if (this.decided.has(uid) && (pod.status?.startTime || isFinished(pod)))
      this.decided.delete(uid);
    if (!awaitsAdmission(pod) || this.decided.has(uid)) return;
    const set = this.waiting.get(node) ?? new Set<string>();
    set.add(uid);
    this.waiting.set(node, set);
    if (!this.busy.has(node)) void this.run(node);
  }

  /** A pod is gone: forget its decision. */
  forget(pod: AdmissionPod): void {
    this.decided.delete(pod.metadata.uid ?? "");
  }

  private podsOn(node: string): AdmissionPod[] {
    return this.o.pods.list().filter((p) => p.spec?.nodeName === node);
  }

  /** Whether the pod counts on its node: admitted (by the cache or by a decision sent) and not finished. */
  private holds(p: AdmissionPod): boolean {
    const d = this.decided.get(p.metadata.uid ?? "");
    if (d === false || isFinished(p)) return false;
    return d === true || !!p.status?.startTime;
  }

  private async run(node: string): Promise<void> {
    this.busy.add(node);
    try {
      for (;;) {
        const uids = this.waiting.get(node);
        if (this.stopped || !uids || uids.size === 0) return;
        this.waiting.delete(node);
        const candidates = admissionOrder(
          this.podsOn(node).filter(
            (p) =>
              uids.has(p.metadata.uid ?? "") &&
              awaitsAdmission(p) &&
              !this.decided.has(p.metadata.uid ?? ""),
          ),
        );
        for (const pod of candidates) {
          if (this.stopped) return;
          const nodeObj = this.o.nodes.get(node);
          if (!nodeObj) continue;
          const admitted = this.podsOn(node).filter(
            (p) => p.metadata.uid !== pod.metadata.uid && this.holds(p),
          );
          let decision = admissionDecision(pod, nodeObj, admitted);
          // A refusal is final (the pod fails): confirm it on a fresh read of the node and its
          // pods, as the caches may not show a patched allocatable or a pod that finished yet.
          if (!decision.admit) decision = await this.confirmRefusal(pod, node, decision);
          await this.decide(pod, decision);
        }
      }
    } finally {
      this.busy.delete(node);
    }
  }

  /** The decision again from fresh reads; the cached one when a read fails. */
  private async confirmRefusal(
    pod: AdmissionPod,
    node: string,
    cached: AdmissionDecision,
  ): Promise<AdmissionDecision> {
    try {
      const [nodeObj, pods] = await Promise.all([
        this.o.client.get<AdmissionNode>(`${paths.nodes()}/${node}`),
        this.o.client.list<AdmissionPod>(paths.allPods(), {
          fieldSelector: `spec.nodeName=${node}`,
        }),
      ]);
      const admitted = pods.items.filter(
        (p) => p.metadata.uid !== pod.metadata.uid && this.holds(p),
      );
      return admissionDecision(pod, nodeObj, admitted);
    } catch (e) {
      this.o.log(`${node}: fresh read for a refusal failed (${errorMessage(e)})`);
      return cached;
    }
  }

  private async decide(pod: AdmissionPod, d: AdmissionDecision): Promise<void> {
    const { namespace = "", name = "", uid } = pod.metadata;
    const now = new Date().toISOString();
    const status = d.admit
      ? { startTime: now }
      : { phase: "Failed", reason: d.reason, message: d.message, startTime: now };
    this.decided.set(uid ?? "", d.admit);
    try {
      await this.o.client.patch(paths.podStatus(namespace, name), { metadata: { uid }, status });
    } catch (e) {
      this.decided.delete(uid ?? "");
      this.o.log(`${namespace}/${name}: admission not recorded (${errorMessage(e)})`);
      // Decided again once the error passes, unless the pod is gone or was recreated under
      // the same name (then its own events queue the new one).
      if (!this.stopped) {
        const timer = setTimeout(() => {
          this.retries.delete(timer);
          const current = this.o.pods.get(`${namespace}/${name}`);
          if (current && current.metadata.uid === uid) this.kick(current);
        }, 500);
        this.retries.add(timer);
      }
      return;
    }
    if (d.admit) return;
    this.o.log(
      `${namespace}/${name}: refused on ${pod.spec?.nodeName}: ${d.reason} (${d.message})`,
    );
    await this.event(pod, d.reason, d.message.replace(/^Pod was rejected: /, "")).catch((e) =>
      this.o.log(`${namespace}/${name}: event not recorded (${errorMessage(e)})`),
    );
  }

  /** The Warning event a kubelet records on a refused pod. */
  private async event(pod: AdmissionPod, reason: string, note: string): Promise<void> {
    const { namespace = "", name = "", uid } = pod.metadata;
    await this.o.client.create(paths.events(namespace), {
      apiVersion: "events.k8s.io/v1",
      kind: "Event",
      metadata: { name: `${name.slice(0, 200)}.${Date.now().toString(16)}`, namespace },
      eventTime: microTime(Date.now()),
      reportingController: "kubelet",
      reportingInstance: `kubelet-${pod.spec?.nodeName ?? ""}`,
      action: "Admit",
      type: "Warning",
      reason,
      note,
      regarding: { apiVersion: "v1", kind: "Pod", namespace, name, uid },
    });
  }
}
