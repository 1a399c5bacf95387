/**
 * The least RBAC the controller needs (controller runtime, engine, owner release and the
 * orphan reaper), as plain objects the SDK installs. Every verb here is one the controller
 * process sends (or, for `cocoonsets/finalizers`, one the apiserver checks when a pod it
 * creates blocks its CocoonSet's deletion); the integration tests run the controller under
 * exactly these rules and take each verb away in turn to show it is needed.
 *
 * - A ClusterRole ({@link controllerClusterRole}) for a controller that watches every
 *   namespace, plus a Role for its Lease in its own namespace ({@link controllerLeaseRole}):
 *   Leases are never granted cluster-wide.
 * - A Role per watched namespace ({@link controllerRole}) otherwise.
 *
 * Not granted: PersistentVolumeClaims. The controller's owner release leaves a pod's claims
 * to the garbage collector (they carry the pod as owner), so it never lists or deletes them.
 *
 * @see https://kubernetes.io/docs/reference/access-authn-authz/rbac/
 */
import type { KubeObject } from "../engine/kube/index.js";
import { GROUP } from "../engine/kube/api-names.js";
import { CRD_NAME } from "../engine/spec/index.js";

/** One RBAC rule. */
export interface PolicyRule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
  resourceNames?: string[];
}

/** Name of the CRD the controller checks for at start-up. */
export const COCOONSET_CRD_NAME = CRD_NAME;

/**
 * Rules for objects inside the watched namespaces, each verb with the code that sends it:
 * - cocoonsets: get (each reconcile reads its CocoonSet), list and watch (informer), patch
 *   (finalizer add/remove, rebuild history);
 * - cocoonsets/status: patch (the pass's status write);
 * - cocoonsets/finalizers: update (pods the engine creates set `blockOwnerDeletion` on their
 *   CocoonSet; an apiserver with the OwnerReferencesPermissionEnforcement admission plugin
 *   allows that only to who may update the owner's finalizers);
 * - pods: get (a toolbox create that meets an existing pod checks its owner), list and watch
 *   (informer, pass, release, reaper), create (fan-out), delete (rebuild, scale-down,
 *   release, reaper), patch (dead-letter mark);
 * - jobs and configmaps: list and watch (release waits until they are gone; the reaper
 *   lists), delete (release, reaper);
 * - events.k8s.io events: create (the event recorder only creates);
 * - cocoonhibernations: get (each reconcile reads its CR), list and watch (informer; the
 *   reconcile's duplicate and tag checks; the CocoonSet pass's restore intent), patch
 *   (finalizer add/remove; the idle policy turns its own CR's desire), create and delete
 *   (the idle policy's CR of an idle member, deleted once its wake is over);
 *   cocoonhibernations/status: patch (the phase);
 * - leases: list and watch (the members' activity Leases, selected by the fleet label; the
 *   controller never writes them);
 * - cocoonsets: delete (a fleet expired with `spec.expiry.action: delete`).
 */
export function namespacedRules(): PolicyRule[] {
  return [
    {
      apiGroups: [GROUP],
      resources: ["cocoonsets"],
      verbs: ["get", "list", "watch", "patch", "delete"],
    },
    {
      apiGroups: [GROUP],
      resources: ["cocoonsets/status"],
      verbs: ["patch"],
    },
    {
      apiGroups: [GROUP],
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
    { apiGroups: ["events.k8s.io"], resources: ["events"], verbs: ["create"] },
    {
      apiGroups: [GROUP],
      resources: ["cocoonhibernations"],
      verbs: ["get", "list", "watch", "patch", "create", "delete"],
    },
    { apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["list", "watch"] },
    { apiGroups: [GROUP], resources: ["cocoonhibernations/status"], verbs: ["patch"] },
  ];
}

/**
 * Rules for the leader Lease, for a Role in the leader-election namespace only: create, get
 * and update of its Lease (a shard's Lease is named after its share, so no resource name
 * limits them), and list and watch of the Leases there: every process reads the shards'
 * Leases to hand CocoonSets over when the shard count changes (controller/shard-gate.ts).
 */
export function leaderElectionRules(): PolicyRule[] {
  return [
    {
      apiGroups: ["coordination.k8s.io"],
      resources: ["leases"],
      verbs: ["create", "get", "update", "list", "watch"],
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

/**
 * Rule to watch the nodes (cluster-scoped; only a ClusterRole can grant it): a migration to
 * `spec.nodeName` checks its target before anything hibernates, and sub-agents are placed
 * next to the main agent when its node has room (docs/behaviour.md §3.17, §3.22); the
 * controller reads both from its node cache.
 */
export function nodeRules(): PolicyRule[] {
  return [{ apiGroups: [""], resources: ["nodes"], verbs: ["list", "watch"] }];
}

/**
 * Every cluster-wide rule of a controller that watches all namespaces, for a ClusterRole.
 * The Lease rules are not among them: they go in {@link controllerLeaseRole}.
 */
export function controllerRules(): PolicyRule[] {
  return [...namespacedRules(), ...crdRules(), ...nodeRules()];
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

/** A Role with {@link leaderElectionRules} in the controller's own (leader-election) namespace. */
export function controllerLeaseRole(name: string, namespace: string): KubeObject {
  return {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "Role",
    metadata: { name, namespace },
    rules: leaderElectionRules(),
  };
}

/**
 * A Role for a `--namespace` deployment: the namespaced rules, plus the Lease rules when
 * this namespace also holds the leader Lease. The CRD check needs no Role: without access
 * to the CRD object the controller falls back to API discovery, which every authenticated
 * user may read. Nodes cannot be granted by a Role: such a controller refuses migrations to
 * `spec.nodeName` (it cannot check the target) unless its account may get nodes.
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
