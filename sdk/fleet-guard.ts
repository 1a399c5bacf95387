/* eslint-disable @typescript-eslint/no-unsafe-argument -- Pulumi hands provider methods their inputs as `any`. */
/**
 * The Fleet's claim guard (`pulumi-nodejs:dynamic/cocoonset:FleetGuard`): registered before
 * the CocoonSet, it refuses a CocoonSet that another Fleet, or no Pulumi stack, created
 * (provider/dynamic/fleet-guard.ts). As with the slots resource, the provider object is
 * serialized into the state and captures nothing: its methods import this package by name.
 */
import * as pulumi from "@pulumi/pulumi";
import type { FleetGuardInputs, FleetGuardOutputs } from "../provider/dynamic/index.js";

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
  async diff(_id, olds: FleetGuardOutputs, news: FleetGuardInputs) {
    // `check` asks the cluster on every deploy; an update re-asks when what is claimed changes.
    const keys = ["namespace", "name", "owner", "adopt", "requireCrd"] as const;
    return { changes: keys.some((k) => olds[k] !== news[k]) };
  },
};

/** A Fleet creates its CocoonSet or refuses: fails preview and `up` on another's CocoonSet. */
export class FleetGuard extends pulumi.dynamic.Resource {
  constructor(
    name: string,
    args: { [K in keyof FleetGuardInputs]: pulumi.Input<FleetGuardInputs[K]> },
    opts: pulumi.CustomResourceOptions = {},
  ) {
    super(fleetGuardProvider, name, args, opts, "cocoonset", "FleetGuard");
  }
}
