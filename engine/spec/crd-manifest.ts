// The generated CRDs as data, imported from JSON so nothing parses YAML at runtime.
import crd from "./generated/crd.json" with { type: "json" };
import hibernationCrdJson from "./generated/hibernation-crd.json" with { type: "json" };

/** A CustomResourceDefinition manifest (apiextensions.k8s.io/v1). */
export interface CrdManifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string };
  spec: Record<string, unknown>;
}

/** The CocoonSet CustomResourceDefinition manifest. */
export const cocoonSetCrd: CrdManifest = crd;

/** The CocoonHibernation CustomResourceDefinition manifest. */
export const cocoonHibernationCrd: CrdManifest = hibernationCrdJson;
