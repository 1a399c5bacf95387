// The deletion's snapshot clean-up, planned: `:hibernate` of every VM the CocoonSet had, and
// `:latest` where the snapshot policy does not keep it (never: all; main-only: all but the
// main agent's; always: none). VM names come from status, the stash and the pods.
import { attributedView } from "../../../engine/attribution/index.js";
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  deleteVmNamesStash,
  teardownTags,
  teardownVmNames,
} from "../../../engine/snapshots/index.js";
import { agentSlotOfVm, parseDeleteVmNames } from "../../../engine/snapshots/teardown.js";
import { ANNOTATIONS, type CocoonSet } from "../../../engine/spec/index.js";
import { cocoonSet, convergedPods, toolbox, withAnnotations } from "./fixtures.js";

const vm = (member: number | string) => `vk-team-demo-${member}`;
const render = (cs: CocoonSet, vms: string[]) =>
  teardownTags(cs, vms).map((t) => `${t.vm}:${t.tag}`);

describe("teardown: which tags the deletion drops", () => {
  const vms = [vm(0), vm(1), vm("db")];
  const table: { policy: string | undefined; want: string[] }[] = [
    {
      policy: "always",
      want: [`${vm(0)}:hibernate`, `${vm(1)}:hibernate`, `${vm("db")}:hibernate`],
    },
    {
      policy: undefined,
      want: [`${vm(0)}:hibernate`, `${vm(1)}:hibernate`, `${vm("db")}:hibernate`],
    },
    {
      policy: "main-only",
      want: [
        `${vm(0)}:hibernate`,
        `${vm(1)}:hibernate`,
        `${vm(1)}:latest`,
        `${vm("db")}:hibernate`,
        `${vm("db")}:latest`,
      ],
    },
    {
      policy: "never",
      want: [
        `${vm(0)}:hibernate`,
        `${vm(0)}:latest`,
        `${vm(1)}:hibernate`,
        `${vm(1)}:latest`,
        `${vm("db")}:hibernate`,
        `${vm("db")}:latest`,
      ],
    },
  ];
  for (const { policy, want } of table) {
    it(`snapshotPolicy ${policy ?? "unset"}`, () => {
      const cs = cocoonSet(policy === undefined ? {} : { snapshotPolicy: policy as "never" });
      if (policy === undefined) delete cs.spec.snapshotPolicy;
      assert.deepEqual(render(cs, vms), want);
    });
  }

  it("main-only keeps :latest only for slot 0 of this very set", () => {
    const cs = cocoonSet({ snapshotPolicy: "main-only" });
    assert.deepEqual(render(cs, ["vk-team-other-0", vm("00")]), [
      "vk-team-other-0:hibernate",
      "vk-team-other-0:latest",
      `${vm("00")}:hibernate`,
    ]);
  });

  it("reads agent slots as upstream does", () => {
    const cs = cocoonSet();
    assert.equal(agentSlotOfVm(cs, vm(0)), 0);
    assert.equal(agentSlotOfVm(cs, vm(12)), 12);
    assert.equal(agentSlotOfVm(cs, vm("db")), -1);
    assert.equal(agentSlotOfVm(cs, vm("a-1")), -1);
    assert.equal(agentSlotOfVm(cs, vm("-1")), -1);
    assert.equal(agentSlotOfVm(cs, "vk-other-demo-0"), -1);
  });
});

describe("teardown: which VMs", () => {
  it("the engine's record and its recorded members' pods, sorted and unique; never the stash", () => {
    const cs = cocoonSet({ toolboxes: [toolbox("db")] }, { replicas: 1 });
    // Anyone who may edit the CocoonSet writes the stash: it names no VM of the deletion.
    cs.metadata.annotations = { [ANNOTATIONS.deleteVmNames]: ` ${vm(9)},vk-team-other-0 ` };
    cs.status = {
      readyAgents: 0,
      desiredAgents: 2,
      readyToolboxes: 0,
      desiredToolboxes: 1,
      // Slot 7 was scaled away: its VM stays recorded. Slot 1's pod was never recorded.
      vms: {
        "0": { vm: vm(0), podUID: "pod-uid-demo-0" },
        "7": { vm: vm(7) },
        db: { vm: vm("db"), podUID: "pod-uid-demo-db" },
      },
    };
    const pods = convergedPods(cs).map((p) =>
      withAnnotations(p, { [ANNOTATIONS.vmName]: "vk-acme-prod-db" }),
    );
    assert.deepEqual(teardownVmNames(cs, pods), [vm(0), vm(7), vm("db")]);
  });

  it("a view of a CocoonSet whose status predates the record adopts its pods by the old rules once", () => {
    const cs = cocoonSet({}, { replicas: 1 });
    cs.status = {
      observedGeneration: 2,
      readyAgents: 2,
      desiredAgents: 2,
      readyToolboxes: 0,
      desiredToolboxes: 0,
      agents: [{ slot: 3, role: "sub-agent", vmName: vm(3) }],
    };
    const pods = convergedPods(cs);
    assert.deepEqual(teardownVmNames(attributedView(cs, pods), pods), [vm(0), vm(1), vm(3)]);
    // A new CocoonSet (no status at all) adopts nothing.
    const fresh = cocoonSet({}, { replicas: 1 });
    assert.deepEqual(teardownVmNames(attributedView(fresh, pods), pods), []);
  });

  it("stashes only what changed", () => {
    const cs = cocoonSet();
    assert.equal(deleteVmNamesStash(cs, []), undefined);
    assert.equal(deleteVmNamesStash(cs, [vm(0), vm(1)]), `${vm(0)},${vm(1)}`);
    cs.metadata.annotations = { [ANNOTATIONS.deleteVmNames]: `${vm(0)},${vm(1)}` };
    assert.equal(deleteVmNamesStash(cs, [vm(0), vm(1)]), undefined);
    assert.deepEqual(parseDeleteVmNames(undefined), []);
  });
});
