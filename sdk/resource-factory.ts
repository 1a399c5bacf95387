/**
 * How the components create their engine-backed resources (the slots resource, the Operator's
 * guards and rollout check). In a program they are dynamic resources (`pulumi-nodejs:dynamic/...`);
 * the component package's provider (plugin/) switches this to custom resources of its own
 * package (`cocoonset:index:<Kind>`), because dynamic providers do not load inside components
 * constructed for another language. Both run the same provider objects.
 */
import type * as pulumi from "@pulumi/pulumi";
import { FleetGuard } from "./fleet-guard.js";
import { ControllerRollout, CrdGuard, OperatorGuard } from "./operator-resources.js";
import { Slots, type SlotsArgs } from "./slots.js";

/** Constructor arguments of each engine-backed resource. */
type ArgsOf<C> = C extends new (name: string, args: infer A, opts?: never) => unknown ? A : never;

/** One function per engine-backed resource, each with its class's constructor arguments. */
export interface ResourceFactory {
  slots(name: string, args: SlotsArgs, opts: pulumi.CustomResourceOptions): Slots;
  operatorGuard(
    name: string,
    args: ArgsOf<typeof OperatorGuard>,
    opts: pulumi.CustomResourceOptions,
  ): OperatorGuard;
  controllerRollout(
    name: string,
    args: ArgsOf<typeof ControllerRollout>,
    opts: pulumi.CustomResourceOptions,
  ): ControllerRollout;
  crdGuard(
    name: string,
    args: ArgsOf<typeof CrdGuard>,
    opts: pulumi.CustomResourceOptions,
  ): CrdGuard;
  fleetGuard(
    name: string,
    args: ArgsOf<typeof FleetGuard>,
    opts: pulumi.CustomResourceOptions,
  ): FleetGuard;
}

/** The dynamic resources a program's components create. */
const dynamicResources: ResourceFactory = {
  slots: (name, args, opts) => new Slots(name, args, opts),
  operatorGuard: (name, args, opts) => new OperatorGuard(name, args, opts),
  controllerRollout: (name, args, opts) => new ControllerRollout(name, args, opts),
  crdGuard: (name, args, opts) => new CrdGuard(name, args, opts),
  fleetGuard: (name, args, opts) => new FleetGuard(name, args, opts),
};

let current: ResourceFactory = dynamicResources;

/** The factory the components use now. */
export function resources(): ResourceFactory {
  return current;
}

/** Switches the factory for the rest of the process (the package provider does, once). */
export function useResources(factory: ResourceFactory): void {
  current = factory;
}
