/**
 * A Fleet and an Operator given the standard resource options, each from stack config, so
 * one program serves every resource-option scenario of the e2e tier.
 *
 * Config: `namespace` (required), `createNamespace` [false]: a Namespace resource of that
 * name, passed to the Fleet only through `dependsOn`; `withFleet` [true], `replicas` [1],
 * `image` [agents/coder:1], `replicasAfterApply`: the replica count, through a resource whose
 * output is unknown until `up` creates it, `namespaceAfterApply` [false]: the namespace the same
 * way, `protect`, `retainOnDelete`, `ignoreImage` (the Fleet's options);
 * `label`: a transform that puts the label `e2e.cocoonstack.io/transformed=<label>` on the
 * CocoonSet and the controller Deployment; `withOperator` [false], `operatorName`
 * [cocoonset], `operatorNamespace`, `operatorReplicas` [1], `operatorProtect`,
 * `operatorRetainOnDelete`, `operatorIgnoreReplicas` (the Operator's options).
 */
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { Fleet, Operator } from "pulumi-cocoonset";

const config = new pulumi.Config();
const namespace = config.require("namespace");
const label = config.get("label");

const transforms: pulumi.ResourceTransform[] = label
  ? [
      ({ type, props, opts }) => {
        const labelled = [
          "kubernetes:cocoonset.cocoonstack.io/v1:CocoonSet",
          "kubernetes:apps/v1:Deployment",
        ];
        if (!labelled.includes(type)) return undefined;
        const metadata = (props.metadata ?? {}) as { labels?: Record<string, string> };
        return {
          props: {
            ...props,
            metadata: {
              ...metadata,
              labels: { ...metadata.labels, "e2e.cocoonstack.io/transformed": label },
            },
          },
          opts,
        };
      },
    ]
  : [];

// A replica count known only once `up` creates this resource: unknown in the first preview.
const replicasAfterApply = config.getNumber("replicasAfterApply");
/** A value that is an output of its own: unknown in a preview that creates the resource. */
class Later<T> extends pulumi.dynamic.Resource {
  declare readonly later: pulumi.Output<T>;
  constructor(name: string, value: T) {
    super(
      {
        create: (inputs: { value: T }) =>
          Promise.resolve({ id: name, outs: { value: inputs.value, later: inputs.value } }),
      },
      name,
      { value, later: undefined },
    );
  }
}
const replicas: pulumi.Input<number> =
  replicasAfterApply === undefined
    ? (config.getNumber("replicas") ?? 1)
    : new Later("counter", replicasAfterApply).later;
const fleetNamespace: pulumi.Input<string> = config.getBoolean("namespaceAfterApply")
  ? new Later("namespace", namespace).later
  : namespace;

const created = config.getBoolean("createNamespace")
  ? new k8s.core.v1.Namespace("fleet-ns", { metadata: { name: namespace } })
  : undefined;

const operator = config.getBoolean("withOperator")
  ? new Operator(
      config.get("operatorName") ?? "cocoonset",
      {
        namespace: config.get("operatorNamespace"),
        replicas: config.getNumber("operatorReplicas") ?? 1,
      },
      {
        transforms,
        protect: config.getBoolean("operatorProtect"),
        retainOnDelete: config.getBoolean("operatorRetainOnDelete"),
        ignoreChanges: config.getBoolean("operatorIgnoreReplicas") ? ["replicas"] : undefined,
      },
    )
  : undefined;

const fleet =
  (config.getBoolean("withFleet") ?? true)
    ? new Fleet(
        "fleet",
        {
          namespace: fleetNamespace,
          operator,
          timeoutSeconds: 120,
          releaseTimeoutSeconds: 60,
          spec: {
            agent: {
              replicas,
              image: config.get("image") ?? "agents/coder:1",
            },
          },
        },
        {
          transforms,
          dependsOn: created ? [created] : undefined,
          protect: config.getBoolean("protect"),
          retainOnDelete: config.getBoolean("retainOnDelete"),
          ignoreChanges: config.getBoolean("ignoreImage") ? ["spec.agent.image"] : undefined,
        },
      )
    : undefined;

export const cocoonSetUid = fleet?.cocoonSetUid;
export const pods = fleet?.podNames;
export const deployment = operator?.deploymentName;
