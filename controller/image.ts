/**
 * The controller image's name, shared by the Operator (its default `image`) and
 * `cocoonset-dev image build` (its default `--tag`), so the image a user builds without options
 * is the one the Operator deploys.
 */

/** Repository part of the default controller image reference. */
export const CONTROLLER_IMAGE_REPOSITORY = "pulumi-cocoonset/controller";

/** The default controller image for a package version: `pulumi-cocoonset/controller:<version>`. */
export function defaultControllerImage(version: string): string {
  return `${CONTROLLER_IMAGE_REPOSITORY}:${version}`;
}

/** UID and GID the controller runs as in the image and in the Operator's Deployment. */
export const CONTROLLER_UID = 65532;

/** What the Operator configures on the controller's command line. */
export interface DeploymentControllerArgs {
  leaderElect: boolean;
  /** Where the leader Lease lives (the Operator's namespace, where its Lease Role is). */
  leaderElectionNamespace?: string;
  concurrency: number;
  fanoutConcurrency: number;
  reapInterval: string;
  logLevel: string;
  /** Watched namespaces; empty means all. */
  watchNamespaces: string[];
  /** The snapshot registry (`--oci-registry`), when the controller acts on `suspend`. */
  ociRegistry?: string;
  /** `--oci-registry-ca-file`: where the registry's CA bundle is mounted, if one is. */
  ociRegistryCaFile?: string;
  /** `--oci-registry-insecure`, when set. */
  ociRegistryInsecure?: boolean;
  /** `--hibernate-timeout`, when not the controller's default. */
  hibernateTimeout?: string;
  /** `--wake-timeout`, when not the controller's default. */
  wakeTimeout?: string;
}

/** Folder the Operator mounts the registry's CA bundle ConfigMap at (key `ca.crt`). */
export const REGISTRY_CA_DIR = "/etc/cocoonset/registry-ca";

/**
 * Folder the Operator mounts the registry credentials' `kubernetes.io/dockerconfigjson`
 * Secret at (its `.dockerconfigjson` as `config.json`); the container's `DOCKER_CONFIG`.
 */
export const REGISTRY_AUTH_DIR = "/etc/cocoonset/registry-auth";

/** Container port of `/metrics` in the Operator's Deployment. */
export const METRICS_PORT = 8080;
/** Container port of `/healthz` and `/readyz` in the Operator's Deployment. */
export const PROBE_PORT = 8081;

/**
 * The container `args` of the Operator's controller Deployment (the image's entry point
 * takes `controller` first, like the `cocoonset` command). The image tests start the image
 * with these arguments.
 */
export function deploymentControllerArgs(a: DeploymentControllerArgs): string[] {
  return [
    "controller",
    `--leader-elect=${a.leaderElect}`,
    ...(a.leaderElect && a.leaderElectionNamespace
      ? [`--leader-election-namespace=${a.leaderElectionNamespace}`]
      : []),
    `--concurrency=${a.concurrency}`,
    `--fanout-concurrency=${a.fanoutConcurrency}`,
    `--reap-interval=${a.reapInterval}`,
    `--log-level=${a.logLevel}`,
    `--metrics-bind-address=:${METRICS_PORT}`,
    `--health-probe-bind-address=:${PROBE_PORT}`,
    ...a.watchNamespaces.map((w) => `--namespace=${w}`),
    ...(a.ociRegistry ? [`--oci-registry=${a.ociRegistry}`] : []),
    ...(a.ociRegistry && a.ociRegistryCaFile
      ? [`--oci-registry-ca-file=${a.ociRegistryCaFile}`]
      : []),
    ...(a.ociRegistry && a.ociRegistryInsecure ? ["--oci-registry-insecure=true"] : []),
    ...(a.hibernateTimeout ? [`--hibernate-timeout=${a.hibernateTimeout}`] : []),
    ...(a.wakeTimeout ? [`--wake-timeout=${a.wakeTimeout}`] : []),
  ];
}
