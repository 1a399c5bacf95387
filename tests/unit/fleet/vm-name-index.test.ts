// The index of fleets by the stem of their VM names (engine/attribution/vm-name-index.ts):
// its answers are exactly the tests it stands for, mayShareVmNames and mayNameVm, over any
// fleets added and deleted, with dashes where names meet.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import {
  mayNameVm,
  mayShareVmNames,
  type FleetName,
  VmNameIndex,
} from "../../../engine/attribution/index.js";

const keys = (fs: FleetName[]) => fs.map((f) => `${f.namespace}/${f.name}`).sort();

describe("VmNameIndex", () => {
  it("finds the same stem, shorter stems and longer stems, across namespaces", () => {
    const index = new VmNameIndex();
    const fleets = [
      { namespace: "q", name: "x-yy" },
      { namespace: "q-x", name: "yy" },
      { namespace: "q", name: "x" },
      { namespace: "q", name: "x-yy-z" },
      { namespace: "q", name: "xy" },
      { namespace: "r", name: "x-yy" },
    ];
    for (const f of fleets) index.add(f);
    assert.deepEqual(keys(index.neighbours({ namespace: "q", name: "x-yy" })), [
      "q-x/yy",
      "q/x",
      "q/x-yy",
      "q/x-yy-z",
    ]);
    assert.deepEqual(keys(index.naming("vk-q-x-yy-1")), ["q-x/yy", "q/x", "q/x-yy"]);
    assert.deepEqual(keys(index.naming("vk-q-xy-0")), ["q/xy"]);
    assert.deepEqual(index.naming("q-xy-0"), [], "not a VM name the engine derives");
    index.delete({ namespace: "q-x", name: "yy" });
    index.delete({ namespace: "q", name: "x" });
    assert.deepEqual(keys(index.neighbours({ namespace: "q", name: "x-yy" })), [
      "q/x-yy",
      "q/x-yy-z",
    ]);
    assert.deepEqual(keys(index.neighbours({ namespace: "s", name: "t" })), []);
  });

  it("answers as the tests it stands for, over fleets added and deleted", () => {
    // Few letters and many dashes, so that stems meet often.
    const part = fc.constantFrom("a", "b", "a-b", "b-a", "a-b-a", "a-a");
    const fleet = fc.record({ namespace: part, name: part });
    const member = fc.constantFrom("0", "1", "a", "b-1", "a-b-0");
    fc.assert(
      fc.property(
        fc.array(fleet, { maxLength: 12 }),
        fc.array(fleet, { maxLength: 6 }),
        fleet,
        fleet,
        member,
        (added, deleted, asked, vmOf, m) => {
          const index = new VmNameIndex();
          for (const f of added) index.add(f);
          for (const f of deleted) index.delete(f);
          const gone = new Set(keys(deleted));
          const held = new Map(added.map((f) => [`${f.namespace}/${f.name}`, f]));
          for (const k of gone) held.delete(k);
          const all = [...held.values()];
          assert.deepEqual(
            keys(index.neighbours(asked)),
            keys(all.filter((f) => mayShareVmNames(asked, f))),
          );
          const vm = `vk-${vmOf.namespace}-${vmOf.name}-${m}`;
          assert.deepEqual(
            keys(index.naming(vm)),
            keys(all.filter((f) => mayNameVm(f.namespace, f.name, vm))),
          );
        },
      ),
      { numRuns: 2000 },
    );
  });
});
