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
import { DEFAULT_CONCURRENCY, DEFAULT_REAP_INTERVAL } from "../controller/options.js";
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

/**
 * The objects of the Operator `name` with these arguments, which must have passed
 * `operatorArgumentProblems` (sdk/operator-args.ts). Pure: the same arguments give the same
 * objects, and nothing is registered or sent.
 */
export function operatorObjects(name: string, args: OperatorArgs = {}): OperatorObjects {
  const ns = operatorNamespace(args);
  const ociRegistry = args.ociRegistry?.trim();
  const ociRegistryCa = ociRegistry ? args.ociRegistryCa : undefined;
  const ociRegistryInsecure = ociRegistry ? args.ociRegistryInsecure : undefined;
  const credentials = ociRegistry ? args.ociRegistryCredentialsSecret : undefined;
  const watch = args.watchNamespaces ?? [];
  const leaderElect = args.leaderElect ?? true;
  const labels = { ...OPERATOR_LABELS, "app.kubernetes.io/name": `${name}-controller` };
  const saName = `${name}-controller`;
  const subject = { kind: "ServiceAccount" as const, name: saName, namespace: ns };
  const role = (
    resourceName: string,
    kind: "ClusterRole" | "Role",
    metadata: ObjectMeta,
    rules: PolicyRule[],
  ): Named<RbacObject> => ({
    resourceName,
    object: { apiVersion: "rbac.authorization.k8s.io/v1", kind, metadata, rules },
  });
  const binding = (
    resourceName: string,
    kind: "ClusterRole" | "Role",
    metadata: ObjectMeta,
  ): Named<RbacObject> => ({
    resourceName,
    object: {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: kind === "Role" ? "RoleBinding" : "ClusterRoleBinding",
      metadata,
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind, name: metadata.name },
      subjects: [subject],
    },
  });

  const rbac: Named<RbacObject>[] = [];
  if (watch.length === 0) {
    const meta = { name: `${name}-cocoonset-controller`, labels };
    rbac.push(
      role(`${name}-role`, "ClusterRole", meta, controllerRules()),
      binding(`${name}-binding`, "ClusterRole", meta),
    );
    // Leases only in the controller's own namespace, where its leader election runs.
    if (leaderElect) {
      const leaseMeta = { name: `${name}-cocoonset-controller-lease`, namespace: ns, labels };
      rbac.push(
        role(`${name}-lease-role`, "Role", leaseMeta, leaderElectionRules()),
        binding(`${name}-lease-binding`, "Role", leaseMeta),
      );
    }
  } else {
    for (const w of [...new Set([...watch, ...(leaderElect ? [ns] : [])])]) {
      const rules = [
        ...(watch.includes(w) ? namespacedRules() : []),
        ...(leaderElect && w === ns ? leaderElectionRules() : []),
      ];
      const meta = { name: `${name}-cocoonset-controller`, namespace: w, labels };
      rbac.push(
        role(`${name}-role-${w}`, "Role", meta, rules),
        binding(`${name}-binding-${w}`, "Role", meta),
      );
    }
  }

  const cliArgs = deploymentControllerArgs({
    leaderElect,
    // The Lease Role is in this namespace: the controller elects its leader there.
    leaderElectionNamespace: ns,
    concurrency: args.concurrency ?? DEFAULT_CONCURRENCY,
    fanoutConcurrency: args.fanoutConcurrency ?? DEFAULT_FANOUT,
    reapInterval: args.reapInterval ?? DEFAULT_REAP_INTERVAL,
    logLevel: args.logLevel ?? "info",
    watchNamespaces: watch,
    ociRegistry,
    ociRegistryCaFile: ociRegistryCa ? `${REGISTRY_CA_DIR}/ca.crt` : undefined,
    ociRegistryInsecure,
    hibernateTimeout: args.hibernateTimeout?.trim(),
    wakeTimeout: args.wakeTimeout?.trim(),
  });
  // The registry's CA bundle reaches the controller as a mounted ConfigMap.
  const registryCa = ociRegistryCa
    ? {
        resourceName: `${name}-registry-ca`,
        object: {
          apiVersion: "v1" as const,
          kind: "ConfigMap" as const,
          metadata: { name: `${name}-registry-ca`, namespace: ns, labels },
          data: { "ca.crt": ociRegistryCa },
        },
      }
    : undefined;

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
  const shards = args.shards ?? 1;
  // Shard 0 keeps the unsharded names (a Deployment's selector cannot change); every shard's
  // pods carry the controller label the metrics Service selects them all by.
  const shardName = (i: number) =>
    i === 0 ? `${name}-controller` : `${name}-controller-shard-${i}`;
  const shardLabels = (i: number) => ({
    ...labels,
    "app.kubernetes.io/name": shardName(i),
    ...(shards > 1 ? { [CONTROLLER_LABEL]: name } : {}),
  });
  const deploymentOf = (i: number): OperatorObjects["deployment"] => ({
    resourceName: shardName(i),
    object: {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: shardName(i), namespace: ns, labels: shardLabels(i) },
      spec: {
        replicas: args.replicas ?? 1,
        selector: { matchLabels: { "app.kubernetes.io/name": shardName(i) } },
        template: {
          metadata: { labels: shardLabels(i) },
          spec: {
            serviceAccountName: saName,
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
                  {
                    name: "POD_NAMESPACE",
                    valueFrom: { fieldRef: { fieldPath: "metadata.namespace" } },
                  },
                  { name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
                  // The registry's credentials: the Docker keychain reads $DOCKER_CONFIG/config.json.
                  ...(credentials ? [{ name: "DOCKER_CONFIG", value: REGISTRY_AUTH_DIR }] : []),
                ],
                ports: [
                  { name: "metrics", containerPort: METRICS_PORT },
                  { name: "probes", containerPort: PROBE_PORT },
                ],
                livenessProbe: {
                  httpGet: { path: "/healthz", port: "probes" },
                  periodSeconds: 20,
                },
                readinessProbe: {
                  httpGet: { path: "/readyz", port: "probes" },
                  periodSeconds: 10,
                },
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
          },
        },
      },
    },
  });
  const deployment = deploymentOf(0);

  const selector: Record<string, string> =
    shards > 1 ? { [CONTROLLER_LABEL]: name } : { "app.kubernetes.io/name": `${name}-controller` };
  const monitor = args.serviceMonitor === true;
  const metricsLabels = { ...labels, "app.kubernetes.io/component": "metrics" };
  const metricsService: OperatorObjects["metricsService"] =
    args.metricsService === true || monitor
      ? {
          resourceName: `${name}-metrics`,
          object: {
            apiVersion: "v1",
            kind: "Service",
            metadata: { name: `${name}-controller-metrics`, namespace: ns, labels: metricsLabels },
            spec: {
              selector,
              ports: [
                { name: "metrics", port: METRICS_PORT, targetPort: "metrics", protocol: "TCP" },
              ],
            },
          },
        }
      : undefined;
  const serviceMonitor: OperatorObjects["serviceMonitor"] = monitor
    ? {
        resourceName: `${name}-service-monitor`,
        object: {
          apiVersion: "monitoring.coreos.com/v1",
          kind: "ServiceMonitor",
          metadata: { name: `${name}-controller`, namespace: ns, labels },
          spec: {
            selector: {
              matchLabels: {
                "app.kubernetes.io/name": `${name}-controller`,
                "app.kubernetes.io/component": "metrics",
              },
            },
            endpoints: [{ port: "metrics", path: "/metrics" }],
          },
        },
      }
    : undefined;
  // Per shard: at most one of its pods evicted at a time, so each shard keeps its leader.
  const pdbOf = (i: number): OperatorObjects["podDisruptionBudget"] =>
    (args.replicas ?? 1) > 1
      ? {
          resourceName: i === 0 ? `${name}-pdb` : `${name}-pdb-shard-${i}`,
          object: {
            apiVersion: "policy/v1",
            kind: "PodDisruptionBudget",
            metadata: { name: shardName(i), namespace: ns, labels },
            spec: {
              minAvailable: 1,
              selector: { matchLabels: { "app.kubernetes.io/name": shardName(i) } },
            },
          },
        }
      : undefined;
  const podDisruptionBudget = pdbOf(0);
  const shardDeployments = Array.from({ length: shards - 1 }, (_, k) => {
    const pdb = pdbOf(k + 1);
    return { deployment: deploymentOf(k + 1), ...(pdb ? { podDisruptionBudget: pdb } : {}) };
  });

  return {
    ...(args.createNamespace === false
      ? {}
      : {
          namespace: {
            resourceName: `${name}-ns`,
            object: {
              apiVersion: "v1",
              kind: "Namespace",
              metadata: { name: ns, labels: OPERATOR_LABELS },
            },
          },
        }),
    crd: crd(crdJson, `${name}-crd`),
    hibernationCrd: crd(hibernationCrdJson, `${name}-hibernation-crd`),
    serviceAccount: {
      resourceName: `${name}-sa`,
      object: {
        apiVersion: "v1",
        kind: "ServiceAccount",
        metadata: { name: saName, namespace: ns, labels },
      },
    },
    rbac,
    ...(registryCa ? { registryCa } : {}),
    deployment,
    ...(shardDeployments.length > 0 ? { shardDeployments } : {}),
    ...(metricsService ? { metricsService } : {}),
    ...(serviceMonitor ? { serviceMonitor } : {}),
    ...(podDisruptionBudget ? { podDisruptionBudget } : {}),
  };
}
