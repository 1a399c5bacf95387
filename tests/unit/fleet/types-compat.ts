// A compile-time check, not a test: the project's Kubernetes types are the wire JSON
// (timestamps are strings), and `tsc` proves here that what the engine builds stays usable
// with @kubernetes/client-node's models, whose deserialiser turns timestamps into Dates (so
// a V1Pod read through client-node is not the engine's Pod: the project reads pods through
// its own client). The build fails if a PodManifest stops being a V1Pod.
import type { V1Pod } from "@kubernetes/client-node";
import type { PodManifest } from "../../../engine/spec/index.js";

/** Compiles only while a PodManifest is assignable to a client-node V1Pod. */
export function podManifestIsV1Pod(manifest: PodManifest): V1Pod {
  return manifest;
}
