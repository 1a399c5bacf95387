/**
 * Where a Fleet's `registryCredentials` wait for its `destroy`: a Secret in the fleet's
 * namespace, not the slots resource's outputs. Pulumi hands a resource's outputs back to the
 * program in the registration reply, which `pulumi up --debug` prints in full, masking only
 * the stack's secret config: credentials a program reads from its environment would be
 * printed. `destroy` runs without the program (no inputs), so it finds them here: `up` writes
 * the Secret (carrying the Fleet's ownership token) when the Fleet has credentials, and
 * `destroy` reads it to drop the snapshot tags, then deletes it.
 */
import { isNotFound, KubeClient, paths, type KubeObject } from "../../engine/kube/index.js";
import { LABELS, MANAGED_BY, stableJson } from "../../engine/spec/index.js";
import type { RegistryCredential } from "../../engine/registry/keychain.js";
import { OWNER_TOKEN } from "./ownership.js";

/** The Secret's name for the CocoonSet `name`. */
export function credentialsSecretName(name: string): string {
  return `${name}-registry-credentials`;
}

const KEY = "credentials";

interface SecretObject extends KubeObject {
  data?: Record<string, string>;
}

/** The credentials the Secret holds, if it exists. */
export async function readCredentialsSecret(
  client: KubeClient,
  namespace: string,
  secret: string,
): Promise<RegistryCredential | undefined> {
  const s = await client.getOrUndefined<SecretObject>(paths.secret(namespace, secret));
  const data = s?.data?.[KEY];
  if (!data) return undefined;
  return JSON.parse(Buffer.from(data, "base64").toString("utf8")) as RegistryCredential;
}

/** Writes the credentials into the Secret (creates it, or replaces its data). */
export async function writeCredentialsSecret(
  client: KubeClient,
  namespace: string,
  secret: string,
  cred: RegistryCredential,
  token: string | undefined,
): Promise<void> {
  const data = { [KEY]: Buffer.from(stableJson(cred)).toString("base64") };
  const metadata = {
    name: secret,
    namespace,
    labels: { [LABELS.managedBy]: MANAGED_BY },
    ...(token ? { annotations: { [OWNER_TOKEN]: token } } : {}),
  };
  const live = await client.getOrUndefined<SecretObject>(paths.secret(namespace, secret));
  if (live) {
    if (stableJson(live.data ?? {}) === stableJson(data)) return;
    await client.patch(paths.secret(namespace, secret), { metadata, data });
    return;
  }
  await client.create(paths.secrets(namespace), {
    apiVersion: "v1",
    kind: "Secret",
    type: "Opaque",
    metadata,
    data,
  });
}

/** Deletes the Secret; gone already is fine. */
export async function deleteCredentialsSecret(
  client: KubeClient,
  namespace: string,
  secret: string,
): Promise<void> {
  await client.delete(paths.secret(namespace, secret)).catch((e: unknown) => {
    if (!isNotFound(e)) throw e;
  });
}

/** Whether the Secret holds other credentials than `cred` (or none while `cred` is given). */
export async function credentialsDiffer(
  client: KubeClient,
  namespace: string,
  secret: string,
  cred: RegistryCredential | undefined,
): Promise<boolean> {
  const live = await readCredentialsSecret(client, namespace, secret);
  return stableJson(live ?? null) !== stableJson(cred ?? null);
}
