/**
 * Installs the CocoonSet and CocoonHibernation CustomResourceDefinitions and waits until the
 * apiserver serves them.
 * Tests, the CLI and the demo call this before they create CocoonSets.
 *
 * Guarantees: the CRD is created when missing and replaced when its spec differs from the
 * generated one (a concurrent writer makes the replace retry on fresh data); the call
 * returns only once the CRD is Established with its names accepted and the `v1` resource
 * answers a list request.
 *
 * Caveats: a CRD that is being deleted is waited out and then created again.
 */
import { PLURAL } from "../kube/api-names.js";
import {
  CRD_NAME,
  HIBERNATION_CRD_NAME,
  HIBERNATION_PLURAL,
  cocoonHibernationCrd,
  cocoonSetCrd,
  type CrdManifest,
} from "../spec/index.js";
import {
  isAlreadyExists,
  isConflict,
  isNotFound,
  paths,
  waitForObject,
  type KubeClient,
  type KubeObject,
} from "../kube/index.js";
import { sleep } from "../kube/sleep.js";

/** Options of {@link ensureCrd}. */
export interface EnsureCrdOptions {
  /** Deadline for installing and waiting. @default 60000 */
  timeoutMs?: number;
}

/** What {@link ensureCrd} did. */
export interface EnsureCrdResult {
  action: "created" | "updated" | "unchanged";
  /** The CRD as last read (Established). */
  crd: KubeObject;
}

interface CrdCondition {
  type: string;
  status: string;
}

/**
 * True when every field of `want` is present in `have` with the same value. The apiserver
 * adds defaults (conversion strategy, empty status), so the live CRD is a superset of ours.
 */
export function isSubset(want: unknown, have: unknown): boolean {
  if (Array.isArray(want)) {
    return (
      Array.isArray(have) &&
      want.length === have.length &&
      want.every((w, i) => isSubset(w, have[i]))
    );
  }
  if (typeof want === "object" && want !== null) {
    if (typeof have !== "object" || have === null || Array.isArray(have)) return false;
    const h = have as Record<string, unknown>;
    return Object.entries(want).every(([k, v]) => isSubset(v, h[k]));
  }
  return want === have;
}

function isEstablished(crd: KubeObject | undefined, plural: string): boolean {
  if (!crd || crd.metadata.deletionTimestamp) return false;
  const status = crd.status as
    { conditions?: CrdCondition[]; acceptedNames?: { plural?: string } } | undefined;
  const ok = (type: string) =>
    status?.conditions?.some((c) => c.type === type && c.status === "True") ?? false;
  return ok("Established") && ok("NamesAccepted") && status?.acceptedNames?.plural === plural;
}

/**
 * Creates or updates the CocoonHibernation CRD, then the CocoonSet CRD, from the generated
 * manifests and waits (watch) until each is Established and its resource is served.
 * @param client an admin client (CRDs are cluster-scoped)
 * @returns what was done to the CocoonSet CRD, and the live CocoonSet CRD
 */
export async function ensureCrd(
  client: KubeClient,
  opts: EnsureCrdOptions = {},
): Promise<EnsureCrdResult> {
  const deadline = Date.now() + (opts.timeoutMs ?? 60_000);
  await ensureOneCrd(client, deadline, {
    manifest: cocoonHibernationCrd,
    name: HIBERNATION_CRD_NAME,
    plural: HIBERNATION_PLURAL,
    collection: paths.cocoonHibernations(),
  });
  return ensureOneCrd(client, deadline, {
    manifest: cocoonSetCrd,
    name: CRD_NAME,
    plural: PLURAL,
    collection: paths.cocoonSets(),
  });
}

interface CrdTarget {
  manifest: CrdManifest;
  name: string;
  plural: string;
  /** The resource's collection across namespaces, probed until served. */
  collection: string;
}

async function ensureOneCrd(
  client: KubeClient,
  deadline: number,
  target: CrdTarget,
): Promise<EnsureCrdResult> {
  const { manifest, name: crdName } = target;
  const remaining = () => Math.max(1000, deadline - Date.now());
  let action: EnsureCrdResult["action"] = "unchanged";
  for (;;) {
    const live = await client.getOrUndefined<KubeObject>(paths.crd(crdName));
    if (live?.metadata.deletionTimestamp) {
      const uid = live.metadata.uid;
      await waitForObject(client, paths.crds(), crdName, (o) => o?.metadata.uid !== uid, {
        timeoutMs: remaining(),
        description: `CRD ${crdName} (being deleted) to be gone`,
      });
      continue;
    }
    try {
      if (!live) {
        await client.create(paths.crds(), manifest);
        action = "created";
      } else if (!isSubset(manifest.spec, live.spec)) {
        await client.replace(paths.crd(crdName), {
          ...manifest,
          metadata: { ...live.metadata, name: crdName },
          spec: manifest.spec,
        });
        action = "updated";
      }
      break;
    } catch (e) {
      // Another installer got there first: read again and compare with what it wrote.
      if (isAlreadyExists(e) || isConflict(e)) {
        if (Date.now() > deadline) throw e;
        continue;
      }
      throw e;
    }
  }
  const crd = await waitForObject(
    client,
    paths.crds(),
    crdName,
    (o) => isEstablished(o, target.plural),
    {
      timeoutMs: remaining(),
      description: `CRD ${crdName} to be Established`,
    },
  );
  await waitUntilServed(client, target.collection, deadline);
  return { action, crd: crd! };
}

/**
 * Established means the names are accepted; the apiserver's handler for the new resource
 * may still answer 404 for a moment, and there is nothing to watch for that, so this probes
 * the collection with a short doubling pause until it answers.
 */
async function waitUntilServed(
  client: KubeClient,
  collection: string,
  deadline: number,
): Promise<void> {
  for (let delay = 20; ; delay = Math.min(delay * 2, 500)) {
    try {
      await client.list(collection, { limit: 1 });
      return;
    } catch (e) {
      if (!isNotFound(e) || Date.now() + delay > deadline) throw e;
    }
    await sleep(delay);
  }
}
