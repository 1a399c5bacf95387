/**
 * A Fleet shaped entirely by stack config, so one program serves every e2e scenario.
 *
 * Config: `namespace` (required, must exist), `name` [fleet], `replicas` [10], `image`
 * [agents/coder:1], `toolboxes` (JSON array of toolbox specs) [[]], `withOperator` [false],
 * `operatorName` [cocoonset], `operatorNamespace` [cocoonset-system], `retainCrdOnDelete`
 * [false], `adoptCrd` [none], `adoptCocoonSet` [false], `fanOut` [8], `providerKubeconfig` (secret; when set, the
 * Operator and the Fleet go through a Kubernetes provider built from it, and nothing else
 * is told the kubeconfig), `registry` [none], `registryCa` (PEM) [none], `registryUsername`
 * and `registryPassword` (secret, else `$E2E_REGISTRY_PASSWORD`; together they are the Fleet's
 * `registryCredentials`) [none],
 * `nodePool` [the default pool], `cpu` (each agent's cpu request) [none], `capacityCheck`
 * [the Fleet's default], `suspend` [false], `timeoutSeconds` [120], `skipAwait` [false].
 * Exports the Fleet's outputs the tests read: `phase` and `status`, besides the names.
 */
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { Fleet, type FleetArgs, Operator, type ToolboxSpec } from "pulumi-cocoonset";

const config = new pulumi.Config();
const namespace = config.require("namespace");
const withOperator = config.getBoolean("withOperator") ?? false;
const providerKubeconfig = config.getSecret("providerKubeconfig");
const provider = providerKubeconfig
  ? new k8s.Provider("target", { kubeconfig: providerKubeconfig })
  : undefined;

const operator = withOperator
  ? new Operator(
      config.get("operatorName") ?? "cocoonset",
      {
        namespace: config.get("operatorNamespace") ?? "cocoonset-system",
        retainCrdOnDelete: config.getBoolean("retainCrdOnDelete"),
        adoptCrd: config.get("adoptCrd"),
      },
      { provider },
    )
  : undefined;

const fleet = new Fleet(
  config.get("name") ?? "fleet",
  {
    namespace,
    operator,
    // Short timeouts: the embedded cluster answers in seconds, and a hung test should fail.
    timeoutSeconds: config.getNumber("timeoutSeconds") ?? 120,
    skipAwait: config.getBoolean("skipAwait"),
    releaseTimeoutSeconds: 60,
    fanOut: config.getNumber("fanOut"),
    adoptCocoonSet: config.getBoolean("adoptCocoonSet"),
    registry: config.get("registry"),
    registryCa: config.get("registryCa"),
    // The password from a secret config, else (as programs often do) from the environment.
    registryCredentials: config.get("registryUsername")
      ? {
          username: config.require("registryUsername"),
          password:
            config.getSecret("registryPassword") ??
            pulumi.secret(process.env.E2E_REGISTRY_PASSWORD ?? ""),
        }
      : undefined,
    capacityCheck: config.get<NonNullable<FleetArgs["capacityCheck"]>>("capacityCheck"),
    spec: {
      suspend: config.getBoolean("suspend"),
      nodePool: config.get("nodePool"),
      agent: {
        replicas: config.getNumber("replicas") ?? 10,
        image: config.get("image") ?? "agents/coder:1",
        resources: config.get("cpu") ? { requests: { cpu: config.require("cpu") } } : undefined,
      },
      toolboxes: config.getObject<ToolboxSpec[]>("toolboxes") ?? [],
    },
  },
  { provider },
);

export const cocoonSet = fleet.cocoonSetName;
export const cocoonSetUid = fleet.cocoonSetUid;
export const pods = fleet.podNames;
export const phase = fleet.phase;
export const status = fleet.status;
export const operatorDeployment = operator?.deploymentName;
