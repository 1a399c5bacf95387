// What `pulumi up` waits for before it returns (pure): which members the spec asks to run,
// which of them are not Ready, why each is not (the words of its pod and of the last Warning
// event about it), and the timeout message and progress line built from them.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  lastWarnings,
  notReadyWhy,
  readiness,
  readinessLine,
  readinessTimeoutMessage,
  type ClusterEvent,
} from "../../../provider/dynamic/deploy-view.js";
import { cocoonSetFrom } from "../../../provider/dynamic/slot-view.js";
import { buildAgentPod, buildToolboxPod } from "../../../engine/pods/index.js";
import { memberVm } from "../../../engine/attribution/index.js";
import {
  ANNOTATIONS,
  type CocoonSet,
  type CocoonSetSpec,
  type Pod,
} from "../../../engine/spec/index.js";

const spec = (over: Partial<CocoonSetSpec> = {}): CocoonSetSpec => ({
  agent: { image: "agents/coder:1", replicas: 2 },
  toolboxes: [{ name: "browser", image: "tools/browser:1" }],
  ...over,
});

const READY = { phase: "Running", conditions: [{ type: "Ready", status: "True" }] };

/** A live pod of the fleet `coder` for a member ("0".."n" or a toolbox), Ready unless changed. */
function pod(
  member: string,
  over: { status?: Pod["status"]; annotations?: Record<string, string>; deleting?: boolean } = {},
  s: CocoonSetSpec = spec(),
): Pod {
  const cs = cocoonSetFrom("agents", "coder", s, "uid-1");
  const built = /^\d+$/.test(member)
    ? buildAgentPod(cs, Number(member))
    : buildToolboxPod(cs, { name: member, image: "tools/x:1" });
  return {
    ...built,
    metadata: {
      ...built.metadata,
      uid: `pod-${member}`,
      annotations: { ...built.metadata.annotations, ...over.annotations },
      ...(over.deleting ? { deletionTimestamp: "2026-12-05T00:00:00Z" } : {}),
    },
    status: over.status ?? READY,
  };
}

/**
 * The fleet `coder` whose record (`status.vms`, what the engine created) names the given pods
 * as its members, as the status of a fleet `up` converged does.
 */
function fleet(s: CocoonSetSpec = spec(), members: Pod[] = []): CocoonSet {
  const cs = cocoonSetFrom("agents", "coder", s, "uid-1");
  const vms = Object.fromEntries(
    members.map((p) => {
      const member = (p.metadata?.name ?? "").slice("coder-".length);
      return [member, { vm: memberVm(cs, member), podUID: p.metadata?.uid ?? "" }];
    }),
  );
  return {
    ...cs,
    status: { readyAgents: 0, desiredAgents: 0, readyToolboxes: 0, desiredToolboxes: 0, vms },
  };
}

describe("readiness: which members up waits for", () => {
  const table: [string, CocoonSetSpec, Pod[], { awaited: string[]; notReady: string[] }][] = [
    [
      "every member Ready: main, sub-agents, toolbox",
      spec(),
      [pod("0"), pod("1"), pod("2"), pod("browser")],
      { awaited: ["coder-0", "coder-1", "coder-2", "coder-browser"], notReady: [] },
    ],
    [
      "a sub-agent with no pod and a toolbox not Ready are waited for",
      spec(),
      [pod("0"), pod("1"), pod("browser", { status: { phase: "Pending", conditions: [] } })],
      {
        awaited: ["coder-0", "coder-1", "coder-2", "coder-browser"],
        notReady: ["coder-2", "coder-browser"],
      },
    ],
    [
      "a suspended fleet asks no member to run",
      spec({ suspend: true }),
      [pod("0", { status: { phase: "Pending" } })],
      { awaited: [], notReady: [] },
    ],
    [
      "a member asked to hibernate (a CocoonHibernation) is not waited for",
      spec(),
      [
        pod("0"),
        pod("1", {
          annotations: { [ANNOTATIONS.hibernate]: "true" },
          status: { phase: "Running", conditions: [{ type: "Ready", status: "False" }] },
        }),
        pod("2"),
        pod("browser"),
      ],
      { awaited: ["coder-0", "coder-2", "coder-browser"], notReady: [] },
    ],
    [
      "a member whose VM reports hibernated is not waited for",
      spec(),
      [
        pod("0"),
        pod("1"),
        pod("2", { annotations: { [ANNOTATIONS.lifecycleState]: "hibernated" } }),
        pod("browser"),
      ],
      { awaited: ["coder-0", "coder-1", "coder-browser"], notReady: [] },
    ],
    [
      "a Ready pod whose VM failed is not Ready (as the status counts it)",
      spec({ toolboxes: [] }),
      [pod("0"), pod("1", { annotations: { [ANNOTATIONS.lifecycleState]: "failed" } }), pod("2")],
      { awaited: ["coder-0", "coder-1", "coder-2"], notReady: ["coder-1"] },
    ],
    [
      "a pod being deleted is no member: its slot is waited for",
      spec({ toolboxes: [] }),
      [pod("0"), pod("1", { deleting: true }), pod("2")],
      { awaited: ["coder-0", "coder-1", "coder-2"], notReady: ["coder-1"] },
    ],
    [
      "replicas 0 and no toolbox: the main agent alone",
      spec({ agent: { image: "agents/coder:1", replicas: 0 }, toolboxes: [] }),
      [],
      { awaited: ["coder-0"], notReady: ["coder-0"] },
    ],
  ];
  for (const [title, s, pods, want] of table) {
    it(title, () => {
      const r = readiness(fleet(s, pods), pods);
      assert.deepEqual({ awaited: r.awaited.map((m) => m.pod), notReady: r.notReady }, want);
    });
  }

  it("pods beyond the spec are left to go, and named until they do", () => {
    const s = spec({ agent: { image: "agents/coder:1", replicas: 1 }, toolboxes: [] });
    const pods = [pod("0"), pod("1"), pod("2"), pod("old", {}, spec())];
    const r = readiness(fleet(s, pods), pods);
    assert.deepEqual(r.leaving, ["coder-2", "coder-old"]);
    assert.deepEqual(r.notReady, []);
  });

  it("a fleet the idle policy holds suspended (status.idleSuspendedSince) asks no member to run", () => {
    const pods = [pod("0", { status: { phase: "Pending" } })];
    const cs = fleet(spec(), pods);
    cs.status = { ...cs.status!, idleSuspendedSince: "2026-12-05T06:00:00Z" };
    assert.deepEqual(readiness(cs, pods), { awaited: [], notReady: [], leaving: [] });
    assert.notDeepEqual(readiness(fleet(spec(), pods), pods).awaited, [], "awake, it would wait");
  });

  it("a suspended fleet waits for no pod to go either", () => {
    const pods = [pod("0"), pod("3")];
    const r = readiness(fleet(spec({ suspend: true, toolboxes: [] }), pods), pods);
    assert.deepEqual(r, { awaited: [], notReady: [], leaving: [] });
  });
});

describe("notReadyWhy", () => {
  const unschedulable: Pod["status"] = {
    phase: "Pending",
    conditions: [
      {
        type: "PodScheduled",
        status: "False",
        reason: "Unschedulable",
        message: "0/3 nodes are available: 1 Insufficient cpu.",
      },
    ],
  };
  const table: [string, Parameters<typeof notReadyWhy>, string][] = [
    ["no pod", [{}], "no pod"],
    [
      "a name another pod holds",
      [{ live: pod("1"), foreign: true }],
      "no pod: its name is held by a pod that is not this fleet's member (see the CocoonSet's SlotBlocked condition)",
    ],
    [
      "unschedulable, with the scheduler's Warning",
      [
        { live: pod("browser", { status: unschedulable }) },
        { reason: "FailedScheduling", message: "0/3 nodes are available: 1 Insufficient cpu." },
      ],
      "phase Pending, PodScheduled False (Unschedulable: 0/3 nodes are available: 1 Insufficient cpu.), last Warning event FailedScheduling: 0/3 nodes are available: 1 Insufficient cpu.",
    ],
    [
      "running, not Ready, a container waiting",
      [
        {
          live: pod("1", {
            status: {
              phase: "Running",
              conditions: [
                { type: "PodScheduled", status: "True" },
                { type: "ContainersReady", status: "False", reason: "ContainersNotReady" },
                { type: "Ready", status: "False", reason: "ContainersNotReady" },
              ],
              containerStatuses: [
                {
                  name: "agent",
                  state: { waiting: { reason: "ImagePullBackOff", message: "back-off" } },
                },
              ],
            },
          }),
        },
      ],
      "phase Running, ContainersReady False (ContainersNotReady), container agent waiting: ImagePullBackOff (back-off)",
    ],
    [
      "bound to a node that has not started it",
      [{ live: { ...pod("1"), spec: { ...pod("1").spec!, nodeName: "n1" }, status: {} } }],
      "phase Pending, not started yet on node n1",
    ],
    [
      "refused by its node's kubelet",
      [
        {
          live: pod("2", {
            status: {
              phase: "Failed",
              reason: "OutOfcpu",
              message: "Pod was rejected: Node didn't have enough resource: cpu",
            },
          }),
        },
      ],
      "phase Failed (OutOfcpu: Pod was rejected: Node didn't have enough resource: cpu)",
    ],
    [
      "a failed VM in a Ready pod",
      [
        {
          live: pod("1", {
            annotations: {
              [ANNOTATIONS.lifecycleState]: "failed",
              [ANNOTATIONS.lifecycleStateMessage]: "boot failed",
            },
          }),
        },
      ],
      "phase Running, VM lifecycle state failed (boot failed)",
    ],
    [
      "being deleted",
      [{ live: pod("1", { deleting: true, status: { phase: "Running" } }) }],
      "terminating, phase Running",
    ],
  ];
  for (const [title, args, want] of table) {
    it(title, () => assert.equal(notReadyWhy(...args), want));
  }
});

describe("lastWarnings", () => {
  const event = (over: Partial<ClusterEvent>): ClusterEvent => ({
    type: "Warning",
    reason: "FailedScheduling",
    note: "no room",
    regarding: { kind: "Pod", name: "coder-1", uid: "u1" },
    eventTime: "2026-12-05T00:00:01.000000Z",
    ...over,
  });
  const table: [string, ClusterEvent[], Record<string, string>][] = [
    [
      "the last Warning about the pod",
      [
        event({ reason: "Old", eventTime: "2026-12-05T00:00:01.000000Z" }),
        event({ reason: "New", eventTime: "2026-12-05T00:00:02.000000Z" }),
      ],
      { "coder-1": "New" },
    ],
    [
      "a series counts by its last observation",
      [
        event({
          reason: "Repeated",
          eventTime: "2026-12-05T00:00:01.000000Z",
          series: { lastObservedTime: "2026-12-05T00:00:09.000000Z" },
        }),
        event({ reason: "Once", eventTime: "2026-12-05T00:00:05.000000Z" }),
      ],
      { "coder-1": "Repeated" },
    ],
    ["Normal events are not named", [event({ type: "Normal", reason: "Scheduled" })], {}],
    [
      "an earlier pod of the same name (another uid) is not this one",
      [event({ regarding: { kind: "Pod", name: "coder-1", uid: "old" } })],
      {},
    ],
    [
      "events about other kinds are not the pod's",
      [event({ regarding: { kind: "CocoonSet", name: "coder-1", uid: "u1" } })],
      {},
    ],
  ];
  for (const [title, events, want] of table) {
    it(title, () => {
      const got = lastWarnings(events, new Map([["coder-1", "u1"]]));
      assert.deepEqual(Object.fromEntries([...got].map(([k, v]) => [k, v.reason])), want);
    });
  }
});

/** The readiness of a fleet whose record names the pods as its members. */
const recorded = (s: CocoonSetSpec, pods: Pod[]) => readiness(fleet(s, pods), pods);

describe("readiness messages", () => {
  it("the timeout names each member that is not Ready, its role and why, and what to do", () => {
    const pods = [
      pod("0"),
      pod("1"),
      pod("browser", {
        status: {
          phase: "Pending",
          conditions: [
            { type: "PodScheduled", status: "False", reason: "Unschedulable", message: "no room" },
          ],
        },
      }),
    ];
    const r = readiness(fleet(spec(), pods), pods);
    assert.equal(
      readinessTimeoutMessage(
        "agents/coder",
        10,
        r,
        new Map([["coder-browser", { reason: "FailedScheduling", message: "no room" }]]),
      ),
      "fleet agents/coder was not Ready within 10s (timeoutSeconds): 2 of 4 member(s) Ready; " +
        "coder-2 (sub-agent 2): no pod; " +
        "coder-browser (toolbox browser): phase Pending, PodScheduled False (Unschedulable: no room), last Warning event FailedScheduling: no room. " +
        "The fleet is left as it is and the next `pulumi up` waits again; `skipAwait: true` on the Fleet returns without waiting",
    );
  });

  it("a reason that ends its own sentence gets no second period", () => {
    const pods = [pod("0", { status: { phase: "Pending" } })];
    const s = spec({ agent: { image: "agents/coder:1", replicas: 0 }, toolboxes: [] });
    const r = readiness(fleet(s, pods), pods);
    const message = readinessTimeoutMessage(
      "agents/coder",
      10,
      r,
      new Map([["coder-0", { reason: "FailedScheduling", message: "no room." }]]),
    );
    assert.match(message, /FailedScheduling: no room\. The fleet is left/);
  });

  it("the progress line counts the Ready members and names the rest", () => {
    const s = spec({ agent: { image: "agents/coder:1", replicas: 1 }, toolboxes: [] });
    assert.equal(
      readinessLine("agents/coder", recorded(s, [pod("0"), pod("2")])),
      "agents/coder: 1 of 2 member(s) Ready; waiting for coder-1, coder-2 to go",
    );
    assert.equal(
      readinessLine("agents/coder", recorded(s, [pod("0"), pod("1")])),
      "agents/coder: 2 of 2 member(s) Ready",
    );
  });
});
