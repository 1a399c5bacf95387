/**
 * The cache keys of today's pins, written out: a key that moves means every machine and CI
 * builds that group again from source (half an hour for the whole toolchain on 2 cores), so a
 * change to how keys are computed, or a field added to `toolchain.json` that slips into a
 * key, fails here. When a pin changes on purpose, the group's key here changes with it, in
 * the same commit.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { groupKey, loadPins, pinsKey } from "../../../cluster/toolchain-pins.js";

const GROUP_KEYS: Record<string, string> = {
  etcd: "c7c645794c30",
  kubernetes: "9e940210756d",
  kwok: "e8ab8ffa7528",
  pulumi: "29dfa8f967fe",
  "pulumi-kubernetes": "f7451ccaffe7",
  registry: "630fd5b1c8c3",
  distribution: "f9ba158bf2cf",
  "pulumi-yaml": "bf179fb28376",
  "pulumi-language-nodejs": "af1fb82a5884",
  "pulumi-language-python": "355e8cfd81e5",
  "pulumi-language-go": "19fe39fa224d",
};

test("each group's cache key is the one its folder has today", () => {
  const pins = loadPins();
  const keys = Object.fromEntries(Object.keys(pins.groups).map((g) => [g, groupKey(g, pins)]));
  assert.deepEqual(keys, GROUP_KEYS);
});

test("the key of the assembled bin folder is the one it has today", () => {
  assert.equal(pinsKey(loadPins()), "1706744037c4");
});
