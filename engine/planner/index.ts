/** `planPass`: one pass's decisions over a whole fleet, and the registry probes it asks for. Only what other layers use is exported here. */
export { planPass } from "./plan.js";
export { snapshotProbes } from "./probes.js";
