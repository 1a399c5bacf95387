/**
 * The `cocoonset` package schema (what `pulumi package get-schema` prints and what a Pulumi
 * YAML program, or `pulumi package add`, reads): the Operator and Fleet as components, and the
 * engine-backed resources they create as custom resources of the package.
 */

import type { FleetArgs } from "../sdk/fleet.js";
import type { OperatorArgs } from "../sdk/operator.js";
import { cocoonSetTypes, typeRef, type SchemaProperty } from "./schema-types.js";

/** A property of the schema. */
type Property = SchemaProperty;

/** The spec's and the status's object types, from the CRD. */
const crdTypes = cocoonSetTypes();

const str = (description: string): Property => ({ type: "string", description });
const int = (description: string): Property => ({ type: "integer", description });
const bool = (description: string): Property => ({ type: "boolean", description });
const any = (description: string): Property => ({ $ref: "pulumi.json#/Any", description });
const strings = (description: string): Property => ({
  type: "array",
  items: { type: "string" },
  description,
});
const stringMap = (description: string): Property => ({
  type: "object",
  additionalProperties: { type: "string" },
  description,
});
const secretKubeconfig = (who: string): Property => ({
  type: "string",
  secret: true,
  description: `Kubeconfig text ${who} use (kept as a secret). Default: the kubeconfig of the Kubernetes provider the component is given, else the stack's \`kubernetes:kubeconfig\` config, else \`$KUBECONFIG\`, else \`~/.kube/config\`.`,
});

// Keyed by every Operator argument: an argument added there and not here fails to compile.
/** Where a resource's kubeconfig was read from: kept among its outputs instead of the text. */
const kubeconfigSource: Record<string, Property> = {
  kubeconfigFile: str("The file the kubeconfig was read from, if it was."),
  kubeconfigContext: str("The context chosen in that file, if any."),
};

const operatorInputs: Record<keyof OperatorArgs, Property> = {
  namespace: str(
    'Namespace of the controller (created unless `createNamespace` is false). Default "cocoonset-system".',
  ),
  createNamespace: bool("Create the controller's namespace. Default true."),
  image: str("Controller image. Default `pulumi-cocoonset/controller:<package version>`."),
  imagePullPolicy: str(
    "`imagePullPolicy` of the controller container: Always, IfNotPresent or Never.",
  ),
  imagePullSecrets: strings(
    "Names of Secrets (in the controller's namespace) holding registry credentials.",
  ),
  nodeSelector: stringMap("`nodeSelector` of the controller pod."),
  tolerations: {
    type: "array",
    items: any("A Kubernetes Toleration."),
    description: "`tolerations` of the controller pod.",
  },
  priorityClassName: str("`priorityClassName` of the controller pod."),
  replicas: int("Controller replicas; more than one needs leader election. Default 1."),
  shards: int(
    "The controller as this many shards, each reconciling a disjoint share of the CocoonSets with `replicas` pods of its own; more than one needs leader election. Default 1.",
  ),
  resources: any("Container resources (Kubernetes ResourceRequirements) of the controller."),
  leaderElect: bool("Leader election on a Lease. Default true."),
  watchNamespaces: strings("Namespaces the controller watches; all when empty. Default []."),
  concurrency: int("CocoonSets reconciled at once. Default 4."),
  fanoutConcurrency: int("Pod creates in flight per CocoonSet. Default 8."),
  reapInterval: str('How often the controller reaps finished pods. Default "5m".'),
  logLevel: str('Controller log level. Default "info".'),
  ociRegistry: str(
    "Snapshot registry of the VMs, `host[:port][/prefix]`: the controller gets `--oci-registry` and acts on `spec.suspend`.",
  ),
  ociRegistryCa: str(
    "PEM CA bundle trusted for the snapshot registry's https besides the system's roots: mounted into the controller from a ConfigMap (`--oci-registry-ca-file`).",
  ),
  ociRegistryInsecure: bool(
    "Plain http to an `ociRegistry` host that is not loopback (`--oci-registry-insecure`). Default false.",
  ),
  metricsService: bool(
    "A Service `<name>-controller-metrics` for the controller's metrics port. Default false.",
  ),
  serviceMonitor: bool(
    "A `monitoring.coreos.com/v1` ServiceMonitor for the metrics Service (implies `metricsService`); needs the Prometheus Operator's CRD. Default false.",
  ),
  ociRegistryCredentialsSecret: str(
    "A `kubernetes.io/dockerconfigjson` Secret in the controller's namespace with the snapshot registry's credentials, mounted for the controller (`DOCKER_CONFIG`). Needs `ociRegistry`.",
  ),
  hibernateTimeout: str(
    'How long a CocoonHibernation may stay Hibernating before it is Failed (`--hibernate-timeout`). Default "3m".',
  ),
  wakeTimeout: str(
    'How long a CocoonHibernation may stay Waking before it is Failed (`--wake-timeout`). Default "5m".',
  ),
  kubeconfig: secretKubeconfig("the Operator's guards"),
  retainCrdOnDelete: bool(
    "Keep the CocoonSet CRD (and every CocoonSet) when the Operator is destroyed. Default false.",
  ),
  adoptCrd: str(
    "Adopt a CocoonSet CRD no Operator installed: the CRD's name, `cocoonsets.cocoonset.cocoonstack.io`.",
  ),
  skipAwait: bool("Do not wait for the controller Deployment to become available. Default false."),
  rolloutTimeoutSeconds: int(
    "How long `pulumi up` waits for the controller Deployment to roll out. Default 600.",
  ),
};

const operatorOutputs: Record<string, Property> = {
  namespace: str("Namespace the controller runs in."),
  crdName: str("Name of the CocoonSet CRD."),
  serviceAccountName: str("ServiceAccount of the controller."),
  deploymentName: str("Name of the controller Deployment."),
};

// The policy arguments take the spec's own types, so each language checks their fields.
const fleetPolicyInputs = {
  idle: {
    ...typeRef("IdleSpec"),
    description:
      "The idle policy, the CocoonSet's `spec.idle` (here or in `spec`, not both): a sub-agent or toolbox without activity for `after` is hibernated and woken by its next activity; a fleet idle as a whole is suspended. Changing it alone changes no slot. Default: none.",
  },
  expiry: {
    ...typeRef("ExpirySpec"),
    description:
      "The expiry, the CocoonSet's `spec.expiry` (here or in `spec`, not both): `after` the fleet's creation (or its last activity, with `since: idle`) it is suspended or deleted (`action`). Changing it alone changes no slot. Default: none.",
  },
  hooks: {
    ...typeRef("HooksSpec"),
    description:
      "Lifecycle hooks, the CocoonSet's `spec.hooks` (here or in `spec`, not both): the controller POSTs an event to `url` around each hibernate, wake and expiry. A `url` holding credentials makes the Fleet keep its spec as a secret. Default: none.",
  },
} satisfies Pick<Record<keyof FleetArgs, Property>, "idle" | "expiry" | "hooks">;

// Keyed by every Fleet argument, as the Operator's above.
const fleetInputs: Record<keyof FleetArgs, Property> = {
  namespace: str("Namespace of the CocoonSet (it must exist)."),
  name: str("Name of the CocoonSet. Default: the resource name."),
  spec: {
    ...typeRef("CocoonSetSpec"),
    description:
      "The CocoonSet spec (`agent`, `toolboxes`, ...), as in the CocoonSet CRD; validated by the provider.",
  },
  operator: {
    $ref: "#/resources/cocoonset:index:Operator",
    description:
      "The Operator whose CRD and controller this fleet uses; the fleet is destroyed before it.",
  },
  kubeconfig: secretKubeconfig("the slots resource"),
  fanOut: int("Sub-agent creates in flight during `pulumi up`. Default 8."),
  timeoutSeconds: int(
    "How long `pulumi up` waits for the fleet, in seconds: the main agent, the fan-out, then every member the spec asks to run to be Ready; on timeout `up` fails naming each member that is not Ready and why. Default 300.",
  ),
  skipAwait: bool(
    "Return from `pulumi up` once the pods are created, without waiting for every sub-agent and toolbox to be Ready (the outputs then say what was Ready at that moment). Changing it alone changes no slot. Default false.",
  ),
  releaseTimeoutSeconds: int(
    "How long `pulumi destroy` waits for the fleet's tree to be gone, in seconds. Default 120.",
  ),
  registry: str(
    "Snapshot registry of the VMs, `host[:port][/prefix]`: `pulumi up` acts on `spec.suspend` and `destroy` drops the snapshot tags. Default: the `ociRegistry` of the `operator` (with its `ociRegistryCa` and `ociRegistryInsecure`), if any.",
  ),
  registryCa: str("PEM CA bundle trusted for the registry's https, besides the system's roots."),
  registryInsecure: bool("Plain http to a `registry` host that is not loopback. Default false."),
  registryCredentials: {
    type: "object",
    additionalProperties: { type: "string" },
    secret: true,
    description:
      "The registry's credentials, kept as a secret: `username` and `password`, or `identityToken`. Default: the Docker keychain of the machine that runs `pulumi`.",
  },
  suspendTimeoutSeconds: int(
    "How long `pulumi up` waits for a suspend (phase Suspended) or a wake (every VM up), in seconds. Default 300.",
  ),
  adoptCocoonSet: bool(
    "Take over a CocoonSet of the same name that no Fleet created (applied with kubectl or another tool): this stack then manages it and `pulumi destroy` deletes it. Without it such a CocoonSet is refused. Default false.",
  ),
  capacityCheck: {
    type: "string",
    description:
      'What `pulumi preview` (and `up`, before any pod) does when the capacity forecast says a node would refuse pods this deploy creates: `"refuse"` fails naming the node, the figures and the slots; `"warn"` prints the same lines as warnings and `up` goes on; `"off"` lists no node or pod. Default "refuse" (`"warn"` is for nodes the forecast cannot see as they will be, e.g. an autoscaled pool). Changing it alone changes no slot.',
  },
  ...fleetPolicyInputs,
};

const fleetOutputs: Record<string, Property> = {
  cocoonSetName: str("Name of the CocoonSet."),
  cocoonSetUid: str("uid of the CocoonSet."),
  podNames: stringMap('Pod name of each slot ("0" is the main agent; toolboxes by name).'),
  podPhases: stringMap("Phase of each slot's pod."),
  mainVmName: str("VM name of the main agent."),
  phase: str(
    "The CocoonSet's phase after the last `pulumi up` (`Running`, `Suspended`, ...): `Running` once `up` returns, unless `skipAwait`.",
  ),
  status: {
    ...typeRef("CocoonSetStatus"),
    description:
      "The CocoonSet's status after the last `pulumi up` (readyAgents, desiredAgents, readyToolboxes, desiredToolboxes, agents, toolboxes, conditions).",
  },
};

/** An engine-backed resource: created by the components, not meant to be declared by hand. */
function engineResource(description: string, inputs: Record<string, Property>) {
  return {
    description: `${description} Created by the components; not meant to be declared directly.`,
    inputProperties: inputs,
    properties: inputs,
  };
}

/** The package schema at `version`. */
export function packageSchema(version: string) {
  return {
    name: "cocoonset",
    displayName: "CocoonSet",
    version,
    description:
      "Fleets of AI agents (CocoonSets) on Kubernetes: the Operator and Fleet components.",
    license: "Apache-2.0",
    keywords: ["kubernetes", "category/cloud", "kind/component"],
    config: {},
    provider: {},
    types: crdTypes.types,
    language: {
      nodejs: { packageName: "@cocoonset/pulumi-cocoonset" },
      python: { packageName: "pulumi_cocoonset" },
      go: { importBasePath: "github.com/cocoonstack/pulumi-cocoonset/sdk/go/cocoonset" },
    },
    resources: {
      "cocoonset:index:Operator": {
        isComponent: true,
        description: "The CocoonSet CRD and its controller, once per cluster.",
        inputProperties: operatorInputs,
        properties: operatorOutputs,
        required: Object.keys(operatorOutputs),
      },
      "cocoonset:index:Fleet": {
        isComponent: true,
        description:
          "One agent fleet: a CocoonSet whose slots `pulumi up` materialises and `destroy` releases.",
        inputProperties: fleetInputs,
        requiredInputs: ["namespace", "spec"],
        properties: fleetOutputs,
        required: Object.keys(fleetOutputs),
      },
      "cocoonset:index:Slots": engineResource("The sub-agent slots of one CocoonSet.", {
        kubeconfig: { type: "string", secret: true },
        ...kubeconfigSource,
        namespace: { type: "string" },
        name: { type: "string" },
        uid: { type: "string" },
        spec: any("The CocoonSet spec."),
        slots: any("The desired slots, keyed by slot number or toolbox name."),
        pods: any("Per slot: pod name, uid, phase and readiness."),
        mainVmName: { type: "string" },
        providerVersion: { type: "string" },
        fanOut: { type: "integer" },
        timeoutSeconds: { type: "integer" },
        releaseTimeoutSeconds: { type: "integer" },
        registry: { type: "string" },
        registryCa: { type: "string" },
        registryInsecure: { type: "boolean" },
        registryCredentials: {
          type: "object",
          additionalProperties: { type: "string" },
          secret: true,
        },
        suspendTimeoutSeconds: { type: "integer" },
        phase: { type: "string" },
        status: any("The CocoonSet's status after the last `pulumi up`."),
        checkNamespace: { type: "boolean" },
        capacityCheck: { type: "string" },
        ownerToken: { type: "string" },
        registryCredentialsSecret: { type: "string" },
        skipAwait: { type: "boolean" },
      }),
      "cocoonset:index:OperatorGuard": engineResource("One Operator per cluster.", {
        kubeconfig: { type: "string", secret: true },
        ...kubeconfigSource,
        owner: { type: "string" },
        adoptCrd: { type: "string" },
        requiredNamespaces: any("Namespaces the Operator needs and does not create."),
        ownerToken: { type: "string" },
        objects: any("The Operator's objects, in the order its delete removes them."),
        retain: { type: "string" },
      }),
      "cocoonset:index:ControllerRollout": engineResource(
        "The rollout check of the controller Deployment.",
        {
          kubeconfig: { type: "string", secret: true },
          namespace: { type: "string" },
          deployment: { type: "string" },
          image: { type: "string" },
          generation: { type: "integer" },
          timeoutSeconds: { type: "integer" },
        },
      ),
      "cocoonset:index:FleetGuard": engineResource(
        "A Fleet creates its CocoonSet or refuses one that another Fleet, or no stack, created.",
        {
          kubeconfig: { type: "string", secret: true },
          namespace: { type: "string" },
          name: { type: "string" },
          ...kubeconfigSource,
          owner: { type: "string" },
          adopt: { type: "boolean" },
          requireCrd: { type: "boolean" },
          ownerToken: { type: "string" },
          spec: any("The CocoonSet spec."),
          fanOut: { type: "integer" },
          capacityCheck: { type: "string" },
        },
      ),
      "cocoonset:index:ArgumentsRefusal": engineResource(
        "A component's refused arguments: its check fails with one failure per property, so nothing is deployed.",
        {
          component: { type: "string" },
          problems: any("Each refused argument: its property path and the rule it breaks."),
        },
      ),
      "cocoonset:index:CrdGuard": engineResource(
        "Refuses to delete the CRD while CocoonSets are left.",
        {
          kubeconfig: { type: "string", secret: true },
          ...kubeconfigSource,
          owner: { type: "string" },
          retain: { type: "string" },
          providerVersion: { type: "string" },
          ownerToken: { type: "string" },
        },
      ),
    },
  };
}
