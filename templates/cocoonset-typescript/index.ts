/**
 * A CocoonSet fleet: the operator (CRD, RBAC, controller) and one fleet of a main agent
 * plus `replicas` sub-agents, in a namespace of its own.
 *
 * Config: `namespace`, `replicas`, `image` (prompted by `pulumi new`).
 */
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { Fleet, Operator } from "pulumi-cocoonset";

const config = new pulumi.Config();
const namespaceName = config.get("namespace") ?? "agents";
const replicas = config.getNumber("replicas") ?? 3;
const image = config.get("image") ?? "agents/coder:1";

const operator = new Operator("cocoonset");
const namespace = new k8s.core.v1.Namespace("agents", { metadata: { name: namespaceName } });

const fleet = new Fleet("agents", {
  namespace: namespace.metadata.name,
  operator,
  spec: { agent: { replicas, image } },
});

export const cocoonSet = fleet.cocoonSetName;
export const pods = fleet.podNames;
export const readyAgents = fleet.status.readyAgents;
