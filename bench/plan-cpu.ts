/**
 * The CPU one controller pass spends planning a converged 1×1000 fleet, in-process: the
 * attributed view and `planPass` over a CocoonSet whose record names its 1,001 pods, as the
 * controller plans it on every pod event. No cluster. Prints the mean CPU milliseconds of a
 * planned pass (`--rounds N`, default 20, after 5 to warm up).
 */
import { attributedView } from "../engine/attribution/index.js";
import { planPass } from "../engine/planner/index.js";
import { buildAgentPod } from "../engine/pods/index.js";
import type { CocoonSet, Pod } from "../engine/spec/index.js";
import type { VMRecord } from "../engine/spec/generated/types.js";
import { benchFlags } from "./support.js";

const REPLICAS = 1000;
/** What `--help` prints. */
const USAGE = `node dist/bench/plan-cpu.js [--rounds N]: the mean CPU milliseconds of one planned pass over a
converged 1x1000 fleet, in-process, no cluster.

  --rounds N  passes measured after 5 to warm up (default 20)
  -h, --help  this text`;
const flags = benchFlags(USAGE, { rounds: { type: "string", default: "20" } });
const rounds = Number(flags.rounds);
if (!Number.isInteger(rounds) || rounds < 1)
  throw new Error(`--rounds: a positive integer (got ${flags.rounds})`);

const spec: CocoonSet = {
  apiVersion: "cocoonset.cocoonstack.io/v1",
  kind: "CocoonSet",
  metadata: { name: "demo", namespace: "team", uid: "uid-demo", generation: 1 },
  spec: { agent: { image: "ghcr.io/acme/agent:1", replicas: REPLICAS } },
};
const placement = { mainVMName: "vk-team-demo-0", mainNodeName: "node-a" };
const pods: Pod[] = [];
const vms: Record<string, VMRecord> = {};
for (let slot = 0; slot <= REPLICAS; slot++) {
  const pod: Pod = structuredClone(
    slot === 0 ? buildAgentPod(spec, 0) : buildAgentPod(spec, slot, placement),
  );
  pod.metadata = { ...pod.metadata, uid: `pod-uid-${slot}` };
  if (pod.spec) pod.spec.nodeName ??= "node-a";
  pod.status = { phase: "Running", conditions: [{ type: "Ready", status: "True" }] };
  pods.push(pod);
  vms[String(slot)] = { vm: `vk-team-demo-${slot}`, podUID: `pod-uid-${slot}` };
}
const cs: CocoonSet = {
  ...spec,
  status: {
    readyAgents: REPLICAS + 1,
    desiredAgents: REPLICAS + 1,
    readyToolboxes: 0,
    desiredToolboxes: 0,
    vms,
  },
};
// A new list each pass, as the controller's reader gives one (so nothing is kept between passes).
const pass = () => {
  const listed = [...pods];
  return planPass({
    cocoonSet: attributedView(cs, listed),
    pods: listed,
    nowMs: Date.parse("2026-01-01T00:00:00Z"),
  });
};
for (let i = 0; i < 5; i++) pass();
const start = process.cpuUsage();
for (let i = 0; i < rounds; i++) pass();
const used = process.cpuUsage(start);
console.log(
  `planning a pass of 1x${REPLICAS} (${pods.length} pods): ${((used.user + used.system) / 1000 / rounds).toFixed(1)} ms CPU (mean of ${rounds})`,
);
