/**
 * `cocoonset:index:Operator` — what a cluster needs once: the CocoonSet CRD, the
 * controller's namespace, ServiceAccount, RBAC and Deployment.
 */
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { createRequire } from "node:module";
import { DEFAULT_ROLLOUT_TIMEOUT_SECONDS } from "../provider/dynamic/controller-rollout.js";
import { INSTALLED_BY } from "../provider/dynamic/operator-guard.js";
import { kubeconfigInputs } from "./kubeconfig.js";
import { assertOperatorArguments, type OperatorArgs } from "./operator-args.js";
import { type ControllerRollout, CRD_GUARD_VERSION, type CrdGuard } from "./operator-resources.js";
import { resources } from "./resource-factory.js";
import { childOptions, componentOptions, operatorIgnoreChanges } from "./resource-options.js";
import { DEFAULT_CONCURRENCY } from "../controller/options.js";
import { controllerRules, leaderElectionRules, namespacedRules } from "../controller/rbac.js";
import {
  CONTROLLER_UID,
  defaultControllerImage,
  deploymentControllerArgs,
  REGISTRY_CA_DIR,
  METRICS_PORT,
  PROBE_PORT,
} from "../controller/image.js";
import crdJson from "../engine/spec/generated/crd.json" with { type: "json" };
import { DEFAULT_FANOUT, LABELS, MANAGED_BY as MANAGED_BY_VALUE } from "../engine/spec/index.js";

// The generated CRD, typed as the Kubernetes provider's input.
import hibernationCrdJson from "../engine/spec/generated/hibernation-crd.json" with { type: "json" };

// The CocoonHibernation CRD (per-pod hibernate and wake), installed beside the CocoonSet's.
const hibernationCrd: {
  metadata: { name: string };
  spec: k8s.types.input.apiextensions.v1.CustomResourceDefinitionSpec;
} = hibernationCrdJson;
const crd: {
  metadata: { name: string };
  spec: k8s.types.input.apiextensions.v1.CustomResourceDefinitionSpec;
} = crdJson;
export type { OperatorArgs };

const require = createRequire(import.meta.url);
const pkg = require("../../package.json") as { version: string };

/** Label every object of the operator carries. */
const MANAGED_BY = {
  [LABELS.managedBy]: MANAGED_BY_VALUE,
  "app.kubernetes.io/part-of": "cocoonset",
};

/**
 * The CocoonSet CRD and its controller. Install it once per cluster: the CRD carries the
 * installing Operator's `<project>/<stack>/<name>`, and an install guard makes `pulumi up`
 * of a second Operator fail with a message naming the first (a CRD with no stamp, applied
 * by hand, is adopted only when named in `adoptCrd`). Destroying the Operator deletes the
 * CRD, and fails instead while any CocoonSet is left; `retainCrdOnDelete` (and `adoptCrd`)
 * keep the CRD.
 */
export class Operator extends pulumi.ComponentResource {
  /** Namespace the controller runs in. */
  readonly namespace: pulumi.Output<string>;
  /** Name of the CocoonSet CRD. */
  readonly crdName: pulumi.Output<string>;
  /** ServiceAccount of the controller. */
  readonly serviceAccountName: pulumi.Output<string>;
  /** Name of the controller Deployment. */
  readonly deploymentName: pulumi.Output<string>;
  /** The snapshot registry the controller is given (`ociRegistry`), if any. */
  readonly ociRegistry?: string;
  /** The CA bundle of the snapshot registry (`ociRegistryCa`), if any. */
  readonly ociRegistryCa?: string;
  /** Whether the registry may be spoken to over plain http (`ociRegistryInsecure`). */
  readonly ociRegistryInsecure?: boolean;
  /** The CRD resource (Fleets depend on it). */
  readonly crd: k8s.apiextensions.v1.CustomResourceDefinition;
  /** The CocoonHibernation CRD resource (kept or adopted as the CocoonSet CRD is). */
  readonly hibernationCrd: k8s.apiextensions.v1.CustomResourceDefinition;
  /** The controller Deployment (Fleets depend on it, so they are destroyed first). */
  readonly deployment: k8s.apps.v1.Deployment;
  /** The rollout check of the controller Deployment (absent with `skipAwait`). */
  readonly rollout?: ControllerRollout;
  /**
   * Deleted before the CRD and the controller: fails the destroy while CocoonSets are left
   * (Fleets depend on it, so theirs are gone by then).
   */
  readonly crdGuard: CrdGuard;

  constructor(name: string, args: OperatorArgs = {}, opts: pulumi.ComponentResourceOptions = {}) {
    assertOperatorArguments(name, args); // before anything, the component included, registers
    const ignore = operatorIgnoreChanges(name, opts.ignoreChanges);
    super("cocoonset:index:Operator", name, {}, componentOptions(opts));
    const ns = args.namespace ?? "cocoonset-system";
    this.ociRegistry = args.ociRegistry?.trim();
    this.ociRegistryCa = this.ociRegistry ? args.ociRegistryCa : undefined;
    this.ociRegistryInsecure = this.ociRegistry ? args.ociRegistryInsecure : undefined;
    const watch = args.watchNamespaces ?? [];
    const leaderElect = args.leaderElect ?? true;
    const replicas = args.replicas ?? 1;
    const retain = args.adoptCrd
      ? "adopted: this Operator did not install it"
      : args.retainCrdOnDelete
        ? "retainCrdOnDelete"
        : "";
    // provider(s), protect and transforms reach the children through `parent`, and they
    // wait for the Operator's dependsOn; retainOnDelete and ignoreChanges are passed on here.
    const child = { parent: this, ...childOptions(opts) };
    const labels = { ...MANAGED_BY, "app.kubernetes.io/name": `${name}-controller` };

    const namespace =
      args.createNamespace === false
        ? undefined
        : new k8s.core.v1.Namespace(
            `${name}-ns`,
            { metadata: { name: ns, labels: MANAGED_BY } },
            child,
          );
    const inNs = namespace ? { ...child, dependsOn: [namespace] } : child;

    // One Operator per cluster: the guard fails `up` when another one stamped the CRD.
    const owner = `${pulumi.getProject()}/${pulumi.getStack()}/${name}`;
    const reach = kubeconfigInputs(this, args.kubeconfig);
    const kubeconfig = reach.kubeconfig;
    const guard = resources().operatorGuard(
      `${name}-guard`,
      {
        kubeconfig,
        owner,
        ...(args.adoptCrd ? { adoptCrd: args.adoptCrd } : {}),
        // Preview fails when a namespace the Operator needs but does not create is missing.
        requiredNamespaces: [
          ...(namespace ? [] : [{ field: "namespace", namespace: ns }]),
          ...watch
            .map((w, i) => ({ field: `watchNamespaces[${i}]`, namespace: w }))
            .filter((r) => !(namespace && r.namespace === ns)),
        ],
      },
      child,
    );
    this.crd = new k8s.apiextensions.v1.CustomResourceDefinition(
      `${name}-crd`,
      {
        metadata: {
          name: crd.metadata.name,
          labels: MANAGED_BY,
          annotations: { [INSTALLED_BY]: owner },
        },
        spec: crd.spec,
      },
      { ...child, dependsOn: [guard], ...(retain ? { retainOnDelete: true } : {}) },
    );
    this.hibernationCrd = new k8s.apiextensions.v1.CustomResourceDefinition(
      `${name}-hibernation-crd`,
      {
        metadata: {
          name: hibernationCrd.metadata.name,
          labels: MANAGED_BY,
          annotations: { [INSTALLED_BY]: owner },
        },
        spec: hibernationCrd.spec,
      },
      { ...child, dependsOn: [guard], ...(retain ? { retainOnDelete: true } : {}) },
    );

    const sa = new k8s.core.v1.ServiceAccount(
      `${name}-sa`,
      { metadata: { name: `${name}-controller`, namespace: ns, labels } },
      inNs,
    );
    const subject = { kind: "ServiceAccount", name: sa.metadata.name, namespace: ns };
    const rbac: pulumi.Resource[] = [];
    if (watch.length === 0) {
      const role = new k8s.rbac.v1.ClusterRole(
        `${name}-role`,
        { metadata: { name: `${name}-cocoonset-controller`, labels }, rules: controllerRules() },
        child,
      );
      rbac.push(
        role,
        new k8s.rbac.v1.ClusterRoleBinding(
          `${name}-binding`,
          {
            metadata: { name: `${name}-cocoonset-controller`, labels },
            roleRef: {
              apiGroup: "rbac.authorization.k8s.io",
              kind: "ClusterRole",
              name: role.metadata.name,
            },
            subjects: [subject],
          },
          child,
        ),
      );
      // Leases only in the controller's own namespace, where its leader election runs.
      if (leaderElect) {
        const leaseRole = new k8s.rbac.v1.Role(
          `${name}-lease-role`,
          {
            metadata: { name: `${name}-cocoonset-controller-lease`, namespace: ns, labels },
            rules: leaderElectionRules(),
          },
          inNs,
        );
        rbac.push(
          leaseRole,
          new k8s.rbac.v1.RoleBinding(
            `${name}-lease-binding`,
            {
              metadata: { name: `${name}-cocoonset-controller-lease`, namespace: ns, labels },
              roleRef: {
                apiGroup: "rbac.authorization.k8s.io",
                kind: "Role",
                name: leaseRole.metadata.name,
              },
              subjects: [subject],
            },
            inNs,
          ),
        );
      }
    } else {
      for (const w of [...new Set([...watch, ...(leaderElect ? [ns] : [])])]) {
        const rules = [
          ...(watch.includes(w) ? namespacedRules() : []),
          ...(leaderElect && w === ns ? leaderElectionRules() : []),
        ];
        const role = new k8s.rbac.v1.Role(
          `${name}-role-${w}`,
          { metadata: { name: `${name}-cocoonset-controller`, namespace: w, labels }, rules },
          inNs,
        );
        rbac.push(
          role,
          new k8s.rbac.v1.RoleBinding(
            `${name}-binding-${w}`,
            {
              metadata: { name: `${name}-cocoonset-controller`, namespace: w, labels },
              roleRef: {
                apiGroup: "rbac.authorization.k8s.io",
                kind: "Role",
                name: role.metadata.name,
              },
              subjects: [subject],
            },
            inNs,
          ),
        );
      }
    }

    const cliArgs = deploymentControllerArgs({
      leaderElect,
      // The Lease Role is in this namespace: the controller elects its leader there.
      leaderElectionNamespace: ns,
      concurrency: args.concurrency ?? DEFAULT_CONCURRENCY,
      fanoutConcurrency: args.fanoutConcurrency ?? DEFAULT_FANOUT,
      reapInterval: args.reapInterval ?? "5m",
      logLevel: args.logLevel ?? "info",
      watchNamespaces: watch,
      ociRegistry: args.ociRegistry?.trim(),
      ociRegistryCaFile: this.ociRegistryCa ? `${REGISTRY_CA_DIR}/ca.crt` : undefined,
      ociRegistryInsecure: this.ociRegistryInsecure,
      hibernateTimeout: args.hibernateTimeout?.trim(),
      wakeTimeout: args.wakeTimeout?.trim(),
    });
    const image = args.image ?? defaultControllerImage(pkg.version);
    // The registry's CA bundle reaches the controller as a mounted ConfigMap.
    const registryCa = this.ociRegistryCa
      ? new k8s.core.v1.ConfigMap(
          `${name}-registry-ca`,
          {
            metadata: { name: `${name}-registry-ca`, namespace: ns, labels },
            data: { "ca.crt": this.ociRegistryCa },
          },
          { ...inNs, dependsOn: namespace ? [namespace] : [] },
        )
      : undefined;
    this.deployment = new k8s.apps.v1.Deployment(
      `${name}-controller`,
      {
        metadata: {
          name: `${name}-controller`,
          namespace: ns,
          labels,
          // The rollout check below waits instead of the provider's generic await, so an
          // image the cluster cannot pull fails `up` at once with a message that says so.
          annotations: { "pulumi.com/skipAwait": "true" },
        },
        spec: {
          replicas,
          selector: { matchLabels: { "app.kubernetes.io/name": `${name}-controller` } },
          template: {
            metadata: { labels },
            spec: {
              serviceAccountName: sa.metadata.name,
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
                  image,
                  imagePullPolicy: args.imagePullPolicy,
                  args: cliArgs,
                  env: [
                    {
                      name: "POD_NAMESPACE",
                      valueFrom: { fieldRef: { fieldPath: "metadata.namespace" } },
                    },
                    { name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
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
                  ...(registryCa
                    ? {
                        volumeMounts: [
                          { name: "registry-ca", mountPath: REGISTRY_CA_DIR, readOnly: true },
                        ],
                      }
                    : {}),
                },
              ],
              ...(registryCa
                ? {
                    volumes: [
                      { name: "registry-ca", configMap: { name: registryCa.metadata.name } },
                    ],
                  }
                : {}),
            },
          },
        },
      },
      {
        ...inNs,
        dependsOn: [
          ...(namespace ? [namespace] : []),
          this.crd,
          this.hibernationCrd,
          ...rbac,
          ...(registryCa ? [registryCa] : []),
        ],
        ignoreChanges: ignore.deployment,
      },
    );

    if (!args.skipAwait) {
      this.rollout = resources().controllerRollout(
        `${name}-rollout`,
        {
          kubeconfig,
          namespace: ns,
          deployment: this.deployment.metadata.name,
          image,
          generation: this.deployment.metadata.generation,
          timeoutSeconds: args.rolloutTimeoutSeconds ?? DEFAULT_ROLLOUT_TIMEOUT_SECONDS,
        },
        { ...child, dependsOn: [this.deployment], ignoreChanges: ignore.rollout },
      );
    }

    // Depends on everything above, so its delete (the check) runs before any of it goes.
    this.crdGuard = resources().crdGuard(
      `${name}-crd-guard`,
      { ...reach, owner, retain, providerVersion: CRD_GUARD_VERSION },
      { ...child, dependsOn: [this.crd, this.deployment, ...rbac] },
    );

    this.namespace = pulumi.output(ns);
    this.crdName = this.crd.metadata.name;
    this.serviceAccountName = sa.metadata.name;
    this.deploymentName = this.deployment.metadata.name;
    this.registerOutputs({
      namespace: this.namespace,
      crdName: this.crdName,
      serviceAccountName: this.serviceAccountName,
      deploymentName: this.deploymentName,
    });
  }
}
