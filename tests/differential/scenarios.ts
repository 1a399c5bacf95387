/**
 * The scenarios of the differential tier. Each one drives one CocoonSet through a story
 * (create, scale, fail, edit, delete) and takes a snapshot at named checkpoints, waiting on
 * watches for a state both controllers must reach. The same code runs against the peer
 * and against the project's controller; only the namespace differs.
 */
import { vmNameFor } from "../../engine/pods/pod-builder.js";
import { parseRebuildHistory } from "../../engine/pods/rebuild-history.js";
import {
  ANNOTATIONS,
  LABELS,
  SNAPSHOT_TAGS,
  type CocoonHibernation,
  type CocoonSet,
  type CocoonSetSpec,
  type Pod,
} from "../../engine/spec/index.js";
import {
  PatchType,
  paths,
  waitForList,
  waitForObject,
  type KubeClient,
} from "../../engine/kube/index.js";
import { SIM_ANNOTATIONS } from "../../cluster/node-agent.js";
import { isReady } from "../support/cluster.js";
import { IMAGE, SIMULATE, cocoonSet } from "../support/controller-fleet.js";
import { OciRegistry } from "../../engine/registry/oci.js";
import { pushTag } from "../support/lifecycle.js";
import { takeSnapshot, type Side, type Snapshot } from "./snapshot.js";

/** What a scenario gets to work with. */
export interface ScenarioContext {
  client: KubeClient;
  side: Side;
  ns: string;
  /**
   * Takes and stores a snapshot of the CocoonSet under `label`; with `tags`, the registry's
   * tags of its VMs too (those its status names, or, for a CocoonSet that is gone, the
   * ones given).
   */
  checkpoint: (
    label: string,
    name: string,
    opts?: { tags?: boolean | readonly string[]; hibernation?: string },
  ) => Promise<void>;
  /** The cluster's registry, when it has one. */
  registry?: OciRegistry;
}

/** A scenario: a name and its story. */
export interface Scenario {
  name: string;
  /**
   * Its namespace is opted in to the embedded cluster's node-agent simulator (the VM
   * lifecycle and the registry): only the scenarios that need VM lifecycles, since the
   * simulator's annotations would change every other scenario's pods.
   */
  nodeAgent?: boolean;
  run(ctx: ScenarioContext): Promise<void>;
}

/** Checkpoints of one scenario run, in order. */
export type Checkpoints = [label: string, snapshot: Snapshot][];

const IMAGE_2 = "ghcr.io/cocoonstack/agent:2";
const TIMEOUT_MS = 90_000;
const NUDGE_MS = 15_000;
/** A test-only pod annotation whose change makes either controller reconcile again. */
const NUDGE = "differential.test/nudge";

const live = (p: Pod) => !p.metadata?.deletionTimestamp;
const nameOf = (p: Pod) => p.metadata?.name ?? "";

interface Want {
  replicas: number;
  toolboxes?: string[];
  image?: string;
}

/**
 * Waits (watches) until the CocoonSet's pods are exactly the wanted members, all Ready,
 * with the wanted image, and its status says Running at the current generation with those
 * counts.
 */
async function converged(client: KubeClient, ns: string, name: string, want: Want) {
  const image = want.image ?? IMAGE;
  const expected = [
    ...Array.from({ length: want.replicas + 1 }, (_, i) => `${name}-${i}`),
    ...(want.toolboxes ?? []).map((t) => `${name}-${t}`),
  ].sort();
  const podsOk = (items: Pod[]) => {
    const pods = items.filter(live);
    if (items.length !== pods.length) return false;
    const names = pods.map(nameOf).sort();
    if (JSON.stringify(names) !== JSON.stringify(expected)) return false;
    return pods.every(
      (p) =>
        isReady(p as never) &&
        (p.metadata?.labels?.[LABELS.role] === "toolbox" ||
          p.metadata?.annotations?.[ANNOTATIONS.image] === image),
    );
  };
  const statusOk = (cs: CocoonSet | undefined, phase?: string) => {
    const s = cs?.status;
    const agents = 1 + want.replicas;
    const tbs = want.toolboxes?.length ?? 0;
    return (
      !!cs &&
      !!s &&
      s.observedGeneration === cs.metadata.generation &&
      // Not the phase: the peer can leave a stale phase next to current counts and
      // conditions (its status merge patch is computed against its cache); the snapshot
      // compares the phase instead of waiting for it.
      (s.conditions ?? []).some((c) => c.type === "Ready" && c.status === "True") &&
      s.readyAgents === agents &&
      s.desiredAgents === agents &&
      (s.readyToolboxes ?? 0) === tbs &&
      (s.desiredToolboxes ?? 0) === tbs &&
      (s.agents?.length ?? 0) === agents &&
      (s.agents ?? []).every((a) => a.phase === "Running") &&
      (phase === undefined || s.phase === phase)
    );
  };
  // Pods first, then the status written after them; then both once more on fresh reads.
  for (let round = 0; ; round++) {
    await waitForList(client, paths.pods(ns), podsOk, {
      labelSelector: `${LABELS.name}=${name}`,
      timeoutMs: TIMEOUT_MS,
      description: `the pods of ${ns}/${name} to be ${expected.join(", ")}, Ready, image ${image}`,
    });
    // The peer can also leave its status one reconcile behind the pods (its merge patch is
    // computed against a stale cache, so a phase of Scaling can sit next to all-Ready
    // counts) and only reconciles again on a pod change: if the status does not follow, a
    // test-only annotation on the main agent asks for another reconcile (it is outside what
    // the snapshots compare). The first nudges also wait for the phase Running; after
    // them, the phase is left to the snapshot comparison.
    for (let nudge = 0; ; nudge++) {
      try {
        await waitForObject(
          client,
          paths.cocoonSets(ns),
          name,
          (o) => statusOk(o as CocoonSet | undefined, nudge < 3 ? "Running" : undefined),
          {
            timeoutMs: NUDGE_MS,
            description: `${ns}/${name} status Running with ${1 + want.replicas} agents`,
          },
        );
        break;
      } catch (e) {
        if (nudge * NUDGE_MS >= TIMEOUT_MS) throw e;
        await client.patch(
          paths.pod(ns, `${name}-0`),
          { metadata: { annotations: { [NUDGE]: String(nudge + 1) } } },
          PatchType.merge,
        );
      }
    }
    const pods = (
      await client.list<Pod>(paths.pods(ns), { labelSelector: `${LABELS.name}=${name}` })
    ).items;
    const cs = await client.getOrUndefined<CocoonSet>(paths.cocoonSet(ns, name));
    if (podsOk(pods) && statusOk(cs)) return;
    if (round > 5) throw new Error(`${ns}/${name} does not stay converged`);
  }
}

async function create(client: KubeClient, ns: string, name: string, spec: Partial<CocoonSetSpec>) {
  await client.create(
    paths.cocoonSets(ns),
    cocoonSet(ns, name, { ...spec, agent: { image: IMAGE, replicas: 0, ...spec.agent } }),
  );
}

async function patchSpec(client: KubeClient, ns: string, name: string, spec: object) {
  await client.patch(paths.cocoonSet(ns, name), { spec }, PatchType.merge);
}

async function annotatePod(
  client: KubeClient,
  ns: string,
  pod: Pod,
  annotations: Record<string, string | null>,
) {
  await client.patch(
    paths.pod(ns, nameOf(pod)),
    { metadata: { uid: pod.metadata?.uid, annotations } },
    PatchType.merge,
  );
}

/** Waits until the CocoonSet's status phase is `phase` (and returns the CocoonSet). */
async function phaseIs(client: KubeClient, ns: string, name: string, phase: string) {
  return (await waitForObject(
    client,
    paths.cocoonSets(ns),
    name,
    (o) => (o as CocoonSet | undefined)?.status?.phase === phase,
    { timeoutMs: TIMEOUT_MS, description: `${ns}/${name} phase ${phase}` },
  )) as unknown as CocoonSet;
}

/** Waits until a live pod named `pod` with a uid other than `oldUid` is Ready. */
async function replaced(client: KubeClient, ns: string, pod: string, oldUid: string) {
  const items = await waitForList(
    client,
    paths.pods(ns),
    (ps) =>
      ps.some((p) => nameOf(p) === pod && live(p) && p.metadata?.uid !== oldUid && isReady(p)),
    {
      fieldSelector: `metadata.name=${pod}`,
      timeoutMs: TIMEOUT_MS,
      description: `a Ready replacement of ${ns}/${pod}`,
    },
  );
  return items.find((p) => live(p) && p.metadata?.uid !== oldUid) as Pod;
}

/** Waits until the rebuild history of the CocoonSet has `count` for `slot`. */
async function historyCount(
  client: KubeClient,
  ns: string,
  name: string,
  slot: number,
  count: number,
) {
  await waitForObject(
    client,
    paths.cocoonSets(ns),
    name,
    (cs) =>
      parseRebuildHistory(cs?.metadata.annotations?.[ANNOTATIONS.rebuildHistory]).get(slot)
        ?.count === count,
    {
      timeoutMs: TIMEOUT_MS,
      description: `${ns}/${name} rebuild history slot ${slot} count ${count}`,
    },
  );
}

const getPod = (client: KubeClient, ns: string, name: string) =>
  client.get<Pod>(paths.pod(ns, name));

const vmState = (p: Pod) => p.metadata?.annotations?.[ANNOTATIONS.lifecycleState];
const vmRunning = (p: Pod) =>
  vmState(p) === "ready" &&
  !!p.metadata?.annotations?.[ANNOTATIONS.vmID] &&
  p.metadata?.annotations?.[ANNOTATIONS.hibernate] === undefined;

/** Waits until the CocoonSet has `count` live pods and every one satisfies `ok`. */
async function podsAre(
  client: KubeClient,
  ns: string,
  name: string,
  count: number,
  ok: (p: Pod) => boolean,
  description: string,
) {
  await waitForList(
    client,
    paths.pods(ns),
    (items) => items.filter(live).length === count && items.filter(live).every(ok),
    { labelSelector: `${LABELS.name}=${name}`, timeoutMs: TIMEOUT_MS, description },
  );
}

/**
 * Waits until the CocoonSet's status lists `count` agents, each with its VM id: the node
 * agent writes the ids after the pods are Ready, so a status written at Ready predates them.
 */
async function vmIdsReported(client: KubeClient, ns: string, name: string, count: number) {
  await waitForObject(
    client,
    paths.cocoonSets(ns),
    name,
    (o) => {
      const agents = (o as unknown as CocoonSet | undefined)?.status?.agents ?? [];
      return agents.length === count && agents.every((a) => !!a.vmID);
    },
    { timeoutMs: TIMEOUT_MS, description: `${ns}/${name} reporting every VM id` },
  );
}

/**
 * Waits until every agent the CocoonSet's status lists carries its live pod's VM id and IP
 * (both absent once the VM hibernates): the status pass that follows the node agent's
 * annotation write can lag behind a watch on the pods.
 */
async function statusFollowsVms(client: KubeClient, ns: string, name: string) {
  const listed = await client.list<Pod>(paths.pods(ns), {
    labelSelector: `${LABELS.name}=${name}`,
  });
  const pods = new Map(
    listed.items.filter(live).map((p) => [nameOf(p), p.metadata?.annotations ?? {}]),
  );
  await waitForObject(
    client,
    paths.cocoonSets(ns),
    name,
    (o) => {
      const agents = (o as unknown as CocoonSet | undefined)?.status?.agents ?? [];
      return agents.every((a) => {
        const ann = pods.get(a.podName ?? "");
        return !!ann && a.vmID === ann[ANNOTATIONS.vmID] && a.ip === ann[ANNOTATIONS.vmIP];
      });
    },
    { timeoutMs: TIMEOUT_MS, description: `${ns}/${name}'s status showing each VM's id and IP` },
  );
}

/** Waits until the CocoonHibernation `ns/name` satisfies `ok`. */
async function hibernationIs(
  client: KubeClient,
  ns: string,
  name: string,
  ok: (h: CocoonHibernation | undefined) => boolean,
  description: string,
) {
  await waitForObject<CocoonHibernation>(client, paths.cocoonHibernations(ns), name, ok, {
    timeoutMs: TIMEOUT_MS,
    description: `${ns}/${name} ${description}`,
  });
}

/** The scenarios, in the order they run. */
export const SCENARIOS: readonly Scenario[] = [
  {
    name: "CocoonHibernation hibernate/wake (node-agent simulator, registry)",
    nodeAgent: true,
    async run({ client, ns, checkpoint }) {
      const onlySolo1Hibernated = (p: Pod) =>
        nameOf(p) === "solo-1" ? vmState(p) === "hibernated" : vmRunning(p);
      await create(client, ns, "solo", { agent: { image: IMAGE, replicas: 1 } });
      await converged(client, ns, "solo", { replicas: 1 });
      await podsAre(client, ns, "solo", 2, vmRunning, `the VMs of ${ns}/solo booted`);
      await vmIdsReported(client, ns, "solo", 2);
      await client.create(paths.cocoonHibernations(ns), {
        apiVersion: "cocoonset.cocoonstack.io/v1",
        kind: "CocoonHibernation",
        metadata: { name: "nap" },
        spec: { podRef: { name: "solo-1" }, desire: "Hibernate" },
      });
      await hibernationIs(
        client,
        ns,
        "nap",
        (h) => h?.status?.phase === "Hibernated",
        "Hibernated",
      );
      await podsAre(client, ns, "solo", 2, onlySolo1Hibernated, `${ns}/solo-1 hibernated`);
      await statusFollowsVms(client, ns, "solo");
      await checkpoint("hibernated", "solo", { tags: true, hibernation: "nap" });
      await client.patch(
        paths.cocoonHibernation(ns, "nap"),
        { spec: { desire: "Wake" } },
        PatchType.merge,
      );
      await hibernationIs(client, ns, "nap", (h) => h?.status?.phase === "Active", "Active");
      await podsAre(client, ns, "solo", 2, vmRunning, `the VMs of ${ns}/solo woken`);
      await vmIdsReported(client, ns, "solo", 2);
      await checkpoint("woken", "solo", { tags: true, hibernation: "nap" });
      await client.patch(
        paths.cocoonHibernation(ns, "nap"),
        { spec: { desire: "Hibernate" } },
        PatchType.merge,
      );
      await hibernationIs(
        client,
        ns,
        "nap",
        (h) => h?.status?.phase === "Hibernated",
        "Hibernated again",
      );
      await podsAre(client, ns, "solo", 2, onlySolo1Hibernated, `${ns}/solo-1 hibernated again`);
      // The CocoonSet pass that follows the node agent's write must be done before the CR
      // goes: a pass that runs after the deletion finds no CR holding solo-1 and withdraws
      // its hibernate request (both controllers do), which the checkpoint would catch half-way.
      await statusFollowsVms(client, ns, "solo");
      await client.delete(paths.cocoonHibernation(ns, "nap"));
      await hibernationIs(client, ns, "nap", (h) => h === undefined, "gone");
      // Nothing the CR's deletion changes makes either controller look at the CocoonSet again:
      // a test annotation on the pod (not compared) does, and with no CR left holding solo-1
      // that pass withdraws its hibernate request and the node agent wakes it.
      await client.patch(
        paths.pod(ns, "solo-1"),
        { metadata: { annotations: { [NUDGE]: "after-delete" } } },
        PatchType.merge,
      );
      await podsAre(
        client,
        ns,
        "solo",
        2,
        vmRunning,
        `the VMs of ${ns}/solo woken once nap is gone`,
      );
      await vmIdsReported(client, ns, "solo", 2);
      // With the tag gone the wake may fail and solo-1 be rebuilt; either way the checkpoint
      // waits for the fleet's settled status (the peer writes it a pass later than ours).
      await converged(client, ns, "solo", { replicas: 1 });
      await checkpoint("deleted", "solo", { tags: true, hibernation: "nap" });
    },
  },
  {
    name: "suspend and unsuspend with hibernatePolicy retain (node-agent simulator, registry)",
    nodeAgent: true,
    async run({ client, ns, checkpoint, registry }) {
      await create(client, ns, "nap", { agent: { image: IMAGE, replicas: 2 } });
      await converged(client, ns, "nap", { replicas: 2 });
      await podsAre(client, ns, "nap", 3, vmRunning, `the VMs of ${ns}/nap booted`);
      await vmIdsReported(client, ns, "nap", 3);
      await checkpoint("running", "nap", { tags: true });
      await patchSpec(client, ns, "nap", { suspend: true });
      await podsAre(
        client,
        ns,
        "nap",
        3,
        (p) => vmState(p) === "hibernated",
        `the VMs of ${ns}/nap hibernated`,
      );
      await waitForObject(
        client,
        paths.cocoonSets(ns),
        "nap",
        (o) => {
          const cs = o as CocoonSet | undefined;
          return (
            cs?.status?.phase === "Suspended" &&
            cs.status.observedGeneration === cs.metadata.generation
          );
        },
        { timeoutMs: TIMEOUT_MS, description: `${ns}/nap Suspended at its generation` },
      );
      await checkpoint("suspended", "nap", { tags: true });
      await patchSpec(client, ns, "nap", { suspend: false });
      await podsAre(client, ns, "nap", 3, vmRunning, `the VMs of ${ns}/nap woken`);
      await converged(client, ns, "nap", { replicas: 2 });
      await vmIdsReported(client, ns, "nap", 3);
      await checkpoint("unsuspended", "nap", { tags: true });
      // Teardown: once the pods are gone the controller drops every `:hibernate` and keeps
      // `:latest` (snapshotPolicy always), which the simulator pushes as each running VM's
      // pod goes: wait for those pushes (neither controller makes them), then compare.
      const vms = [0, 1, 2].map((n) => vmNameFor(ns, "nap", n));
      await client.delete(paths.cocoonSet(ns, "nap"));
      await waitForObject(client, paths.cocoonSets(ns), "nap", (o) => o === undefined, {
        timeoutMs: TIMEOUT_MS,
        description: `${ns}/nap to be deleted`,
      });
      await waitForList(client, paths.pods(ns), (ps) => ps.length === 0, {
        labelSelector: `${LABELS.name}=nap`,
        timeoutMs: TIMEOUT_MS,
        description: `the pods of ${ns}/nap to be gone`,
      });
      for (const vm of vms) await waitForTag(registry, vm, SNAPSHOT_TAGS.latest);
      await checkpoint("deleted", "nap", { tags: vms });
    },
  },
  {
    name: "slot release and wake with hibernatePolicy release (node-agent simulator, registry)",
    nodeAgent: true,
    async run({ client, ns, checkpoint, registry }) {
      const vm = vmNameFor(ns, "seat", 0);
      await create(client, ns, "seat", {
        hibernatePolicy: "release",
        agent: { image: IMAGE, replicas: 0 },
      });
      await converged(client, ns, "seat", { replicas: 0 });
      await podsAre(client, ns, "seat", 1, vmRunning, `the VM of ${ns}/seat booted`);
      await vmIdsReported(client, ns, "seat", 1);
      await checkpoint("running", "seat", { tags: true });
      await patchSpec(client, ns, "seat", { suspend: true });
      // The seat is freed: no pod, and a status that lists none (the peer writes Suspended
      // with its deletes, still listing the deleted pod, and the pod-less one 5 s later).
      await podsAre(client, ns, "seat", 0, () => true, `the pod of ${ns}/seat released`);
      await waitForObject(
        client,
        paths.cocoonSets(ns),
        "seat",
        (o) => {
          const cs = o as CocoonSet | undefined;
          return (
            cs?.status?.phase === "Suspended" &&
            cs.status.observedGeneration === cs.metadata.generation &&
            (cs.status.agents ?? []).length === 0
          );
        },
        { timeoutMs: TIMEOUT_MS, description: `${ns}/seat Suspended with no agent` },
      );
      await checkpoint("suspended", "seat", { tags: [vm] });
      await patchSpec(client, ns, "seat", { suspend: false });
      await podsAre(client, ns, "seat", 1, vmRunning, `the VM of ${ns}/seat restored`);
      await converged(client, ns, "seat", { replicas: 0 });
      await vmIdsReported(client, ns, "seat", 1);
      // The wake is over once the tag is dropped and the hint cleared.
      await waitForObject(
        client,
        paths.cocoonSets(ns),
        "seat",
        (o) => o?.metadata.annotations?.[ANNOTATIONS.hibernatedOnNode] === undefined,
        { timeoutMs: TIMEOUT_MS, description: `${ns}/seat without its node hint` },
      );
      await checkpoint("woken", "seat", { tags: true });
      // Teardown: the running VM's pod pushes `:latest` as it goes (snapshotPolicy always).
      await client.delete(paths.cocoonSet(ns, "seat"));
      await waitForObject(client, paths.cocoonSets(ns), "seat", (o) => o === undefined, {
        timeoutMs: TIMEOUT_MS,
        description: `${ns}/seat to be deleted`,
      });
      await waitForList(client, paths.pods(ns), (ps) => ps.length === 0, {
        labelSelector: `${LABELS.name}=seat`,
        timeoutMs: TIMEOUT_MS,
        description: `the pods of ${ns}/seat to be gone`,
      });
      await waitForTag(registry, vm, SNAPSHOT_TAGS.latest);
      await checkpoint("deleted", "seat", { tags: [vm] });
    },
  },
  {
    name: "migration to spec.nodeName (node-agent simulator, registry)",
    nodeAgent: true,
    async run({ client, ns, checkpoint, registry }) {
      const [from, to] = ["kwok-node-0", "kwok-node-1"];
      const vm = vmNameFor(ns, "mover", 0);
      await create(client, ns, "mover", { nodeName: from, agent: { image: IMAGE, replicas: 0 } });
      await converged(client, ns, "mover", { replicas: 0 });
      await podsAre(
        client,
        ns,
        "mover",
        1,
        (p) => vmRunning(p) && p.spec?.nodeName === from,
        `the VM of ${ns}/mover booted on ${from}`,
      );
      await vmIdsReported(client, ns, "mover", 1);
      await checkpoint("pinned", "mover", { tags: true });
      const old = await getPod(client, ns, "mover-0");
      // A real node takes seconds to snapshot a VM; the simulator, a quarter of a second,
      // which under load outruns the peer's cache of its own hibernate request
      // (docs/differences.md, "A migration under load"). Both sides get the same delay.
      await annotatePod(client, ns, old, { [SIM_ANNOTATIONS.hibernateDelayMs]: "2000" });
      await patchSpec(client, ns, "mover", { nodeName: to });
      // The old pod is hibernated and deleted, its replacement restored on the target; the
      // snapshot tag goes once the restored VM runs.
      await podsAre(
        client,
        ns,
        "mover",
        1,
        (p) => p.metadata?.uid !== old.metadata?.uid && p.spec?.nodeName === to && vmRunning(p),
        `the VM of ${ns}/mover restored on ${to}`,
      );
      await waitForTag(registry, vm, SNAPSHOT_TAGS.hibernate, false);
      await converged(client, ns, "mover", { replicas: 0 });
      await vmIdsReported(client, ns, "mover", 1);
      await checkpoint("migrated", "mover", { tags: true });
    },
  },
  {
    name: "create with replicas 3, then scale 3 → 6 → 2",
    async run({ client, ns, checkpoint }) {
      await create(client, ns, "fleet", { agent: { image: IMAGE, replicas: 3 } });
      await converged(client, ns, "fleet", { replicas: 3 });
      await checkpoint("created with 3", "fleet");
      await patchSpec(client, ns, "fleet", { agent: { replicas: 6 } });
      await converged(client, ns, "fleet", { replicas: 6 });
      await checkpoint("scaled to 6", "fleet");
      await patchSpec(client, ns, "fleet", { agent: { replicas: 2 } });
      await converged(client, ns, "fleet", { replicas: 2 });
      await checkpoint("scaled to 2", "fleet");
    },
  },
  {
    name: "toolboxes: run and clone modes, windows with rdp",
    async run({ client, ns, checkpoint }) {
      await create(client, ns, "tools", {
        agent: { image: IMAGE, replicas: 1 },
        toolboxes: [
          { name: "shell", mode: "run", image: "ghcr.io/cocoonstack/shell:1" },
          {
            name: "browser",
            mode: "clone",
            image: "ghcr.io/cocoonstack/browser:1",
            storage: "10Gi",
          },
          {
            name: "desktop",
            mode: "run",
            image: "ghcr.io/cocoonstack/win11:1",
            os: "windows",
            connType: "rdp",
          },
          { name: "winauto", mode: "clone", image: "ghcr.io/cocoonstack/win11:1", os: "windows" },
        ],
      });
      await converged(client, ns, "tools", {
        replicas: 1,
        toolboxes: ["shell", "browser", "desktop", "winauto"],
      });
      await checkpoint("converged", "tools");
      await patchSpec(client, ns, "tools", {
        toolboxes: [
          { name: "shell", mode: "run", image: "ghcr.io/cocoonstack/shell:2" },
          {
            name: "desktop",
            mode: "run",
            image: "ghcr.io/cocoonstack/win11:1",
            os: "windows",
            connType: "rdp",
          },
        ],
      });
      await converged(client, ns, "tools", { replicas: 1, toolboxes: ["shell", "desktop"] });
      await checkpoint("one toolbox changed, two removed", "tools");
    },
  },
  {
    name: "image change (drift)",
    async run({ client, ns, checkpoint }) {
      await create(client, ns, "drift", {
        agent: { image: IMAGE, replicas: 2, resources: { limits: { cpu: "2", memory: "4Gi" } } },
      });
      await converged(client, ns, "drift", { replicas: 2 });
      await checkpoint("converged", "drift");
      await patchSpec(client, ns, "drift", { agent: { image: IMAGE_2 } });
      await converged(client, ns, "drift", { replicas: 2, image: IMAGE_2 });
      await checkpoint("image changed", "drift");
    },
  },
  {
    name: "a sub-agent rebuilt after 0/1/5/30 s, dead-lettered, revived by a spec edit",
    async run({ client, ns, checkpoint }) {
      await create(client, ns, "rebuild", { agent: { image: IMAGE, replicas: 2 } });
      await converged(client, ns, "rebuild", { replicas: 2 });
      let pod = await getPod(client, ns, "rebuild-2");
      for (let attempt = 1; attempt <= 4; attempt++) {
        await annotatePod(client, ns, pod, { [SIMULATE]: "failed" });
        await historyCount(client, ns, "rebuild", 2, attempt);
        pod = await replaced(client, ns, "rebuild-2", pod.metadata?.uid ?? "");
        await converged(client, ns, "rebuild", { replicas: 2 });
        await checkpoint(`rebuilt ${attempt} time(s)`, "rebuild");
      }
      await annotatePod(client, ns, pod, { [SIMULATE]: "failed" });
      await waitForObject(
        client,
        paths.pods(ns),
        "rebuild-2",
        (p) => p?.metadata?.annotations?.[ANNOTATIONS.deadLetter] === "true",
        { timeoutMs: TIMEOUT_MS, description: `${ns}/rebuild-2 in dead-letter` },
      );
      await waitForObject(
        client,
        paths.cocoonSets(ns),
        "rebuild",
        (o) => {
          const s = (o as CocoonSet | undefined)?.status;
          return (
            s?.readyAgents === 2 &&
            (s.agents ?? []).some((a) => a.slot === 2 && a.phase === "Failed")
          );
        },
        { timeoutMs: TIMEOUT_MS, description: `${ns}/rebuild status showing slot 2 Failed` },
      );
      await checkpoint("dead-letter", "rebuild");
      await patchSpec(client, ns, "rebuild", { agent: { image: IMAGE_2 } });
      await converged(client, ns, "rebuild", { replicas: 2, image: IMAGE_2 });
      await checkpoint("revived by a spec edit", "rebuild");
    },
  },
  {
    name: "the main agent fails (lifecycle state) and recovers",
    async run({ client, ns, checkpoint }) {
      await create(client, ns, "lifecycle", { agent: { image: IMAGE, replicas: 2 } });
      await converged(client, ns, "lifecycle", { replicas: 2 });
      const main = await getPod(client, ns, "lifecycle-0");
      await annotatePod(client, ns, main, {
        [ANNOTATIONS.lifecycleState]: "failed",
        [ANNOTATIONS.lifecycleStateMessage]: "guest kernel panic",
      });
      await phaseIs(client, ns, "lifecycle", "Failed");
      await checkpoint("main failed", "lifecycle");
      await annotatePod(client, ns, main, {
        [ANNOTATIONS.lifecycleState]: "ready",
        [ANNOTATIONS.lifecycleStateMessage]: null,
      });
      await converged(client, ns, "lifecycle", { replicas: 2 });
      await checkpoint("recovered", "lifecycle");
    },
  },
  {
    name: "the main agent pod fails (phase Failed) and is replaced by hand",
    async run({ client, ns, checkpoint }) {
      await create(client, ns, "mainpod", { agent: { image: IMAGE, replicas: 2 } });
      await converged(client, ns, "mainpod", { replicas: 2 });
      const main = await getPod(client, ns, "mainpod-0");
      await annotatePod(client, ns, main, { [SIMULATE]: "failed" });
      await phaseIs(client, ns, "mainpod", "Failed");
      await checkpoint("main failed", "mainpod");
      await client.delete(paths.pod(ns, "mainpod-0"), { uid: main.metadata?.uid ?? "" });
      await replaced(client, ns, "mainpod-0", main.metadata?.uid ?? "");
      await converged(client, ns, "mainpod", { replicas: 2 });
      await checkpoint("recovered", "mainpod");
    },
  },
  {
    name: "deletion with the finalizer",
    async run({ client, ns, checkpoint }) {
      await create(client, ns, "gone", { agent: { image: IMAGE, replicas: 2 } });
      await converged(client, ns, "gone", { replicas: 2 });
      await checkpoint("converged", "gone");
      await client.delete(paths.cocoonSet(ns, "gone"));
      await waitForObject(client, paths.cocoonSets(ns), "gone", (o) => o === undefined, {
        timeoutMs: TIMEOUT_MS,
        description: `${ns}/gone to be deleted`,
      });
      await waitForList(client, paths.pods(ns), (ps) => ps.length === 0, {
        labelSelector: `${LABELS.name}=gone`,
        timeoutMs: TIMEOUT_MS,
        description: `the pods of ${ns}/gone to be gone`,
      });
      await checkpoint("deleted", "gone");
    },
  },
];

/**
 * A scenario the two controllers run against a registry that asks for credentials (CNCF
 * Distribution with htpasswd auth over TLS, the CA given to each as its own way takes it,
 * the same Docker config for both): a retain suspend waits for the registry's word on the
 * snapshot, and the deletion drops it. The node-agent simulator pushes its snapshots to the
 * cluster's own registry, so here the `:hibernate` tag lands in the authenticated one as a
 * real node agent configured with it would push it, once the VM reports hibernated.
 */
export const AUTH_REGISTRY_SCENARIO: Scenario = {
  name: "suspend, unsuspend and deletion against a registry with htpasswd auth over TLS (node-agent simulator)",
  nodeAgent: true,
  async run({ client, ns, checkpoint, registry }) {
    if (!registry) throw new Error("this scenario needs the authenticated registry");
    const vm = vmNameFor(ns, "vault", 0);
    await create(client, ns, "vault", { agent: { image: IMAGE, replicas: 0 } });
    await converged(client, ns, "vault", { replicas: 0 });
    await podsAre(client, ns, "vault", 1, vmRunning, `the VM of ${ns}/vault booted`);
    await vmIdsReported(client, ns, "vault", 1);
    await checkpoint("running", "vault", { tags: true });
    await patchSpec(client, ns, "vault", { suspend: true });
    await podsAre(
      client,
      ns,
      "vault",
      1,
      (p) => vmState(p) === "hibernated",
      `the VM of ${ns}/vault hibernated`,
    );
    await pushTag(registry, vm, SNAPSHOT_TAGS.hibernate);
    await waitForObject(
      client,
      paths.cocoonSets(ns),
      "vault",
      (o) => {
        const cs = o as CocoonSet | undefined;
        return (
          cs?.status?.phase === "Suspended" &&
          cs.status.observedGeneration === cs.metadata.generation
        );
      },
      { timeoutMs: TIMEOUT_MS, description: `${ns}/vault Suspended at its generation` },
    );
    await checkpoint("suspended", "vault", { tags: true });
    await patchSpec(client, ns, "vault", { suspend: false });
    await podsAre(client, ns, "vault", 1, vmRunning, `the VM of ${ns}/vault woken`);
    await converged(client, ns, "vault", { replicas: 0 });
    await vmIdsReported(client, ns, "vault", 1);
    await checkpoint("unsuspended", "vault", { tags: true });
    await client.delete(paths.cocoonSet(ns, "vault"));
    await waitForObject(client, paths.cocoonSets(ns), "vault", (o) => o === undefined, {
      timeoutMs: TIMEOUT_MS,
      description: `${ns}/vault to be deleted`,
    });
    await waitForList(client, paths.pods(ns), (ps) => ps.length === 0, {
      labelSelector: `${LABELS.name}=vault`,
      timeoutMs: TIMEOUT_MS,
      description: `the pods of ${ns}/vault to be gone`,
    });
    // The deletion dropped `:hibernate` before the finalizer went (`:latest` is the
    // simulator's, pushed to the cluster's registry).
    await checkpoint("deleted", "vault", { tags: [vm] });
  },
};

/**
 * Waits until the registry has `vm:tag`, or with `present` false until it has not (the
 * registry has no watch: asked again after 25 ms, doubling to 400 ms).
 */
async function waitForTag(
  registry: OciRegistry | undefined,
  vm: string,
  tag: string,
  present = true,
) {
  if (!registry) throw new Error("this scenario needs the cluster's registry");
  const deadline = Date.now() + TIMEOUT_MS;
  for (
    let delay = 25;
    (await registry.hasManifest(vm, tag)) !== present;
    delay = Math.min(delay * 2, 400)
  ) {
    if (Date.now() >= deadline)
      throw new Error(
        `timed out waiting for ${vm}:${tag} to be ${present ? "in" : "gone from"} the registry`,
      );
    await new Promise((r) => setTimeout(r, delay));
  }
}

/** Runs every scenario (of `scenarios`) in its own namespace; a failing scenario keeps what it checkpointed. */
export async function runScenarios(
  client: KubeClient,
  side: Side,
  namespaceOf: (scenario: number) => string,
  controller: { metricsText(): Promise<string>; tail(): string },
  progress: (line: string) => void,
  registry?: OciRegistry,
  scenarios: readonly Scenario[] = SCENARIOS,
): Promise<{ checkpoints: Checkpoints; error?: string }[]> {
  const out: { checkpoints: Checkpoints; error?: string }[] = [];
  for (const [i, scenario] of scenarios.entries()) {
    const ns = namespaceOf(i);
    const checkpoints: Checkpoints = [];
    const t0 = Date.now();
    try {
      await scenario.run({
        client,
        side,
        ns,
        registry,
        checkpoint: async (label, name, opts) => {
          if (opts?.tags && !registry)
            throw new Error("this scenario needs the cluster's registry");
          const reg = opts?.tags ? registry : undefined;
          const vms = Array.isArray(opts?.tags) ? (opts.tags as readonly string[]) : undefined;
          const snap = await takeSnapshot(
            client,
            side,
            ns,
            name,
            () => controller.metricsText(),
            reg,
            vms,
            opts?.hibernation,
          );
          // An empty tag record would compare equal on both sides and prove nothing.
          if (reg && Object.keys(snap.registryTags ?? {}).length === 0)
            throw new Error(`${label}: the status of ${ns}/${name} names no VM to list tags of`);
          checkpoints.push([label, snap]);
        },
      });
      out.push({ checkpoints });
      progress(`${side}: ${scenario.name}: done in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    } catch (e) {
      out.push({ checkpoints, error: (e as Error).message });
      progress(`${side}: ${scenario.name}: FAILED: ${(e as Error).message}`);
      // What a failure needs to be understood once its cluster is gone: the pods as they
      // stand and the controller's last lines.
      progress(`${side}: pods of ${ns}:\n${await describePods(client, ns)}`);
      progress(`${side}: the controller's last lines:\n${controller.tail()}`);
    }
  }
  return out;
}

/** One line per pod of `ns`: node, phase, reason, start, deletion, and the VM annotations. */
async function describePods(client: KubeClient, ns: string): Promise<string> {
  try {
    const pods = await client.list<Pod & { status?: { reason?: string; startTime?: string } }>(
      paths.pods(ns),
    );
    return pods.items
      .map((p) => {
        const vmAnnotations = Object.entries(p.metadata?.annotations ?? {})
          .filter(([k]) => k.startsWith("cocoonset.") || k.startsWith("vm."))
          .map(([k, v]) => `${k}=${v}`)
          .join(" ");
        return `  ${p.metadata?.name} node=${p.spec?.nodeName ?? "-"} phase=${p.status?.phase ?? "-"} reason=${p.status?.reason ?? "-"} started=${p.status?.startTime ?? "-"} deleting=${p.metadata?.deletionTimestamp ?? "-"} ${vmAnnotations}`;
      })
      .join("\n");
  } catch (e) {
    return `  (could not list: ${(e as Error).message})`;
  }
}
