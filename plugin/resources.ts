/**
 * The engine-backed resources as custom resources of the `cocoonset` package
 * (`cocoonset:index:Slots`, `OperatorGuard`, `ControllerRollout`, `CrdGuard`,
 * `FleetGuard`). Components
 * constructed by the package provider create these instead of dynamic resources; the engine
 * sends their operations to this package's provider (./provider.ts), which runs the same
 * provider objects the dynamic resources store.
 */
import * as pulumi from "@pulumi/pulumi";
import type { ResourceFactory } from "../sdk/resource-factory.js";
import type { Slots } from "../sdk/slots.js";

/** The package's name: the first part of every type token. */
const PACKAGE = "cocoonset";

/** Type token of an engine-backed resource kind. */
export const token = (kind: string) => `${PACKAGE}:index:${kind}`;

/** The slots resource of the package, with the outputs of the dynamic one. */
class PackageSlots extends pulumi.CustomResource {
  declare readonly pods: Slots["pods"];
  declare readonly slots: Slots["slots"];
  declare readonly mainVmName: Slots["mainVmName"];
  declare readonly phase: Slots["phase"];
  declare readonly status: Slots["status"];
  declare readonly uid: Slots["uid"];
  declare readonly spec: Slots["spec"];
}

/** A resource kind whose outputs nobody reads. */
export class PackageResource extends pulumi.CustomResource {}

/** A guard of the package: its ownership token is read (provider/dynamic/ownership.ts). */
class PackageGuard extends pulumi.CustomResource {
  declare readonly ownerToken: pulumi.Output<string>;
}

/** The factory the package provider switches the components to. */
export const packageResources: ResourceFactory = {
  slots: (name, args, opts) =>
    new PackageSlots(
      token("Slots"),
      name,
      { ...args, pods: undefined, mainVmName: undefined, phase: undefined, status: undefined },
      opts,
    ),
  operatorGuard: (name, args, opts) =>
    new PackageGuard(token("OperatorGuard"), name, { ...args, ownerToken: undefined }, opts),
  controllerRollout: (name, args, opts) =>
    new PackageResource(token("ControllerRollout"), name, args, opts),
  crdGuard: (name, args, opts) => new PackageResource(token("CrdGuard"), name, args, opts),
  fleetGuard: (name, args, opts) =>
    new PackageGuard(token("FleetGuard"), name, { ...args, ownerToken: undefined }, opts),
};
