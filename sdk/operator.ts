/**
 * `cocoonset:index:Operator` — what a cluster needs once: the CocoonSet CRD, the
 * controller's namespace, ServiceAccount, RBAC and Deployment.
 */
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { DEFAULT_ROLLOUT_TIMEOUT_SECONDS } from "../provider/dynamic/controller-rollout.js";
import { INSTALLED_BY, OWNER_TOKEN } from "../provider/dynamic/ownership.js";
import { ArgumentsError } from "./arguments-error.js";
import { kubeconfigInputs } from "./kubeconfig.js";
import { operatorArgumentProblems, type OperatorArgs } from "./operator-args.js";
import {
  operatorImage,
  operatorNamespace,
  operatorObjects,
  requiredKinds,
  teardownOrder,
  type Named,
  type ObjectMeta,
  type RbacObject,
  type OperatorObjects,
} from "./operator-objects.js";
import { type ControllerRollout, CRD_GUARD_VERSION, type CrdGuard } from "./operator-resources.js";
import { resources } from "./resource-factory.js";
import {
  childAliases,
  childOptions,
  componentOptions,
  operatorIgnoreChanges,
} from "./resource-options.js";

export type { OperatorArgs };

/** Throws a clean (stack-less) program error listing every problem, if there is one. */
function assertOperatorArguments(name: string, args: OperatorArgs): void {
  const problems = operatorArgumentProblems(args);
  if (problems.length > 0) {
    throw new ArgumentsError(`Operator ${name}`, problems);
  }
}

/** The Pulumi resource of one RBAC object. */
function rbacResource(
  { resourceName, object }: Named<RbacObject>,
  opts: pulumi.CustomResourceOptions,
): pulumi.CustomResource {
  switch (object.kind) {
    case "ClusterRole":
      return new k8s.rbac.v1.ClusterRole(resourceName, object, opts);
    case "Role":
      return new k8s.rbac.v1.Role(resourceName, object, opts);
    case "ClusterRoleBinding":
      return new k8s.rbac.v1.ClusterRoleBinding(resourceName, object, opts);
    case "RoleBinding":
      return new k8s.rbac.v1.RoleBinding(resourceName, object, opts);
  }
}

/** The ownership token every object of one Operator carries. */
interface Token {
  token: pulumi.Output<string>;
  adopt: boolean;
}

/**
 * An object carrying the Operator's ownership token (and, for the CRDs, its name): the guards
 * act only on objects that carry their token. The token is an Output; the object types hold
 * plain strings, and Pulumi resolves Outputs at any depth of a resource's inputs.
 */
function owned<T extends { metadata: ObjectMeta }>(o: T, own: Token, installedBy?: string): T {
  return {
    ...o,
    metadata: {
      ...o.metadata,
      annotations: {
        ...o.metadata.annotations,
        ...(installedBy ? { [INSTALLED_BY]: installedBy } : {}),
        [OWNER_TOKEN]: own.token as unknown as string,
        // Adopting takes the objects over from their last field managers (another stack's
        // resources, or this program's under an old parent).
        ...(own.adopt ? { "pulumi.com/patchForce": "true" } : {}),
      },
    },
  };
}

/** Why the guards keep the CRD at destroy, or "" when they delete it. */
function retainReason(args: OperatorArgs): string {
  if (args.adoptCrd) return "adopted: this Operator did not install it";
  return args.retainCrdOnDelete ? "retainCrdOnDelete" : "";
}

/** The rollout check of each controller Deployment: shard 0's first. */
function registerRollouts(
  name: string,
  args: OperatorArgs,
  kubeconfig: ReturnType<typeof kubeconfigInputs>["kubeconfig"],
  deployments: { deployment: k8s.apps.v1.Deployment; shards: k8s.apps.v1.Deployment[] },
  optsOf: (resourceName: string) => pulumi.CustomResourceOptions,
): ControllerRollout[] {
  const rolloutOf = (resourceName: string, d: k8s.apps.v1.Deployment) =>
    resources().controllerRollout(
      resourceName,
      {
        kubeconfig,
        namespace: operatorNamespace(args),
        deployment: d.metadata.name,
        image: operatorImage(args),
        generation: d.metadata.generation,
        timeoutSeconds: args.rolloutTimeoutSeconds ?? DEFAULT_ROLLOUT_TIMEOUT_SECONDS,
      },
      { ...optsOf(resourceName), dependsOn: [d] },
    );
  return [
    rolloutOf(`${name}-rollout`, deployments.deployment),
    ...deployments.shards.map((d, k) => rolloutOf(`${name}-rollout-shard-${k + 1}`, d)),
  ];
}

/** The Operators this program has constructed so far, in order. */
const constructed: Operator[] = [];

/**
 * The Operators of this program constructed so far: a Fleet given no `operator` is still
 * destroyed before them (its CocoonSet depends on their CRD guards), so their CRD guard never
 * meets a CocoonSet the same destroy is about to delete.
 */
export function programOperators(): readonly Operator[] {
  return constructed;
}

/**
 * The CocoonSet CRD and its controller. Install it once per cluster: the CRD carries the
 * installing Operator's `<project>/<stack>/<name>`, and an install guard makes `pulumi up`
 * of a second Operator fail with a message naming the first (a CRD with no stamp, applied
 * by hand, is adopted only when named in `adoptCrd`). Destroying the Operator deletes the
 * CRD, and fails instead while any CocoonSet is left; `retainCrdOnDelete` (and `adoptCrd`)
 * keep the CRD.
 */
/** How the children of one Operator are registered. */
interface Children {
  objects: OperatorObjects;
  token: Token;
  /** `<project>/<stack>/<name>` of the Operator, stamped on its CRDs. */
  owner: string;
  /** A child's options: the given ones and the aliases its name inherits. */
  as: (resourceName: string, o: pulumi.CustomResourceOptions) => pulumi.CustomResourceOptions;
  /** The options of a cluster-scoped Kubernetes object: it waits for the install guard. */
  kube: pulumi.CustomResourceOptions;
  /** The options of a namespaced one: it also waits for the namespace. */
  inNs: pulumi.CustomResourceOptions;
  /** The install guard and the namespace (if the Operator creates it). */
  first: pulumi.Resource[];
}

/**
 * One object of the controller's namespace as its Kubernetes resource: the guard's token on
 * it, its name's aliases, after the guard and the namespace.
 */
function inNamespace<T extends { metadata: ObjectMeta }, R>(
  c: Children,
  kind: new (name: string, args: T, opts: pulumi.CustomResourceOptions) => R,
  named: { resourceName: string; object: T },
): R {
  return new kind(
    named.resourceName,
    owned(named.object, c.token),
    c.as(named.resourceName, c.inNs),
  );
}

/**
 * One Operator per cluster, and ownership by token: the install guard's check refuses, at
 * preview and before anything of the Operator is written in `up`, a CRD another Operator
 * holds. Every object depends on it, so a refused `up` has written nothing.
 */
function registerInstallGuard(
  name: string,
  args: OperatorArgs,
  objects: OperatorObjects,
  guard: { owner: string; reach: ReturnType<typeof kubeconfigInputs>; retain: string },
  opts: pulumi.CustomResourceOptions,
) {
  const ns = operatorNamespace(args);
  return resources().operatorGuard(
    `${name}-guard`,
    {
      ...guard.reach,
      owner: guard.owner,
      ...(args.adoptCrd ? { adoptCrd: args.adoptCrd } : {}),
      // Preview fails when a namespace the Operator needs but does not create is missing.
      requiredNamespaces: [
        ...(objects.namespace ? [] : [{ field: "namespace", namespace: ns }]),
        ...(args.watchNamespaces ?? [])
          .map((w, i) => ({ field: `watchNamespaces[${i}]`, namespace: w }))
          .filter((r) => !(objects.namespace && r.namespace === ns)),
      ],
      // Preview fails when the ServiceMonitor it asks for has no CRD to serve it.
      ...(objects.serviceMonitor ? { requiredKinds: requiredKinds(objects) } : {}),
      // Deleted after every object of the Operator, it deletes those that carry its token.
      objects: teardownOrder(objects),
      retain: guard.retain,
    },
    opts,
  );
}

/**
 * The RBAC objects. Cluster-scoped ones wait for nothing but the guard; namespaced ones for
 * the namespace; a binding also for the role it names.
 */
function registerRbac(c: Children): pulumi.Resource[] {
  const rbac: pulumi.Resource[] = [];
  const roles = new Map<string, pulumi.Resource>();
  for (const r of c.objects.rbac) {
    const o = r.object;
    const base = o.metadata.namespace ? c.inNs : c.kube;
    const role =
      "roleRef" in o
        ? roles.get(`${o.roleRef.kind}/${o.metadata.namespace ?? ""}/${o.roleRef.name}`)
        : undefined;
    const res = rbacResource(
      { ...r, object: owned(o, c.token) },
      c.as(r.resourceName, role ? { ...base, dependsOn: [...c.first, role] } : base),
    );
    if (!("roleRef" in o))
      roles.set(`${o.kind}/${o.metadata.namespace ?? ""}/${o.metadata.name}`, res);
    rbac.push(res);
  }
  return rbac;
}

/**
 * The registry's CA ConfigMap (if any) and the controller Deployments, shard 0 first, each
 * shard after it with its own disruption budget. They wait for everything they use.
 */
function registerDeployments(
  c: Children,
  uses: pulumi.Resource[],
  ignoreChanges: string[] | undefined,
): { deployment: k8s.apps.v1.Deployment; shards: k8s.apps.v1.Deployment[] } {
  const { objects } = c;
  const registryCa = objects.registryCa
    ? inNamespace(c, k8s.core.v1.ConfigMap, objects.registryCa)
    : undefined;
  const deploymentOf = (named: OperatorObjects["deployment"]) => {
    const d = owned(named.object, c.token);
    return new k8s.apps.v1.Deployment(
      named.resourceName,
      {
        ...d,
        metadata: {
          ...d.metadata,
          // The rollout check waits instead of the provider's generic await, so an image the
          // cluster cannot pull fails `up` at once with a message that says so.
          annotations: { ...d.metadata.annotations, "pulumi.com/skipAwait": "true" },
        },
      },
      {
        ...c.as(named.resourceName, c.inNs),
        dependsOn: [...c.first, ...uses, ...(registryCa ? [registryCa] : [])],
        ignoreChanges,
      },
    );
  };
  const deployment = deploymentOf(objects.deployment);
  const shards = (objects.shardDeployments ?? []).map((shard) => {
    if (shard.podDisruptionBudget)
      inNamespace(c, k8s.policy.v1.PodDisruptionBudget, shard.podDisruptionBudget);
    return deploymentOf(shard.deployment);
  });
  return { deployment, shards };
}

/**
 * The namespace (when the Operator creates it) and the options the Kubernetes objects share.
 * The Kubernetes resources never delete: the guard does, for the objects that still carry
 * its token. A resource moved under another parent, whose new resource took the object
 * over, must not delete it on its way out.
 */
function registerNamespace(
  args: OperatorArgs,
  objects: OperatorObjects,
  owner: string,
  guard: pulumi.Resource & { ownerToken: pulumi.Output<string> },
  as: Children["as"],
  child: pulumi.CustomResourceOptions,
): Children {
  const token = { token: guard.ownerToken, adopt: args.adoptCrd !== undefined };
  const kube = { ...child, retainOnDelete: true, dependsOn: [guard] };
  const namespace = objects.namespace
    ? new k8s.core.v1.Namespace(
        objects.namespace.resourceName,
        owned(objects.namespace.object, token),
        as(objects.namespace.resourceName, kube),
      )
    : undefined;
  const first = [guard, ...(namespace ? [namespace] : [])];
  return { objects, owner, token, as, kube, inNs: { ...kube, dependsOn: first }, first };
}

/** The metrics Service, its ServiceMonitor and shard 0's disruption budget, when asked for. */
function registerMetricsAndBudget(c: Children): void {
  const { objects } = c;
  const metricsService = objects.metricsService
    ? inNamespace(c, k8s.core.v1.Service, objects.metricsService)
    : undefined;
  if (objects.serviceMonitor) {
    new k8s.apiextensions.CustomResource(
      objects.serviceMonitor.resourceName,
      owned(objects.serviceMonitor.object, c.token),
      {
        ...c.as(objects.serviceMonitor.resourceName, c.inNs),
        dependsOn: [...c.first, ...(metricsService ? [metricsService] : [])],
      },
    );
  }
  if (objects.podDisruptionBudget)
    inNamespace(c, k8s.policy.v1.PodDisruptionBudget, objects.podDisruptionBudget);
}

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
    const objects = operatorObjects(name, args);
    this.ociRegistry = args.ociRegistry?.trim();
    this.ociRegistryCa = this.ociRegistry ? args.ociRegistryCa : undefined;
    this.ociRegistryInsecure = this.ociRegistry ? args.ociRegistryInsecure : undefined;
    const retain = retainReason(args);
    // provider(s), protect and transforms reach the children through `parent`, and they
    // wait for the Operator's dependsOn; retainOnDelete, ignoreChanges and the aliases that
    // follow the Operator's own are passed on here.
    const child = { parent: this, ...childOptions(opts) };
    const aliased = childAliases(name, "cocoonset:index:Operator", opts);
    const as = (resourceName: string, o: pulumi.CustomResourceOptions) => ({
      ...o,
      ...aliased(resourceName),
    });
    const owner = `${pulumi.getProject()}/${pulumi.getStack()}/${name}`;
    const reach = kubeconfigInputs(this, args.kubeconfig);
    const guard = registerInstallGuard(
      name,
      args,
      objects,
      { owner, reach, retain },
      as(`${name}-guard`, child),
    );
    const c = registerNamespace(args, objects, owner, guard, as, child);

    this.crd = new k8s.apiextensions.v1.CustomResourceDefinition(
      objects.crd.resourceName,
      owned(objects.crd.object, c.token, owner),
      as(objects.crd.resourceName, c.kube),
    );
    this.hibernationCrd = new k8s.apiextensions.v1.CustomResourceDefinition(
      objects.hibernationCrd.resourceName,
      owned(objects.hibernationCrd.object, c.token, owner),
      as(objects.hibernationCrd.resourceName, c.kube),
    );
    const sa = inNamespace(c, k8s.core.v1.ServiceAccount, objects.serviceAccount);
    const rbac = registerRbac(c);
    const uses = [this.crd, this.hibernationCrd, sa, ...rbac];
    const deployments = registerDeployments(c, uses, ignore.deployment);
    this.deployment = deployments.deployment;
    registerMetricsAndBudget(c);
    if (!args.skipAwait) {
      const rollouts = registerRollouts(name, args, reach.kubeconfig, deployments, (n) => ({
        ...as(n, child),
        ignoreChanges: ignore.rollout,
      }));
      this.rollout = rollouts[0];
    }

    // Depends on everything above, so its delete (the check) runs before any of it goes.
    const crdGuardName = `${name}-crd-guard`;
    this.crdGuard = resources().crdGuard(
      crdGuardName,
      {
        ...reach,
        owner,
        retain,
        providerVersion: CRD_GUARD_VERSION,
        ownerToken: guard.ownerToken,
      },
      {
        ...as(crdGuardName, child),
        dependsOn: [this.crd, this.deployment, ...deployments.shards, ...rbac],
      },
    );

    constructed.push(this);
    this.namespace = pulumi.output(operatorNamespace(args));
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
