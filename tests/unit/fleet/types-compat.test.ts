// The pure core has its own minimal Kubernetes types; these checks make the compiler prove
// they stay interchangeable with @kubernetes/client-node's models in both directions.
import assert from "node:assert/strict";
import { it } from "node:test";
import type { V1Pod } from "@kubernetes/client-node";
import type { Pod, PodManifest } from "../../../provider/fleet/index.js";
import { buildAgentPod } from "../../../provider/fleet/index.js";
import { cocoonSet } from "./fixtures.js";

function acceptsListedPod(pod: V1Pod): Pod {
  return pod;
}

function acceptsBuiltPod(manifest: PodManifest): V1Pod {
  return manifest;
}

it("a client-node V1Pod is a Pod, and a built PodManifest is a V1Pod", () => {
  const built = buildAgentPod(cocoonSet(), 0);
  assert.equal(acceptsListedPod(acceptsBuiltPod(built)), built);
});
