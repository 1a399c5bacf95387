/**
 * An Operator and two Fleets (`fa`, linked to the Operator, and `fb`, not linked), for the
 * structural changes Pulumi allows: a parent, an alias, a rename, `deleteBeforeReplace`.
 *
 * Config: `namespace` (required, must exist), `operatorNamespace` (required, the Operator
 * creates it), `operatorName` [own-op], `group` (put every component under a component of
 * this name) [none], `aliasGroup` (alias the components' old parent: a group's name, or ""
 * for the stack) [none], `fleetA` [fa], `fleetAOld` (alias of fleet A's old name) [none],
 * `adopt` (`adoptCocoonSet` and `adoptCrd`) [false], `deleteBeforeReplace` [false], `withB`
 * [true], `cpuB` (fleet B's agents' cpu request) [none], `replicasB` [1], `replicasA` (fleet A's replicas, given
 * as an Output) [1], `onlyB` (declare fleet B alone) [false], `withA` [true].
 */
import * as pulumi from "@pulumi/pulumi";
import { Fleet, Operator } from "pulumi-cocoonset";

const config = new pulumi.Config();
const namespace = config.require("namespace");
const group = config.get("group");
const aliasGroup = config.get("aliasGroup");
const fleetAOld = config.get("fleetAOld");
const adopt = config.getBoolean("adopt") ?? false;
const deleteBeforeReplace = config.getBoolean("deleteBeforeReplace") ?? false;
const cpuB = config.get("cpuB");
const replicasA = config.get("replicasA");
const replicasB = config.getNumber("replicasB") ?? 1;

const parent = group ? new pulumi.ComponentResource("e2e:index:Group", group) : undefined;
/** The component's old parent when `aliasGroup` says where it was (the stack: "", or a group). */
const moved = (): pulumi.Alias[] =>
  aliasGroup === undefined
    ? []
    : [
        {
          parent:
            aliasGroup === ""
              ? pulumi.rootStackResource
              : pulumi.createUrn(aliasGroup, "e2e:index:Group"),
        },
      ];
const options = (aliases: pulumi.Alias[] = []) => ({
  parent,
  aliases: [...moved(), ...aliases],
  ...(deleteBeforeReplace ? { deleteBeforeReplace } : {}),
});

// `onlyB`: the program of a stack that holds fleet B alone (moved to it with `pulumi state move`).
const onlyB = config.getBoolean("onlyB") ?? false;

const operatorName = config.get("operatorName") ?? "own-op";
const operator = onlyB
  ? undefined
  : new Operator(
      operatorName,
      {
        namespace: config.require("operatorNamespace"),
        ...(adopt ? { adoptCrd: "cocoonsets.cocoonset.cocoonstack.io" } : {}),
      },
      options(),
    );

const spec = (cpu?: string, replicas: pulumi.Input<number> = 1) => ({
  agent: {
    replicas,
    image: "agents/coder:1",
    ...(cpu ? { resources: { requests: { cpu } } } : {}),
  },
});

const fleetA = config.get("fleetA") ?? "fa";
const a =
  onlyB || !(config.getBoolean("withA") ?? true)
    ? undefined
    : new Fleet(
        fleetA,
        {
          namespace,
          name: "coder-a",
          operator,
          adoptCocoonSet: adopt,
          timeoutSeconds: 120,
          releaseTimeoutSeconds: 60,
          // An Output, as from another resource: checked once known, by the Fleet's guard.
          spec: spec(undefined, replicasA ? pulumi.output(Number(replicasA)) : 1),
        },
        options(fleetAOld ? [{ name: fleetAOld }] : []),
      );

// Not linked to the Operator (no `operator`, no dependsOn): destroyed beside it, not before
// it. Add it once the CRD is installed (a Fleet with no Operator needs the CRD there).
const b =
  (config.getBoolean("withB") ?? true)
    ? new Fleet(
        "fb",
        {
          namespace,
          name: "coder-b",
          adoptCocoonSet: adopt,
          timeoutSeconds: 120,
          releaseTimeoutSeconds: 60,
          spec: spec(cpuB, replicasB),
        },
        options(),
      )
    : undefined;

export const podsA = a?.podNames;
export const podsB = b?.podNames;
