/** What a cluster needs for a deploy, read and judged: `cocoonset doctor` and the guards' checks. */
export { gatherDoctorFacts, readAccess, readPools, type RegistryTarget } from "./gather.js";
export {
  blocks,
  deployPreflight,
  doctorFindings,
  renderFindings,
  requiredAccess,
  type DeployPreflight,
} from "./findings.js";
