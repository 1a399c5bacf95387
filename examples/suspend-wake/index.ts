/**
 * Suspend and wake a fleet with `pulumi up`: set `suspended` to true and `up` asks every
 * agent's VM to hibernate (its snapshot goes to the registry as `<vm>:hibernate`) and
 * returns once the CocoonSet is Suspended; set it back to false and `up` wakes every VM and
 * returns once they are all up again. `pulumi destroy` drops the snapshot tags as the
 * `snapshotPolicy` says. The walk-through is in README.md next to this file.
 *
 * Config: `registry` (required: the snapshot registry, `host[:port][/prefix]`; on the
 * embedded cluster `cocoonset-dev cluster env` prints it as COCOONSET_REGISTRY), `suspended`
 * (default false), `replicas` (default 2), `namespace` (default `agents-suspend`),
 * `snapshotPolicy` (default `main-only`), `operator` (default true; false when the CRD and
 * the controller are managed elsewhere), `simulator` (default true: label the namespace so
 * the embedded cluster's node-agent simulator plays the VMs; false on a real cluster),
 * `suspendTimeoutSeconds` (default 300), `idleAfter` (a duration such as `10m`: the idle policy,
 * `spec.idle.after`; unset, none).
 */
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { Fleet, Operator } from "pulumi-cocoonset";

const config = new pulumi.Config();
const registry = config.require("registry");
const suspended = config.getBoolean("suspended") ?? false;
const replicas = config.getNumber("replicas") ?? 2;
const namespaceName = config.get("namespace") ?? "agents-suspend";
const snapshotPolicy = config.get("snapshotPolicy") ?? "main-only";
const withOperator = config.getBoolean("operator") ?? true;
const simulator = config.getBoolean("simulator") ?? true;
const idleAfter = config.get("idleAfter");

// The Operator's controller gets `--oci-registry`, and the Fleet takes the same registry.
const operator = withOperator ? new Operator("cocoonset", { ociRegistry: registry }) : undefined;

const namespace = new k8s.core.v1.Namespace("agents", {
  metadata: {
    name: namespaceName,
    // The embedded cluster's stand-in for the node agent acts only in namespaces with this
    // label (docs/cluster.md, "A simulator of the node agent, not shipped").
    labels: simulator ? { "sim.cocoonset.cocoonstack.io/node-agent": "enabled" } : {},
  },
});

const fleet = new Fleet("coder", {
  namespace: namespace.metadata.name,
  operator,
  registry,
  suspendTimeoutSeconds: config.getNumber("suspendTimeoutSeconds"),
  // The controller hibernates a member idle this long and suspends the fleet once every member
  // is; the declared spec does not change, so the next `pulumi up` changes nothing.
  idle: idleAfter ? { after: idleAfter } : undefined,
  spec: {
    agent: { replicas, image: "agents/coder:1" },
    snapshotPolicy: snapshotPolicy as "always" | "main-only" | "never",
    suspend: suspended,
  },
});

export const cocoonSet = fleet.cocoonSetName;
export const phase = fleet.phase;
export const pods = fleet.podNames;
export const mainVm = fleet.mainVmName;
