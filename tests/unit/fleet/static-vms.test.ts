// Static toolboxes' VM identities (issue 39, finding 4): a fleet may not claim, by
// `staticVMID` or `staticIP`, a VM another live fleet holds (runs, or claimed first); the
// younger claim is refused as a VM name clash is, and nothing is created for it.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { staticVmClash, staticVmClashMessage } from "../../../engine/snapshots/index.js";
import { planPass } from "../../../engine/planner/index.js";
import type { CocoonSet } from "../../../engine/spec/index.js";
import type { ToolboxSpec } from "../../../engine/spec/generated/types.js";
import { NOW, cocoonSet, decisions, toolbox } from "./fixtures.js";

function fleet(
  ns: string,
  name: string,
  toolboxes: ToolboxSpec[],
  opts: { created?: string; vmIDs?: string[]; deleting?: boolean } = {},
): CocoonSet {
  const base = cocoonSet({ toolboxes });
  return {
    ...base,
    metadata: {
      name,
      namespace: ns,
      uid: `uid-${ns}-${name}`,
      generation: 1,
      creationTimestamp: opts.created ?? "2025-01-01T00:00:00Z",
      ...(opts.deleting ? { deletionTimestamp: "2025-06-01T00:00:00Z" } : {}),
    },
    ...(opts.vmIDs
      ? {
          status: {
            readyAgents: 1,
            desiredAgents: 1,
            readyToolboxes: 0,
            desiredToolboxes: 0,
            agents: opts.vmIDs.map((id, slot) => ({
              slot,
              role: slot === 0 ? ("main" as const) : ("sub-agent" as const),
              vmID: id,
              ip: `10.0.0.${slot + 1}`,
            })),
          },
        }
      : {}),
  };
}
const staticTb = (id?: string, ip?: string) =>
  toolbox("db", { mode: "static", staticVMID: id, staticIP: ip });

describe("staticVmClash", () => {
  const mine = (tb: ToolboxSpec, created = "2025-03-01T00:00:00Z") =>
    fleet("acme", "web", [tb], { created });
  const table: [string, CocoonSet, CocoonSet[], string | undefined][] = [
    [
      "no static toolbox",
      fleet("acme", "web", [toolbox("db")]),
      [fleet("b", "x", [], { vmIDs: ["vm-1"] })],
      undefined,
    ],
    [
      "a VM id another fleet runs",
      mine(staticTb("vm-1")),
      [fleet("b", "x", [], { vmIDs: ["vm-1"] })],
      "b/x staticVMID vm-1",
    ],
    [
      "an IP another fleet runs",
      mine(staticTb(undefined, "10.0.0.1")),
      [fleet("b", "x", [], { vmIDs: ["vm-9"] })],
      "b/x staticIP 10.0.0.1",
    ],
    [
      "an id an older fleet claims",
      mine(staticTb("vm-7")),
      [fleet("b", "old", [staticTb("vm-7")])],
      "b/old staticVMID vm-7",
    ],
    [
      "an id a younger fleet claims: mine",
      mine(staticTb("vm-7")),
      [fleet("b", "new", [staticTb("vm-7")], { created: "2025-05-01T00:00:00Z" })],
      undefined,
    ],
    [
      "held by a fleet being deleted: free",
      mine(staticTb("vm-1")),
      [fleet("b", "x", [], { vmIDs: ["vm-1"], deleting: true })],
      undefined,
    ],
    [
      "an id nobody holds",
      mine(staticTb("vm-2")),
      [fleet("b", "x", [], { vmIDs: ["vm-1"] })],
      undefined,
    ],
    ["the fleet itself in the list", mine(staticTb("vm-2")), [mine(staticTb("vm-2"))], undefined],
    [
      "a non-static toolbox's staticVMID is not a claim",
      fleet("acme", "web", [toolbox("db", { staticVMID: "vm-1" })]),
      [fleet("b", "x", [], { vmIDs: ["vm-1"] })],
      undefined,
    ],
  ];
  for (const [what, cs, fleets, want] of table)
    it(what, () => {
      const c = staticVmClash(cs, fleets);
      assert.equal(c ? `${c.holder} ${c.claim.field} ${c.claim.value}` : undefined, want);
    });
});

describe("the plan of a fleet claiming another's static VM", () => {
  it("is refused: nothing is created, VMNamesAvailable False and a Warning name both fleets", () => {
    const cs = fleet("acme", "web", [staticTb("vm-1")], { created: "2025-03-01T00:00:00Z" });
    const victim = fleet("b", "x", [], { vmIDs: ["vm-1"] });
    const p = planPass({ cocoonSet: cs, pods: [], nowMs: NOW, fleets: [cs, victim] });
    assert.deepEqual(decisions(p), ["web-0:refuse-vm-names"]);
    assert.equal(p.mutatesPods, false);
    const message = staticVmClashMessage(cs, staticVmClash(cs, [victim])!);
    assert.equal(
      message,
      "[spec.toolboxes[db].staticVMID] vm-1 of CocoonSet acme/web is already held by CocoonSet b/x (a static toolbox adopts that VM as its own); nothing is created for acme/web: name a VM of its own",
    );
    assert.deepEqual(p.refusals, [{ kind: "vm-name-clash", message }]);
    const write = p.steps[0].actions.find((a) => a.kind === "write-status");
    assert.ok(write?.kind === "write-status");
    const c = write.status.conditions?.find((x) => x.type === "VMNamesAvailable");
    assert.equal(c?.status, "False");
    assert.equal(c?.message, message);
  });
});
