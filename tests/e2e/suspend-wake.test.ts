/**
 * The suspend-wake example through the real pulumi CLI (file backend) on the embedded
 * cluster, with the node-agent simulator playing the VMs and the cluster's registry holding
 * their snapshots; no controller runs but for the idle policy's step, so `pulumi up` itself
 * drives every pass. Every assertion reads the cluster's objects or the registry's tag lists.
 *
 * - up: a main agent and 2 sub-agents, every VM booted;
 * - preview of `suspended=true`: the slots resource is one update whose diff is
 *   `spec.suspend` alone, no slot entry, and the preview says "suspend fleet NS/coder
 *   (3 pods hibernate …)";
 * - up: returns with the CocoonSet Suspended, every pod asked to hibernate and hibernated,
 *   and `<vm>:hibernate` in the registry for each VM;
 * - up of `suspended=false`: Running, no pod asked to hibernate, every VM up again;
 * - `idleAfter=10m`: its preview is one update of the slots resource whose diff is `spec.idle`
 *   alone; a controller (in the test's process, on a clock the test moves) idle-hibernates
 *   both sub-agents, then suspends the whole fleet through its status; after each, preview
 *   and up change nothing and wake nothing; activity on every member wakes them all;
 * - a suspend whose pod the simulator holds in `hibernating`: up fails after
 *   `suspendTimeoutSeconds`, naming that pod and only it;
 * - destroy: no pod, no CocoonSet, and the tags dropped as `snapshotPolicy: main-only` says
 *   (every `:hibernate`, the sub-agents' `:latest`; the main agent's `:latest` kept).
 */
import type { EngineEvent, Stack } from "@pulumi/pulumi/automation/index.js";
import assert from "node:assert/strict";
import { join } from "node:path";
import { test, type TestContext } from "node:test";
import { SIM_ANNOTATIONS } from "../../cluster/node-agent.js";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import {
  ANNOTATIONS,
  LABELS,
  SNAPSHOT_TAGS,
  type CocoonHibernation,
  type CocoonSet,
  type Pod,
} from "../../engine/spec/index.js";
import { paths, waitForList, waitForObject } from "../../engine/kube/index.js";
import { OciRegistry } from "../../engine/registry/oci.js";
import { adminClient, suffix } from "../support/cluster.js";
import { pushTag, registryAddress, vmReady, waitForPods } from "../support/lifecycle.js";
import { fleetPods } from "../support/controller-fleet.js";
import { Cleanup } from "../support/controller-process.js";
import { startIdleController } from "../support/idle-controller.js";
import { programStack, repoRoot } from "../support/pulumi.js";

const example = join(repoRoot, "examples", "suspend-wake");
const SLOTS_TYPE = "pulumi-nodejs:dynamic/cocoonset:Slots";
const client = adminClient();
const MINUTE = 60_000;

const hibernated = (p: Pod) =>
  p.metadata?.annotations?.[ANNOTATIONS.hibernate] === "true" &&
  p.metadata?.annotations?.[ANNOTATIONS.lifecycleState] === "hibernated";
const awake = (p: Pod) =>
  vmReady(p) && p.metadata?.annotations?.[ANNOTATIONS.hibernate] === undefined;

test("suspend and wake a fleet with pulumi up, a suspend that times out, and destroy's tag clean-up", async (t) => {
  await ensureCrd(client);
  const ns = `e2e-suspend-${suffix()}`.slice(0, 63);
  const name = "coder";
  const registry = registryAddress();
  const reg = new OciRegistry(registry);
  const vms = [0, 1, 2].map((s) => `vk-${ns}-${name}-${s}`);
  const { stack } = await programStack(t, example, {
    registry: { value: registry },
    namespace: { value: ns },
    replicas: { value: "2" },
    operator: { value: "false" },
    snapshotPolicy: { value: "main-only" },
  });
  t.after(async () => {
    // A failed step leaves the stack up: take it down (the namespace is the stack's).
    await stack.destroy().catch(() => undefined);
  });
  const phase = async () =>
    (await client.get<CocoonSet>(paths.cocoonSet(ns, name))).status?.phase ?? "";

  // 1. A running fleet: 3 pods, every VM booted by the simulator.
  const up = await stack.up();
  assert.equal(up.summary.result, "succeeded");
  await waitForPods(ns, name, 3, vmReady, "every VM booted");

  // 2. Preview of the suspend: one update of the slots resource, `spec.suspend` its whole
  // diff, and the summary line.
  await stack.setConfig("suspended", { value: "true" });
  let slotsStep: { op: string; keys: string[] } | undefined;
  const messages: string[] = [];
  const preview = await stack.preview({
    diff: true,
    onEvent: (e: EngineEvent) => {
      if (e.diagnosticEvent) messages.push(e.diagnosticEvent.message);
      const md = e.resourcePreEvent?.metadata;
      if (md?.type !== SLOTS_TYPE) return;
      slotsStep = { op: md.op, keys: Object.keys(md.detailedDiff ?? {}).sort() };
    },
  });
  assert.deepEqual(slotsStep, { op: "update", keys: ["spec.suspend"] }, "no per-slot entry");
  const summary = `suspend fleet ${ns}/${name} (3 pods hibernate; the slots are kept)`;
  assert.ok(
    messages.some((m) => m.includes(summary)),
    `the preview says what the update is: ${messages.join(" | ")}`,
  );
  assert.equal(preview.changeSummary.update, 2, "the CocoonSet and the slots, nothing else");

  // 3. The suspend: up returns once the fleet is Suspended.
  const logged: string[] = [];
  const onEvent = (e: EngineEvent) => {
    if (e.diagnosticEvent) logged.push(e.diagnosticEvent.message);
  };
  const suspend = await stack.up({ onEvent });
  assert.equal(suspend.summary.result, "succeeded");
  assert.equal(await phase(), "Suspended");
  const pods = (await client.list<Pod>(paths.pods(ns), { labelSelector: `${LABELS.name}=${name}` }))
    .items;
  assert.deepEqual(pods.map((p) => p.metadata?.name).sort(), ["coder-0", "coder-1", "coder-2"]);
  assert.ok(pods.every(hibernated), "every pod asked to hibernate and hibernated");
  for (const vm of vms) {
    assert.ok((await reg.listTags(vm)).includes(SNAPSHOT_TAGS.hibernate), `${vm}:hibernate`);
  }
  const end = new RegExp(`${ns}/${name}: Suspended after (\\d+) pass\\(es\\)`);
  const done = logged.map((m) => end.exec(m)).find((m) => m !== null);
  assert.ok(done, `the end is logged: ${logged.join(" | ")}`);
  // A wait pass that does not finish says what is left. The converge before the wait
  // already asks every pod to hibernate; when the node agent is done before the wait's
  // first pass (converge is slow on a loaded machine), that pass finishes and logs none.
  if (Number(done[1]) > 1) {
    assert.ok(
      logged.some((m) =>
        /: suspend pass \d+: phase Suspending, \d pod\(s\) not hibernated yet/.test(m),
      ),
      `each pass is logged: ${logged.join(" | ")}`,
    );
  }
  assert.equal(suspend.outputs.phase.value, "Suspended");

  // 4. The wake: up returns once the fleet is Running and every VM is up again.
  await stack.setConfig("suspended", { value: "false" });
  const wake = await stack.up();
  assert.equal(wake.summary.result, "succeeded");
  assert.equal(await phase(), "Running");
  const woken = (
    await client.list<Pod>(paths.pods(ns), { labelSelector: `${LABELS.name}=${name}` })
  ).items;
  assert.equal(woken.length, 3);
  assert.ok(woken.every(awake), "no pod asked to hibernate, every VM ready");
  assert.deepEqual(
    woken.map((p) => p.metadata?.uid).sort(),
    pods.map((p) => p.metadata?.uid).sort(),
    "the same pods: a retain suspend keeps them",
  );

  // 5. The idle policy, declared: its preview changes no slot, and once the controller has
  // acted on it (idle-hibernated sub-agents, then the whole fleet suspended through its
  // status) `pulumi up` finds nothing to change and wakes nothing.
  await idlePolicySteps(t, stack, ns, name);

  // 6. A suspend that does not finish in time: the simulator holds coder-1 in `hibernating`.
  await client.patch(paths.pod(ns, "coder-1"), {
    metadata: { annotations: { [SIM_ANNOTATIONS.hibernateDelayMs]: "600000" } },
  });
  await stack.setConfig("suspended", { value: "true" });
  await stack.setConfig("suspendTimeoutSeconds", { value: "3" });
  await assert.rejects(stack.up(), (e: Error) => {
    assert.match(
      e.message,
      new RegExp(
        `suspend of fleet ${ns}/${name} did not finish within 3s \\(suspendTimeoutSeconds\\): phase Suspending; pods that did not hibernate: coder-1 \\(lifecycle state hibernating\\)\\.`,
      ),
    );
    return true;
  });
  await waitForPods(
    ns,
    name,
    3,
    (p) => (p.metadata?.name === "coder-1" ? !hibernated(p) : hibernated(p)),
    "the other two hibernated, coder-1 not",
  );

  // 7. Destroy: the tags go as snapshotPolicy main-only says. `:latest` of every VM stands
  // for an earlier deletion's (hibernated VMs push none).
  for (const vm of vms) await pushTag(reg, vm, SNAPSHOT_TAGS.latest);
  logged.length = 0;
  const destroyed = await stack.destroy({ onEvent });
  assert.equal(destroyed.summary.result, "succeeded");
  assert.equal(await client.getOrUndefined(paths.cocoonSet(ns, name)), undefined);
  await waitForList(client, paths.pods(ns), (items) => items.length === 0, {
    labelSelector: `${LABELS.name}=${name}`,
    description: "no pod of the fleet left",
  });
  assert.deepEqual(await reg.listTags(vms[0]), [SNAPSHOT_TAGS.latest], "main keeps :latest");
  assert.deepEqual(await reg.listTags(vms[1]), [], "slot 1: both tags dropped");
  assert.deepEqual(await reg.listTags(vms[2]), [], "slot 2: both tags dropped");
  assert.ok(
    logged.some((m) => m.includes("snapshot tags dropped: 5, left in the registry: 0")),
    logged.join(" | "),
  );
});

/** An update that changes nothing: the preview plans none and the up makes none. */
async function assertNoChange(stack: Stack, what: string): Promise<void> {
  const preview = await stack.preview({ diff: true });
  assert.deepEqual(
    Object.keys(preview.changeSummary).filter((op) => op !== "same"),
    [],
    `${what}: the preview plans no change (${JSON.stringify(preview.changeSummary)})`,
  );
  const up = await stack.up();
  assert.equal(up.summary.result, "succeeded");
  assert.deepEqual(
    Object.keys(up.summary.resourceChanges ?? {}).filter((op) => op !== "same"),
    [],
    `${what}: up changes nothing (${JSON.stringify(up.summary.resourceChanges)})`,
  );
}

/**
 * Step 5 of the test: the idle policy set with `pulumi up`, then carried out by a controller
 * (in this process, on a clock the test moves), then woken by activity; the fleet ends awake.
 */
async function idlePolicySteps(t: TestContext, stack: Stack, ns: string, name: string) {
  const before = await fleetPods(client, ns, name);
  const uids = before.map((p) => p.metadata?.uid);

  // Only the policy changes: one update of the slots resource, `spec.idle` its whole diff.
  await stack.setConfig("idleAfter", { value: "10m" });
  const slotSteps: { op: string; keys: string[] }[] = [];
  await stack.preview({
    diff: true,
    onEvent: (e: EngineEvent) => {
      const md = e.resourcePreEvent?.metadata;
      if (md?.type === SLOTS_TYPE)
        slotSteps.push({ op: md.op, keys: Object.keys(md.detailedDiff ?? {}).sort() });
    },
  });
  assert.deepEqual(slotSteps, [{ op: "update", keys: ["spec.idle"] }], "no per-slot entry");
  assert.equal((await stack.up()).summary.result, "succeeded");
  const declared = await client.get<CocoonSet>(paths.cocoonSet(ns, name));
  assert.deepEqual(declared.spec.idle, { after: "10m" });
  assert.deepEqual(
    (await fleetPods(client, ns, name)).map((p) => p.metadata?.uid),
    uids,
    "setting the policy recreates no pod",
  );

  // The controller: the main agent is used at minute 6; at minute 11 both sub-agents have
  // been idle 10 minutes and are hibernated through the policy's CocoonHibernations.
  const c = new Cleanup(t);
  const { clock, proc, renew } = await startIdleController(c, ns);
  clock.advance(6 * MINUTE);
  await renew(name, [`${name}-0`]);
  clock.advance(5 * MINUTE);
  const subHibernated = (p: Pod) => (p.metadata?.name === `${name}-0` ? awake(p) : hibernated(p));
  await waitForPods(ns, name, 3, subHibernated, "both sub-agents idle-hibernated, main awake");
  const idleCrs = async () =>
    (await client.list<CocoonHibernation>(paths.cocoonHibernations(ns))).items
      .map((h) => `${h.metadata?.name}:${h.spec?.desire}`)
      .sort();
  assert.deepEqual(await idleCrs(), [`${name}-1-idle:Hibernate`, `${name}-2-idle:Hibernate`]);

  await assertNoChange(stack, "after the idle hibernations");
  const kept = await fleetPods(client, ns, name);
  assert.deepEqual(
    kept.map((p) => p.metadata?.uid),
    uids,
    "no pod recreated",
  );
  assert.ok(kept.every(subHibernated), "up woke no idle-hibernated member");
  assert.deepEqual(await idleCrs(), [`${name}-1-idle:Hibernate`, `${name}-2-idle:Hibernate`]);

  // Nobody uses the main agent either: at minute 22 the whole fleet is idle and suspended
  // through its status, the declared `spec.suspend` untouched.
  clock.advance(11 * MINUTE);
  const suspended = await waitForObject(
    client,
    paths.cocoonSets(ns),
    name,
    (o) => {
      const cs = o as unknown as CocoonSet | undefined;
      return !!cs?.status?.idleSuspendedSince && cs.status.phase === "Suspended";
    },
    { timeoutMs: 90_000, description: `${name} idle-suspended` },
  );
  assert.equal(
    suspended?.metadata?.generation,
    declared.metadata.generation,
    "the spec is untouched",
  );
  await assertNoChange(stack, "after the idle suspend");
  const asleep = await client.get<CocoonSet>(paths.cocoonSet(ns, name));
  assert.ok(asleep.status?.idleSuspendedSince, "still idle-suspended after up");
  assert.equal(asleep.status?.phase, "Suspended");
  assert.ok((await fleetPods(client, ns, name)).every(hibernated), "up woke no member");

  // Activity on every member wakes the fleet and each idle-hibernated member.
  await renew(
    name,
    [0, 1, 2].map((s) => `${name}-${s}`),
  );
  await waitForPods(ns, name, 3, awake, "every VM running again");
  await waitForList(client, paths.cocoonHibernations(ns), (items) => items.length === 0, {
    description: "the policy's CocoonHibernations gone once the wakes are over",
  });
  await proc.stop();
}
