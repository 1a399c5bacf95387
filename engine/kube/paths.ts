/** REST paths of the resources the project touches. */

const enc = encodeURIComponent;

import { API_VERSION, PLURAL } from "./api-names.js";

/** Group/version of CocoonSets (the one definition is in api-names.ts). */
export const COCOONSET_API = API_VERSION;

/** Paths for namespaced core and group resources. */
export const paths = {
  namespaces: () => `/api/v1/namespaces`,
  namespace: (ns: string) => `/api/v1/namespaces/${enc(ns)}`,
  pods: (ns: string) => `/api/v1/namespaces/${enc(ns)}/pods`,
  /** Pods of every namespace. */
  allPods: () => `/api/v1/pods`,
  pod: (ns: string, name: string) => `/api/v1/namespaces/${enc(ns)}/pods/${enc(name)}`,
  podStatus: (ns: string, name: string) => `/api/v1/namespaces/${enc(ns)}/pods/${enc(name)}/status`,
  configMaps: (ns: string) => `/api/v1/namespaces/${enc(ns)}/configmaps`,
  configMap: (ns: string, name: string) => `/api/v1/namespaces/${enc(ns)}/configmaps/${enc(name)}`,
  pvcs: (ns: string) => `/api/v1/namespaces/${enc(ns)}/persistentvolumeclaims`,
  pvc: (ns: string, name: string) =>
    `/api/v1/namespaces/${enc(ns)}/persistentvolumeclaims/${enc(name)}`,
  secrets: (ns: string) => `/api/v1/namespaces/${enc(ns)}/secrets`,
  secret: (ns: string, name: string) => `/api/v1/namespaces/${enc(ns)}/secrets/${enc(name)}`,
  serviceAccounts: (ns: string) => `/api/v1/namespaces/${enc(ns)}/serviceaccounts`,
  serviceAccountToken: (ns: string, name: string) =>
    `/api/v1/namespaces/${enc(ns)}/serviceaccounts/${enc(name)}/token`,
  jobs: (ns: string) => `/apis/batch/v1/namespaces/${enc(ns)}/jobs`,
  job: (ns: string, name: string) => `/apis/batch/v1/namespaces/${enc(ns)}/jobs/${enc(name)}`,
  deployments: (ns: string) => `/apis/apps/v1/namespaces/${enc(ns)}/deployments`,
  deployment: (ns: string, name: string) =>
    `/apis/apps/v1/namespaces/${enc(ns)}/deployments/${enc(name)}`,
  replicaSets: (ns: string) => `/apis/apps/v1/namespaces/${enc(ns)}/replicasets`,
  events: (ns: string) => `/apis/events.k8s.io/v1/namespaces/${enc(ns)}/events`,
  leases: (ns: string) => `/apis/coordination.k8s.io/v1/namespaces/${enc(ns)}/leases`,
  lease: (ns: string, name: string) =>
    `/apis/coordination.k8s.io/v1/namespaces/${enc(ns)}/leases/${enc(name)}`,
  roles: (ns: string) => `/apis/rbac.authorization.k8s.io/v1/namespaces/${enc(ns)}/roles`,
  roleBindings: (ns: string) =>
    `/apis/rbac.authorization.k8s.io/v1/namespaces/${enc(ns)}/rolebindings`,
  clusterRoles: () => `/apis/rbac.authorization.k8s.io/v1/clusterroles`,
  clusterRole: (name: string) => `/apis/rbac.authorization.k8s.io/v1/clusterroles/${enc(name)}`,
  clusterRoleBindings: () => `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings`,
  clusterRoleBinding: (name: string) =>
    `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${enc(name)}`,
  crds: () => `/apis/apiextensions.k8s.io/v1/customresourcedefinitions`,
  crd: (name: string) => `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${enc(name)}`,
  nodes: () => `/api/v1/nodes`,
  /** CocoonSets in one namespace, or in all namespaces when `ns` is undefined. */
  cocoonSets: (ns?: string) =>
    ns === undefined
      ? `/apis/${COCOONSET_API}/${PLURAL}`
      : `/apis/${COCOONSET_API}/namespaces/${enc(ns)}/${PLURAL}`,
  cocoonSet: (ns: string, name: string) =>
    `/apis/${COCOONSET_API}/namespaces/${enc(ns)}/${PLURAL}/${enc(name)}`,
  cocoonSetStatus: (ns: string, name: string) =>
    `/apis/${COCOONSET_API}/namespaces/${enc(ns)}/${PLURAL}/${enc(name)}/status`,
  /** CocoonHibernations in one namespace, or in all namespaces when `ns` is undefined. */
  cocoonHibernations: (ns?: string) =>
    ns === undefined
      ? `/apis/${COCOONSET_API}/cocoonhibernations`
      : `/apis/${COCOONSET_API}/namespaces/${enc(ns)}/cocoonhibernations`,
  cocoonHibernation: (ns: string, name: string) =>
    `/apis/${COCOONSET_API}/namespaces/${enc(ns)}/cocoonhibernations/${enc(name)}`,
  cocoonHibernationStatus: (ns: string, name: string) =>
    `/apis/${COCOONSET_API}/namespaces/${enc(ns)}/cocoonhibernations/${enc(name)}/status`,
} as const;
