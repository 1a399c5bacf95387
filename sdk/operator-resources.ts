/* eslint-disable @typescript-eslint/no-unsafe-argument -- Pulumi hands provider methods their inputs as `any`. */
/**
 * The Operator's dynamic resources: the install guard (one Operator per cluster), the CRD
 * guard (destroy never deletes other stacks' CocoonSets) and the rollout check of the
 * controller Deployment. As with the slots resource, each provider object is serialized
 * into the state and captures nothing: its methods import this package by name. Their
 * method bodies are part of users' stored state, so they stay as written (a change shows as
 * an update of every Operator on the next deploy).
 */
import * as pulumi from "@pulumi/pulumi";
import { createRequire } from "node:module";
import type {
  ControllerRolloutInputs,
  CrdGuardInputs,
  OperatorGuardInputs,
} from "../provider/dynamic/index.js";

const pkg = createRequire(import.meta.url)("../../package.json") as { version: string };

/** The Operator's install guard provider (see provider/dynamic/operator-guard.ts). */
export const operatorGuardProvider: pulumi.dynamic.ResourceProvider = {
  async check(olds, news) {
    const m = await import("pulumi-cocoonset/provider");
    return m.dynamic.guardCheck(olds, news);
  },
  async create(inputs) {
    const m = await import("pulumi-cocoonset/provider");
    return m.dynamic.guardCreate(inputs);
  },
  async update(id, olds, news) {
    const m = await import("pulumi-cocoonset/provider");
    return m.dynamic.guardUpdate(id, olds, news);
  },
  async diff(id, olds, news) {
    const m = await import("pulumi-cocoonset/provider");
    return m.dynamic.guardDiff(id, olds, news);
  },
  async delete(_id, props) {
    const m = await import("pulumi-cocoonset/provider");
    await m.dynamic.guardDelete(props);
  },
};

/** Version of the CRD guard's stored code: a new one rewrites it on the next update. */
export const CRD_GUARD_VERSION = `${pkg.version}+crd-guard.3`;

/** The Operator's CRD guard provider (see provider/dynamic/operator-guard.ts). */
export const crdGuardProvider: pulumi.dynamic.ResourceProvider = {
  async create(inputs) {
    const m = await import("pulumi-cocoonset/provider");
    return m.dynamic.crdGuardCreate(inputs);
  },
  async update(id, olds, news) {
    const m = await import("pulumi-cocoonset/provider");
    return m.dynamic.crdGuardUpdate(id, olds, news);
  },
  async diff(id, olds, news) {
    const m = await import("pulumi-cocoonset/provider");
    return m.dynamic.crdGuardDiff(id, olds, news);
  },
  async delete(_id, props) {
    const m = await import("pulumi-cocoonset/provider");
    await m.dynamic.crdGuardDelete(props);
  },
};

/**
 * One Operator per cluster: fails preview and `up` when another Operator holds the CRD; holds
 * the Operator's ownership token and, deleted last, deletes the objects that carry it.
 */
export class OperatorGuard extends pulumi.dynamic.Resource {
  /** The ownership token every object of the Operator carries. */
  declare readonly ownerToken: pulumi.Output<string>;

  constructor(
    name: string,
    args: { [K in keyof OperatorGuardInputs]: pulumi.Input<OperatorGuardInputs[K]> },
    opts: pulumi.CustomResourceOptions = {},
  ) {
    super(
      operatorGuardProvider,
      name,
      { ...args, ownerToken: undefined },
      opts,
      "cocoonset",
      "OperatorGuard",
    );
  }
}

/** The Operator's rollout check provider (see provider/dynamic/controller-rollout.ts). */
export const controllerRolloutProvider: pulumi.dynamic.ResourceProvider = {
  async create(inputs) {
    const m = await import("pulumi-cocoonset/provider");
    return m.dynamic.rolloutCreate(inputs);
  },
  async update(id, olds, news) {
    const m = await import("pulumi-cocoonset/provider");
    return m.dynamic.rolloutUpdate(id, olds, news);
  },
  async diff(
    _id,
    olds: Omit<ControllerRolloutInputs, "kubeconfig">,
    news: ControllerRolloutInputs,
  ) {
    // The outputs carry no kubeconfig (provider/dynamic/outputs.ts), so it is not compared.
    const keys = ["namespace", "deployment", "image", "generation"] as const;
    return { changes: keys.some((k) => olds[k] !== news[k]) };
  },
};

/**
 * Waits for the controller Deployment to roll out; fails with a message naming the image
 * when the cluster cannot pull it.
 */
export class ControllerRollout extends pulumi.dynamic.Resource {
  constructor(
    name: string,
    args: { [K in keyof ControllerRolloutInputs]: pulumi.Input<ControllerRolloutInputs[K]> },
    opts: pulumi.CustomResourceOptions = {},
  ) {
    super(controllerRolloutProvider, name, args, opts, "cocoonset", "ControllerRollout");
  }
}

/**
 * Deleted before the Operator's CRD and controller: refuses the destroy while CocoonSets are
 * left (deleting the CRD would delete them and hang on their finalizers), or, when the CRD
 * is kept, says so.
 */
export class CrdGuard extends pulumi.dynamic.Resource {
  constructor(
    name: string,
    args: { [K in keyof CrdGuardInputs]: pulumi.Input<CrdGuardInputs[K]> },
    opts: pulumi.CustomResourceOptions = {},
  ) {
    super(crdGuardProvider, name, args, opts, "cocoonset", "CrdGuard");
  }
}
