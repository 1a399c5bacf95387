/**
 * pulumi-cocoonset: Pulumi components for fleets of AI agents on Kubernetes.
 *
 * - {@link Operator} (`cocoonset:index:Operator`): the CRD, RBAC and controller, once per cluster.
 * - {@link Fleet} (`cocoonset:index:Fleet`): one CocoonSet and its slots.
 */
export { Operator, type OperatorArgs } from "./operator.js";
export { Fleet, type FleetArgs } from "./fleet.js";
export { ArgumentsError, type ArgumentProblem } from "./arguments-error.js";
export { Slots, slotsProvider, PROVIDER_VERSION, type SlotsArgs } from "./slots.js";
export type * from "../engine/spec/generated/types.js";
