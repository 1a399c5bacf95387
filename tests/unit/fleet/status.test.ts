import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { statusEqual } from "../../../engine/plan/index.js";
import { deriveStatus } from "../../../engine/plan/status.js";
import type { CocoonSet, CocoonSetStatus, Pod } from "../../../engine/spec/index.js";
import {
  NOW,
  cocoonSet,
  convergedPods,
  failed,
  mainPod,
  subPod,
  toolbox,
  toolboxPod,
  withAnnotations,
} from "./fixtures.js";

const cs = cocoonSet({ toolboxes: [toolbox("web"), toolbox("db")] }, { replicas: 2 });
const status = (pods: Pod[], on: CocoonSet = cs, nowMs = NOW): CocoonSetStatus =>
  deriveStatus({ cocoonSet: on, pods, nowMs });

describe("deriveStatus", () => {
  it("describes a converged fleet: counts, members, Running, conditions", () => {
    const pods = convergedPods(cs).map((p) =>
      p.metadata?.name === "demo-1"
        ? withAnnotations(p, {
            "vm.cocoonstack.io/id": "vm-17",
            "vm.cocoonstack.io/ip": "10.2.0.17",
          })
        : p,
    );
    assert.deepEqual(status(pods), {
      observedGeneration: 3,
      phase: "Running",
      readyAgents: 3,
      desiredAgents: 3,
      readyToolboxes: 2,
      desiredToolboxes: 2,
      agents: [
        {
          slot: 0,
          role: "main",
          podName: "demo-0",
          vmName: "vk-team-demo-0",
          phase: "Running",
        },
        {
          slot: 1,
          role: "sub-agent",
          podName: "demo-1",
          vmName: "vk-team-demo-1",
          vmID: "vm-17",
          ip: "10.2.0.17",
          phase: "Running",
          forkedFrom: "vk-team-demo-0",
        },
        {
          slot: 2,
          role: "sub-agent",
          podName: "demo-2",
          vmName: "vk-team-demo-2",
          phase: "Running",
          forkedFrom: "vk-team-demo-0",
        },
      ],
      toolboxes: [
        {
          name: "db",
          podName: "demo-db",
          vmName: "vk-team-demo-db",
          phase: "Running",
          connType: "ssh",
        },
        {
          name: "web",
          podName: "demo-web",
          vmName: "vk-team-demo-web",
          phase: "Running",
          connType: "ssh",
        },
      ],
      conditions: [
        {
          type: "Ready",
          status: "True",
          reason: "AllAgentsReady",
          message: "3/3 agents ready, 2/2 toolboxes ready",
          observedGeneration: 3,
          lastTransitionTime: "2025-06-01T12:00:00Z",
        },
        {
          type: "Progressing",
          status: "False",
          reason: "Stable",
          message: "Running",
          observedGeneration: 3,
          lastTransitionTime: "2025-06-01T12:00:00Z",
        },
      ],
    });
  });

  it("always reports the four counts, zeros included, and empty member lists", () => {
    const s = status([], cocoonSet());
    assert.deepEqual(
      [s.readyAgents, s.desiredAgents, s.readyToolboxes, s.desiredToolboxes, s.agents, s.toolboxes],
      [0, 1, 0, 0, [], []],
    );
  });

  const phases: [string, () => Pod[], string][] = [
    ["no main agent → Pending", () => [subPod(cs, 1)], "Pending"],
    ["main agent not Ready → Pending", () => [mainPod(cs, false)], "Pending"],
    [
      "terminal main agent → Failed",
      () => [failed(mainPod(cs)), ...convergedPods(cs).slice(1)],
      "Failed",
    ],
    [
      "a sub-agent missing → Scaling",
      () => convergedPods(cs).filter((p) => p.metadata?.name !== "demo-2"),
      "Scaling",
    ],
    [
      "a toolbox not Ready → Scaling",
      () => convergedPods(cs).map((p) => (p.metadata?.name === "demo-db" ? failed(p) : p)),
      "Scaling",
    ],
    [
      "an extra sub-agent still present → Scaling",
      () => [...convergedPods(cs), subPod(cocoonSet({}, { replicas: 3 }), 3)],
      "Scaling",
    ],
    ["everything Ready → Running", () => convergedPods(cs), "Running"],
  ];
  for (const [title, pods, phase] of phases) {
    it(title, () => assert.equal(status(pods()).phase, phase));
  }

  it("counts only Ready agents within 1..replicas and Ready toolboxes of the spec", () => {
    const extra = subPod(cocoonSet({}, { replicas: 5 }), 5);
    const stray = toolboxPod(cs, toolbox("old"));
    const pods = [...convergedPods(cs), extra, stray].map((p) =>
      p.metadata?.name === "demo-1" ? failed(p) : p,
    );
    const s = status(pods);
    assert.equal(s.readyAgents, 2);
    assert.equal(s.readyToolboxes, 2);
    assert.deepEqual(
      s.agents?.map((a) => a.slot),
      [0, 1, 2, 5],
    );
    assert.deepEqual(
      s.toolboxes?.map((t) => t.name),
      ["db", "old", "web"],
    );
  });

  it("reports AgentsNotReady and Reconciling with the counts while scaling", () => {
    const s = status(convergedPods(cs).slice(0, 2));
    assert.deepEqual(
      s.conditions?.map((c) => [c.type, c.status, c.reason, c.message]),
      [
        ["Ready", "False", "AgentsNotReady", "2/3 agents ready, 0/2 toolboxes ready"],
        ["Progressing", "True", "Reconciling", "Scaling"],
      ],
    );
  });

  it("keeps a condition's transition time while its status is unchanged", () => {
    const first = status(convergedPods(cs).slice(0, 2));
    const later = status(convergedPods(cs).slice(0, 1), { ...cs, status: first }, NOW + 90_000);
    assert.deepEqual(
      later.conditions?.map((c) => c.lastTransitionTime),
      ["2025-06-01T12:00:00Z", "2025-06-01T12:00:00Z"],
    );
    const ready = status(convergedPods(cs), { ...cs, status: first }, NOW + 90_000);
    assert.deepEqual(
      ready.conditions?.map((c) => c.lastTransitionTime),
      ["2025-06-01T12:01:30Z", "2025-06-01T12:01:30Z"],
    );
  });

  it("takes the VNC port and connection type of a toolbox from its annotations", () => {
    const desk = toolbox("desk", {
      mode: "static",
      staticVMID: "vm-3",
      vncPort: 5900,
      connType: "vnc",
    });
    const on = cocoonSet({ toolboxes: [desk] });
    const [entry] = status([mainPod(on), toolboxPod(on, desk)], on).toolboxes ?? [];
    assert.deepEqual(entry, {
      name: "desk",
      podName: "demo-desk",
      vmName: "vk-team-demo-desk",
      vmID: "vm-3",
      phase: "Running",
      connType: "vnc",
      vncPort: 5900,
    });
  });
});

describe("deriveStatus: the fields cocoon-operator fills the same way", () => {
  it("reports a member's IP from the VM annotation and never the pod IP", () => {
    const pods = convergedPods(cs).map((p) =>
      p.metadata?.name === "demo-2"
        ? withAnnotations(p, { "vm.cocoonstack.io/ip": "10.9.0.2" })
        : p,
    );
    const s = status(pods);
    assert.deepEqual(
      s.agents?.map((a) => a.ip),
      [undefined, undefined, "10.9.0.2"],
    );
    assert.deepEqual(
      s.toolboxes?.map((t) => t.ip),
      [undefined, undefined],
    );
  });

  it("infers a toolbox's connection type: spec, else vnc with a VNC port, else by OS", () => {
    const boxes = [
      toolbox("a", { os: "windows" }),
      toolbox("b", { os: "windows", connType: "vnc" }),
      toolbox("c", { os: "android" }),
      toolbox("d", { os: "linux" }),
      toolbox("e", { mode: "static", staticVMID: "vm-1", vncPort: 5901, os: "windows" }),
    ];
    const on = cocoonSet({ toolboxes: boxes });
    const s = status([mainPod(on), ...boxes.map((b) => toolboxPod(on, b))], on);
    assert.deepEqual(
      s.toolboxes?.map((t) => [t.name, t.connType]),
      [
        ["a", "rdp"],
        ["b", "vnc"],
        ["c", "adb"],
        ["d", "ssh"],
        ["e", "vnc"],
      ],
    );
  });
});

describe("statusEqual", () => {
  const s = status(convergedPods(cs));

  it("is true for the same content in another key order or with empty lists left out", () => {
    const reordered = Object.fromEntries(Object.entries(s).reverse()) as CocoonSetStatus;
    assert.deepEqual(Object.keys(reordered).reverse(), Object.keys(s));
    assert.equal(statusEqual(s, reordered), true);
    const bare: CocoonSetStatus = {
      readyAgents: 0,
      desiredAgents: 1,
      readyToolboxes: 0,
      desiredToolboxes: 0,
    };
    assert.equal(statusEqual(bare, { ...bare, agents: [], toolboxes: [] }), true);
  });

  it("is false when anything changes", () => {
    assert.equal(statusEqual(s, { ...s, readyAgents: 2 }), false);
    assert.equal(statusEqual(s, { ...s, conditions: s.conditions?.slice(0, 1) }), false);
    assert.equal(statusEqual(undefined, s), false);
  });

  // The rule as first written: both sides serialised with sorted keys and the fields that say
  // nothing (absent, null, an empty list) left out. The comparison in place must agree with it.
  const canonical = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(canonical);
    if (value !== null && typeof value === "object")
      return Object.fromEntries(
        Object.entries(value as Record<string, unknown>)
          .filter(([, v]) => v !== undefined && v !== null && !(Array.isArray(v) && v.length === 0))
          .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
          .map(([k, v]) => [k, canonical(v)]),
      );
    return value;
  };
  const byJson = (a: unknown, b: unknown) =>
    JSON.stringify(canonical(a ?? {})) === JSON.stringify(canonical(b ?? {}));
  // Small alphabets, so that equal and nearly equal pairs come up often.
  const leaf = fc.oneof(
    fc.constantFrom(0, 1, "a", "b", true, false, null, undefined),
    fc.constant([] as unknown[]),
  );
  const { value } = fc.letrec((tie) => ({
    value: fc.oneof(
      { depthSize: "small" },
      leaf,
      fc.array(tie("value"), { maxLength: 3 }),
      fc.dictionary(fc.constantFrom("x", "y", "z"), tie("value"), { maxKeys: 3 }),
    ),
  }));
  // Two statuses built from the same entries in another order, some fields dropped or emptied.
  const pair = value.chain((a) =>
    fc.oneof(
      fc.constant([a, structuredClone(a)] as const),
      fc.constant([a, reordered(a)] as const),
      value.map((b) => [a, b] as const),
    ),
  );

  it("agrees with the serialised comparison on any two values (property)", () => {
    fc.assert(
      fc.property(pair, ([a, b]) => {
        const x = a as unknown as CocoonSetStatus;
        const y = b as CocoonSetStatus;
        assert.equal(statusEqual(x, y), byJson(x, y));
        assert.equal(statusEqual(y, x), byJson(x, y));
      }),
      { numRuns: 2000 },
    );
  });
});

/** `v` with every object's keys in reverse order. */
function reordered(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(reordered);
  if (v !== null && typeof v === "object")
    return Object.fromEntries(
      Object.entries(v)
        .reverse()
        .map(([k, x]) => [k, reordered(x)]),
    );
  return v;
}

describe("one derivation: a member whose VM failed while its pod still reports Ready", () => {
  const lifecycleFailed = (p: Pod) =>
    withAnnotations(p, {
      "vm.cocoonstack.io/lifecycle-state": "failed",
      "vm.cocoonstack.io/lifecycle-state-message":
        "snapshot vk-x:hibernate not found in the registry",
    });
  const fleet = cocoonSet({}, { replicas: 2 });

  it("the main agent: phase Failed, not counted ready, its entry Failed, and the messages agree", () => {
    const [main, one, two] = convergedPods(fleet);
    const s = deriveStatus({
      cocoonSet: fleet,
      pods: [lifecycleFailed(main), one, two],
      nowMs: NOW,
    });
    assert.equal(s.phase, "Failed");
    assert.equal(s.readyAgents, 2);
    assert.equal(s.agents?.[0]?.phase, "Failed");
    const ready = s.conditions?.find((c) => c.type === "Ready");
    assert.equal(ready?.reason, "AgentsNotReady");
    assert.equal(ready?.message, "2/3 agents ready, 0/0 toolboxes ready");
  });

  it("a sub-agent or a toolbox: not ready, entry Failed, phase Scaling (never Running)", () => {
    const withTb = cocoonSet({ toolboxes: [toolbox("db")] }, { replicas: 1 });
    const [main, one, db] = convergedPods(withTb);
    const s = deriveStatus({
      cocoonSet: withTb,
      pods: [main, lifecycleFailed(one), lifecycleFailed(db)],
      nowMs: NOW,
    });
    assert.equal(s.phase, "Scaling");
    assert.equal(s.readyAgents, 1);
    assert.equal(s.readyToolboxes, 0);
    assert.equal(s.agents?.[1]?.phase, "Failed");
    assert.equal(s.toolboxes?.[0]?.phase, "Failed");
  });
});
