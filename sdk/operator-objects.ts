/**
 * The Kubernetes objects of an Operator, built from its (checked) arguments by a pure
 * function: the CRDs, the controller's namespace, ServiceAccount, RBAC, the registry CA
 * ConfigMap and the Deployment. The `Operator` component (sdk/operator.ts) registers them as
 * Pulumi resources; `cocoonset manifests` (cli/manifests-command.ts) prints them as YAML for
 * GitOps. One source, so both install the same objects.
 *
 * Only type imports from the Pulumi packages: the CLI loads this module without them.
 */
import type { RequiredKind } from "../provider/dynamic/namespace-check.js";
import type { ObjectRef } from "../provider/dynamic/ownership.js";
import type * as k8s from "@pulumi/kubernetes";
import { createRequire } from "node:module";
import type { OperatorArgs } from "./operator-args.js";
import {
  DEFAULT_CONCURRENCY,
  DEFAULT_LEADER_ELECT,
  DEFAULT_REAP_INTERVAL,
} from "../controller/options.js";
import { DEFAULT_LOG_LEVEL } from "../controller/logger.js";
import {
  controllerRules,
  leaderElectionRules,
  namespacedRules,
  type PolicyRule,
} from "../controller/rbac.js";
import {
  CONTROLLER_UID,
  defaultControllerImage,
  deploymentControllerArgs,
  REGISTRY_AUTH_DIR,
  REGISTRY_CA_DIR,
  METRICS_PORT,
  PROBE_PORT,
} from "../controller/image.js";
import crdJson from "../engine/spec/generated/crd.json" with { type: "json" };
import hibernationCrdJson from "../engine/spec/generated/hibernation-crd.json" with { type: "json" };
import { DEFAULT_FANOUT, OPERATOR_LABELS } from "../engine/spec/constants.js";

const require = createRequire(import.meta.url);
const pkg = require("../../package.json") as { version: string };

/** Label every object of the operator carries. */

/** The Prometheus Operator's CRD that serves `monitoring.coreos.com/v1` ServiceMonitors. */
export const SERVICE_MONITOR_CRD = "servicemonitors.monitoring.coreos.com";

/**
 * The kinds among the objects that the cluster serves only with another project's CRD (the
 * ServiceMonitor), by the argument that asks for them: the install guard's check refuses
 * `preview` and `up` when the cluster does not serve one.
 */
export function requiredKinds(objects: Pick<OperatorObjects, "serviceMonitor">): RequiredKind[] {
  if (!objects.serviceMonitor) return [];
  const { apiVersion, kind } = objects.serviceMonitor.object;
  return [
    {
      field: "serviceMonitor",
      apiVersion,
      kind,
      crd: SERVICE_MONITOR_CRD,
      hint: "install the Prometheus Operator (or its CRDs) first, or leave `serviceMonitor` off (`metricsService: true` makes the Service alone)",
    },
  ];
}
export { OPERATOR_LABELS };

/** Label on every controller pod of a sharded Operator (its name): the metrics Service's selector. */
const CONTROLLER_LABEL = "cocoonset.cocoonstack.io/controller";

/** `metadata` of the objects built here. */
export interface ObjectMeta {
  name: string;
  namespace?: string;
  labels: Record<string, string>;
  annotations?: Record<string, string>;
}

/** An object and the Pulumi resource name the Operator registers it under. */
export interface Named<T> {
  resourceName: string;
  object: T;
}

type CrdSpec = k8s.types.input.apiextensions.v1.CustomResourceDefinitionSpec;

/** A CustomResourceDefinition (the generated schema). */
export interface CrdObject {
  apiVersion: "apiextensions.k8s.io/v1";
  kind: "CustomResourceDefinition";
  metadata: ObjectMeta;
  spec: CrdSpec;
}

interface RoleOf<K extends "ClusterRole" | "Role"> {
  apiVersion: "rbac.authorization.k8s.io/v1";
  kind: K;
  metadata: ObjectMeta;
  rules: PolicyRule[];
}
interface BindingOf<K extends "ClusterRoleBinding" | "RoleBinding"> {
  apiVersion: "rbac.authorization.k8s.io/v1";
  kind: K;
  metadata: ObjectMeta;
  roleRef: { apiGroup: "rbac.authorization.k8s.io"; kind: "ClusterRole" | "Role"; name: string };
  subjects: { kind: "ServiceAccount"; name: string; namespace: string }[];
}

/** One RBAC object: a (Cluster)Role with its rules or a (Cluster)RoleBinding. */
export type RbacObject =
  | RoleOf<"ClusterRole">
  | RoleOf<"Role">
  | BindingOf<"ClusterRoleBinding">
  | BindingOf<"RoleBinding">;

/** Everything an Operator installs in the cluster, in the order a `kubectl apply` wants it. */
export interface OperatorObjects {
  /** Absent with `createNamespace: false`. */
  namespace?: Named<{ apiVersion: "v1"; kind: "Namespace"; metadata: ObjectMeta }>;
  crd: Named<CrdObject>;
  hibernationCrd: Named<CrdObject>;
  serviceAccount: Named<{ apiVersion: "v1"; kind: "ServiceAccount"; metadata: ObjectMeta }>;
  /** Roles before the bindings that name them. */
  rbac: Named<RbacObject>[];
  /** The registry's CA bundle, with `ociRegistryCa`. */
  registryCa?: Named<{
    apiVersion: "v1";
    kind: "ConfigMap";
    metadata: ObjectMeta;
    data: Record<string, string>;
  }>;
  deployment: Named<{
    apiVersion: "apps/v1";
    kind: "Deployment";
    metadata: ObjectMeta;
    spec: k8s.types.input.apps.v1.DeploymentSpec;
  }>;
  /**
   * Shards 1 to N-1 of a controller in `shards`, each its own Deployment (and PodDisruptionBudget
   * when `replicas` > 1); `deployment` is shard 0.
   */
  shardDeployments?: {
    deployment: OperatorObjects["deployment"];
    podDisruptionBudget?: OperatorObjects["podDisruptionBudget"];
  }[];
  /** The metrics port's Service, with `metricsService` or `serviceMonitor`. */
  metricsService?: Named<{
    apiVersion: "v1";
    kind: "Service";
    metadata: ObjectMeta;
    spec: {
      selector: Record<string, string>;
      ports: { name: string; port: number; targetPort: string; protocol: "TCP" }[];
    };
  }>;
  /** The Prometheus Operator's ServiceMonitor of that Service, with `serviceMonitor`. */
  serviceMonitor?: Named<{
    apiVersion: "monitoring.coreos.com/v1";
    kind: "ServiceMonitor";
    metadata: ObjectMeta;
    spec: {
      selector: { matchLabels: Record<string, string> };
      endpoints: { port: string; path: string }[];
    };
  }>;
  /** At most one controller pod evicted at a time, when `replicas` > 1. */
  podDisruptionBudget?: Named<{
    apiVersion: "policy/v1";
    kind: "PodDisruptionBudget";
    metadata: ObjectMeta;
    spec: { minAvailable: number; selector: { matchLabels: Record<string, string> } };
  }>;
}

/** The controller's namespace for these arguments. */
export function operatorNamespace(args: OperatorArgs): string {
  return args.namespace ?? "cocoonset-system";
}

/** The controller image for these arguments (`image`, else the package version's default). */
export function operatorImage(args: OperatorArgs): NonNullable<OperatorArgs["image"]> {
  return args.image ?? defaultControllerImage(pkg.version);
}

/**
 * The objects in apply order (namespace, CRDs, ServiceAccount, RBAC, ConfigMap, the
 * Deployments, then the metrics Service, ServiceMonitor and PodDisruptionBudgets).
 */
export function operatorObjectList(o: OperatorObjects): Named<{ kind: string }>[] {
  return [
    ...(o.namespace ? [o.namespace] : []),
    o.crd,
    o.hibernationCrd,
    o.serviceAccount,
    ...o.rbac,
    ...(o.registryCa ? [o.registryCa] : []),
    o.deployment,
    ...(o.shardDeployments ?? []).map((s) => s.deployment),
    ...(o.metricsService ? [o.metricsService] : []),
    ...(o.serviceMonitor ? [o.serviceMonitor] : []),
    ...(o.podDisruptionBudget ? [o.podDisruptionBudget] : []),
    ...(o.shardDeployments ?? []).flatMap((s) =>
      s.podDisruptionBudget ? [s.podDisruptionBudget] : [],
    ),
  ];
}

/**
 * The objects in the order the Operator's install guard deletes them at destroy: the reverse of
 * apply order, the CRDs last (the CocoonSet CRD after the CocoonHibernation one), so the
 * controller is gone before its RBAC and namespace, and nothing is deleted with a CRD.
 */
export function teardownOrder(o: OperatorObjects): ObjectRef[] {
  const list = operatorObjectList(o) as Named<{
    apiVersion: string;
    kind: string;
    metadata: ObjectMeta;
  }>[];
  const refs = list.reverse().map(({ object: { apiVersion, kind, metadata } }) => ({
    apiVersion,
    kind,
    name: metadata.name,
    ...(metadata.namespace ? { namespace: metadata.namespace } : {}),
  }));
  const isCrd = (r: ObjectRef) => r.kind === "CustomResourceDefinition";
  return [...refs.filter((r) => !isCrd(r)), ...refs.filter(isCrd)];
}

const crd = (c: { metadata: { name: string }; spec: CrdSpec }, resourceName: string) => ({
  resourceName,
  object: {
    apiVersion: "apiextensions.k8s.io/v1" as const,
    kind: "CustomResourceDefinition" as const,
    metadata: { name: c.metadata.name, labels: OPERATOR_LABELS },
    spec: c.spec,
  },
});

/** What every object of one Operator is built from: its name, namespace and labels. */
interface Base {
  name: string;
  args: OperatorArgs;
  ns: string;
  labels: Record<string, string>;
  saName: string;
}

/**
 * The objects of the Operator `name` with these arguments, which must have passed
 * `operatorArgumentProblems` (sdk/operator-args.ts). Pure: the same arguments give the same
 * objects, and nothing is registered or sent.
 */
export function operatorObjects(name: string, args: OperatorArgs = {}): OperatorObjects {
  const ns = operatorNamespace(args);
  const labels = { ...OPERATOR_LABELS, "app.kubernetes.io/name": `${name}-controller` };
  const b: Base = { name, args, ns, labels, saName: `${name}-controller` };
  const registryCa = registryCaObject(b);
  const deployment = deploymentObject(b, 0, registryCa);
  const metricsService = metricsServiceObject(b);
  const serviceMonitor = serviceMonitorObject(b);
  const podDisruptionBudget = podDisruptionBudgetObject(b, 0);
  const shardDeployments = Array.from({ length: (args.shards ?? 1) - 1 }, (_, k) => {
    const pdb = podDisruptionBudgetObject(b, k + 1);
    return {
      deployment: deploymentObject(b, k + 1, registryCa),
      ...(pdb ? { podDisruptionBudget: pdb } : {}),
    };
  });
  const namespace = args.createNamespace === false ? undefined : namespaceObject(b);
  return {
    ...(namespace ? { namespace } : {}),
    crd: crd(crdJson, `${name}-crd`),
    hibernationCrd: crd(hibernationCrdJson, `${name}-hibernation-crd`),
    serviceAccount: {
      resourceName: `${name}-sa`,
      object: {
        apiVersion: "v1",
        kind: "ServiceAccount",
        metadata: { name: b.saName, namespace: ns, labels },
      },
    },
    rbac: rbacObjects(b),
    ...(registryCa ? { registryCa } : {}),
    deployment,
    ...(shardDeployments.length > 0 ? { shardDeployments } : {}),
    ...(metricsService ? { metricsService } : {}),
    ...(serviceMonitor ? { serviceMonitor } : {}),
    ...(podDisruptionBudget ? { podDisruptionBudget } : {}),
  };
}

function namespaceObject(b: Base): NonNullable<OperatorObjects["namespace"]> {
  return {
    resourceName: `${b.name}-ns`,
    object: {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: b.ns, labels: OPERATOR_LABELS },
    },
  };
}

/** The controller's leader election, on unless `leaderElect: false`. */
const leaderElects = (args: OperatorArgs) => args.leaderElect ?? DEFAULT_LEADER_ELECT;

function role(
  resourceName: string,
  kind: "ClusterRole" | "Role",
  metadata: ObjectMeta,
  rules: PolicyRule[],
): Named<RbacObject> {
  return {
    resourceName,
    object: { apiVersion: "rbac.authorization.k8s.io/v1", kind, metadata, rules },
  };
}

/** The binding of the role of that kind and metadata to the controller's ServiceAccount. */
function binding(
  resourceName: string,
  kind: "ClusterRole" | "Role",
  metadata: ObjectMeta,
  subject: { kind: "ServiceAccount"; name: string; namespace: string },
): Named<RbacObject> {
  return {
    resourceName,
    object: {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: kind === "Role" ? "RoleBinding" : "ClusterRoleBinding",
      metadata,
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind, name: metadata.name },
      subjects: [subject],
    },
  };
}

/**
 * The RBAC objects, each role before its binding: a ClusterRole (and a Lease Role in the
 * controller's namespace) when the controller watches every namespace, else a Role per
 * watched namespace (and the Lease rules in the controller's own).
 */
function rbacObjects(b: Base): Named<RbacObject>[] {
  const { name, ns, labels } = b;
  const watch = b.args.watchNamespaces ?? [];
  const leaderElect = leaderElects(b.args);
  const subject = { kind: "ServiceAccount" as const, name: b.saName, namespace: ns };
  // `*` in the suffix: "role" in the role's resource name, "binding" in the binding's.
  const pair = (
    suffix: string,
    kind: "ClusterRole" | "Role",
    meta: ObjectMeta,
    rules: PolicyRule[],
  ) => [
    role(`${name}-${suffix.replace("*", "role")}`, kind, meta, rules),
    binding(`${name}-${suffix.replace("*", "binding")}`, kind, meta, subject),
  ];
  if (watch.length === 0) {
    const meta = { name: `${name}-cocoonset-controller`, labels };
    // Leases only in the controller's own namespace, where its leader election runs.
    const leaseMeta = { name: `${name}-cocoonset-controller-lease`, namespace: ns, labels };
    return [
      ...pair("*", "ClusterRole", meta, controllerRules()),
      ...(leaderElect ? pair("lease-*", "Role", leaseMeta, leaderElectionRules()) : []),
    ];
  }
  return [...new Set([...watch, ...(leaderElect ? [ns] : [])])].flatMap((w) => {
    const rules = [
      ...(watch.includes(w) ? namespacedRules() : []),
      ...(leaderElect && w === ns ? leaderElectionRules() : []),
    ];
    const meta = { name: `${name}-cocoonset-controller`, namespace: w, labels };
    return pair(`*-${w}`, "Role", meta, rules);
  });
}

/** The registry's CA bundle reaches the controller as a mounted ConfigMap. */
function registryCaObject(b: Base): OperatorObjects["registryCa"] {
  const ca = b.args.ociRegistry?.trim() ? b.args.ociRegistryCa : undefined;
  if (!ca) return undefined;
  return {
    resourceName: `${b.name}-registry-ca`,
    object: {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: `${b.name}-registry-ca`, namespace: b.ns, labels: b.labels },
      data: { "ca.crt": ca },
    },
  };
}

/** The controller's command line (without the shard). */
function controllerArgs(b: Base): string[] {
  const { args, ns } = b;
  const ociRegistry = args.ociRegistry?.trim();
  return deploymentControllerArgs({
    leaderElect: leaderElects(args),
    // The Lease Role is in this namespace: the controller elects its leader there.
    leaderElectionNamespace: ns,
    concurrency: args.concurrency ?? DEFAULT_CONCURRENCY,
    fanoutConcurrency: args.fanoutConcurrency ?? DEFAULT_FANOUT,
    reapInterval: args.reapInterval ?? DEFAULT_REAP_INTERVAL,
    logLevel: args.logLevel ?? DEFAULT_LOG_LEVEL,
    watchNamespaces: args.watchNamespaces ?? [],
    ociRegistry,
    ociRegistryCaFile: ociRegistry && args.ociRegistryCa ? `${REGISTRY_CA_DIR}/ca.crt` : undefined,
    ociRegistryInsecure: ociRegistry ? args.ociRegistryInsecure : undefined,
    hibernateTimeout: args.hibernateTimeout?.trim(),
    wakeTimeout: args.wakeTimeout?.trim(),
  });
}

/** The controller container's volumes and their mounts: the registry's CA and credentials. */
function registryVolumes(b: Base, registryCa: OperatorObjects["registryCa"]) {
  const credentials = b.args.ociRegistry?.trim() ? b.args.ociRegistryCredentialsSecret : undefined;
  const volumes = [
    ...(registryCa
      ? [{ name: "registry-ca", configMap: { name: registryCa.object.metadata.name } }]
      : []),
    ...(credentials
      ? [
          {
            name: "registry-auth",
            secret: {
              secretName: credentials,
              items: [{ key: ".dockerconfigjson", path: "config.json" }],
            },
          },
        ]
      : []),
  ];
  const mounts = [
    ...(registryCa ? [{ name: "registry-ca", mountPath: REGISTRY_CA_DIR, readOnly: true }] : []),
    ...(credentials
      ? [{ name: "registry-auth", mountPath: REGISTRY_AUTH_DIR, readOnly: true }]
      : []),
  ];
  return { volumes, mounts, credentials };
}

/**
 * Shard `i`'s name: shard 0 keeps the unsharded names (a Deployment's selector cannot change).
 */
const shardName = (b: Base, i: number) =>
  i === 0 ? `${b.name}-controller` : `${b.name}-controller-shard-${i}`;

/** Shard `i`'s pods' labels: every shard's carry the label the metrics Service selects. */
const shardLabels = (b: Base, i: number) => ({
  ...b.labels,
  "app.kubernetes.io/name": shardName(b, i),
  ...((b.args.shards ?? 1) > 1 ? { [CONTROLLER_LABEL]: b.name } : {}),
});

/** The Deployment of shard `i` (shard 0: the controller's, when unsharded). */
function deploymentObject(
  b: Base,
  i: number,
  registryCa: OperatorObjects["registryCa"],
): OperatorObjects["deployment"] {
  const name = shardName(b, i);
  return {
    resourceName: name,
    object: {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name, namespace: b.ns, labels: shardLabels(b, i) },
      spec: {
        replicas: b.args.replicas ?? 1,
        selector: { matchLabels: { "app.kubernetes.io/name": name } },
        template: {
          metadata: { labels: shardLabels(b, i) },
          spec: podSpec(b, i, registryCa),
        },
      },
    },
  };
}

/** The controller pod of shard `i`. */
function podSpec(b: Base, i: number, registryCa: OperatorObjects["registryCa"]) {
  const { args } = b;
  const { volumes, mounts, credentials } = registryVolumes(b, registryCa);
  const shards = args.shards ?? 1;
  const cliArgs = controllerArgs(b);
  return {
    serviceAccountName: b.saName,
    imagePullSecrets: args.imagePullSecrets?.map((name) => ({ name })),
    nodeSelector: args.nodeSelector,
    tolerations: args.tolerations,
    priorityClassName: args.priorityClassName,
    securityContext: {
      runAsNonRoot: true,
      runAsUser: CONTROLLER_UID,
      seccompProfile: { type: "RuntimeDefault" },
    },
    containers: [
      {
        name: "controller",
        image: operatorImage(args),
        imagePullPolicy: args.imagePullPolicy,
        args: shards > 1 ? [...cliArgs, `--shard=${i}/${shards}`] : cliArgs,
        env: [
          { name: "POD_NAMESPACE", valueFrom: { fieldRef: { fieldPath: "metadata.namespace" } } },
          { name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
          // The registry's credentials: the Docker keychain reads $DOCKER_CONFIG/config.json.
          ...(credentials ? [{ name: "DOCKER_CONFIG", value: REGISTRY_AUTH_DIR }] : []),
        ],
        ports: [
          { name: "metrics", containerPort: METRICS_PORT },
          { name: "probes", containerPort: PROBE_PORT },
        ],
        livenessProbe: { httpGet: { path: "/healthz", port: "probes" }, periodSeconds: 20 },
        readinessProbe: { httpGet: { path: "/readyz", port: "probes" }, periodSeconds: 10 },
        resources: args.resources ?? {
          requests: { cpu: "100m", memory: "128Mi" },
          limits: { memory: "512Mi" },
        },
        securityContext: {
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          capabilities: { drop: ["ALL"] },
        },
        ...(mounts.length > 0 ? { volumeMounts: mounts } : {}),
      },
    ],
    ...(volumes.length > 0 ? { volumes } : {}),
  };
}

/** The metrics port's Service, with `metricsService` or `serviceMonitor`. */
function metricsServiceObject(b: Base): OperatorObjects["metricsService"] {
  const { name, args } = b;
  if (args.metricsService !== true && args.serviceMonitor !== true) return undefined;
  const selector: Record<string, string> =
    (args.shards ?? 1) > 1
      ? { [CONTROLLER_LABEL]: name }
      : { "app.kubernetes.io/name": `${name}-controller` };
  const labels = { ...b.labels, "app.kubernetes.io/component": "metrics" };
  return {
    resourceName: `${name}-metrics`,
    object: {
      apiVersion: "v1",
      kind: "Service",
      metadata: { name: `${name}-controller-metrics`, namespace: b.ns, labels },
      spec: {
        selector,
        ports: [{ name: "metrics", port: METRICS_PORT, targetPort: "metrics", protocol: "TCP" }],
      },
    },
  };
}

/** The Prometheus Operator's ServiceMonitor of the metrics Service, with `serviceMonitor`. */
function serviceMonitorObject(b: Base): OperatorObjects["serviceMonitor"] {
  if (b.args.serviceMonitor !== true) return undefined;
  return {
    resourceName: `${b.name}-service-monitor`,
    object: {
      apiVersion: "monitoring.coreos.com/v1",
      kind: "ServiceMonitor",
      metadata: { name: `${b.name}-controller`, namespace: b.ns, labels: b.labels },
      spec: {
        selector: {
          matchLabels: {
            "app.kubernetes.io/name": `${b.name}-controller`,
            "app.kubernetes.io/component": "metrics",
          },
        },
        endpoints: [{ port: "metrics", path: "/metrics" }],
      },
    },
  };
}

/** Per shard, with `replicas` > 1: at most one of its pods evicted at a time, so it keeps its leader. */
function podDisruptionBudgetObject(b: Base, i: number): OperatorObjects["podDisruptionBudget"] {
  if ((b.args.replicas ?? 1) <= 1) return undefined;
  return {
    resourceName: i === 0 ? `${b.name}-pdb` : `${b.name}-pdb-shard-${i}`,
    object: {
      apiVersion: "policy/v1",
      kind: "PodDisruptionBudget",
      metadata: { name: shardName(b, i), namespace: b.ns, labels: b.labels },
      spec: {
        minAvailable: 1,
        selector: { matchLabels: { "app.kubernetes.io/name": shardName(b, i) } },
      },
    },
  };
}
