/* eslint-disable @typescript-eslint/no-unsafe-argument -- Pulumi hands provider methods their inputs as `any`. */
/**
 * The slots dynamic resource (`pulumi-nodejs:dynamic/cocoonset:Slots`). Its provider object
 * is serialized into the state, so it captures nothing: every method imports this package
 * by name (resolved from the program's folder) and delegates to `provider/dynamic`.
 */
import * as pulumi from "@pulumi/pulumi";
import { createRequire } from "node:module";
import type { CocoonSetSpec, CocoonSetStatus } from "../engine/spec/index.js";
import type { SlotMap, SlotsInputs } from "../provider/dynamic/index.js";

const pkg = createRequire(import.meta.url)("../../package.json") as { version: string };

/**
 * Version of the stored provider code. Part of the inputs, so upgrading the package makes
 * the next `pulumi up` update the resource and rewrite the code destroy will run.
 */
export const PROVIDER_VERSION = `${pkg.version}+slots.2`;

/** The provider object Pulumi serializes. Keep it free of captured values. */
export const slotsProvider: pulumi.dynamic.ResourceProvider = {
  async check(olds, news) {
    const m = await import("pulumi-cocoonset/provider");
    return m.dynamic.check(olds, news);
  },
  async diff(id, olds, news) {
    const m = await import("pulumi-cocoonset/provider");
    return m.dynamic.diff(id, olds, news);
  },
  async create(inputs) {
    const m = await import("pulumi-cocoonset/provider");
    return m.dynamic.create(inputs);
  },
  async update(id, olds, news) {
    const m = await import("pulumi-cocoonset/provider");
    return m.dynamic.update(id, olds, news);
  },
  async delete(id, props) {
    const m = await import("pulumi-cocoonset/provider");
    await m.dynamic.remove(id, props);
  },
  async read(id, props) {
    const m = await import("pulumi-cocoonset/provider");
    return m.dynamic.read(id, props);
  },
};

/** Inputs of {@link Slots}, as Pulumi inputs. */
export type SlotsArgs = { [K in keyof SlotsInputs]: pulumi.Input<SlotsInputs[K]> };

/** The sub-agent slots of one CocoonSet, materialised by the engine during `pulumi up`. */
export class Slots extends pulumi.dynamic.Resource {
  /** Per slot: pod name, uid, phase and readiness. */
  declare readonly pods: pulumi.Output<
    Record<string, { pod: string; uid: string; phase: string; ready: boolean }>
  >;
  /** The desired slots (keyed by slot number or toolbox name). */
  declare readonly slots: pulumi.Output<SlotMap>;
  /** VM name of the main agent. */
  declare readonly mainVmName: pulumi.Output<string>;
  /** The CocoonSet's phase after the last `up`. */
  declare readonly phase: pulumi.Output<string | undefined>;
  /** The CocoonSet's status after the last `up` (undefined while it has none). */
  declare readonly status: pulumi.Output<CocoonSetStatus | undefined>;
  /** uid of the CocoonSet. */
  declare readonly uid: pulumi.Output<string>;
  /** The spec the slots were built from. */
  declare readonly spec: pulumi.Output<CocoonSetSpec>;

  constructor(name: string, args: SlotsArgs, opts: pulumi.CustomResourceOptions = {}) {
    super(
      slotsProvider,
      name,
      { ...args, pods: undefined, mainVmName: undefined, phase: undefined, status: undefined },
      opts,
      "cocoonset",
      "Slots",
    );
  }
}
