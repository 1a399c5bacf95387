/**
 * The CPU one controller pass spends planning a converged 1×1000 fleet, in-process: the
 * attributed view and `planPass` over a CocoonSet whose record names its 1,001 pods, as the
 * controller plans it on every pod event. No cluster. Prints the mean CPU milliseconds of a
 * planned pass (`--rounds N`, default 20, after 5 to warm up), from frozen objects as the
 * controller's cache holds them and from a fresh read's, in the same process.
 */
import { attributedView } from "../engine/attribution/index.js";
import { planPass } from "../engine/planner/index.js";
import { buildAgentPod } from "../engine/pods/index.js";
import { frozen, type CocoonSet, type Pod } from "../engine/spec/index.js";
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
/**
 * The mean CPU milliseconds of a planned pass over `fleet`: a new list each pass, as the
 * controller's reader gives one (so no list is kept between passes).
 */
function measure(fleet: { cs: CocoonSet; pods: readonly Pod[] }): number {
  const pass = () => {
    const listed = [...fleet.pods];
    return planPass({
      cocoonSet: attributedView(fleet.cs, listed),
      pods: listed,
      nowMs: Date.parse("2026-01-01T00:00:00Z"),
    });
  };
  for (let i = 0; i < 5; i++) pass();
  const start = process.cpuUsage();
  for (let i = 0; i < rounds; i++) pass();
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1000 / rounds;
}

// The controller plans from its caches' own objects, frozen, and keeps what it derived from
// them between passes (engine/spec/frozen.ts); a fresh read (pulumi up, cocoonset plan) has
// new objects each pass. Copies, so that freezing one does not freeze the other.
const cached = frozen(structuredClone({ cs, pods }));
const fresh = () => structuredClone({ cs, pods });
const fromCache = measure(cached);
const fromFresh = measure(fresh());
const ms = (x: number) => `${x.toFixed(1)} ms CPU`;
console.log(
  `planning a pass of 1x${REPLICAS} (${pods.length} pods), mean of ${rounds}: from the controller's cache (frozen objects) ${ms(fromCache)}; from a fresh read ${ms(fromFresh)}; ratio ${(fromCache / fromFresh).toFixed(2)}`,
);
