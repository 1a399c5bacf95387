// The generated CRD as data, imported from JSON so nothing parses YAML at runtime.
import crd from "./generated/crd.json" with { type: "json" };

/** The CocoonSet CustomResourceDefinition manifest (apiextensions.k8s.io/v1). */
export const cocoonSetCrd: {
  apiVersion: string;
  kind: string;
  metadata: { name: string };
  spec: Record<string, unknown>;
} = crd;
