/** The embedded local cluster and the toolchain that builds its binaries. */
export * from "./local-cluster.js";
export * from "./toolchain.js";
export {
  binDir,
  cacheDir,
  loadPins,
  locate,
  requireBinary,
  toolchainPath,
  ToolchainError,
  type BinaryName,
  type Located,
  type ToolchainPins,
} from "./toolchain-pins.js";
export { rawRequest } from "./http.js";
export { pulumiEnv, toolchainPulumiCommand } from "./pulumi.js";
export { createClientCa, issueClientCertificate } from "./pki.js";
export type { CertificateAuthority, ClientCertificate } from "./pki.js";
