/**
 * Test support for Operator tests: the CocoonSet CRD as a test needs to find it. Tests run
 * one at a time against the shared cluster, and earlier ones leave an unstamped CRD (and
 * sometimes CocoonSets) behind; an Operator test starts from a cluster with no CRD.
 */
import {
  CRD_NAME,
  FINALIZER,
  HIBERNATION_CRD_NAME,
  HIBERNATION_FINALIZER,
} from "../../provider/fleet/index.js";
import { isNotFound, paths, waitForObject, type KubeObject } from "../../provider/kube/index.js";
import { adminClient } from "./cluster.js";

/**
 * Deletes the CocoonHibernation CRD (its CRs' finalizers lifted first), then the CocoonSet
 * CRD, and waits until each is gone. CocoonSets left by earlier tests
 * lose this project's finalizer first (no controller runs to release them), so the CRD's
 * deletion cannot hang on them.
 */
export async function removeCrd(): Promise<void> {
  await removeHibernationCrd();
  const client = adminClient();
  const crd = await client.getOrUndefined<KubeObject>(paths.crd(CRD_NAME));
  if (!crd) return;
  for (const cs of (await client.list(paths.cocoonSets())).items) {
    if (!(cs.metadata.finalizers ?? []).includes(FINALIZER)) continue;
    // It may be gone by now, with its namespace: a namespace left terminating by an earlier
    // test finishes once its last CocoonSet is released.
    await client
      .patch(paths.cocoonSet(cs.metadata.namespace ?? "", cs.metadata.name ?? ""), {
        metadata: { finalizers: null },
      })
      .catch((e: unknown) => {
        if (!isNotFound(e)) throw e;
      });
  }
  if (!crd.metadata.deletionTimestamp) await client.delete(paths.crd(CRD_NAME));
  await waitForObject(client, paths.crds(), CRD_NAME, (o) => o === undefined, {
    timeoutMs: 60_000,
    description: `CRD ${CRD_NAME} to be gone`,
  });
}

/** The Operator stamp on the CRD, or undefined (no stamp, or no CRD). */
export async function crdStamp(): Promise<string | undefined> {
  const crd = await adminClient().getOrUndefined<KubeObject>(paths.crd(CRD_NAME));
  return crd?.metadata.annotations?.["cocoonset.cocoonstack.io/installed-by"];
}

/** Deletes the CocoonHibernation CRD and waits until it is gone (no controller runs here). */
async function removeHibernationCrd(): Promise<void> {
  const client = adminClient();
  const crd = await client.getOrUndefined<KubeObject>(paths.crd(HIBERNATION_CRD_NAME));
  if (!crd) return;
  for (const h of (await client.list(paths.cocoonHibernations())).items) {
    if (!(h.metadata.finalizers ?? []).includes(HIBERNATION_FINALIZER)) continue;
    await client
      .patch(paths.cocoonHibernation(h.metadata.namespace ?? "", h.metadata.name ?? ""), {
        metadata: { finalizers: null },
      })
      .catch((e: unknown) => {
        if (!isNotFound(e)) throw e;
      });
  }
  if (!crd.metadata.deletionTimestamp) await client.delete(paths.crd(HIBERNATION_CRD_NAME));
  await waitForObject(client, paths.crds(), HIBERNATION_CRD_NAME, (o) => o === undefined, {
    timeoutMs: 60_000,
    description: `CRD ${HIBERNATION_CRD_NAME} to be gone`,
  });
}
