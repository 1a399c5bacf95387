/**
 * The forecast `cocoonset plan` prints for spec.idle and spec.expiry: which members the idle
 * policy hibernates next and when, when the fleet is suspended, when it expires (tables over
 * members and times), and how the members are read from status.vms, pods and Leases.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  idleMembers,
  newFleetMembers,
  policyForecast,
  policyForecastToJSON,
  renderPolicyForecast,
  type IdleMember,
} from "../../../engine/idle/index.js";
import {
  ANNOTATIONS,
  type CocoonSet,
  type CocoonSetSpec,
  type Pod,
} from "../../../engine/spec/index.js";

const NOW = new Date("2026-12-05T12:00:00.000Z");
const ago = (min: number) => new Date(NOW.getTime() - min * 60_000);
const at = (min: number) => new Date(NOW.getTime() + min * 60_000).toISOString();

function fleet(spec: Partial<CocoonSetSpec>, status: CocoonSet["status"] = undefined): CocoonSet {
  return {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonSet",
    metadata: {
      name: "coder",
      namespace: "agents",
      creationTimestamp: ago(60 * 23 + 30).toISOString(),
    },
    spec: { agent: { image: "agents/coder:1", replicas: 2 }, ...spec },
    ...(status ? { status } : {}),
  };
}

const running = (
  key: string,
  minutesAgo: number,
  kind: IdleMember["kind"] = "sub-agent",
): IdleMember => ({
  key,
  kind,
  state: "running",
  lastActivity: ago(minutesAgo),
});

/** The steps as [minutes from now, what] pairs, for short tables. */
function steps(cs: CocoonSet, members: IdleMember[]): [number, string][] {
  const f = policyForecast(cs, members, NOW);
  return (f.idle?.steps ?? []).map((s) => [
    (s.at.getTime() - NOW.getTime()) / 60_000,
    [
      ...s.wake.map((k) => `wake ${k}`),
      ...s.hibernate.map((k) => `hibernate ${k}`),
      ...(s.fleet ? [`fleet ${s.fleet}`] : []),
    ].join(", "),
  ]);
}

describe("the idle forecast, if nobody is active from now", () => {
  const idle30: Partial<CocoonSetSpec> = {
    idle: { after: "30m" },
    toolboxes: [{ name: "browser", image: "b:1" }],
  };
  const table: [
    string,
    Partial<CocoonSetSpec>,
    CocoonSet["status"],
    IdleMember[],
    [number, string][],
  ][] = [
    [
      "each sub-agent and toolbox at its own deadline, then the fleet when the last member is idle",
      idle30,
      undefined,
      [
        running("0", 10, "main"),
        running("1", 25),
        running("2", 5),
        running("browser", 40, "toolbox"),
      ],
      [
        [0, "hibernate browser"],
        [5, "hibernate 1"],
        [25, "fleet suspend"],
      ],
    ],
    [
      "the main agent's own activity holds the fleet, not the sub-agents",
      idle30,
      undefined,
      [
        running("0", 0, "main"),
        running("1", 29),
        running("2", 29),
        running("browser", 29, "toolbox"),
      ],
      [
        [1, "hibernate 1, hibernate 2, hibernate browser"],
        [30, "fleet suspend"],
      ],
    ],
    [
      "every member idle already: the fleet is suspended now",
      idle30,
      undefined,
      [
        running("0", 31, "main"),
        running("1", 40),
        running("2", 50),
        running("browser", 60, "toolbox"),
      ],
      [[0, "fleet suspend"]],
    ],
    [
      "a member being built keeps the fleet awake; the others still hibernate",
      idle30,
      undefined,
      [
        running("0", 10, "main"),
        running("1", 25),
        { key: "2", kind: "sub-agent", state: "absent" },
        running("browser", 1, "toolbox"),
      ],
      [
        [5, "hibernate 1"],
        [29, "hibernate browser"],
      ],
    ],
    [
      "a member used since its hibernation is woken now, and goes idle again from its wake",
      idle30,
      undefined,
      [
        running("0", 1, "main"),
        {
          key: "1",
          kind: "sub-agent",
          state: "idle-hibernated",
          idleSince: ago(20),
          lastActivity: ago(2),
        },
        running("2", 1),
        running("browser", 1, "toolbox"),
      ],
      [
        [0, "wake 1"],
        [29, "hibernate 2, hibernate browser"],
        [30, "fleet suspend"],
      ],
    ],
    [
      "a member someone else holds neither hibernates nor keeps the fleet awake",
      idle30,
      undefined,
      [
        running("0", 20, "main"),
        { key: "1", kind: "sub-agent", state: "held", lastActivity: ago(1) },
        running("2", 15),
        running("browser", 12, "toolbox"),
      ],
      [
        [15, "hibernate 2"],
        [18, "fleet suspend"],
      ],
    ],
    [
      "spec.suspend: nothing",
      { ...idle30, suspend: true },
      undefined,
      [running("0", 90, "main")],
      [],
    ],
    [
      "idle-suspended with no activity since: nothing until somebody is active",
      idle30,
      {
        readyAgents: 0,
        desiredAgents: 3,
        readyToolboxes: 0,
        desiredToolboxes: 1,
        idleSuspendedSince: ago(5).toISOString(),
      },
      [running("0", 40, "main")],
      [],
    ],
    [
      "idle-suspended and a member used since: the fleet wakes now",
      idle30,
      {
        readyAgents: 0,
        desiredAgents: 3,
        readyToolboxes: 0,
        desiredToolboxes: 1,
        idleSuspendedSince: ago(5).toISOString(),
      },
      [running("0", 40, "main"), running("2", 1)],
      [[0, "fleet wake"]],
    ],
  ];
  for (const [title, spec, status, members, want] of table) {
    it(title, () => assert.deepEqual(steps(fleet(spec, status), members), want));
  }

  it("renders each step with its time and how far it is, and JSON with RFC 3339 times", () => {
    const cs = fleet(idle30);
    const f = policyForecast(
      cs,
      [
        running("0", 10, "main"),
        running("1", 25),
        running("2", 5),
        running("browser", 40, "toolbox"),
      ],
      NOW,
    );
    assert.deepEqual(renderPolicyForecast(f), [
      "idle policy (after 30m), if no member is active from now:",
      `  ${at(0)} (now): hibernate toolbox browser`,
      `  ${at(5)} (in 5m): hibernate slot 1`,
      `  ${at(25)} (in 25m): suspend the fleet (every member idle)`,
    ]);
    const json = policyForecastToJSON(f) as {
      idle: { next: unknown[]; lastActivity: Record<string, string> };
    };
    assert.deepEqual(json.idle.next[2], { at: at(25), hibernate: [], wake: [], fleet: "suspend" });
    assert.equal(json.idle.lastActivity["1"], ago(25).toISOString());
  });

  it("says why nothing is forecast", () => {
    const suspended = policyForecast(fleet({ idle: { after: "30m" }, suspend: true }), [], NOW);
    assert.match(renderPolicyForecast(suspended)[0], /the fleet is suspended \(spec\.suspend\)/);
    const asleep = policyForecast(
      fleet(
        { idle: { after: "30m" } },
        {
          readyAgents: 0,
          desiredAgents: 3,
          readyToolboxes: 0,
          desiredToolboxes: 0,
          idleSuspendedSince: ago(5).toISOString(),
        },
      ),
      [running("0", 40, "main")],
      NOW,
    );
    assert.deepEqual(renderPolicyForecast(asleep), [
      `idle policy (after 30m): the fleet is suspended for being idle since ${ago(5).toISOString()}; activity on any member wakes it`,
    ]);
    assert.deepEqual(
      renderPolicyForecast(policyForecast(fleet({}), [], NOW)),
      [],
      "no policy, no lines",
    );
  });
});

describe("a fleet not created yet", () => {
  it("starts each member at its creation: the fleet is suspended one `after` later", () => {
    const cs = fleet({ idle: { after: "30m" }, toolboxes: [{ name: "browser", image: "b:1" }] });
    const members = newFleetMembers(cs, NOW);
    assert.deepEqual(
      members.map((m) => [m.key, m.kind, m.state]),
      [
        ["0", "main", "running"],
        ["1", "sub-agent", "running"],
        ["2", "sub-agent", "running"],
        ["browser", "toolbox", "running"],
      ],
    );
    assert.deepEqual(steps(cs, members), [[30, "fleet suspend"]]);
  });
});

describe("the expiry forecast", () => {
  // The fleet was created 23h30m ago.
  const table: [string, CocoonSetSpec["expiry"], IdleMember[], string][] = [
    [
      "since creation, announced (an hour ahead) and not due",
      { after: "24h" },
      [running("0", 1, "main")],
      `expiry (after 24h since creation, then suspend): ${at(30)} (in 30m); Expiring since ${at(-30)}`,
    ],
    [
      "since creation, not announced yet: an hour ahead (a tenth of 48h would be earlier)",
      { after: "48h", action: "delete" },
      [],
      `expiry (after 48h since creation, then delete): ${at(60 * 24 + 30)} (in 1d30m); Expiring from ${at(60 * 23 + 30)}`,
    ],
    [
      "since idle: the last activity of any member pushes it back",
      { after: "2h", since: "idle" },
      [running("0", 90, "main"), running("1", 10)],
      `expiry (after 2h since idle, then suspend): ${at(110)} (in 1h50m); Expiring from ${at(98)}`,
    ],
    [
      "due",
      { after: "20h", action: "delete" },
      [],
      `expiry (after 20h since creation, then delete): due since ${at(-210)}: the controller deletes the fleet`,
    ],
  ];
  for (const [title, expiry, members, line] of table) {
    it(title, () => {
      const f = policyForecast(fleet({ expiry }), members, NOW);
      assert.deepEqual(renderPolicyForecast(f), [line]);
      const json = policyForecastToJSON(f) as { expiry: { expiresAt: string; due: boolean } };
      assert.equal(json.expiry.due, line.includes("due since"));
    });
  }

  it("a fleet not created yet counts from now", () => {
    const cs = fleet({ expiry: { after: "1h" } });
    delete cs.metadata.creationTimestamp;
    assert.equal(policyForecast(cs, [], NOW).expiry?.expiresAt.toISOString(), at(60));
  });
});

describe("idleMembers", () => {
  const pod = (
    name: string,
    uid: string,
    createdMinutesAgo: number,
    annotations: Record<string, string> = {},
  ): Pod => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, uid, creationTimestamp: ago(createdMinutesAgo).toISOString(), annotations },
    status: { phase: "Running" },
  });
  const cs = fleet(
    { idle: { after: "30m" }, toolboxes: [{ name: "browser", image: "b:1" }] },
    {
      readyAgents: 2,
      desiredAgents: 3,
      readyToolboxes: 1,
      desiredToolboxes: 1,
      vms: {
        "0": { vm: "vk-agents-coder-0", podUID: "u0", lastActivity: ago(50).toISOString() },
        "1": {
          vm: "vk-agents-coder-1",
          podUID: "u1",
          idleSince: ago(3).toISOString(),
          lastActivity: ago(33).toISOString(),
        },
        "2": { vm: "vk-agents-coder-2", podUID: "u2" },
        browser: { vm: "vk-agents-coder-browser", podUID: "ub" },
      },
    },
  );
  const pods = [
    pod("coder-0", "u0", 120),
    pod("coder-1", "u1", 120, { [ANNOTATIONS.hibernate]: "true" }),
    pod("coder-browser", "ub", 7, { [ANNOTATIONS.hibernate]: "true" }),
    pod("coder-2", "someone-else", 1),
  ];
  const leases = [
    { metadata: { name: "coder-0-activity" }, spec: { renewTime: ago(4).toISOString() } },
    { metadata: { name: "coder-2-activity" }, spec: { renewTime: ago(9).toISOString() } },
  ];

  it("reads state and the latest of Lease, status and pod creation for each member", () => {
    const got = idleMembers(cs, pods, leases).map((m) => [
      m.key,
      m.kind,
      m.state,
      m.lastActivity?.toISOString(),
      m.idleSince?.toISOString(),
    ]);
    assert.deepEqual(got, [
      ["0", "main", "running", ago(4).toISOString(), undefined],
      ["1", "sub-agent", "idle-hibernated", ago(33).toISOString(), ago(3).toISOString()],
      // Its pod is not the one the engine recorded: absent, as the Lease still counts.
      ["2", "sub-agent", "absent", ago(9).toISOString(), undefined],
      ["browser", "toolbox", "held", ago(7).toISOString(), undefined],
    ]);
  });
});
