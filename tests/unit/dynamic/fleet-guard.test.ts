// The Fleet's claim decision (what the claim guard's `check` and `create` decide from one read
// of the cluster): a Fleet creates its CocoonSet, keeps the one that carries its token, adopts
// one only when told, and refuses one it holds no token for, naming who holds it.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { CREATED_BY, claimProblem, type ClaimView } from "../../../provider/dynamic/fleet-guard.js";
import { OWNER_TOKEN } from "../../../provider/dynamic/ownership.js";

const MINE = "a".repeat(32);
const THEIRS = "b".repeat(32);
const me = {
  namespace: "p9",
  name: "coder",
  owner: "team-a/dev/coder",
  ownerToken: MINE,
  existing: true,
};
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
    ["no CocoonSet yet: created", { crdInstalled: true }, { existing: false }, undefined],
    ["its own token: kept", live({ [CREATED_BY]: me.owner, [OWNER_TOKEN]: MINE }), {}, undefined],
    [
      "its own token under another stamp (an aliased rename, a renamed stack): kept",
      live({ [CREATED_BY]: "team-a/old-name/coder", [OWNER_TOKEN]: MINE }),
      {},
      undefined,
    ],
    [
      "another token, the same stamp, a new resource (another backend, a moved line): refused, naming it",
      live({ [CREATED_BY]: me.owner, [OWNER_TOKEN]: THEIRS }),
      { existing: false },
      /^\[name\] the CocoonSet p9\/coder is held by the Fleet team-a\/dev\/coder \(ownership token bbbbbbbb…\).*add an alias.*`adoptCocoonSet: true`/,
    ],
    [
      "another stack's Fleet: refused, naming it",
      live({ [CREATED_BY]: "team-b/prod/coder", [OWNER_TOKEN]: THEIRS }),
      { existing: false },
      /held by the Fleet team-b\/prod\/coder/,
    ],
    [
      "another token with adoptCocoonSet: taken over",
      live({ [CREATED_BY]: "team-b/prod/coder", [OWNER_TOKEN]: THEIRS }),
      { existing: false, adopt: true },
      undefined,
    ],
    [
      "this stack's resource, but another stack took it over since: refused, saying so",
      live({ [CREATED_BY]: "team-b/prod/coder", [OWNER_TOKEN]: THEIRS }),
      {},
      /^\[adoptCocoonSet\] the CocoonSet p9\/coder is now held by the Fleet team-b\/prod\/coder/,
    ],
    [
      "a stamp without a token, its own name, an existing resource (an earlier version): kept",
      live({ [CREATED_BY]: me.owner }),
      {},
      undefined,
    ],
    [
      "a stamp without a token, its own name, a new resource (a re-created stack): refused",
      live({ [CREATED_BY]: me.owner }),
      { existing: false },
      /held by the Fleet team-a\/dev\/coder \(stamped by a pulumi-cocoonset that recorded no ownership token\)/,
    ],
    [
      "another Fleet of the same stack, no token: refused",
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

  it("claims a CocoonSet that carries a token only with that token or adoptCocoonSet, whatever the names (property)", () => {
    const hex = fc.stringMatching(/^[0-9a-f]{32}$/);
    fc.assert(
      fc.property(
        hex,
        hex,
        fc.string({ minLength: 1 }),
        fc.string({ minLength: 1 }),
        fc.boolean(),
        fc.boolean(),
        (mine, theirs, owner, stamp, existing, adopt) => {
          const p = { namespace: "ns", name: "n", owner, ownerToken: mine, existing, adopt };
          const view = live({ [CREATED_BY]: stamp, [OWNER_TOKEN]: theirs });
          assert.equal(claimProblem(view, p) === undefined, mine === theirs || adopt);
        },
      ),
    );
  });
});
