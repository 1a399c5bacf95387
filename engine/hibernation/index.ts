/** The CocoonHibernation planner: what one CR's reconcile does, as engine actions. Only what other layers use is exported here. */
export {
  type HibernationAction,
  type HibernationPlan,
  type HibernationRefusal,
  hibernationRefusalMessage,
} from "./hibernation-plan.js";
export {
  type HibernationInput,
  hibernationProbe,
  planHibernation,
  type TagFact,
} from "./hibernation.js";
