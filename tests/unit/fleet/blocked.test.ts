// A pod that is not the fleet's holding a member's name (`kubectl run demo-1`): the slot is
// planned as blocked, named with its holder in a Warning (once) and in the SlotBlocked
// condition, the rest of the fleet goes on, and the status stays true to the pods.
// Behaviour: docs/behaviour.md §3.21.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { BLOCKED_POLL_MS } from "../../../engine/lifecycle/blocked.js";
import {
  agentNamesToCheck,
  isFollowedMember,
  namesToRead,
} from "../../../engine/lifecycle/index.js";
import { planToJSON, renderPlan, type Plan } from "../../../engine/plan/index.js";
import { planPass } from "../../../engine/planner/index.js";
import type { CocoonSet, Pod } from "../../../engine/spec/index.js";
import { NOW, cocoonSet, decisions, mainPod, subPod, toolbox, toolboxPod } from "./fixtures.js";

/** A bare pod of that name, as `kubectl run NAME` leaves it: no fleet label, no owner. */
function foreign(name: string, owner?: { kind: string; name: string }): Pod {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      namespace: "team",
      uid: `uid-${name}`,
      labels: { run: name },
      ...(owner
        ? { ownerReferences: [{ apiVersion: "v1", ...owner, uid: "x", controller: true }] }
        : {}),
    },
    spec: { containers: [{ name, image: "busybox" }] },
    status: { phase: "Running", conditions: [{ type: "Ready", status: "True" }] },
  };
}

const plan = (cs: CocoonSet, pods: Pod[]): Plan => planPass({ cocoonSet: cs, pods, nowMs: NOW });
const blockedCondition = (p: Plan) => p.status?.conditions?.find((c) => c.type === "SlotBlocked");
const events = (p: Plan) =>
  p.steps.flatMap((s) => s.actions.flatMap((a) => (a.kind === "event" ? [a] : [])));

describe("a member's name held by a pod that is not the fleet's", () => {
  const cs = cocoonSet({}, { replicas: 3 });
  const main = mainPod(cs);

  it("the executor reads the agent names the pass may create and did not list", () => {
    assert.deepEqual(agentNamesToCheck(cs, []), ["demo-0"]);
    assert.deepEqual(agentNamesToCheck(cs, [main, subPod(cs, 2)]), ["demo-1", "demo-3"]);
    assert.deepEqual(agentNamesToCheck(cs, [mainPod(cs, false)]), [], "sub-agents wait for main");
    assert.deepEqual(
      agentNamesToCheck(cs, [main, foreign("demo-1")]),
      ["demo-3"].concat(["demo-2"]).sort(),
    );
    assert.deepEqual(
      agentNamesToCheck(cocoonSet({ suspend: true }, { replicas: 3 }), [main]),
      [],
      "a suspended fleet creates none",
    );
  });

  it("slot 1 blocked: the others are created, slot 1 is named with its holder", () => {
    const p = plan(cs, [main, foreign("demo-1")]);
    assert.deepEqual(decisions(p), ["demo-1:blocked", "demo-2:create", "demo-3:create"]);
    const [warn] = events(p);
    assert.equal(warn.type, "Warning");
    assert.equal(warn.reason, "SlotBlocked");
    assert.equal(
      warn.message,
      "slot 1: pod demo-1 already exists and is not this CocoonSet's (no controller); the slot stays empty until that pod is deleted or renamed",
    );
    assert.match(
      renderPlan(p),
      /^slot 1: blocked: pod demo-1 already exists and is not this CocoonSet's \(no controller\)/m,
    );
    const json = planToJSON(p).changes.find((c) => c.slot === 1);
    assert.equal(json?.decision, "blocked");
    assert.match(json?.why ?? "", /pod demo-1/);
  });

  it("once the others run: a quiet pass writes the true status with the SlotBlocked condition", () => {
    const pods = [
      main,
      foreign("demo-1", { kind: "ReplicaSet", name: "web" }),
      subPod(cs, 2),
      subPod(cs, 3),
    ];
    const p = plan(cs, pods);
    assert.deepEqual(decisions(p), ["demo-1:blocked"]);
    assert.equal(p.mutatesPods, false);
    assert.equal(p.requeueAfterMs, BLOCKED_POLL_MS, "looked at again: no watch covers that pod");
    assert.equal(p.status?.phase, "Scaling");
    assert.equal(p.status?.readyAgents, 3);
    assert.equal(p.status?.desiredAgents, 4);
    const c = blockedCondition(p);
    assert.equal(c?.status, "True");
    assert.equal(c?.reason, "ForeignPod");
    assert.match(c?.message ?? "", /slot 1: pod demo-1 .*\(ReplicaSet\/web\)/);
    // The Warning is not repeated once the stored condition names the holder.
    const again = plan({ ...cs, status: p.status }, pods);
    assert.deepEqual(events(again), []);
    // The holder is gone: the slot is created and the condition turns False.
    const freed = plan({ ...cs, status: p.status }, [main, subPod(cs, 2), subPod(cs, 3)]);
    assert.deepEqual(decisions(freed), ["demo-1:create"]);
    const settled = plan({ ...cs, status: p.status }, [
      main,
      subPod(cs, 1),
      subPod(cs, 2),
      subPod(cs, 3),
    ]);
    assert.equal(blockedCondition(settled)?.status, "False");
    assert.equal(settled.status?.phase, "Running");
  });

  it("the main agent's name held: nothing is created, the main agent is named as blocked", () => {
    const p = plan(cs, [foreign("demo-0")]);
    assert.deepEqual(decisions(p), ["demo-0:blocked"]);
    assert.equal(p.status?.phase, "Pending");
    assert.match(blockedCondition(p)?.message ?? "", /^main agent: pod demo-0 /);
  });
});

describe("a holder whose ownerReference names the fleet (forged: the labels are missing)", () => {
  const cs = cocoonSet({}, { replicas: 2 });
  const forged = (labels: Record<string, string>): Pod => ({
    ...foreign("demo-2"),
    metadata: {
      name: "demo-2",
      namespace: "team",
      uid: "uid-forged",
      labels,
      ownerReferences: [
        {
          apiVersion: "cocoonset.cocoonstack.io/v1",
          kind: "CocoonSet",
          name: "demo",
          uid: cs.metadata.uid ?? "",
          controller: true,
        },
      ],
    },
  });
  it("is named with what it lacks, not as this CocoonSet's own", () => {
    const p = plan(cs, [mainPod(cs), subPod(cs, 1), forged({ run: "demo-2" })]);
    const want =
      "slot 2: pod demo-2 already exists and is not this CocoonSet's (its ownerReference names this CocoonSet, but it lacks the label(s) cocoonset.cocoonstack.io/name=demo, app.kubernetes.io/managed-by=cocoonset that the CocoonSet's pods carry: the controller did not create it); the slot stays empty until that pod is deleted or renamed";
    assert.equal(blockedCondition(p)?.message, want);
    assert.deepEqual(
      events(p).map((e) => [e.reason, e.message]),
      [["SlotBlocked", want]],
    );
    assert.match(renderPlan(p), /^slot 2: blocked: pod demo-2 already exists .*lacks the label/m);
  });
  it("a followed member needs the fleet's and the managed-by labels besides the owner", () => {
    const table: [Record<string, string>, boolean][] = [
      [{}, false],
      [{ "cocoonset.cocoonstack.io/name": "demo" }, false],
      [{ "app.kubernetes.io/managed-by": "cocoonset" }, false],
      [
        { "cocoonset.cocoonstack.io/name": "demo", "app.kubernetes.io/managed-by": "cocoonset" },
        true,
      ],
    ];
    // The engine recorded the pod as slot 2's: only its labels decide whether the pod cache,
    // which selects on them, will show it.
    const recorded: CocoonSet = {
      ...cs,
      status: { ...cs.status, vms: { "2": { vm: "vk-team-demo-2", podUID: "uid-forged" } } },
    } as CocoonSet;
    for (const [labels, want] of table)
      assert.equal(isFollowedMember(recorded, forged(labels)), want, JSON.stringify(labels));
    const unrecorded = forged({
      "cocoonset.cocoonstack.io/name": "demo",
      "app.kubernetes.io/managed-by": "cocoonset",
    });
    assert.equal(
      isFollowedMember(
        { ...recorded, status: { ...recorded.status, vms: {} } } as CocoonSet,
        unrecorded,
      ),
      false,
      "labels and an owner without the record make no member",
    );
  });
});

describe("the names a pass reads the holders of before it plans", () => {
  const tb = toolbox("db");
  const fleet = cocoonSet({ toolboxes: [tb] }, { replicas: 2 });
  const cases: {
    what: string;
    cs: CocoonSet;
    listed: (cs: CocoonSet) => Pod[];
    names: string[];
  }[] = [
    {
      what: "nothing listed: the toolbox, then the main agent",
      cs: fleet,
      listed: () => [],
      names: ["demo-db", "demo-0"],
    },
    {
      what: "main agent Ready: the toolbox and the missing sub-agents",
      cs: fleet,
      listed: (cs) => [mainPod(cs)],
      names: ["demo-db", "demo-1", "demo-2"],
    },
    {
      what: "converged: none",
      cs: fleet,
      listed: (cs) => [mainPod(cs), subPod(cs, 1), subPod(cs, 2), toolboxPod(cs, tb)],
      names: [],
    },
    {
      what: "a listed holder of a name (not the fleet's) is not read again",
      cs: fleet,
      listed: (cs) => [mainPod(cs), foreign("demo-db"), foreign("demo-1")],
      names: ["demo-2"],
    },
    {
      what: "suspended: no sub-agent, only the toolbox",
      cs: cocoonSet({ suspend: true, toolboxes: [tb] }, { replicas: 2 }),
      listed: (cs) => [mainPod(cs)],
      names: ["demo-db"],
    },
  ];
  for (const c of cases)
    it(c.what, () => {
      assert.deepEqual(namesToRead(c.cs, c.listed(c.cs)), c.names);
    });
});
