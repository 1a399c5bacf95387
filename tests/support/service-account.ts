/**
 * Test support: a KubeClient acting as a namespaced service account bound to a Role, so
 * tests can check behaviour under narrow RBAC (for example, no rights on Jobs).
 */
import { KubeClient, paths } from "../../engine/kube/index.js";
import { adminClient } from "./cluster.js";

/** One Role rule. */
export interface RoleRule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
}

/**
 * Creates ServiceAccount `name` in `ns`, a Role with `rules` and its binding, and returns a
 * kubeconfig (text) authenticated with a short-lived token for it (TokenRequest).
 */
export async function serviceAccountKubeconfig(
  ns: string,
  name: string,
  rules: RoleRule[],
): Promise<string> {
  const admin = adminClient();
  await admin.create(paths.serviceAccounts(ns), {
    apiVersion: "v1",
    kind: "ServiceAccount",
    metadata: { name },
  });
  await admin.create(paths.roles(ns), {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "Role",
    metadata: { name },
    rules,
  });
  const token = await bindRoleAndRequestToken(admin, ns, name, 600);
  const cluster = admin.config.getCurrentCluster()!;
  return JSON.stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [
      {
        name: "c",
        cluster: { server: cluster.server, "certificate-authority-data": cluster.caData },
      },
    ],
    users: [{ name, user: { token } }],
    contexts: [{ name: "c", context: { cluster: "c", user: name } }],
    "current-context": "c",
  });
}

/** A client of {@link serviceAccountKubeconfig}'s service account. Close it when done. */
export async function serviceAccountClient(
  ns: string,
  name: string,
  rules: RoleRule[],
): Promise<KubeClient> {
  return KubeClient.fromString(await serviceAccountKubeconfig(ns, name, rules));
}

/**
 * Binds ServiceAccount `sa` of `ns` to the Role of the same name and returns a token for it
 * (a TokenRequest) that lasts `expirationSeconds`.
 */
export async function bindRoleAndRequestToken(
  admin: KubeClient,
  ns: string,
  sa: string,
  expirationSeconds: number,
): Promise<string> {
  await admin.create(paths.roleBindings(ns), {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "RoleBinding",
    metadata: { name: sa },
    roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: sa },
    subjects: [{ kind: "ServiceAccount", name: sa, namespace: ns }],
  });
  const tr = await admin.create<{ status: { token: string } }>(paths.serviceAccountToken(ns, sa), {
    apiVersion: "authentication.k8s.io/v1",
    kind: "TokenRequest",
    spec: { expirationSeconds },
  });
  return tr.status.token;
}
