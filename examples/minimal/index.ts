/**
 * The minimal fleet: the operator (CRD, RBAC, controller) and one CocoonSet with a main
 * agent and `replicas` sub-agents, in a namespace of its own.
 *
 * Config: `replicas` (default 3), `image` (default `agents/coder:1`), `namespace`
 * (default `agents`), `createNamespace` (default true; false to use an existing one),
 * `operator` (default true; false when the controller is managed elsewhere).
 */
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { Fleet, Operator } from "pulumi-cocoonset";

const config = new pulumi.Config();
const replicas = config.getNumber("replicas") ?? 3;
const image = config.get("image") ?? "agents/coder:1";
const namespaceName = config.get("namespace") ?? "agents";
const withOperator = config.getBoolean("operator") ?? true;
const createNamespace = config.getBoolean("createNamespace") ?? true;

const operator = withOperator ? new Operator("cocoonset") : undefined;
const namespace = createNamespace
  ? new k8s.core.v1.Namespace("agents", { metadata: { name: namespaceName } }).metadata.name
  : namespaceName;

const fleet = new Fleet("coder", {
  namespace,
  operator,
  spec: { agent: { replicas, image } },
});

export const cocoonSet = fleet.cocoonSetName;
export const pods = fleet.podNames;
export const phases = fleet.podPhases;
export const mainVm = fleet.mainVmName;
