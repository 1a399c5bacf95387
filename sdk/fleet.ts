/**
 * `cocoonset:index:Fleet` — one CocoonSet and its slots resource.
 */
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { desiredSlots } from "../provider/dynamic/slot-view.js";
import {
  API_VERSION,
  KIND,
  validateCocoonSetSpec,
  type CocoonSetSpec,
} from "../provider/fleet/index.js";
import { defaultKubeconfig } from "./kubeconfig.js";
import type { Operator } from "./operator.js";
import { PROVIDER_VERSION, Slots } from "./slots.js";

/** Arguments of {@link Fleet}. */
export interface FleetArgs {
  /** Namespace of the CocoonSet (it must exist; pass a Namespace's name to order after it). */
  namespace: pulumi.Input<string>;
  /**
   * Name of the CocoonSet.
   * @default the component name
   */
  name?: string;
  /** The CocoonSet spec (SPEC section 1); validated by the slots resource's `check`. */
  spec: CocoonSetSpec;
  /**
   * The operator whose CRD and controller this fleet uses; omit when the controller is
   * managed elsewhere. The fleet is destroyed before it, while the controller still runs.
   */
  operator?: Operator;
  /**
   * Kubeconfig text the slots resource uses (kept as a secret).
   * @default the file named by `$KUBECONFIG`, else `~/.kube/config`
   */
  kubeconfig?: pulumi.Input<string>;
  /**
   * Sub-agent creates in flight during `pulumi up`.
   * @default 8
   */
  fanOut?: number;
  /**
   * How long `pulumi up` waits for the main agent and the fan-out, in seconds.
   * @default 300
   */
  timeoutSeconds?: number;
  /**
   * How long `pulumi destroy` waits for the fleet's tree to be gone, in seconds.
   * @default 120
   */
  releaseTimeoutSeconds?: number;
}

/** One agent fleet: a CocoonSet whose slots `pulumi up` materialises and `destroy` releases. */
export class Fleet extends pulumi.ComponentResource {
  /** Name of the CocoonSet. */
  readonly cocoonSetName: pulumi.Output<string>;
  /** uid of the CocoonSet. */
  readonly cocoonSetUid: pulumi.Output<string>;
  /** Pod name of each slot ("0" is the main agent; toolboxes by name). */
  readonly podNames: pulumi.Output<Record<string, string>>;
  /** Phase of each slot's pod. */
  readonly podPhases: pulumi.Output<Record<string, string>>;
  /** VM name of the main agent. */
  readonly mainVmName: pulumi.Output<string>;
  /** The CocoonSet custom resource. */
  readonly cocoonSet: k8s.apiextensions.CustomResource;
  /** The slots resource. */
  readonly slots: Slots;

  constructor(name: string, args: FleetArgs, opts: pulumi.ComponentResourceOptions = {}) {
    super("cocoonset:index:Fleet", name, {}, opts);
    const csName = args.name ?? name;
    const operatorDeps = args.operator
      ? [
          args.operator.crd,
          args.operator.deployment,
          ...(args.operator.rollout ? [args.operator.rollout] : []),
        ]
      : [];

    this.cocoonSet = new k8s.apiextensions.CustomResource(
      `${name}-cocoonset`,
      {
        apiVersion: API_VERSION,
        kind: KIND,
        metadata: { name: csName, namespace: args.namespace },
        spec: args.spec,
      },
      { parent: this, dependsOn: operatorDeps },
    );

    this.slots = new Slots(
      `${name}-slots`,
      {
        kubeconfig: pulumi.secret(args.kubeconfig ?? defaultKubeconfig()),
        namespace: args.namespace,
        name: csName,
        uid: this.cocoonSet.metadata.uid,
        spec: args.spec,
        // An invalid spec gets no slots here: the resource's check reports every failure.
        slots: pulumi
          .output(args.namespace)
          .apply((ns) =>
            validateCocoonSetSpec(args.spec).ok ? desiredSlots(ns, csName, args.spec) : {},
          ),
        providerVersion: PROVIDER_VERSION,
        fanOut: args.fanOut ?? 8,
        timeoutSeconds: args.timeoutSeconds ?? 300,
        releaseTimeoutSeconds: args.releaseTimeoutSeconds ?? 120,
      },
      { parent: this, dependsOn: [this.cocoonSet] },
    );

    this.cocoonSetName = pulumi.output(csName);
    this.cocoonSetUid = this.slots.uid;
    this.podNames = this.slots.pods.apply((p) =>
      Object.fromEntries(Object.entries(p ?? {}).map(([k, v]) => [k, v.pod])),
    );
    this.podPhases = this.slots.pods.apply((p) =>
      Object.fromEntries(Object.entries(p ?? {}).map(([k, v]) => [k, v.phase])),
    );
    this.mainVmName = this.slots.mainVmName;
    this.registerOutputs({
      cocoonSetName: this.cocoonSetName,
      cocoonSetUid: this.cocoonSetUid,
      podNames: this.podNames,
      podPhases: this.podPhases,
      mainVmName: this.mainVmName,
    });
  }
}
