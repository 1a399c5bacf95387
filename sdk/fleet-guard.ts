/* eslint-disable @typescript-eslint/no-unsafe-argument -- Pulumi hands provider methods their inputs as `any`. */
/**
 * The Fleet's claim guard (`pulumi-nodejs:dynamic/cocoonset:FleetGuard`): registered before
 * the CocoonSet, it refuses a CocoonSet this Fleet's state holds no ownership token for, and
 * its check refuses, before anything is written, pods the cluster or its nodes would refuse
 * (provider/dynamic/fleet-guard.ts). As with the slots resource, the provider object is
 * serialized into the state and captures nothing: its methods import this package by name.
 */
import * as pulumi from "@pulumi/pulumi";
import type { FleetGuardInputs } from "../provider/dynamic/index.js";

/** The claim guard's provider object. */
export const fleetGuardProvider: pulumi.dynamic.ResourceProvider = {
  async check(olds, news) {
    const m = await import("pulumi-cocoonset/provider");
    return m.dynamic.fleetGuardCheck(olds, news);
  },
  async create(inputs) {
    const m = await import("pulumi-cocoonset/provider");
    return m.dynamic.fleetGuardCreate(inputs);
  },
  async update(id, olds, news) {
    const m = await import("pulumi-cocoonset/provider");
    return m.dynamic.fleetGuardUpdate(id, olds, news);
  },
  async diff(id, olds, news) {
    // `check` asks the cluster on every deploy; an update re-asks when what is claimed changes.
    const m = await import("pulumi-cocoonset/provider");
    return m.dynamic.fleetGuardDiff(id, olds, news);
  },
  async delete(_id, props) {
    const m = await import("pulumi-cocoonset/provider");
    await m.dynamic.fleetGuardDelete(props);
  },
};

/** A Fleet creates its CocoonSet or refuses: fails preview and `up` on another's CocoonSet. */
export class FleetGuard extends pulumi.dynamic.Resource {
  /** The ownership token the Fleet's CocoonSet carries (drawn by the guard's first check). */
  declare readonly ownerToken: pulumi.Output<string>;

  constructor(
    name: string,
    args: { [K in keyof FleetGuardInputs]: pulumi.Input<FleetGuardInputs[K]> },
    opts: pulumi.CustomResourceOptions = {},
  ) {
    super(
      fleetGuardProvider,
      name,
      { ...args, ownerToken: undefined },
      opts,
      "cocoonset",
      "FleetGuard",
    );
  }
}
