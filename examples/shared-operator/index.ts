/**
 * One operator for the cluster and two teams' fleets, each in its own namespace. Both
 * fleets depend on the operator, so `pulumi destroy` removes the fleets (and everything
 * their agents created) while the controller still runs, and the CRD last.
 *
 * Config: `operatorNamespace` (default `cocoonset-system`), `namespaceA` / `namespaceB`
 * (default `team-a` / `team-b`), `replicasA` / `replicasB` (default 3 / 2).
 */
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { Fleet, Operator } from "pulumi-cocoonset";

const config = new pulumi.Config();

const operator = new Operator("cocoonset", {
  namespace: config.get("operatorNamespace") ?? "cocoonset-system",
});

const teams = [
  {
    team: "a",
    namespace: config.get("namespaceA") ?? "team-a",
    replicas: config.getNumber("replicasA") ?? 3,
    image: "agents/coder:1",
  },
  {
    team: "b",
    namespace: config.get("namespaceB") ?? "team-b",
    replicas: config.getNumber("replicasB") ?? 2,
    image: "agents/reviewer:1",
  },
];

const fleets = teams.map(({ team, namespace, replicas, image }) => {
  const ns = new k8s.core.v1.Namespace(`team-${team}`, { metadata: { name: namespace } });
  return new Fleet(`team-${team}`, {
    namespace: ns.metadata.name,
    operator,
    spec: { agent: { replicas, image } },
  });
});

export const controller = operator.deploymentName;
export const teamAPods = fleets[0].podNames;
export const teamBPods = fleets[1].podNames;
