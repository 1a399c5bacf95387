// What `pulumi preview` dry-runs: the pods the engine would create converging a fleet (its own
// planner and pod builder on a simulated cluster), grouped by shape (pods differing only by
// their slot share one dry run), sent at most `concurrency` at a time.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { buildAgentPod } from "../../../engine/pods/index.js";
import { ANNOTATIONS, LABELS, type CocoonSet, type Pod } from "../../../engine/spec/index.js";
import {
  NOT_CREATED_UID,
  groupByShape,
  plannedCocoonSet,
  podShape,
  previewCreates,
  sendOnePerShape,
  type SlotCreate,
} from "../../../engine/execute/preview-creates.js";
import { NOW, cocoonSet, convergedPods, failed, toolbox } from "./fixtures.js";

const slots = (creates: readonly SlotCreate[]): string[] => creates.map((c) => c.slot);

function preview(cs: CocoonSet, pods: Pod[]) {
  return previewCreates({ cocoonSet: cs, pods, nowMs: NOW });
}

describe("previewCreates", () => {
  it("a scale-up creates exactly the added slots, as the engine builds them", () => {
    const before = cocoonSet({}, { replicas: 2 });
    const after = cocoonSet({}, { replicas: 5 });
    const r = preview(after, convergedPods(before));
    assert.deepEqual(slots(r.creates), ["3", "4", "5"]);
    assert.deepEqual(r.removed, []);
    // The engine's own pod: forked from the live main agent and bound to its node.
    const want = buildAgentPod(after, 3, { mainVMName: "vk-team-demo-0", mainNodeName: "node-a" });
    assert.deepEqual(r.creates[0].pod, want);
  });

  it("a converged fleet creates nothing, a scale-down removes without creating", () => {
    const cs = cocoonSet({}, { replicas: 3 });
    assert.deepEqual(preview(cs, convergedPods(cs)).creates, []);
    const down = preview(cocoonSet({}, { replicas: 1 }), convergedPods(cs));
    assert.deepEqual(down.creates, []);
    assert.deepEqual(
      down.removed.map((p) => p.metadata?.name),
      ["demo-2", "demo-3"],
    );
  });

  it("a new fleet creates its main agent and everything waiting for it, sub-agents on no node yet", () => {
    const spec = {
      agent: { image: "ghcr.io/acme/agent:1", replicas: 2 },
      toolboxes: [toolbox("web")],
    };
    const cs = plannedCocoonSet("team", "demo", spec, undefined);
    assert.equal(cs.metadata.uid, NOT_CREATED_UID);
    assert.equal(cs.metadata.generation, 1);
    const r = preview(cs, []);
    assert.deepEqual(slots(r.creates), ["0", "1", "2", "web"]);
    const sub = r.creates[1].pod;
    assert.equal(sub.spec.nodeName, undefined, "the main agent's node is not known yet");
    assert.equal(sub.metadata.annotations[ANNOTATIONS.forkFrom], "vk-team-demo-0");
    assert.equal(sub.metadata.ownerReferences[0].uid, NOT_CREATED_UID);
  });

  it("an agent image change rebuilds every agent pod, each once, main first; the toolbox stays", () => {
    const before = cocoonSet({ toolboxes: [toolbox("web")] }, { replicas: 2 });
    const after = cocoonSet({ toolboxes: [toolbox("web")] }, { replicas: 2, image: "x/y:2" });
    const r = preview(after, convergedPods(before));
    assert.deepEqual(slots(r.creates), ["0", "1", "2"]);
    assert.deepEqual(r.removed, []);
    assert.deepEqual(
      r.creates.map((c) => c.pod.metadata.annotations[ANNOTATIONS.image]),
      ["x/y:2", "x/y:2", "x/y:2"],
    );
    // The main agent is rebuilt too, so its new node is not known: sub-agents carry none.
    assert.equal(r.creates[1].pod.spec.nodeName, undefined);
  });

  it("a failed sub-agent out of backoff is rebuilt: its new pod is a create", () => {
    const cs = cocoonSet({}, { replicas: 2 });
    const pods = convergedPods(cs).map((p) => (p.metadata?.name === "demo-2" ? failed(p) : p));
    assert.deepEqual(slots(preview(cs, pods).creates), ["2"]);
  });

  it("plannedCocoonSet keeps the live object and counts a spec change as a new generation", () => {
    const live = cocoonSet({}, { replicas: 2 });
    assert.equal(plannedCocoonSet("team", "demo", live.spec, live).metadata.generation, 3);
    const next = plannedCocoonSet("team", "demo", cocoonSet({}, { replicas: 4 }).spec, live);
    assert.equal(next.metadata.generation, 4);
    assert.equal(next.metadata.uid, live.metadata.uid);
    assert.equal(next.spec.agent.replicas, 4);
  });
});

describe("pod shapes", () => {
  const cs = cocoonSet({ toolboxes: [toolbox("web"), toolbox("db")] }, { replicas: 6 });
  const creates = preview(plannedCocoonSet("team", "demo", cs.spec, undefined), []).creates;

  it("sub-agents differing only by slot share one shape; main and each distinct toolbox do not", () => {
    const groups = groupByShape(creates);
    assert.deepEqual(
      groups.map((g) => slots(g.creates)),
      [["0"], ["1", "2", "3", "4", "5", "6"], ["web"], ["db"]],
    );
  });

  it("name, slot label and VM name are all that is normalised", () => {
    const [a, b] = [creates[1].pod, creates[2].pod];
    assert.equal(podShape(a), podShape(b));
    for (const change of [
      (p: typeof a) => (p.metadata.labels[LABELS.role] = "other"),
      (p: typeof a) => (p.metadata.annotations[ANNOTATIONS.generation] = "9"),
      (p: typeof a) => (p.metadata.annotations[ANNOTATIONS.forkFrom] = "vk-other"),
      (p: typeof a) => (p.spec.containers[0].resources = { requests: { cpu: "1" } }),
      (p: typeof a) => (p.spec.nodeName = "node-b"),
      (p: typeof a) => (p.metadata.ownerReferences[0].uid = "other"),
    ]) {
      const c = structuredClone(b);
      change(c);
      assert.notEqual(podShape(a), podShape(c), String(change));
    }
  });

  it("toolboxes alike but for their name share a shape", () => {
    const same = cocoonSet(
      { toolboxes: [toolbox("a", { image: "t:1" }), toolbox("b", { image: "t:1" })] },
      { replicas: 0 },
    );
    const groups = groupByShape(
      preview(plannedCocoonSet("team", "demo", same.spec, undefined), []).creates,
    );
    assert.deepEqual(
      groups.map((g) => slots(g.creates)),
      [["0"], ["a", "b"]],
    );
  });
});

describe("sendOnePerShape", () => {
  const shapes = (n: number, per: number) =>
    groupByShape(
      Array.from({ length: n * per }, (_, i) => {
        const pod = buildAgentPod(
          cocoonSet({}, { image: `img:${i % n}`, replicas: n * per }),
          i + 1,
        );
        return { slot: String(i + 1), pod };
      }),
    );

  for (const [n, per, concurrency] of [
    [20, 5, 3],
    [4, 50, 8],
    [1, 100, 8],
    [9, 1, 1],
  ] as const) {
    it(`${n} shapes of ${per} pods, ${concurrency} in flight: one send per shape, never more than ${concurrency} at once`, async () => {
      const groups = shapes(n, per);
      assert.equal(groups.length, n);
      let inFlight = 0;
      let most = 0;
      const sent: string[] = [];
      const answers = await sendOnePerShape(groups, concurrency, async (c) => {
        inFlight++;
        most = Math.max(most, inFlight);
        sent.push(c.slot);
        // Settle on a later turn, so that sends overlap when the bound allows it.
        await new Promise<void>((resolve) => setImmediate(resolve));
        inFlight--;
        return `answer ${c.slot}`;
      });
      assert.equal(sent.length, n, "one send per shape");
      assert.ok(most <= concurrency, `at most ${concurrency} in flight (saw ${most})`);
      assert.equal(most, Math.min(concurrency, n), "the bound is used");
      // Each group gets the answer of its own first create, in group order.
      assert.deepEqual(
        answers.map((a) => a.answer),
        groups.map((g) => `answer ${g.creates[0].slot}`),
      );
    });
  }
});
