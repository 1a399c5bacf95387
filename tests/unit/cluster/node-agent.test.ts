// The node-agent simulator's decisions: which pods it owes a VM, the next transition of a
// VM from its annotations, and when a deleted VM is snapshotted to `:latest`.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  RESTORING_MESSAGE,
  SIM_ANNOTATIONS,
  delayOf,
  generationOf,
  isSimulatedVM,
  nextStep,
  pushesLatestOnDelete,
  type AgentPod,
  type AgentStep,
} from "../../../cluster/node-agent.js";

const VM = "vk-ns-coder-0";

function pod(
  annotations: Record<string, string>,
  opts: { nodeName?: string | null; role?: string; deleting?: boolean } = {},
): AgentPod {
  return {
    metadata: {
      name: "coder-0",
      namespace: "ns",
      uid: "u1",
      labels: { "cocoonset.cocoonstack.io/role": opts.role ?? "main" },
      annotations: {
        "vm.cocoonstack.io/name": VM,
        "cocoonset.cocoonstack.io/managed": "true",
        ...annotations,
      },
      ...(opts.deleting ? { deletionTimestamp: "2026-12-01T00:00:00Z" } : {}),
    },
    spec: opts.nodeName === null ? {} : { nodeName: opts.nodeName ?? "kwok-node-0" },
  };
}

const state = (s: string, extra: Record<string, string> = {}) => ({
  "vm.cocoonstack.io/lifecycle-state": s,
  "vm.cocoonstack.io/lifecycle-observed-generation": "1",
  "cocoonset.cocoonstack.io/generation": "1",
  ...extra,
});
const HIB = { "vm.cocoonstack.io/hibernate": "true" };

describe("isSimulatedVM", () => {
  const nodes = new Set(["kwok-node-0"]);
  const table: [string, AgentPod, boolean][] = [
    ["a managed VM pod on a simulated node", pod({}), true],
    ["not bound yet", pod({}, { nodeName: null }), false],
    ["bound to a node that is not simulated", pod({}, { nodeName: "real-node" }), false],
    ["a static toolbox (not managed)", pod({ "cocoonset.cocoonstack.io/managed": "false" }), false],
    ["no VM name", pod({ "vm.cocoonstack.io/name": "" }), false],
  ];
  for (const [name, p, want] of table) it(name, () => assert.equal(isSimulatedVM(p, nodes), want));
});

describe("nextStep", () => {
  const table: [string, AgentPod, AgentStep][] = [
    ["a new pod boots", pod({}), { kind: "boot", fromSnapshot: false }],
    [
      "a new pod with restore intent restores",
      pod({ "vm.cocoonstack.io/restore-from-hibernate": "true" }),
      { kind: "boot", fromSnapshot: true },
    ],
    ["a new pod asked to hibernate boots first", pod(HIB), { kind: "boot", fromSnapshot: false }],
    [
      "found creating (a restart) boots again",
      pod(state("creating")),
      { kind: "boot", fromSnapshot: false },
    ],
    [
      "found creating while restoring restores again",
      pod(state("creating", { "vm.cocoonstack.io/lifecycle-state-message": RESTORING_MESSAGE })),
      { kind: "boot", fromSnapshot: true },
    ],
    ["ready and settled: nothing", pod(state("ready")), undefined],
    ["ready, asked to hibernate: hibernate", pod(state("ready", HIB)), { kind: "hibernate" }],
    [
      "ready with a new generation: echo it",
      pod(state("ready", { "cocoonset.cocoonstack.io/generation": "2" })),
      { kind: "echo" },
    ],
    [
      "found hibernating (a restart): hibernate again",
      pod(state("hibernating", HIB)),
      { kind: "hibernate" },
    ],
    [
      "hibernating, the ask withdrawn: finish the hibernation first",
      pod(state("hibernating")),
      { kind: "hibernate" },
    ],
    ["hibernated and still asked: nothing", pod(state("hibernated", HIB)), undefined],
    [
      "hibernated, the ask withdrawn: wake from the snapshot",
      pod(state("hibernated")),
      { kind: "boot", fromSnapshot: true },
    ],
    [
      "hibernated with a new generation: echo it",
      pod(state("hibernated", { ...HIB, "cocoonset.cocoonstack.io/generation": "3" })),
      { kind: "echo" },
    ],
    ["failed stays failed", pod(state("failed", HIB)), undefined],
    ["a pod being deleted: nothing", pod({}, { deleting: true }), undefined],
  ];
  for (const [name, p, want] of table) it(name, () => assert.deepEqual(nextStep(p), want));
});

describe("generationOf", () => {
  it("echoes the stamped generation, 0 when absent or garbled", () => {
    assert.equal(generationOf(pod({ "cocoonset.cocoonstack.io/generation": "7" })), "7");
    assert.equal(generationOf(pod({})), "0");
    assert.equal(generationOf(pod({ "cocoonset.cocoonstack.io/generation": "x" })), "0");
  });
});

describe("pushesLatestOnDelete", () => {
  const policy = (p: string) => ({ "cocoonset.cocoonstack.io/snapshot-policy": p });
  const table: [string, AgentPod, boolean][] = [
    ["always: the main agent", pod(policy("always")), true],
    ["always: a sub-agent", pod(policy("always"), { role: "sub-agent" }), true],
    ["no policy means always", pod({}, { role: "toolbox" }), true],
    ["main-only: the main agent", pod(policy("main-only")), true],
    ["main-only: a sub-agent", pod(policy("main-only"), { role: "sub-agent" }), false],
    ["never: the main agent", pod(policy("never")), false],
  ];
  for (const [name, p, want] of table) it(name, () => assert.equal(pushesLatestOnDelete(p), want));
});

describe("delayOf", () => {
  it("reads milliseconds, ignores garbage, caps at ten minutes", () => {
    const key = SIM_ANNOTATIONS.hibernateDelayMs;
    assert.equal(delayOf(pod({ [key]: "1500" }), key), 1500);
    assert.equal(delayOf(pod({ [key]: "soon" }), key), 0);
    assert.equal(delayOf(pod({ [key]: "-5" }), key), 0);
    assert.equal(delayOf(pod({}), key), 0);
    assert.equal(delayOf(pod({ [key]: "99999999" }), key), 600_000);
  });
});
