/**
 * The least RBAC the controller needs (controller runtime, engine, owner release and the
 * orphan reaper), as plain objects the SDK installs.
 *
 * @see https://kubernetes.io/docs/reference/access-authn-authz/rbac/
 */
import type { KubeObject } from "../provider/kube/index.js";

/** One RBAC rule. */
export interface PolicyRule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
  resourceNames?: string[];
}

/** Name of the CRD the controller checks for at start-up. */
export const COCOONSET_CRD_NAME = "cocoonsets.cocoonset.cocoonstack.io";

/** Rules for objects inside the watched namespaces. */
export function namespacedRules(): PolicyRule[] {
  return [
    {
      apiGroups: ["cocoonset.cocoonstack.io"],
      resources: ["cocoonsets"],
      verbs: ["get", "list", "watch", "update", "patch"],
    },
    {
      apiGroups: ["cocoonset.cocoonstack.io"],
      resources: ["cocoonsets/status"],
      verbs: ["get", "update", "patch"],
    },
    {
      apiGroups: ["cocoonset.cocoonstack.io"],
      resources: ["cocoonsets/finalizers"],
      verbs: ["update"],
    },
    {
      apiGroups: [""],
      resources: ["pods"],
      verbs: ["get", "list", "watch", "create", "delete", "patch"],
    },
    { apiGroups: ["batch"], resources: ["jobs"], verbs: ["list", "watch", "delete"] },
    { apiGroups: [""], resources: ["configmaps"], verbs: ["list", "watch", "delete"] },
    {
      apiGroups: [""],
      resources: ["persistentvolumeclaims"],
      verbs: ["list", "watch", "delete"],
    },
    { apiGroups: ["events.k8s.io"], resources: ["events"], verbs: ["create", "patch"] },
  ];
}

/** Rules for the leader Lease (in the leader-election namespace). */
export function leaderElectionRules(): PolicyRule[] {
  return [
    {
      apiGroups: ["coordination.k8s.io"],
      resources: ["leases"],
      verbs: ["get", "create", "update"],
    },
  ];
}

/** Rule to read the CocoonSet CRD (cluster-scoped; only a ClusterRole can grant it). */
export function crdRules(): PolicyRule[] {
  return [
    {
      apiGroups: ["apiextensions.k8s.io"],
      resources: ["customresourcedefinitions"],
      verbs: ["get"],
      resourceNames: [COCOONSET_CRD_NAME],
    },
  ];
}

/** Every rule of the controller, for a ClusterRole (all-namespaces deployments). */
export function controllerRules(): PolicyRule[] {
  return [...namespacedRules(), ...leaderElectionRules(), ...crdRules()];
}

/** A ClusterRole with {@link controllerRules}. */
export function controllerClusterRole(name: string): KubeObject {
  return {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "ClusterRole",
    metadata: { name },
    rules: controllerRules(),
  };
}

/**
 * A Role for a `--namespace` deployment: the namespaced rules, plus the Lease rules when
 * this namespace also holds the leader Lease. The CRD check needs no Role: without access
 * to the CRD object the controller falls back to API discovery, which every authenticated
 * user may read.
 */
export function controllerRole(
  name: string,
  namespace: string,
  opts: { leaderElection?: boolean } = {},
): KubeObject {
  return {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "Role",
    metadata: { name, namespace },
    rules: [...namespacedRules(), ...(opts.leaderElection ? leaderElectionRules() : [])],
  };
}
