// What the slots resource says and waits for around a suspend or a wake (pure): the change
// a spec flip asks for, the preview's summary line, and the pods a suspend or a wake still
// waits for.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import {
  describePods,
  lifecycleChange,
  lifecycleCount,
  lifecycleSummary,
  suspendPending,
  wakePending,
} from "../../../provider/dynamic/deploy-view.js";
import { UNKNOWN } from "../../../provider/dynamic/slots.js";
import { cocoonSetFrom, desiredSlots } from "../../../provider/dynamic/slot-view.js";
import { planPass } from "../../../engine/planner/index.js";
import { buildAgentPod, buildToolboxPod } from "../../../engine/pods/index.js";
import { ANNOTATIONS, type CocoonSetSpec, type Pod } from "../../../engine/spec/index.js";
import {
  StepFailure,
  isSuspendRegistrySilence,
  refusalFailure,
} from "../../../engine/execute/pass-result.js";

const unknown = (v: unknown) => v === UNKNOWN;
const spec = (suspend?: unknown): CocoonSetSpec =>
  ({
    agent: { image: "agents/coder:1", replicas: 2 },
    toolboxes: [
      { name: "shell", image: "tools/shell:1", mode: "static", staticIP: "10.0.0.9" },
      { name: "browser", image: "tools/browser:1" },
    ],
    ...(suspend === undefined ? {} : { suspend }),
  }) as CocoonSetSpec;

const cs = { ...cocoonSetFrom("agents", "coder", spec(), "uid-1") };
cs.metadata.generation = 3;

/** The fleet's live pods, each with the given lifecycle annotations. */
function pods(annotations: (slot: string) => Record<string, string> = () => ({})): Pod[] {
  const built = [
    buildAgentPod(cs, 0),
    buildAgentPod(cs, 1),
    buildAgentPod(cs, 2),
    ...(cs.spec.toolboxes ?? []).map((t) => buildToolboxPod(cs, t)),
  ];
  return built.map((p, i) => {
    const slot = p.metadata.labels?.["cocoonset.cocoonstack.io/slot"] ?? String(i);
    return {
      ...p,
      metadata: {
        ...p.metadata,
        uid: `pod-${slot}`,
        resourceVersion: "1",
        annotations: { ...p.metadata.annotations, ...annotations(slot) },
      },
      status: {
        phase: "Running",
        conditions: [{ type: "Ready", status: "True" }],
      },
    };
  });
}

describe("lifecycleChange", () => {
  const table: [string, unknown, unknown, string | undefined][] = [
    ["false → true is a suspend", false, true, "suspend"],
    ["unset → true is a suspend", undefined, true, "suspend"],
    ["true → false is a wake", true, false, "wake"],
    ["true → unset is a wake", true, undefined, "wake"],
    ["true → true is nothing", true, true, undefined],
    ["unset → false is nothing", undefined, false, undefined],
    ["a value unknown in preview is nothing yet", false, UNKNOWN, undefined],
  ];
  for (const [title, was, is, want] of table) {
    it(title, () => {
      assert.equal(lifecycleChange(spec(was), spec(is), unknown), want);
    });
  }
  it("a create (no last spec) is not a suspend", () => {
    assert.equal(lifecycleChange(undefined, spec(true), unknown), undefined);
  });
  it("is a suspend exactly when the new value is true and the old one is not (property)", () => {
    const value = fc.constantFrom<unknown>(true, false, undefined, "true", 1);
    fc.assert(
      fc.property(value, value, (was, is) => {
        const got = lifecycleChange(spec(was), spec(is), unknown);
        const want =
          is === true && was !== true
            ? "suspend"
            : was === true && is !== true
              ? "wake"
              : undefined;
        assert.equal(got, want);
      }),
    );
  });
});

describe("lifecycleSummary and lifecycleCount", () => {
  it("counts the live managed pods (a static toolbox has no VM lifecycle)", () => {
    assert.equal(lifecycleCount(cs, pods(), {}), 4);
  });
  it("counts the desired slots when the pods could not be listed", () => {
    assert.equal(lifecycleCount(cs, undefined, desiredSlots("agents", "coder", spec())), 4);
  });
  it("leaves out terminal pods and pods of another owner", () => {
    const live = pods();
    live[1] = { ...live[1], status: { phase: "Failed" } };
    live[2] = {
      ...live[2],
      metadata: { ...live[2].metadata, ownerReferences: [] },
    };
    assert.equal(lifecycleCount(cs, live, {}), 2);
  });
  it("says what the update is, in one line", () => {
    assert.equal(
      lifecycleSummary("suspend", "agents", "coder", 3),
      "suspend fleet agents/coder (3 pods hibernate; the slots are kept)",
    );
    assert.equal(
      lifecycleSummary("wake", "agents", "coder", 1),
      "wake fleet agents/coder (1 pod wakes from the hibernation snapshots)",
    );
  });
});

describe("suspendPending", () => {
  it("is the pods the suspend pass asks to hibernate (a static toolbox too) or still waits for", () => {
    const suspended = { ...cs, spec: { ...cs.spec, suspend: true } };
    const live = pods((slot): Record<string, string> =>
      slot === "1"
        ? {
            [ANNOTATIONS.hibernate]: "true",
            [ANNOTATIONS.lifecycleState]: "hibernated",
            [ANNOTATIONS.lifecycleObservedGeneration]: "3",
          }
        : slot === "2"
          ? { [ANNOTATIONS.hibernate]: "true", [ANNOTATIONS.lifecycleState]: "hibernating" }
          : {},
    );
    const vm1 = live[1].metadata?.annotations?.[ANNOTATIONS.vmName] ?? "";
    const plan = planPass({
      cocoonSet: suspended,
      pods: live,
      nowMs: 0,
      snapshots: { hibernate: new Set([vm1]) },
    });
    assert.deepEqual(suspendPending(plan), ["coder-0", "coder-2", "coder-browser", "coder-shell"]);
  });

  it("with hibernatePolicy release, is also the pods it deletes and those still terminating", () => {
    const release = { ...cs, spec: { ...cs.spec, suspend: true, hibernatePolicy: "release" } };
    const asleep = (pod: Pod): Pod => ({
      ...pod,
      metadata: {
        ...pod.metadata,
        annotations: {
          ...pod.metadata?.annotations,
          [ANNOTATIONS.hibernate]: "true",
          [ANNOTATIONS.lifecycleState]: "hibernated",
          [ANNOTATIONS.lifecycleObservedGeneration]: "3",
        },
      },
    });
    const live = pods().map(asleep);
    const vms = new Set(live.map((p) => p.metadata?.annotations?.[ANNOTATIONS.vmName] ?? ""));
    const names = live.map((p) => p.metadata?.name ?? "").sort();
    const planOf = (fleet: Pod[]) =>
      planPass({
        cocoonSet: release as typeof cs,
        pods: fleet,
        nowMs: 0,
        snapshots: { hibernate: vms },
      });
    assert.deepEqual(suspendPending(planOf(live)), names, "the deletes are not the end");
    const going = live.map((p) => ({
      ...p,
      metadata: { ...p.metadata, deletionTimestamp: "2025-06-01T11:59:59Z" },
    }));
    assert.deepEqual(suspendPending(planOf(going)), names, "nor are the pods still terminating");
    assert.deepEqual(suspendPending(planOf([])), []);
  });
});

describe("wakePending", () => {
  const table: [string, Record<string, string>, boolean][] = [
    ["still asked to hibernate", { [ANNOTATIONS.hibernate]: "true" }, true],
    ["hibernated", { [ANNOTATIONS.lifecycleState]: "hibernated" }, true],
    ["creating (waking)", { [ANNOTATIONS.lifecycleState]: "creating" }, true],
    ["ready", { [ANNOTATIONS.lifecycleState]: "ready" }, false],
    ["no node agent reporting", {}, false],
  ];
  for (const [title, annotations, waits] of table) {
    it(`a pod ${title} is ${waits ? "" : "not "}waited for`, () => {
      const live = pods((slot) => (slot === "1" ? annotations : {}));
      assert.deepEqual(wakePending(cs, live), waits ? ["coder-1"] : []);
    });
  }
  it("a terminal pod is not waited for (the normal flow rebuilds it)", () => {
    const live = pods(() => ({ [ANNOTATIONS.lifecycleState]: "failed" }));
    assert.deepEqual(wakePending(cs, live), []);
  });
});

describe("describePods", () => {
  it("names each pod with its lifecycle state", () => {
    const live = pods((slot): Record<string, string> =>
      slot === "2" ? { [ANNOTATIONS.lifecycleState]: "hibernating" } : {},
    );
    assert.equal(
      describePods(live, ["coder-2", "coder-1", "coder-9"]),
      "coder-2 (lifecycle state hibernating), coder-1 (no lifecycle state reported), coder-9 (gone)",
    );
  });
});

describe("isSuspendRegistrySilence", () => {
  it("is the planner's refusal when the registry did not answer a suspend, and nothing else", () => {
    const suspended = { ...cs, spec: { ...cs.spec, suspend: true } };
    const live = pods(() => ({
      [ANNOTATIONS.hibernate]: "true",
      [ANNOTATIONS.lifecycleState]: "hibernated",
      [ANNOTATIONS.lifecycleObservedGeneration]: "3",
    }));
    const plan = planPass({
      cocoonSet: suspended,
      pods: live,
      nowMs: 0,
      snapshots: { error: "probe hibernate snapshot vk-x: HTTP 500" },
    });
    assert.deepEqual(
      plan.refusals.map((r) => [r.kind, "need" in r ? r.need : undefined]),
      [["registry-unanswered", "suspend"]],
    );
    assert.ok(isSuspendRegistrySilence(refusalFailure(plan.refusals[0])));
    const forbidden = new StepFailure("coder-1", "create", new Error("pods is forbidden"));
    assert.equal(isSuspendRegistrySilence(forbidden), false);
    const restore = refusalFailure({
      kind: "registry-unanswered",
      need: "restore",
      registryError: "HTTP 500",
      podName: "coder-1",
      message: "pod coder-1: ...",
    });
    assert.equal(isSuspendRegistrySilence(restore), false);
  });
});
