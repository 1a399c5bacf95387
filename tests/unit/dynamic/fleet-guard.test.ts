// The Fleet's claim decision (what the claim guard's `check` and `create` decide from one read
// of the cluster): a Fleet creates its CocoonSet, keeps its own, adopts one only when told,
// and refuses another Fleet's whatever it is told.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { CREATED_BY, claimProblem, type ClaimView } from "../../../provider/dynamic/fleet-guard.js";

const me = { namespace: "p9", name: "coder", owner: "team-a/dev/coder" };
const live = (
  annotations?: Record<string, string>,
  labels?: Record<string, string>,
): ClaimView => ({
  crdInstalled: true,
  cocoonSet: { metadata: { name: "coder", namespace: "p9", annotations, labels } },
});

describe("Fleet claim decision", () => {
  const cases: [
    string,
    ClaimView,
    Partial<typeof me & { adopt: boolean; requireCrd: boolean }>,
    RegExp | undefined,
  ][] = [
    ["no CocoonSet yet: created", { crdInstalled: true }, {}, undefined],
    ["its own stamp: kept", live({ [CREATED_BY]: me.owner }), {}, undefined],
    [
      "another stack's Fleet: refused, naming it",
      live({ [CREATED_BY]: "team-b/prod/coder" }),
      {},
      /^\[name\] the CocoonSet p9\/coder is held by the Fleet team-b\/prod\/coder;/,
    ],
    [
      "another stack's Fleet even with adoptCocoonSet: refused",
      live({ [CREATED_BY]: "team-b/prod/coder" }),
      { adopt: true },
      /held by the Fleet team-b\/prod\/coder/,
    ],
    [
      "another Fleet of the same stack: refused",
      live({ [CREATED_BY]: "team-a/dev/reviewer" }),
      {},
      /held by the Fleet team-a\/dev\/reviewer/,
    ],
    [
      "made with kubectl: refused as not created by Pulumi",
      live(),
      {},
      /^\[adoptCocoonSet\] the CocoonSet p9\/coder exists and was not created by Pulumi .*set `adoptCocoonSet: true`/,
    ],
    [
      "made by Pulumi without a stamp: refused, saying so",
      live(undefined, { "app.kubernetes.io/managed-by": "pulumi" }),
      {},
      /exists and was created by a Pulumi stack that did not record its owner/,
    ],
    ["made with kubectl, adoptCocoonSet: adopted", live(), { adopt: true }, undefined],
    [
      "no CRD and no Operator: refused at preview",
      { crdInstalled: false },
      { requireCrd: true },
      /^\[operator\] the CocoonSet CRD cocoonsets\.cocoonset\.cocoonstack\.io is not installed/,
    ],
    [
      "no CRD, an Operator installs it: fine",
      { crdInstalled: false },
      { requireCrd: false },
      undefined,
    ],
  ];
  for (const [title, view, extra, expected] of cases) {
    it(title, () => {
      const problem = claimProblem(view, { ...me, ...extra });
      if (expected === undefined) assert.equal(problem, undefined);
      else assert.match(problem ?? "", expected);
    });
  }

  it("never lets a Fleet claim a CocoonSet another Fleet stamped (property)", () => {
    fc.assert(
      fc.property(
        fc.string({ minLength: 1 }),
        fc.string({ minLength: 1 }),
        fc.boolean(),
        fc.boolean(),
        (mine, theirs, adopt, requireCrd) => {
          fc.pre(mine !== theirs);
          const p = { namespace: "ns", name: "n", owner: mine, adopt, requireCrd };
          assert.notEqual(claimProblem(live({ [CREATED_BY]: theirs }), p), undefined);
          assert.equal(claimProblem(live({ [CREATED_BY]: mine }), p), undefined);
        },
      ),
    );
  });
});
