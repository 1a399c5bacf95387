// The slots resource's `diff` of a change to the idle policy, the expiry or the hooks alone:
// an update whose input diff is the spec's policy field, with the same desired slots (so
// preview lists no slot created, replaced or deleted) and no suspend or wake summary. And the
// status the controller writes (idle-suspended, members' activity) is never compared: a
// state whose outputs carry it diffs as one without.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { lifecycleChange } from "../../../provider/dynamic/deploy-view.js";
import { desiredSlots } from "../../../provider/dynamic/slot-view.js";
import {
  UNKNOWN,
  diff,
  type SlotsInputs,
  type SlotsOutputs,
} from "../../../provider/dynamic/slots.js";
import { stableJson, type CocoonSetSpec } from "../../../engine/spec/index.js";

const BASE: CocoonSetSpec = {
  agent: { image: "agents/coder:1", replicas: 2 },
  toolboxes: [{ name: "browser", image: "tools/browser:1" }],
};

function inputs(spec: CocoonSetSpec, kubeconfig = "apiVersion: v1\nkind: Config\n"): SlotsInputs {
  return {
    kubeconfig,
    kubeconfigFile: "/dev/null",
    namespace: "agents",
    name: "coder",
    uid: "uid-1",
    spec,
    slots: desiredSlots("agents", "coder", spec),
    providerVersion: "test",
    fanOut: 8,
    timeoutSeconds: 300,
    releaseTimeoutSeconds: 120,
  };
}

function outputs(spec: CocoonSetSpec, extra: Partial<SlotsOutputs> = {}): SlotsOutputs {
  return { ...inputs(spec), kubeconfig: undefined, pods: {}, mainVmName: "vm", ...extra };
}

/** The slots preview would print as created (+), deleted (-) or changed (~). */
function slotChanges(olds: SlotsOutputs, news: SlotsInputs): string[] {
  const keys = new Set([...Object.keys(olds.slots), ...Object.keys(news.slots)]);
  return [...keys]
    .filter((k) => stableJson(olds.slots[k]) !== stableJson(news.slots[k]))
    .map((k) =>
      olds.slots[k] === undefined ? `+${k}` : news.slots[k] === undefined ? `-${k}` : `~${k}`,
    );
}

const POLICY_CHANGES: [string, CocoonSetSpec, CocoonSetSpec][] = [
  ["idle added", BASE, { ...BASE, idle: { after: "30m" } }],
  ["idle.after changed", { ...BASE, idle: { after: "30m" } }, { ...BASE, idle: { after: "2h" } }],
  ["idle removed", { ...BASE, idle: { after: "30m" } }, BASE],
  ["expiry added", BASE, { ...BASE, expiry: { after: "24h" } }],
  [
    "expiry's since and action changed",
    { ...BASE, expiry: { after: "24h" } },
    { ...BASE, expiry: { after: "24h", since: "idle", action: "delete" } },
  ],
  ["hooks added", BASE, { ...BASE, hooks: { url: "https://hooks.example.com/c" } }],
  [
    "hooks' failurePolicy and timeout changed",
    { ...BASE, hooks: { url: "https://hooks.example.com/c" } },
    {
      ...BASE,
      hooks: { url: "https://hooks.example.com/c", failurePolicy: "Ignore", timeoutSeconds: 3 },
    },
  ],
  [
    "all three at once, on a suspended fleet",
    { ...BASE, suspend: true },
    {
      ...BASE,
      suspend: true,
      idle: { after: "5m" },
      expiry: { after: "1h", since: "idle" },
      hooks: { url: "https://hooks.example.com/c" },
    },
  ],
];

describe("a policy-only change in the slots resource's diff", () => {
  for (const [title, before, after] of POLICY_CHANGES) {
    it(`${title}: an update, no slot created, replaced or deleted, no suspend or wake`, async () => {
      const olds = outputs(before);
      const news = inputs(after);
      const result = await diff("agents/coder", olds, news);
      assert.deepEqual(result, {}, "the engine prints the input diff: an update, no replace");
      assert.deepEqual(slotChanges(olds, news), []);
      assert.equal(
        lifecycleChange(before, after, (v) => v === UNKNOWN),
        undefined,
      );
    });
  }

  it("a change of the slots beside it is still seen (the table can fail)", () => {
    const more: CocoonSetSpec = {
      ...BASE,
      agent: { ...BASE.agent, replicas: 3 },
      idle: { after: "5m" },
    };
    assert.deepEqual(slotChanges(outputs(BASE), inputs(more)), ["+3"]);
  });
});

describe("the status the controller writes is not compared", () => {
  it("outputs holding an idle-suspended status, idle members and an expiry diff as equal inputs do", async () => {
    const spec: CocoonSetSpec = { ...BASE, idle: { after: "30m" }, expiry: { after: "24h" } };
    const olds = outputs(spec, {
      phase: "Suspended",
      status: {
        readyAgents: 0,
        desiredAgents: 3,
        readyToolboxes: 0,
        desiredToolboxes: 1,
        idleSuspendedSince: "2026-12-05T03:00:00Z",
        expiresAt: "2026-12-06T03:00:00Z",
        vms: {
          "1": {
            vm: "vk-agents-coder-1",
            lastActivity: "2026-12-05T02:00:00Z",
            idleSince: "2026-12-05T02:30:00Z",
          },
        },
      },
    });
    // An unknown kubeconfig stops the diff before the live check: what is left is the
    // comparison of the inputs, which must find nothing.
    assert.deepEqual(await diff("agents/coder", olds, inputs(spec, UNKNOWN)), { changes: false });
    assert.deepEqual(await diff("agents/coder", outputs(spec), inputs(spec, UNKNOWN)), {
      changes: false,
    });
  });
});
