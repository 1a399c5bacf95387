/**
 * A simulator of the node agent (vk-cocoon, the virtual kubelet that runs cocoon VMs), for
 * the embedded cluster: kwok plays the kubelet's part of a pod's life, this process plays
 * the VM's. It is a test fixture of `cocoonset-dev cluster up`, never part of the controller
 * image.
 *
 * **Opt-in.** It acts only on pods in namespaces labelled
 * `sim.cocoonset.cocoonstack.io/node-agent=enabled` ({@link NODE_AGENT_LABEL}). Everywhere
 * else a pod keeps only what kwok gives it, as before the simulator existed: a controller
 * that reacts to the lifecycle annotations (cocoon-operator does) sees none unless a test
 * asked for them. In an opted-in namespace it acts on the pods a CocoonSet manages: bound
 * to a simulated node, with a VM name and `cocoonset.cocoonstack.io/managed=true`.
 *
 * **What it does**, writing the lifecycle annotations as the node agent does (state and
 * observed generation in one patch, the observed generation being the pod's
 * `cocoonset.cocoonstack.io/generation` at that moment, the message cleared unless there
 * is something to say):
 * - boot: `creating`, then `ready` with a fresh VM id and IP;
 * - `vm.cocoonstack.io/hibernate=true` on a ready VM: `hibernating`, a snapshot manifest
 *   pushed to the registry as `<vm>:hibernate`, then `hibernated` with the id and IP removed;
 * - the annotation removed from a hibernated VM (wake), or a new pod with
 *   `vm.cocoonstack.io/restore-from-hibernate=true` (restore): `creating`, the snapshot
 *   looked up, then `ready` with a fresh id — or `failed` when `<vm>:hibernate` is missing;
 * - a pod deleted while its VM runs: `<vm>:latest` pushed where the snapshot policy asks
 *   (`always`: every VM; `main-only`: the main agent's; `never`: none);
 * - a pod deleted with `vm.cocoonstack.io/keep-snapshot-on-delete=true` (a seat release):
 *   no `:latest`; the node keeps its local copy, and the next restore of that VM on that
 *   node is warm: it needs no registry tag and says so in the message;
 * - a changed generation on a ready or hibernated VM is echoed.
 *
 * **Test hooks**, pod annotations of its own: `sim.cocoonset.cocoonstack.io/hibernate-delay-ms`
 * and `wake-delay-ms` hold the VM in `hibernating` / `creating` that long;
 * `sim.cocoonset.cocoonstack.io/fail: hibernate|wake` ends that transition in `failed`.
 *
 * Guarantees: one pod's transitions run one at a time, in order, each from the newest copy
 * of the pod it has; every patch carries the pod's uid, so a pod recreated under the same
 * name is never written by a step meant for the old one. Registry errors (other than a
 * missing tag) are retried with a backoff (200 ms doubling to 5 s).
 *
 * Caveats: the node-local copies and the work in flight live in memory; after a restart a
 * pod found in `hibernating` is hibernated again and one found in `creating` is booted again
 * (from the snapshot when its message says it was restoring).
 */
import { randomBytes, randomUUID } from "node:crypto";
import { Informer } from "../controller/informer.js";
import {
  ANNOTATIONS,
  LABELS,
  LIFECYCLE_STATES,
  ROLES,
  SNAPSHOT_TAGS,
} from "../engine/spec/index.js";
import { paths, type KubeClient, type KubeObject } from "../engine/kube/index.js";
import { OciRegistry, type OciRegistryOptions, RegistryError } from "../engine/registry/oci.js";
import { FAKE_NODE_ANNOTATION } from "./local-cluster.js";
import { type AdmissionPod, KubeletAdmission } from "./node-admission.js";
import { errorMessage } from "../engine/kube/branded-error.js";

/** Namespace label that opts a namespace's pods in, with the value {@link NODE_AGENT_ENABLED}. */
export const NODE_AGENT_LABEL = "sim.cocoonset.cocoonstack.io/node-agent";
/** The value of {@link NODE_AGENT_LABEL} that opts in. */
export const NODE_AGENT_ENABLED = "enabled";

/** The simulator's own pod annotations (test hooks). */
export const SIM_ANNOTATIONS = {
  /** Milliseconds a hibernation stays in `hibernating` before the snapshot is pushed. */
  hibernateDelayMs: "sim.cocoonset.cocoonstack.io/hibernate-delay-ms",
  /** Milliseconds a wake or restore stays in `creating`. */
  wakeDelayMs: "sim.cocoonset.cocoonstack.io/wake-delay-ms",
  /** `hibernate` or `wake`: that transition ends in `failed`. */
  fail: "sim.cocoonset.cocoonstack.io/fail",
} as const;

/** Message of `creating` while a VM is being restored from its snapshot. */
export const RESTORING_MESSAGE = "restoring from the hibernation snapshot";

/** Media types of the snapshot manifest (the node agent's artifact format). */
const SNAPSHOT_MEDIA_TYPES = {
  artifact: "application/vnd.cocoonstack.snapshot.v1+json",
  config: "application/vnd.cocoonstack.snapshot.config.v1+json",
  state: "application/vnd.cocoonstack.vm.state+json",
} as const;

/** The fields of a pod the simulator reads. */
export interface AgentPod extends KubeObject {
  spec?: { nodeName?: string };
}

/** What the simulator does next to a pod, or nothing. */
export type AgentStep =
  { kind: "boot"; fromSnapshot: boolean } | { kind: "hibernate" } | { kind: "echo" } | undefined;

const annotationsOf = (pod: AgentPod): Record<string, string> => pod.metadata.annotations ?? {};

/** The pod's `cocoonset.cocoonstack.io/generation` as the node agent echoes it ("0" when absent). */
export function generationOf(pod: AgentPod): string {
  const raw = annotationsOf(pod)[ANNOTATIONS.generation] ?? "";
  return /^\d+$/.test(raw) ? String(Number(raw)) : "0";
}

/** Whether the pod is one the simulator owes a VM: managed, named, bound to a simulated node. */
export function isSimulatedVM(pod: AgentPod, simulatedNodes: ReadonlySet<string>): boolean {
  const a = annotationsOf(pod);
  const node = pod.spec?.nodeName;
  return (
    !!a[ANNOTATIONS.vmName] &&
    a[ANNOTATIONS.managed] === "true" &&
    node !== undefined &&
    simulatedNodes.has(node)
  );
}

/**
 * The next transition of a live pod's VM (pure; the pod is the newest copy known).
 * A failed VM stays failed: the controller replaces the pod.
 */
export function nextStep(pod: AgentPod): AgentStep {
  if (pod.metadata.deletionTimestamp) return undefined;
  const a = annotationsOf(pod);
  const hibernate = a[ANNOTATIONS.hibernate] === "true";
  const restore = a[ANNOTATIONS.restoreFromHibernate] === "true";
  const echo = a[ANNOTATIONS.lifecycleObservedGeneration] !== generationOf(pod);
  switch (a[ANNOTATIONS.lifecycleState] ?? "") {
    case "":
      return { kind: "boot", fromSnapshot: restore };
    case LIFECYCLE_STATES.creating:
      return {
        kind: "boot",
        fromSnapshot: restore || a[ANNOTATIONS.lifecycleStateMessage] === RESTORING_MESSAGE,
      };
    case LIFECYCLE_STATES.ready:
      if (hibernate) return { kind: "hibernate" };
      return echo ? { kind: "echo" } : undefined;
    case LIFECYCLE_STATES.hibernating:
      return { kind: "hibernate" };
    case LIFECYCLE_STATES.hibernated:
      if (!hibernate) return { kind: "boot", fromSnapshot: true };
      return echo ? { kind: "echo" } : undefined;
    default:
      return undefined;
  }
}

/** Whether deleting a running VM pushes `<vm>:latest`, by snapshot policy and role. */
export function pushesLatestOnDelete(pod: AgentPod): boolean {
  const a = annotationsOf(pod);
  switch (a[ANNOTATIONS.snapshotPolicy] || "always") {
    case "never":
      return false;
    case "main-only":
      return pod.metadata.labels?.[LABELS.role] === ROLES.main;
    default:
      return true;
  }
}

/** A delay hook's value in milliseconds (0 when absent or not a number), at most 10 minutes. */
export function delayOf(pod: AgentPod, key: string): number {
  const n = Number(annotationsOf(pod)[key] ?? "");
  return Number.isFinite(n) && n > 0 ? Math.min(n, 600_000) : 0;
}

/** Options of {@link startNodeAgent}. */
export interface NodeAgentOptions {
  client: KubeClient;
  /** The registry, `host:port[/prefix]`. */
  registry: string;
  /**
   * How to reach the registry: its CA and where credentials come from, as the controller
   * takes them (`--oci-registry-ca-file`, `--oci-registry-docker-config`).
   * @default http to a loopback host, the Docker keychain of the process
   */
  registryOptions?: Pick<OciRegistryOptions, "ca" | "keychain" | "insecure">;
  /**
   * The value of {@link NODE_AGENT_LABEL} that opts a namespace in: a second simulator (one
   * that reaches another registry) takes namespaces of its own beside the cluster's.
   * @default {@link NODE_AGENT_ENABLED}
   */
  optIn?: string;
  /**
   * Play the kubelet's admission of pods bound to simulated nodes (cluster/node-admission.ts).
   * One simulator per cluster does: a second one leaves it to the cluster's.
   * @default true
   */
  admission?: boolean;
  /** One line per transition and per error. @default silent */
  log?: (line: string) => void;
}

/** A running simulator. */
export interface NodeAgent {
  /** Resolves once the node, namespace and pod caches are filled. */
  synced(): Promise<void>;
  stop(): Promise<void>;
}

/** Lifecycle annotations of one patch; null removes a key. */
type Patch = Record<string, string | null>;

/** Starts simulating the node agent on the opted-in pods. */
export function startNodeAgent(opts: NodeAgentOptions): NodeAgent {
  const sim = new SimulatedNodeAgent(opts);
  sim.start();
  return sim;
}

/**
 * The simulator's parts: three informers (nodes, namespaces, pods) feed {@link kick}; one
 * runner per pod uid ({@link work}) performs the pod's next step (boot, hibernate, echo) from
 * its newest copy; {@link onGone} handles a deletion's snapshot.
 */
class SimulatedNodeAgent implements NodeAgent {
  private readonly client: KubeClient;
  private readonly log: (line: string) => void;
  private readonly registry: OciRegistry;
  private readonly nodes: Informer<KubeObject>;
  private readonly namespaces: Informer<KubeObject>;
  private readonly pods: Informer<AgentPod & AdmissionPod>;
  /** The kubelet's admission of every pod bound to a simulated node (cluster/node-admission.ts). */
  private readonly admission: KubeletAdmission | undefined;
  /** The {@link NODE_AGENT_LABEL} value of the namespaces this simulator acts in. */
  private readonly optIn: string;
  /** Names of the nodes kwok simulates. */
  private readonly simulated = new Set<string>();
  /** `node/vm` of the snapshots nodes kept for a warm restore. */
  private readonly localCopies = new Set<string>();
  /** uid → the newest copy of the pod this process has (a patch answer may be newer than the cache). */
  private readonly newest = new Map<string, AgentPod>();
  /** uids with a runner. */
  private readonly running = new Set<string>();
  /** uids changed while their runner worked: it looks again before it returns. */
  private readonly dirty = new Set<string>();
  /** uids whose deletion was handled. */
  private readonly deleted = new Set<string>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private stopped = false;

  constructor(opts: NodeAgentOptions) {
    this.client = opts.client;
    this.log = opts.log ?? (() => undefined);
    this.registry = new OciRegistry(opts.registry, opts.registryOptions);
    this.optIn = opts.optIn ?? NODE_AGENT_ENABLED;
    this.nodes = new Informer<KubeObject>({ client: this.client, path: paths.nodes() });
    this.namespaces = new Informer<KubeObject>({ client: this.client, path: paths.namespaces() });
    this.pods = new Informer<AgentPod & AdmissionPod>({
      client: this.client,
      path: paths.allPods(),
    });
    this.admission =
      opts.admission === false
        ? undefined
        : new KubeletAdmission({
            client: this.client,
            nodes: this.nodes,
            pods: this.pods,
            isSimulated: (node) => this.simulated.has(node),
            log: this.log,
          });
  }

  /** Wires the informers' events and starts them. */
  start(): void {
    const isSimulatedNode = (n: KubeObject) =>
      n.metadata.annotations?.[FAKE_NODE_ANNOTATION] === "fake";
    this.nodes.addHandlers({
      onAdd: (n) => {
        if (!isSimulatedNode(n)) return;
        this.simulated.add(n.metadata.name ?? "");
        this.kickAll((p) => p.spec?.nodeName === n.metadata.name);
        for (const p of this.pods.list())
          if (p.spec?.nodeName === n.metadata.name) this.admission?.kick(p);
      },
      onUpdate: (_, n) => {
        if (isSimulatedNode(n)) this.simulated.add(n.metadata.name ?? "");
        else this.simulated.delete(n.metadata.name ?? "");
      },
      onDelete: (n) => {
        this.simulated.delete(n.metadata.name ?? "");
      },
    });
    const namespaceChanged = (ns: KubeObject) => {
      if (this.optedIn(ns.metadata.name))
        this.kickAll((p) => p.metadata.namespace === ns.metadata.name);
    };
    this.namespaces.addHandlers({
      onAdd: namespaceChanged,
      onUpdate: (_, ns) => namespaceChanged(ns),
    });
    this.pods.addHandlers({
      onAdd: (p) => {
        this.admission?.kick(p);
        this.kick(p);
      },
      onUpdate: (_, p) => {
        this.admission?.kick(p);
        this.kick(p);
      },
      onDelete: (p) => {
        this.admission?.forget(p);
        this.remember(p);
        this.onGone(p);
        const uid = p.metadata.uid ?? "";
        this.newest.delete(uid);
        this.deleted.delete(uid);
        this.dirty.delete(uid);
      },
    });
    this.nodes.start();
    this.namespaces.start();
    this.pods.start();
  }

  async synced(): Promise<void> {
    await this.nodes.waitForSync();
    await this.namespaces.waitForSync();
    await this.pods.waitForSync();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.admission?.stop();
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    await Promise.all([this.nodes.stop(), this.namespaces.stop(), this.pods.stop()]);
  }

  // --- which pods, and their newest copies

  private optedIn(ns: string | undefined): boolean {
    return this.namespaces.get(ns ?? "")?.metadata.labels?.[NODE_AGENT_LABEL] === this.optIn;
  }

  private eligible(p: AgentPod): boolean {
    return this.optedIn(p.metadata.namespace) && isSimulatedVM(p, this.simulated);
  }

  private remember(p: AgentPod): void {
    const uid = p.metadata.uid ?? "";
    const known = this.newest.get(uid);
    if (!known || resourceVersionOf(p) >= resourceVersionOf(known)) this.newest.set(uid, p);
  }

  private newestOf(pod: AgentPod): AgentPod {
    return this.newest.get(pod.metadata.uid ?? "") ?? pod;
  }

  private kickAll(filter: (p: AgentPod) => boolean): void {
    for (const p of this.pods.list()) if (filter(p)) this.kick(p);
  }

  private kick(pod: AgentPod): void {
    const uid = pod.metadata.uid ?? "";
    if (!uid) return;
    this.remember(pod);
    if (pod.metadata.deletionTimestamp) return this.onGone(pod);
    if (!this.eligible(pod)) return;
    if (this.running.has(uid)) this.dirty.add(uid);
    else void this.work(uid);
  }

  // --- scheduling

  /** Calls `fn` after `ms` unless the simulator stopped first. */
  private later(ms: number, fn: () => void): void {
    const t = setTimeout(() => {
      this.timers.delete(t);
      fn();
    }, ms);
    this.timers.add(t);
  }

  private sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      if (ms <= 0 || this.stopped) return resolve();
      this.later(ms, resolve);
    });
  }

  /** Runs the pod's transitions until none is left; one runner per uid. */
  private async work(uid: string, attempt = 0): Promise<void> {
    this.running.add(uid);
    try {
      for (;;) {
        this.dirty.delete(uid);
        const pod = this.newest.get(uid);
        if (this.stopped || !pod || this.deleted.has(uid) || !this.eligible(pod)) return;
        const step = nextStep(pod);
        if (!step) {
          if (this.dirty.has(uid)) continue;
          return;
        }
        try {
          await this.perform(pod, step);
          attempt = 0;
        } catch (e) {
          if (this.stopped || this.deleted.has(uid)) return;
          if (!RegistryError.isInstance(e) && !this.newest.has(uid)) return;
          const delay = retryDelayMs(attempt);
          this.log(`${keyOf(pod)}: ${step.kind} failed (${errorMessage(e)}); retry in ${delay} ms`);
          this.later(delay, () => {
            if (!this.running.has(uid)) void this.work(uid, attempt + 1);
          });
          return;
        }
      }
    } finally {
      this.running.delete(uid);
    }
  }

  private async perform(pod: AgentPod, step: NonNullable<AgentStep>): Promise<void> {
    switch (step.kind) {
      case "boot":
        return this.boot(pod, step.fromSnapshot);
      case "hibernate":
        return this.hibernate(pod);
      case "echo":
        await this.patch(pod, { [ANNOTATIONS.lifecycleObservedGeneration]: generationOf(pod) });
        return;
    }
  }

  // --- the VM's transitions

  private async patch(pod: AgentPod, annotations: Patch): Promise<AgentPod> {
    const { namespace = "", name = "", uid } = pod.metadata;
    const updated = await this.client.patch<AgentPod>(paths.pod(namespace, name), {
      metadata: { uid, annotations },
    });
    this.remember(updated);
    return updated;
  }

  private async boot(start: AgentPod, fromSnapshot: boolean): Promise<void> {
    const vm = annotationsOf(start)[ANNOTATIONS.vmName];
    const node = start.spec?.nodeName ?? "";
    let pod = await this.patch(
      start,
      lifecycle(start, LIFECYCLE_STATES.creating, fromSnapshot ? RESTORING_MESSAGE : undefined),
    );
    let message: string | undefined;
    if (fromSnapshot) {
      await this.sleep(delayOf(pod, SIM_ANNOTATIONS.wakeDelayMs));
      pod = this.newestOf(pod);
      if (annotationsOf(pod)[SIM_ANNOTATIONS.fail] === "wake") {
        await this.patch(pod, lifecycle(pod, LIFECYCLE_STATES.failed, "simulated wake failure"));
        this.log(`${keyOf(pod)}: wake of ${vm} failed (${SIM_ANNOTATIONS.fail}=wake)`);
        return;
      }
      if (this.localCopies.delete(`${node}/${vm}`)) {
        message = `restored from the node-local snapshot on ${node}`;
      } else if (await this.registry.hasManifest(vm, SNAPSHOT_TAGS.hibernate)) {
        message = `restored from ${this.registry.repository(vm)}:${SNAPSHOT_TAGS.hibernate}`;
      } else {
        const why = `snapshot ${this.registry.repository(vm)}:${SNAPSHOT_TAGS.hibernate} not found in the registry`;
        await this.patch(pod, lifecycle(pod, LIFECYCLE_STATES.failed, why));
        this.log(`${keyOf(pod)}: restore of ${vm} failed: ${why}`);
        return;
      }
    }
    const id = randomUUID();
    const ip = `10.88.${randomBytes(1)[0]}.${1 + (randomBytes(1)[0] % 254)}`;
    await this.patch(pod, {
      ...lifecycle(pod, LIFECYCLE_STATES.ready, message),
      [ANNOTATIONS.vmID]: id,
      [ANNOTATIONS.vmIP]: ip,
    });
    this.log(`${keyOf(pod)}: ${vm} ready on ${node} as ${id} (${message ?? "booted"})`);
  }

  private async hibernate(start: AgentPod): Promise<void> {
    const vm = annotationsOf(start)[ANNOTATIONS.vmName];
    let pod = start;
    if (annotationsOf(pod)[ANNOTATIONS.lifecycleState] !== LIFECYCLE_STATES.hibernating)
      pod = await this.patch(pod, lifecycle(pod, LIFECYCLE_STATES.hibernating));
    await this.sleep(delayOf(pod, SIM_ANNOTATIONS.hibernateDelayMs));
    pod = this.newestOf(pod);
    if (annotationsOf(pod)[SIM_ANNOTATIONS.fail] === "hibernate") {
      await this.patch(pod, lifecycle(pod, LIFECYCLE_STATES.failed, "simulated hibernate failure"));
      this.log(`${keyOf(pod)}: hibernation of ${vm} failed (${SIM_ANNOTATIONS.fail}=hibernate)`);
      return;
    }
    const digest = await pushSnapshot(this.registry, pod, SNAPSHOT_TAGS.hibernate);
    await this.patch(pod, {
      ...lifecycle(pod, LIFECYCLE_STATES.hibernated),
      [ANNOTATIONS.vmID]: null,
      [ANNOTATIONS.vmIP]: null,
    });
    this.log(
      `${keyOf(pod)}: ${vm} hibernated to ${this.registry.repository(vm)}:hibernate@${digest}`,
    );
  }

  /** A pod being deleted (or gone): keep or drop the node's copy, push `:latest` per policy. */
  private onGone(last: AgentPod): void {
    const uid = last.metadata.uid ?? "";
    if (this.deleted.has(uid) || !this.eligible(last)) return;
    this.deleted.add(uid);
    const pod = this.newest.get(uid) ?? last;
    const a = annotationsOf(pod);
    const vm = a[ANNOTATIONS.vmName];
    const where = `${pod.spec?.nodeName ?? ""}/${vm}`;
    if (a[ANNOTATIONS.keepSnapshotOnDelete] === "true") {
      this.localCopies.add(where);
      this.log(`${keyOf(pod)}: deleted; ${pod.spec?.nodeName} keeps the local snapshot of ${vm}`);
      return;
    }
    this.localCopies.delete(where);
    const live = a[ANNOTATIONS.lifecycleState] === LIFECYCLE_STATES.ready && !!a[ANNOTATIONS.vmID];
    if (!live || !pushesLatestOnDelete(pod)) return;
    const push = async (attempt: number): Promise<void> => {
      if (this.stopped) return;
      try {
        const digest = await pushSnapshot(this.registry, pod, SNAPSHOT_TAGS.latest);
        this.log(
          `${keyOf(pod)}: deleted; ${vm} snapshotted to ${this.registry.repository(vm)}:latest@${digest}`,
        );
      } catch (e) {
        const delay = retryDelayMs(attempt);
        this.log(
          `${keyOf(pod)}: pushing ${vm}:latest failed (${errorMessage(e)}); retry in ${delay} ms`,
        );
        this.later(delay, () => void push(attempt + 1));
      }
    };
    void push(0);
  }
}

const keyOf = (p: AgentPod) => `${p.metadata.namespace}/${p.metadata.name}`;
const resourceVersionOf = (p: AgentPod) => Number(p.metadata.resourceVersion ?? 0);
/** A failed step's or push's retry: 200 ms doubling to 5 s. */
const retryDelayMs = (attempt: number) => Math.min(5000, 200 * 2 ** attempt);

/** The lifecycle annotations of a transition to `state`. */
function lifecycle(pod: AgentPod, state: string, message?: string): Patch {
  return {
    [ANNOTATIONS.lifecycleState]: state,
    [ANNOTATIONS.lifecycleObservedGeneration]: generationOf(pod),
    [ANNOTATIONS.lifecycleStateMessage]: message ?? null,
  };
}

/** Pushes a snapshot artifact of the pod's VM as `<vm>:<tag>`; returns the manifest's digest. */
async function pushSnapshot(registry: OciRegistry, pod: AgentPod, tag: string): Promise<string> {
  const a = annotationsOf(pod);
  const vm = a[ANNOTATIONS.vmName];
  const created = new Date().toISOString();
  const state = Buffer.from(
    JSON.stringify({
      vmName: vm,
      vmID: a[ANNOTATIONS.vmID] ?? "",
      pod: keyOf(pod),
      node: pod.spec?.nodeName ?? "",
      tag,
      created,
      nonce: randomBytes(8).toString("hex"),
    }),
  );
  const config = Buffer.from(
    JSON.stringify({ vmName: vm, image: a[ANNOTATIONS.image] ?? "", simulated: true }),
  );
  const stateDigest = await registry.pushBlob(vm, state);
  const configDigest = await registry.pushBlob(vm, config);
  const manifest = JSON.stringify({
    schemaVersion: 2,
    mediaType: "application/vnd.oci.image.manifest.v1+json",
    artifactType: SNAPSHOT_MEDIA_TYPES.artifact,
    config: { mediaType: SNAPSHOT_MEDIA_TYPES.config, digest: configDigest, size: config.length },
    layers: [
      {
        mediaType: SNAPSHOT_MEDIA_TYPES.state,
        digest: stateDigest,
        size: state.length,
        annotations: { "org.opencontainers.image.title": "state.json" },
      },
    ],
    annotations: { "org.opencontainers.image.created": created },
  });
  return registry.putManifest(vm, tag, manifest);
}
