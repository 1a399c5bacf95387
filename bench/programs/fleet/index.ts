/**
 * The Pulumi program of bench/pulumi.ts: one Fleet, no Operator (no controller runs during
 * that benchmark). The benchmark writes its Pulumi.yaml next to the compiled file in dist/
 * at run time, so stack files never land in the source tree.
 *
 * Config: `namespace` (required, must exist), `name` [fleet], `replicas` [0], `image`
 * [ghcr.io/cocoonstack/agent:1], `capacityCheck` [the Fleet's default].
 */
import * as pulumi from "@pulumi/pulumi";
import { Fleet } from "pulumi-cocoonset";

const config = new pulumi.Config();

const fleet = new Fleet("fleet", {
  namespace: config.require("namespace"),
  name: config.get("name") ?? "fleet",
  // Generous: a slow 2-core machine must not turn a benchmark into a timeout.
  timeoutSeconds: 600,
  releaseTimeoutSeconds: 300,
  capacityCheck: config.get<"refuse" | "warn" | "off">("capacityCheck"),
  spec: {
    agent: {
      replicas: config.getNumber("replicas") ?? 0,
      image: config.get("image") ?? "ghcr.io/cocoonstack/agent:1",
    },
  },
});

export const cocoonSetUid = fleet.cocoonSetUid;
