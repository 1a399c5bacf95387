// The capacity forecast (engine/capacity/forecast.ts): tables with hand-computed figures, and a
// property: the forecast never says "fits" for pods a node's allocatable cannot hold.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import {
  type ForecastCreate,
  type ForecastNode,
  type ForecastPod,
  forecastCapacity,
  formatAmount,
  mayLandOn,
} from "../../../engine/capacity/index.js";
import type { Toleration } from "../../../engine/spec/kube-types.js";

type R = Record<string, string>;

function node(
  name: string,
  allocatable: R,
  opts: {
    labels?: R;
    taints?: { key: string; value?: string; effect: string }[];
    unschedulable?: boolean;
  } = {},
): ForecastNode {
  return {
    metadata: { name, labels: { "kubernetes.io/hostname": name, ...opts.labels } },
    spec: { taints: opts.taints, unschedulable: opts.unschedulable },
    status: { allocatable },
  };
}

function pod(
  requests: R,
  opts: {
    node?: string;
    uid?: string;
    phase?: string;
    init?: R;
    overhead?: R;
    selector?: R;
    tolerations?: Toleration[];
    affinity?: { key: string; operator: string; values?: string[] }[][];
  } = {},
): ForecastPod {
  return {
    metadata: { uid: opts.uid },
    spec: {
      nodeName: opts.node,
      containers: [{ resources: { requests } }],
      initContainers: opts.init && [{ resources: { requests: opts.init } }],
      overhead: opts.overhead,
      nodeSelector: opts.selector,
      tolerations: opts.tolerations,
      affinity: opts.affinity && {
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: {
            nodeSelectorTerms: opts.affinity.map((matchExpressions) => ({ matchExpressions })),
          },
        },
      },
    },
    status: opts.phase ? { phase: opts.phase } : undefined,
  };
}

const create = (slot: string | number, p: ForecastPod, follows?: string): ForecastCreate => ({
  slot: String(slot),
  pod: p,
  ...(follows !== undefined && { follows }),
});

const text = (a: Record<string, bigint>) =>
  Object.fromEntries(Object.entries(a).map(([k, v]) => [k, formatAmount(k, v)]));

describe("forecastCapacity: bound pods", () => {
  const n = node("n1", { cpu: "12", memory: "48Gi", pods: "20" });

  it("a scale-up with room fits", () => {
    const f = forecastCapacity({
      nodes: [n],
      pods: [pod({ cpu: "4" }, { node: "n1" })],
      creates: [1, 2].map((s) => create(s, pod({ cpu: "2", memory: "4Gi" }, { node: "n1" }))),
    });
    assert.equal(f.fits, true);
    assert.deepEqual(f.nodes[0].refused, []);
    assert.deepEqual(text(f.nodes[0].free), { cpu: "8", memory: "48Gi", pods: "19" });
    assert.deepEqual(text(f.nodes[0].requested), { cpu: "4", memory: "8Gi", pods: "2" });
  });

  it("names the slots the node would refuse, in creation order, and the shortfall", () => {
    // 11.5 of 12 cores taken: room for 0.5; each new slot wants 1.
    const f = forecastCapacity({
      nodes: [n],
      pods: [pod({ cpu: "11500m" }, { node: "n1" })],
      creates: [13, 14, 15, 16].map((s) => create(s, pod({ cpu: "1" }, { node: "n1" }))),
    });
    assert.equal(f.fits, false);
    assert.deepEqual(f.nodes[0].refused, ["13", "14", "15", "16"]);
    assert.deepEqual(
      f.nodes[0].short.map((s) => [
        s.resource,
        formatAmount("cpu", s.free),
        formatAmount("cpu", s.requested),
      ]),
      [["cpu", "500m", "4"]],
    );
  });

  it("admits what fits and refuses the rest, a refused pod taking nothing", () => {
    const f = forecastCapacity({
      nodes: [node("n1", { cpu: "3", pods: "10" })],
      pods: [],
      creates: [
        create(1, pod({ cpu: "2" }, { node: "n1" })),
        create(2, pod({ cpu: "2" }, { node: "n1" })),
        create(3, pod({ cpu: "1" }, { node: "n1" })),
      ],
    });
    assert.deepEqual(f.nodes[0].refused, ["2"]);
  });

  it("counts the pods count, init containers and overhead as the scheduler does", () => {
    const f = forecastCapacity({
      nodes: [node("n1", { cpu: "4", memory: "8Gi", pods: "2" })],
      pods: [pod({ cpu: "1" }, { node: "n1", init: { cpu: "2" } })],
      creates: [
        create(1, pod({ cpu: "1" }, { node: "n1", overhead: { cpu: "250m" } })),
        create(2, pod({}, { node: "n1" })),
      ],
    });
    assert.deepEqual(text(f.nodes[0].free), { cpu: "2", memory: "8Gi", pods: "1" });
    assert.deepEqual(f.nodes[0].refused, ["2"]);
    assert.deepEqual(
      f.nodes[0].short.map((s) => s.resource),
      ["pods"],
    );
  });

  it("frees the room of pods the deploy deletes and of finished pods", () => {
    const f = forecastCapacity({
      nodes: [node("n1", { cpu: "2", pods: "10" })],
      pods: [
        pod({ cpu: "1" }, { node: "n1", uid: "old" }),
        pod({ cpu: "1" }, { node: "n1", phase: "Failed" }),
      ],
      freed: new Set(["old"]),
      creates: [create(1, pod({ cpu: "2" }, { node: "n1" }))],
    });
    assert.equal(f.fits, true);
  });

  it("counts pods of other namespaces bound to the node and ignores other nodes' pods", () => {
    const f = forecastCapacity({
      nodes: [node("n1", { cpu: "2", pods: "10" }), node("n2", { cpu: "2", pods: "10" })],
      pods: [pod({ cpu: "1500m" }, { node: "n1" }), pod({ cpu: "2" }, { node: "n2" })],
      creates: [create(1, pod({ cpu: "1" }, { node: "n1" }))],
    });
    assert.deepEqual(
      f.nodes.map((x) => [x.node, x.refused]),
      [["n1", ["1"]]],
    );
  });

  it("checks extended resources the pods request; a node that lists none has none", () => {
    const f = forecastCapacity({
      nodes: [
        node("n1", { cpu: "8", pods: "10", "example.com/gpu": "1" }),
        node("n2", { cpu: "8", pods: "10" }),
      ],
      pods: [],
      creates: [
        create(1, pod({ "example.com/gpu": "1" }, { node: "n1" })),
        create(2, pod({ "example.com/gpu": "1" }, { node: "n1" })),
        create(3, pod({ "example.com/gpu": "1" }, { node: "n2" })),
      ],
    });
    assert.deepEqual(
      f.nodes.map((x) => [x.node, x.refused]),
      [
        ["n1", ["2"]],
        ["n2", ["3"]],
      ],
    );
  });

  it("refuses every pod bound to a node that does not exist", () => {
    const f = forecastCapacity({
      nodes: [],
      pods: [],
      creates: [create(1, pod({}, { node: "gone" }))],
    });
    assert.deepEqual([f.nodes[0].found, f.nodes[0].refused], [false, ["1"]]);
  });
});

describe("forecastCapacity: a main agent the scheduler places", () => {
  const pool = { "cocoonstack.io/pool": "default" };
  const main = (requests: R, extra: Parameters<typeof pod>[1] = {}) =>
    pod(requests, { selector: pool, ...extra });

  it("fits when a matching node holds the main agent and every pod bound next to it", () => {
    const f = forecastCapacity({
      nodes: [
        node("small", { cpu: "2", pods: "10" }, { labels: pool }),
        node("big", { cpu: "8", pods: "10" }, { labels: pool }),
      ],
      pods: [],
      creates: [
        create(0, main({ cpu: "1" })),
        ...[1, 2, 3].map((s) => create(s, pod({ cpu: "1" }), "0")),
      ],
    });
    assert.equal(f.fits, true);
    assert.deepEqual(
      [f.placements[0].node, f.placements[0].candidates, f.placements[0].slots],
      ["big", 2, ["0", "1", "2", "3"]],
    );
  });

  it("names the best node's shortfall when no node holds the group", () => {
    const f = forecastCapacity({
      nodes: [
        node("a", { cpu: "4", memory: "4Gi", pods: "10" }, { labels: pool }),
        node("b", { cpu: "6", memory: "16Gi", pods: "10" }, { labels: pool }),
        node("other-pool", { cpu: "100", memory: "1Ti", pods: "100" }),
      ],
      pods: [],
      creates: [
        create(0, main({ cpu: "2", memory: "2Gi" })),
        ...[1, 2, 3].map((s) => create(s, pod({ cpu: "2", memory: "2Gi" }), "0")),
      ],
    });
    const p = f.placements[0];
    assert.deepEqual([f.fits, p.fits, p.candidates, p.node], [false, false, 2, "b"]);
    assert.deepEqual(
      p.short.map((s) => [
        s.resource,
        formatAmount("cpu", s.free),
        formatAmount("cpu", s.requested),
      ]),
      [["cpu", "6", "8"]],
    );
  });

  it("keeps to nodeSelector, required node affinity, taints and unschedulable nodes", () => {
    const big = { cpu: "8", pods: "10" };
    const nodes = [
      node("tainted", big, {
        labels: pool,
        taints: [{ key: "dedicated", value: "gpu", effect: "NoSchedule" }],
      }),
      node("cordoned", big, { labels: pool, unschedulable: true }),
      node("soft-taint", big, { labels: pool, taints: [{ key: "x", effect: "PreferNoSchedule" }] }),
      node("wrong-class", big, { labels: { ...pool, "cocoonstack.io/snapshot-cpu-class": "arm" } }),
    ];
    const f = forecastCapacity({
      nodes,
      pods: [],
      creates: [
        create(
          0,
          main({ cpu: "1" }, { selector: { ...pool, "cocoonstack.io/snapshot-cpu-class": "x86" } }),
        ),
      ],
    });
    assert.deepEqual([f.placements[0].candidates, f.fits], [0, false]);
    assert.deepEqual(
      nodes.filter((x) => mayLandOn(main({}), x)).map((x) => x.metadata.name),
      ["soft-taint", "wrong-class"],
    );
    const tolerant = main(
      {},
      { tolerations: [{ key: "dedicated", operator: "Equal", value: "gpu" }] },
    );
    assert.equal(mayLandOn(tolerant, nodes[0]), true);
    const pinned = main(
      {},
      { affinity: [[{ key: "kubernetes.io/hostname", operator: "In", values: ["cordoned"] }]] },
    );
    assert.deepEqual(
      nodes.filter((x) => mayLandOn(pinned, x)).map((x) => x.metadata.name),
      [],
    );
    const anyTaint = main({}, { tolerations: [{ operator: "Exists" }] });
    assert.equal(mayLandOn(anyTaint, nodes[1]), true);
  });

  it("counts a placed group on its node for what comes after it", () => {
    const f = forecastCapacity({
      nodes: [node("only", { cpu: "3", pods: "10" }, { labels: pool })],
      pods: [],
      creates: [create(0, main({ cpu: "2" })), create("tools", main({ cpu: "2" }))],
    });
    assert.deepEqual(
      f.placements.map((p) => p.fits),
      [true, false],
    );
  });
});

describe("forecastCapacity: property", () => {
  const resources = ["cpu", "memory", "example.com/gpu"] as const;
  const qty = fc.integer({ min: 0, max: 6 }).map(String);
  const requests = fc.record(
    { cpu: qty, memory: qty, "example.com/gpu": qty },
    { requiredKeys: [] },
  );
  const nodeArb = fc.record({
    alloc: fc.record(
      {
        cpu: qty,
        memory: qty,
        pods: fc.integer({ min: 0, max: 5 }).map(String),
        "example.com/gpu": qty,
      },
      { requiredKeys: ["pods"] },
    ),
    pool: fc.boolean(),
  });

  const sum = (ps: readonly ForecastPod[], k: string) =>
    ps.reduce((t, p) => t + Number(p.spec?.containers?.[0].resources?.requests?.[k] ?? 0), 0);

  it("never says a node fits pods its allocatable cannot hold", () => {
    fc.assert(
      fc.property(
        fc.array(nodeArb, { minLength: 1, maxLength: 3 }),
        fc.array(
          fc.record({
            node: fc.nat(2),
            req: requests,
            phase: fc.constantFrom(undefined, "Running", "Failed"),
            freed: fc.boolean(),
          }),
          { maxLength: 6 },
        ),
        fc.array(
          fc.record({
            node: fc.option(fc.nat(2), { nil: undefined }),
            req: requests,
            follows: fc.boolean(),
          }),
          { maxLength: 8 },
        ),
        (nodeSpecs, liveSpecs, createSpecs) => {
          const name = (i: number) => `n${i}`;
          const pool = { "cocoonstack.io/pool": "p" };
          const nodes = nodeSpecs.map((s, i) =>
            node(name(i), s.alloc, { labels: s.pool ? pool : {} }),
          );
          const live = liveSpecs.map((s, i) =>
            pod(s.req, { node: name(s.node), uid: `u${i}`, phase: s.phase }),
          );
          const freed = new Set(liveSpecs.flatMap((s, i) => (s.freed ? [`u${i}`] : [])));
          let leader: string | undefined;
          const creates = createSpecs.map((s, i) => {
            if (s.node !== undefined) return create(i, pod(s.req, { node: name(s.node) }));
            if (s.follows && leader !== undefined) return create(i, pod(s.req), leader);
            leader = String(i);
            return create(i, pod(s.req, { selector: pool }));
          });
          const f = forecastCapacity({ nodes, pods: live, freed, creates });
          const staying = (n: string) =>
            live.filter(
              (p, i) =>
                p.spec?.nodeName === n && p.status?.phase !== "Failed" && !freed.has(`u${i}`),
            );
          // What each node would end up holding, by the forecast's own account.
          const held = new Map<string, ForecastPod[]>();
          for (const nf of f.nodes) {
            const admitted = creates.filter(
              (c) =>
                c.pod.spec?.nodeName === nf.node &&
                nf.slots.includes(c.slot) &&
                !nf.refused.includes(c.slot),
            );
            held.set(
              nf.node,
              admitted.map((c) => c.pod),
            );
            if (nf.refused.length === 0)
              assert.equal(
                admitted.length,
                creates.filter((c) => c.pod.spec?.nodeName === nf.node).length,
              );
          }
          for (const p of f.placements) {
            if (!p.fits) continue;
            const group = creates.filter((c) => p.slots.includes(c.slot)).map((c) => c.pod);
            held.set(p.node!, [...(held.get(p.node!) ?? []), ...group]);
          }
          for (const [n, pods] of held) {
            const spec = nodeSpecs[Number(n.slice(1))];
            if (!spec) {
              assert.equal(pods.length, 0, `nothing is admitted on missing node ${n}`);
              continue;
            }
            const all = [...staying(n), ...pods];
            for (const k of resources) {
              const want = sum(pods, k);
              if (want === 0) continue;
              assert.ok(
                sum(all, k) <= Number(spec.alloc[k] ?? 0),
                `${n} ${k}: ${sum(all, k)} held of ${spec.alloc[k] ?? 0}`,
              );
            }
            if (pods.length > 0)
              assert.ok(
                all.length <= Number(spec.alloc.pods),
                `${n} pods: ${all.length} of ${spec.alloc.pods}`,
              );
          }
          if (f.fits) assert.ok(f.nodes.every((x) => x.found && x.short.length === 0));
        },
      ),
      { numRuns: 500 },
    );
  });
});
