// The project's Kubernetes types are the wire JSON (timestamps are strings); these checks make
// the compiler prove that what the engine builds stays usable with @kubernetes/client-node's
// models, whose deserialiser turns timestamps into Dates (so a V1Pod read through client-node
// is not the engine's Pod: the project reads pods through its own client).
import assert from "node:assert/strict";
import { it } from "node:test";
import type { V1Pod } from "@kubernetes/client-node";
import type { PodManifest } from "../../../provider/fleet/index.js";
import { buildAgentPod } from "../../../provider/fleet/index.js";
import { cocoonSet } from "./fixtures.js";

function acceptsBuiltPod(manifest: PodManifest): V1Pod {
  return manifest;
}

it("a built PodManifest is a client-node V1Pod", () => {
  const built = buildAgentPod(cocoonSet(), 0);
  assert.equal(acceptsBuiltPod(built), built);
});
