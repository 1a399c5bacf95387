// The REST identity of the project's own resource: its API group, version and plural, which
// the client's paths (paths.ts) and the CRD share. Wire contract: changing one breaks live
// clusters. The planning core re-exports them with the rest of the contract
// (engine/spec/constants.ts).

/** API group of the CocoonSet resource. */
export const GROUP = "cocoonset.cocoonstack.io";
/** Served and stored API version. */
export const VERSION = "v1";
/** `apiVersion` field value of a CocoonSet. */
export const API_VERSION = `${GROUP}/${VERSION}`;
/** Plural resource name (used in API paths). */
export const PLURAL = "cocoonsets";
