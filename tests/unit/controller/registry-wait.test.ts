// When a CocoonSet pass refused for want of the registry requeues for the breaker's next
// probe instead of the queue's growing backoff: only with the guard, only while it is
// unanswered, and only when the registry is all that failed.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { registryWait } from "../../../controller/cocoonset-reconciler.js";
import { SnapshotRegistryFailure } from "../../../engine/execute/index.js";
import { GuardedRegistry, type TagClient } from "../../../engine/registry/guard.js";
import { suspendUnanswered } from "../../../engine/lifecycle/suspend.js";
import { FakeClock } from "../../support/fake-clock.js";

const hung: TagClient = {
  hasManifest: () => new Promise<boolean>(() => undefined),
  deleteManifest: () => new Promise<void>(() => undefined),
};

async function openGuard(clock: FakeClock): Promise<GuardedRegistry> {
  const g = new GuardedRegistry(hung, { name: "reg.test", clock, waitMs: 1_000 });
  for (let i = 0; i < 3; i++) g.hasManifest(`vm-${i}`, "hibernate").catch(() => undefined);
  clock.advance(1_000);
  await new Promise<void>((r) => setImmediate(r));
  return g;
}

const registryFailure = new SnapshotRegistryFailure({
  ...suspendUnanswered("no answer"),
  kind: "registry-unanswered",
  need: "suspend",
  registryError: "no answer",
});

describe("registryWait", () => {
  it("an open breaker and only registry failures: wait for its next probe", async () => {
    const clock = new FakeClock(0);
    const g = await openGuard(clock);
    assert.equal(registryWait(g, { failures: [registryFailure] }), 5_000);
    clock.advance(3_000);
    assert.equal(registryWait(g, { failures: [registryFailure, registryFailure] }), 2_000);
  });

  const table: [string, (g: GuardedRegistry) => unknown, unknown[]][] = [
    ["no failure", (g) => g, []],
    ["another failure beside the registry's", (g) => g, [registryFailure, new Error("409")]],
    ["a registry client without the guard", () => hung, [registryFailure]],
    ["no registry", () => undefined, [registryFailure]],
  ];
  for (const [name, registry, failures] of table)
    it(`${name}: the usual path`, async () => {
      const g = await openGuard(new FakeClock(0));
      assert.equal(registryWait(registry(g), { failures }), undefined);
    });

  it("a closed breaker: the usual path (the queue's backoff)", () => {
    const g = new GuardedRegistry(hung, { name: "reg.test", clock: new FakeClock(0) });
    assert.equal(registryWait(g, { failures: [registryFailure] }), undefined);
  });
});
