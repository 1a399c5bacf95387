/** Room on nodes: a pod's requests as the scheduler and the kubelet count them, the kubelet's fit check, and the capacity forecast of a plan. Only what other layers use is exported here. */
export {
  type CapacityPod,
  type Insufficient,
  isFinished,
  kubeletFitErrors,
  outOfReason,
  podRequests,
  rejectionMessage,
  type Resources,
} from "./requests.js";
export {
  type Amounts,
  type CapacityForecast,
  type ForecastCreate,
  type ForecastInput,
  type ForecastNode,
  type ForecastPod,
  forecastCapacity,
  formatAmount,
  mayLandOn,
  type NodeForecast,
  type PlacementForecast,
  type Shortfall,
} from "./forecast.js";
export { forecastToJSON, renderForecast, slotRanges } from "./render.js";
export { capacityReasons } from "./reasons.js";
export { placementProblem, type PlacementNode } from "./placement.js";
