/**
 * Test support for Operator tests: the CocoonSet CRD as a test needs to find it. Tests run
 * one at a time against the shared cluster, and earlier ones leave an unstamped CRD (and
 * sometimes CocoonSets) behind; an Operator test starts from a cluster with no CRD.
 */
import { HIBERNATION_FINALIZER } from "../../engine/spec/hibernation-schema.js";
import { CRD_NAME, FINALIZER, HIBERNATION_CRD_NAME } from "../../engine/spec/index.js";
import {
  isNotFound,
  paths,
  waitForObject,
  WaitTimeoutError,
  type KubeObject,
} from "../../engine/kube/index.js";
import { adminClient } from "./cluster.js";

/**
 * Deletes the CocoonHibernation CRD, then the CocoonSet CRD, and waits until each is gone.
 * Objects left by earlier tests lose this project's finalizer first (no controller runs to
 * release them), so a CRD's deletion cannot hang on them.
 */
export async function removeCrd(): Promise<void> {
  await removeOneCrd(
    HIBERNATION_CRD_NAME,
    paths.cocoonHibernations(),
    paths.cocoonHibernation,
    HIBERNATION_FINALIZER,
  );
  await removeOneCrd(CRD_NAME, paths.cocoonSets(), paths.cocoonSet, FINALIZER);
}

/** The Operator stamp on the CRD, or undefined (no stamp, or no CRD). */
export async function crdStamp(): Promise<string | undefined> {
  const crd = await adminClient().getOrUndefined<KubeObject>(paths.crd(CRD_NAME));
  return crd?.metadata.annotations?.["cocoonset.cocoonstack.io/installed-by"];
}

/**
 * Deletes one CRD and waits (watch) until it is gone. Until then, every object of it that
 * still carries `finalizer` has it lifted, again whenever a wait round ends with the CRD
 * still there: a controller an earlier test stopped may have put it back on its way out.
 * On timeout the error names what is left.
 */
async function removeOneCrd(
  name: string,
  collection: string,
  objectPath: (ns: string, name: string) => string,
  finalizer: string,
): Promise<void> {
  const client = adminClient();
  const crd = await client.getOrUndefined<KubeObject>(paths.crd(name));
  if (!crd) return;
  const deadline = Date.now() + 60_000;
  let deleted = crd.metadata.deletionTimestamp !== undefined;
  for (;;) {
    const left = await client.list(collection).then(
      (l) => l.items,
      (e: unknown) => {
        if (isNotFound(e)) return []; // the resource is no longer served: nothing is left
        throw e;
      },
    );
    for (const o of left) {
      if (!(o.metadata.finalizers ?? []).includes(finalizer)) continue;
      await liftFinalizers(
        o.metadata.namespace ?? "",
        objectPath(o.metadata.namespace ?? "", o.metadata.name ?? ""),
      );
    }
    if (!deleted) {
      await client.delete(paths.crd(name)).catch((e: unknown) => {
        if (!isNotFound(e)) throw e;
      });
      deleted = true;
    }
    try {
      await waitForObject(client, paths.crds(), name, (o) => o === undefined, {
        timeoutMs: Math.min(5_000, Math.max(100, deadline - Date.now())),
        description: `CRD ${name} to be gone`,
      });
      return;
    } catch (e) {
      if (!(e instanceof WaitTimeoutError)) throw e;
      if (Date.now() < deadline) continue;
      const what = left.map(
        (o) =>
          `${o.metadata.namespace}/${o.metadata.name} (finalizers: ${(o.metadata.finalizers ?? []).join(", ") || "none"}; deleting: ${o.metadata.deletionTimestamp ?? "no"})`,
      );
      const live = await client.getOrUndefined<KubeObject>(paths.crd(name));
      const status = JSON.stringify(
        (live?.status as { conditions?: unknown } | undefined)?.conditions,
      );
      throw new Error(
        `CRD ${name} is still there after 60 s (conditions ${status}); left of it: ${what.join("; ") || "nothing"}`,
        { cause: e },
      );
    }
  }
}

/**
 * Lifts the finalizers of one namespaced object. It may be gone by now; or its namespace
 * may be gone while it was left in storage (a namespace whose deletion ran while the
 * object's CRD was being replaced skips it): the apiserver answers 404 to a patch there, so
 * the namespace is created for the patch and deleted again.
 */
async function liftFinalizers(ns: string, path: string): Promise<void> {
  const client = adminClient();
  const lift = () => client.patch(path, { metadata: { finalizers: null } });
  try {
    await lift();
    return;
  } catch (e) {
    if (!isNotFound(e)) throw e;
  }
  if (await client.getOrUndefined(paths.namespace(ns))) return; // the object itself is gone
  await client.create("/api/v1/namespaces", {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: ns },
  });
  try {
    await lift().catch((e: unknown) => {
      if (!isNotFound(e)) throw e;
    });
  } finally {
    await client.delete(paths.namespace(ns)).catch(() => undefined);
  }
}
