// Who may install, keep or delete what, given tokens: the pure decisions behind the Operator's
// install guard and every guarded delete (provider/dynamic/ownership.ts).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { CRD_NAME } from "../../../engine/spec/index.js";
import {
  deleteDecision,
  INSTALLED_BY,
  newOwnerToken,
  objectPath,
  operatorInstallProblem,
  OWNER_TOKEN,
  tokenFor,
  type Claimant,
  type DeleteDecision,
} from "../../../provider/dynamic/ownership.js";
import { operatorObjects, teardownOrder } from "../../../sdk/operator-objects.js";

const MINE = "a".repeat(32);
const THEIRS = "b".repeat(32);
const obj = (annotations?: Record<string, string>) => ({ metadata: { name: "x", annotations } });
const me: Claimant = { owner: "proj/dev/cocoonset", token: MINE, existing: true, adopt: false };

describe("the ownership token a guard keeps", () => {
  it("is the state's on every later check, and a new one for a new resource", () => {
    assert.equal(tokenFor({ ownerToken: MINE, owner: "x" }), MINE);
    const fresh = tokenFor({});
    assert.match(fresh, /^[0-9a-f]{32}$/);
    assert.notEqual(fresh, tokenFor(undefined), "two new resources draw two tokens");
    assert.match(tokenFor({ ownerToken: "not-a-token" }), /^[0-9a-f]{32}$/);
    assert.notEqual(newOwnerToken(), newOwnerToken());
  });
});

describe("Operator install decision", () => {
  const cases: [
    string,
    ReturnType<typeof obj> | undefined,
    Partial<Claimant>,
    RegExp | undefined,
  ][] = [
    ["no CRD: installed", undefined, { existing: false }, undefined],
    ["its own token: kept", obj({ [OWNER_TOKEN]: MINE, [INSTALLED_BY]: "x/y/z" }), {}, undefined],
    [
      "another Operator's token, a new resource (a second stack, another backend, a moved line): refused, naming it",
      obj({ [OWNER_TOKEN]: THEIRS, [INSTALLED_BY]: "other/prod/cocoonset" }),
      { existing: false },
      /^\[Operator\] the CocoonSet CRD \S+ is already installed by the Operator other\/prod\/cocoonset \(ownership token bbbbbbbb…\); a cluster takes one Operator.*add an alias.*adoptCrd/,
    ],
    [
      "another token with adoptCrd: taken over",
      obj({ [OWNER_TOKEN]: THEIRS, [INSTALLED_BY]: "other/prod/cocoonset" }),
      { existing: false, adopt: true },
      undefined,
    ],
    [
      "this stack's resource whose CRD another stack took since: refused, saying so",
      obj({ [OWNER_TOKEN]: THEIRS, [INSTALLED_BY]: "other/prod/cocoonset" }),
      {},
      /is now held by the Operator other\/prod\/cocoonset/,
    ],
    [
      "its own stamp without a token, an existing resource (an earlier version): kept",
      obj({ [INSTALLED_BY]: me.owner }),
      {},
      undefined,
    ],
    [
      "its own stamp without a token, a new resource (a re-created stack): refused",
      obj({ [INSTALLED_BY]: me.owner }),
      { existing: false },
      /already installed by the Operator proj\/dev\/cocoonset \(stamped by a pulumi-cocoonset that recorded no ownership token\)/,
    ],
    [
      "applied by hand: refused unless adoptCrd",
      obj(),
      {},
      new RegExp(
        `^\\[adoptCrd\\] the CocoonSet CRD ${CRD_NAME.replace(/\./g, "\\.")} exists and no Operator installed it`,
      ),
    ],
    ["applied by hand, adoptCrd: adopted", obj(), { adopt: true }, undefined],
  ];
  for (const [title, crd, extra, expected] of cases) {
    it(title, () => {
      const problem = operatorInstallProblem(crd, { ...me, ...extra });
      if (expected === undefined) assert.equal(problem, undefined);
      else assert.match(problem ?? "", expected);
    });
  }
});

describe("guarded delete", () => {
  const cases: [string, ReturnType<typeof obj> | undefined, string | undefined, DeleteDecision][] =
    [
      ["gone: nothing to do", undefined, MINE, "gone"],
      ["its own token: deleted", obj({ [OWNER_TOKEN]: MINE }), MINE, "delete"],
      [
        "another token (a replacement or an adopter holds it): left alone",
        obj({ [OWNER_TOKEN]: THEIRS }),
        MINE,
        "handed-over",
      ],
      ["no token on the object, one in the state: left alone", obj(), MINE, "untokened"],
      ["a state of an earlier version (no token): deletes as it did", obj(), undefined, "delete"],
    ];
  for (const [title, live, mine, expected] of cases) {
    it(title, () => assert.equal(deleteDecision(live, mine), expected));
  }

  it("never deletes an object that carries another token (property)", () => {
    const hex = fc.stringMatching(/^[0-9a-f]{32}$/);
    fc.assert(
      fc.property(hex, hex, (mine, theirs) => {
        const d = deleteDecision(obj({ [OWNER_TOKEN]: theirs }), mine);
        assert.equal(d === "delete", mine === theirs);
      }),
    );
  });
});

describe("the Operator's teardown order", () => {
  it("deletes the controller first, its RBAC and namespace after, and the CRDs last, the CocoonSet CRD at the very end", () => {
    const refs = teardownOrder(
      operatorObjects("op", { namespace: "op-system", metricsService: true, replicas: 2 }),
    );
    const kinds = refs.map((r) => r.kind);
    assert.equal(kinds.at(-1), "CustomResourceDefinition");
    assert.equal(refs.at(-1)!.name, CRD_NAME);
    assert.equal(kinds.at(-2), "CustomResourceDefinition");
    assert.equal(kinds.at(-3), "Namespace");
    assert.ok(kinds.indexOf("Deployment") < kinds.indexOf("ServiceAccount"));
    assert.ok(kinds.indexOf("ClusterRoleBinding") < kinds.indexOf("ClusterRole"));
    assert.deepEqual(
      refs.find((r) => r.kind === "Deployment"),
      { apiVersion: "apps/v1", kind: "Deployment", name: "op-controller", namespace: "op-system" },
    );
    assert.equal(
      objectPath(refs.find((r) => r.kind === "PodDisruptionBudget")!),
      "/apis/policy/v1/namespaces/op-system/poddisruptionbudgets/op-controller",
    );
    assert.equal(
      objectPath(refs.find((r) => r.kind === "Namespace")!),
      "/api/v1/namespaces/op-system",
    );
  });
});
