/**
 * The embedded cluster's node-agent simulator (cluster/node-agent.ts), on the real apiserver
 * and the real registry: VM pods in an opted-in namespace boot, hibernate (the `:hibernate`
 * tag really lands in the registry: its tags are listed over HTTP), wake, restore, fail when
 * the tag is missing, obey the delay and fail hooks, keep the node-local copy on a seat
 * release and push `:latest` on delete per snapshot policy; pods elsewhere are left alone.
 *
 * Each test watches its pods from before they exist and asserts on the sequence of
 * lifecycle states the apiserver delivered, never on a timer.
 */
import assert from "node:assert/strict";
import { describe, test, type TestContext } from "node:test";
import { readState } from "../../cluster/local-cluster.js";
import { NODE_AGENT_ENABLED, NODE_AGENT_LABEL, SIM_ANNOTATIONS } from "../../cluster/node-agent.js";
import { paths, type KubeObject } from "../../engine/kube/index.js";
import { OciRegistry } from "../../engine/registry/oci.js";
import { adminClient, suffix, testClusterDir, withNamespace } from "../support/cluster.js";
import { ObjectHistory } from "../support/object-history.js";

const client = adminClient();
const A = {
  vmName: "vm.cocoonstack.io/name",
  id: "vm.cocoonstack.io/id",
  ip: "vm.cocoonstack.io/ip",
  hibernate: "vm.cocoonstack.io/hibernate",
  restore: "vm.cocoonstack.io/restore-from-hibernate",
  keep: "vm.cocoonstack.io/keep-snapshot-on-delete",
  state: "vm.cocoonstack.io/lifecycle-state",
  observed: "vm.cocoonstack.io/lifecycle-observed-generation",
  message: "vm.cocoonstack.io/lifecycle-state-message",
  generation: "cocoonset.cocoonstack.io/generation",
  policy: "cocoonset.cocoonstack.io/snapshot-policy",
};

function registry(): OciRegistry {
  const st = readState(testClusterDir());
  assert.ok(st?.registry, `the cluster in ${testClusterDir()} records its registry`);
  return new OciRegistry(st.registry);
}

/** A namespace whose pods the simulator acts on (or not, with `optIn: false`). */
async function namespace(t: TestContext, optIn = true): Promise<string> {
  const ns = await withNamespace(t, "node-agent");
  if (optIn) await optInNamespace(ns);
  return ns;
}

async function optInNamespace(ns: string): Promise<void> {
  await client.patch(paths.namespace(ns), {
    metadata: { labels: { [NODE_AGENT_LABEL]: NODE_AGENT_ENABLED } },
  });
}

const annotationsOf = (p: KubeObject | undefined) => p?.metadata.annotations ?? {};
const stateOf = (p: KubeObject | undefined) => annotationsOf(p)[A.state];

/** A VM pod as the engine builds it, bound straight to a simulated node. */
function vmPod(
  name: string,
  vm: string,
  opts: { annotations?: Record<string, string>; role?: string; node?: string } = {},
): KubeObject {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      labels: {
        "cocoonset.cocoonstack.io/name": "coder",
        "cocoonset.cocoonstack.io/role": opts.role ?? "main",
      },
      annotations: {
        [A.vmName]: vm,
        "cocoonset.cocoonstack.io/managed": "true",
        [A.generation]: "1",
        ...opts.annotations,
      },
    },
    spec: {
      nodeName: opts.node ?? "kwok-node-0",
      containers: [{ name: "agent", image: "registry.invalid/never-pulled" }],
    },
  };
}

/** Every version of one pod the apiserver delivers, from before it exists, read as VM states. */
class PodHistory {
  private constructor(private readonly h: ObjectHistory<KubeObject>) {}

  static async start(t: TestContext, ns: string, name: string): Promise<PodHistory> {
    return new PodHistory(await ObjectHistory.start<KubeObject>(t, client, paths.pods(ns), name));
  }

  get seen(): readonly KubeObject[] {
    return this.h.seen;
  }

  /** The first version (from `since`, an index into `seen`) for which `done` holds. */
  until(
    done: (p: KubeObject) => boolean,
    description: string,
    since = 0,
    timeoutMs = 60_000,
  ): Promise<KubeObject> {
    return this.h.until(done, description, { since, timeoutMs, show: (p) => stateOf(p) ?? "" });
  }

  /** Waits for a lifecycle state (after index `since`). */
  state(s: string, since = 0): Promise<KubeObject> {
    return this.until((p) => stateOf(p) === s, `lifecycle-state ${s}`, since);
  }

  /** The lifecycle states seen, consecutive repeats folded ("" before the first). */
  states(since = 0): string[] {
    return this.h.fold((p) => stateOf(p) ?? "", since);
  }

  /** When the first version in `state` was delivered (after index `since`). */
  firstAt(state: string, since = 0): number {
    const i = this.h.seen.findIndex((p, j) => j >= since && stateOf(p) === state);
    assert.ok(i >= 0, `${this.h.name} was seen in ${state}`);
    return this.h.times[i];
  }
}

/**
 * Waits until the registry has `vm:tag` (the registry has no watch: asked again after 25 ms,
 * doubling to 400 ms).
 */
async function waitForTag(reg: OciRegistry, vm: string, tag: string, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  for (let delay = 25; !(await reg.hasManifest(vm, tag)); delay = Math.min(delay * 2, 400)) {
    assert.ok(Date.now() < deadline, `${vm}:${tag} appears in the registry`);
    await new Promise((r) => setTimeout(r, delay));
  }
}

async function annotate(ns: string, name: string, annotations: Record<string, string | null>) {
  await client.patch(paths.pod(ns, name), { metadata: { annotations } });
}

/** Creates a VM pod and waits until its VM is ready. */
async function bootedPod(
  t: TestContext,
  ns: string,
  name: string,
  vm: string,
  opts: Parameters<typeof vmPod>[2] = {},
): Promise<{ history: PodHistory; pod: KubeObject }> {
  const history = await PodHistory.start(t, ns, name);
  await client.create(paths.pods(ns), vmPod(name, vm, opts));
  const pod = await history.state("ready");
  return { history, pod };
}

/** Hibernates a ready VM pod and returns the hibernated version. */
async function hibernated(ns: string, name: string, history: PodHistory): Promise<KubeObject> {
  const since = history.seen.length;
  await annotate(ns, name, { [A.hibernate]: "true" });
  return history.state("hibernated", since);
}

describe("node-agent simulator", () => {
  test("boots a managed VM pod of an opted-in namespace and leaves other namespaces alone", async (t) => {
    // A pod in a namespace that did not opt in, first: the simulator has judged it by the
    // time it acts on the pod created after it.
    const plain = await namespace(t, false);
    const quiet = await PodHistory.start(t, plain, "coder-0");
    await client.create(paths.pods(plain), vmPod("coder-0", `vk-${plain}-coder-0`));
    await quiet.until(
      (p) => (p.status as { phase?: string } | undefined)?.phase === "Running",
      "kwok runs it",
    );

    const ns = await namespace(t);
    const vm = `vk-${ns}-coder-0`;
    const { history, pod } = await bootedPod(t, ns, "coder-0", vm);
    assert.deepEqual(history.states(), ["", "creating", "ready"]);
    const a = annotationsOf(pod);
    assert.match(a[A.id] ?? "", /^[0-9a-f-]{36}$/, "a VM id");
    assert.match(a[A.ip] ?? "", /^10\.88\.\d+\.\d+$/, "an IP");
    assert.equal(a[A.observed], "1", "the pod's generation is echoed");
    assert.equal(a[A.message], undefined, "no message on a plain boot");

    // A new generation stamped on the pod is echoed, with the state unchanged.
    const since = history.seen.length;
    await annotate(ns, "coder-0", { [A.generation]: "2" });
    const echoed = await history.until((p) => annotationsOf(p)[A.observed] === "2", "echo", since);
    assert.equal(stateOf(echoed), "ready");
    assert.equal(annotationsOf(echoed)[A.id], a[A.id], "the same VM");

    const untouched = await client.get<KubeObject>(paths.pod(plain, "coder-0"));
    for (const k of [A.state, A.observed, A.id, A.ip])
      assert.equal(annotationsOf(untouched)[k], undefined, `${k} is not written outside opt-in`);
    // Opting in later picks the pod up.
    await optInNamespace(plain);
    await quiet.state("ready");
  });

  test("hibernate pushes <vm>:hibernate to the registry, then wake boots a fresh VM", async (t) => {
    const reg = registry();
    const ns = await namespace(t);
    const vm = `vk-${ns}-coder-0`;
    const { history, pod } = await bootedPod(t, ns, "coder-0", vm);
    assert.deepEqual(await reg.listTags(vm), [], "no snapshot before hibernation");

    const start = history.seen.length;
    const down = await hibernated(ns, "coder-0", history);
    assert.deepEqual(history.states(start), ["ready", "hibernating", "hibernated"]);
    const a = annotationsOf(down);
    assert.equal(a[A.id], undefined, "the VM id is dropped");
    assert.equal(a[A.ip], undefined, "the IP is dropped");
    assert.equal(a[A.observed], "1");
    assert.deepEqual(await reg.listTags(vm), ["hibernate"], "the tag is in the registry");

    // A real manifest: an OCI manifest of the snapshot artifact type whose blobs are there.
    const r = await fetch(`${reg.origin}/v2/${vm}/manifests/hibernate`, {
      headers: { accept: "application/vnd.oci.image.manifest.v1+json" },
    });
    assert.equal(r.status, 200);
    const manifest = (await r.json()) as {
      mediaType: string;
      artifactType: string;
      config: { digest: string; mediaType: string };
      layers: { digest: string; size: number }[];
    };
    assert.equal(manifest.mediaType, "application/vnd.oci.image.manifest.v1+json");
    assert.equal(manifest.artifactType, "application/vnd.cocoonstack.snapshot.v1+json");
    assert.equal(manifest.layers.length, 1);
    for (const d of [manifest.config.digest, manifest.layers[0].digest]) {
      const blob = await fetch(`${reg.origin}/v2/${vm}/blobs/${d}`, { method: "HEAD" });
      assert.equal(blob.status, 200, `blob ${d} is in the registry`);
    }

    const wakeFrom = history.seen.length;
    await annotate(ns, "coder-0", { [A.hibernate]: null });
    const up = await history.state("ready", wakeFrom);
    assert.deepEqual(history.states(wakeFrom), ["hibernated", "creating", "ready"]);
    const b = annotationsOf(up);
    assert.match(b[A.id] ?? "", /^[0-9a-f-]{36}$/);
    assert.notEqual(b[A.id], annotationsOf(pod)[A.id], "a fresh VM id");
    assert.ok(b[A.ip], "an IP again");
    assert.match(b[A.message] ?? "", /restored from .*:hibernate/);
    assert.deepEqual(
      await reg.listTags(vm),
      ["hibernate"],
      "waking leaves the tag (the operator drops it)",
    );
  });

  test("a wake or a restore whose :hibernate tag is missing ends in failed", async (t) => {
    const reg = registry();
    const ns = await namespace(t);
    const vm = `vk-${ns}-coder-0`;
    const { history } = await bootedPod(t, ns, "coder-0", vm);
    await hibernated(ns, "coder-0", history);
    await reg.deleteManifest(vm, "hibernate");
    assert.deepEqual(await reg.listTags(vm), []);
    const since = history.seen.length;
    await annotate(ns, "coder-0", { [A.hibernate]: null });
    const failed = await history.state("failed", since);
    assert.deepEqual(history.states(since), ["hibernated", "creating", "failed"]);
    assert.equal(
      annotationsOf(failed)[A.message],
      `snapshot ${vm}:hibernate not found in the registry`,
    );
    assert.equal(annotationsOf(failed)[A.id], undefined, "no VM");

    // A new pod with restore intent and no snapshot fails the same way.
    const vm2 = `vk-${ns}-coder-1`;
    const restoring = await PodHistory.start(t, ns, "coder-1");
    await client.create(
      paths.pods(ns),
      vmPod("coder-1", vm2, { role: "sub-agent", annotations: { [A.restore]: "true" } }),
    );
    const f2 = await restoring.state("failed");
    assert.deepEqual(restoring.states(), ["", "creating", "failed"]);
    assert.match(annotationsOf(f2)[A.message] ?? "", /not found in the registry/);
  });

  test("restore-from-hibernate on a new pod boots from the snapshot", async (t) => {
    const ns = await namespace(t);
    const vm = `vk-${ns}-coder-0`;
    const { history } = await bootedPod(t, ns, "coder-0", vm);
    await hibernated(ns, "coder-0", history);
    // The pod is rebuilt elsewhere (as a migration does): the new one restores.
    await client.delete(paths.pod(ns, "coder-0"));
    await history.until(
      (p) => p.metadata.deletionTimestamp !== undefined,
      "the old pod is being deleted",
    );
    const rebuilt = await PodHistory.start(t, ns, "coder-0b");
    await client.create(
      paths.pods(ns),
      vmPod("coder-0b", vm, { node: "kwok-node-1", annotations: { [A.restore]: "true" } }),
    );
    const up = await rebuilt.state("ready");
    assert.deepEqual(rebuilt.states(), ["", "creating", "ready"]);
    assert.equal(annotationsOf(up)[A.message], `restored from ${vm}:hibernate`);
  });

  test("the delay hooks hold a transition, the fail hooks end it in failed", async (t) => {
    const reg = registry();
    const ns = await namespace(t);
    const slow = 2500;

    const vm = `vk-${ns}-coder-0`;
    const { history } = await bootedPod(t, ns, "coder-0", vm, {
      annotations: {
        [SIM_ANNOTATIONS.hibernateDelayMs]: String(slow),
        [SIM_ANNOTATIONS.wakeDelayMs]: String(slow),
      },
    });
    const h0 = history.seen.length;
    await annotate(ns, "coder-0", { [A.hibernate]: "true" });
    await history.state("hibernating", h0);
    assert.deepEqual(await reg.listTags(vm), [], "no snapshot while the hibernation is held");
    await history.state("hibernated", h0);
    const held = history.firstAt("hibernated", h0) - history.firstAt("hibernating", h0);
    assert.ok(held >= slow - 50, `hibernating was held ${held} ms (hook ${slow} ms)`);
    const w0 = history.seen.length;
    await annotate(ns, "coder-0", { [A.hibernate]: null });
    await history.state("ready", w0);
    const waking = history.firstAt("ready", w0) - history.firstAt("creating", w0);
    assert.ok(waking >= slow - 50, `creating was held ${waking} ms (hook ${slow} ms)`);

    const vm1 = `vk-${ns}-coder-1`;
    const one = await bootedPod(t, ns, "coder-1", vm1, {
      role: "sub-agent",
      annotations: { [SIM_ANNOTATIONS.fail]: "hibernate" },
    });
    const f0 = one.history.seen.length;
    await annotate(ns, "coder-1", { [A.hibernate]: "true" });
    const failed = await one.history.state("failed", f0);
    assert.deepEqual(one.history.states(f0), ["ready", "hibernating", "failed"]);
    assert.equal(annotationsOf(failed)[A.message], "simulated hibernate failure");
    assert.deepEqual(await reg.listTags(vm1), [], "a failed hibernation pushes nothing");

    const vm2 = `vk-${ns}-coder-2`;
    const two = await bootedPod(t, ns, "coder-2", vm2, {
      role: "sub-agent",
      annotations: { [SIM_ANNOTATIONS.fail]: "wake" },
    });
    await hibernated(ns, "coder-2", two.history);
    const g0 = two.history.seen.length;
    await annotate(ns, "coder-2", { [A.hibernate]: null });
    const wakeFailed = await two.history.state("failed", g0);
    assert.deepEqual(two.history.states(g0), ["hibernated", "creating", "failed"]);
    assert.equal(annotationsOf(wakeFailed)[A.message], "simulated wake failure");
  });

  test("keep-snapshot-on-delete: no :latest, and the node's copy makes the next restore warm", async (t) => {
    const reg = registry();
    const ns = await namespace(t);
    const vm = `vk-${ns}-coder-0`;
    const { history } = await bootedPod(t, ns, "coder-0", vm);
    await hibernated(ns, "coder-0", history);
    // A slot release: flag, then delete.
    await annotate(ns, "coder-0", { [A.keep]: "true" });
    await client.delete(paths.pod(ns, "coder-0"));
    await history.until((p) => p.metadata.deletionTimestamp !== undefined, "deleting");
    // Without the registry tag, only the node-local copy can restore it.
    await reg.deleteManifest(vm, "hibernate");

    // On another node there is no copy: the restore fails.
    const elsewhere = await PodHistory.start(t, ns, "coder-0-other");
    await client.create(
      paths.pods(ns),
      vmPod("coder-0-other", vm, { node: "kwok-node-1", annotations: { [A.restore]: "true" } }),
    );
    await elsewhere.state("failed");

    const back = await PodHistory.start(t, ns, "coder-0-back");
    await client.create(
      paths.pods(ns),
      vmPod("coder-0-back", vm, { node: "kwok-node-0", annotations: { [A.restore]: "true" } }),
    );
    const up = await back.state("ready");
    assert.equal(
      annotationsOf(up)[A.message],
      "restored from the node-local snapshot on kwok-node-0",
    );
    assert.deepEqual(await reg.listTags(vm), [], "no :latest for a seat release");
  });

  test(":latest is pushed when a running VM's pod is deleted, per snapshot policy", async (t) => {
    const reg = registry();
    const ns = await namespace(t);
    const id = suffix();
    const cases: { name: string; role: string; policy?: string; latest: boolean }[] = [
      { name: "never-main", role: "main", policy: "never", latest: false },
      { name: "mainonly-sub", role: "sub-agent", policy: "main-only", latest: false },
      { name: "mainonly-main", role: "main", policy: "main-only", latest: true },
      { name: "always-sub", role: "sub-agent", policy: "always", latest: true },
      { name: "default-toolbox", role: "toolbox", latest: true },
    ];
    const vmOf = (name: string) => `vk-${ns}-${name}-${id}`;
    for (const c of cases)
      await bootedPod(t, ns, c.name, vmOf(c.name), {
        role: c.role,
        annotations: c.policy ? { [A.policy]: c.policy } : {},
      });
    // Deleted in this order: the decisions for the pods that push nothing are taken before
    // the pushes of the later ones, so once those tags are there the others are final.
    for (const c of cases) await client.delete(paths.pod(ns, c.name));
    for (const c of cases.filter((c) => c.latest)) await waitForTag(reg, vmOf(c.name), "latest");
    for (const c of cases)
      assert.deepEqual(await reg.listTags(vmOf(c.name)), c.latest ? ["latest"] : [], c.name);
  });
});
