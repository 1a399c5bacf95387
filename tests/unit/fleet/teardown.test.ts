// The deletion's snapshot clean-up, planned: `:hibernate` of every VM the CocoonSet had, and
// `:latest` where the snapshot policy does not keep it (never: all; main-only: all but the
// main agent's; always: none). VM names come from status, the stash and the pods.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  deleteVmNamesStash,
  teardownTags,
  teardownVmNames,
} from "../../../engine/snapshots/index.js";
import { agentSlotOfVm, parseDeleteVmNames } from "../../../engine/snapshots/teardown.js";
import { ANNOTATIONS, type CocoonSet } from "../../../engine/spec/index.js";
import { cocoonSet, convergedPods, toolbox } from "./fixtures.js";

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
  it("unions status, the stash and the pods, sorted and unique", () => {
    const cs = cocoonSet({ toolboxes: [toolbox("db")] }, { replicas: 1 });
    cs.metadata.annotations = { [ANNOTATIONS.deleteVmNames]: ` ${vm(7)},,${vm(0)} ` };
    cs.status = { agents: [{ slot: 0, podName: "demo-0", vmName: vm(0) }] } as CocoonSet["status"];
    const pods = convergedPods(cs);
    assert.deepEqual(teardownVmNames(cs, pods), [vm(0), vm(1), vm(7), vm("db")]);
  });

  it("finds the VMs through the pods when no status was written", () => {
    const cs = cocoonSet({}, { replicas: 1 });
    assert.deepEqual(teardownVmNames(cs, convergedPods(cs)), [vm(0), vm(1)]);
    assert.deepEqual(teardownVmNames(cs, []), []);
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
