/**
 * `cocoonset doctor`'s judgement (engine/preflight/findings.ts), pure: facts in, one finding per
 * line out, with the severity that decides the exit status. Tables of facts, each changed in
 * one part from a healthy cluster.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  blocks,
  doctorFindings,
  nodeKind,
  parseKubeVersion,
  renderFindings,
  requiredAccess,
  resourceName,
  type DoctorFacts,
  type Finding,
  type NodeFact,
} from "../../../engine/preflight/findings.js";

const node = (name: string, over: Partial<NodeFact> = {}): NodeFact => ({
  name,
  kind: "virtual-kubelet",
  ready: true,
  unschedulable: false,
  allocatable: { cpu: "8", memory: "16Gi", pods: "110" },
  ...over,
});

function healthy(): DoctorFacts {
  return {
    server: "https://k8s.example:6443",
    source: "~/.kube/config",
    namespace: "agents",
    apiServer: { version: "v1.36.3" },
    crds: [
      { name: "cocoonsets.cocoonset.cocoonstack.io", state: "matches" },
      { name: "cocoonhibernations.cocoonset.cocoonstack.io", state: "matches" },
    ],
    controllers: {
      deployments: [
        {
          namespace: "cocoonset-system",
          name: "cocoonset-controller",
          image: "r.example/c@sha256:ab",
          replicas: 1,
          readyReplicas: 1,
          updatedReplicas: 1,
        },
      ],
    },
    access: requiredAccess("agents", "cocoonset-system").map((check) => ({ check, allowed: true })),
    pools: [{ pool: "default", nodes: [node("vk-1"), node("vk-2")] }],
    registry: {
      address: "r.example/snapshots",
      host: "r.example",
      from: "--oci-registry",
      ping: { ok: true },
      credentials: true,
      pull: { ok: true },
      push: { ok: true },
    },
  };
}

const bad = (fs: Finding[]) => fs.filter((f) => f.severity === "error" || f.severity === "warn");

describe("doctor findings", () => {
  it("a healthy cluster: every part ok, nothing blocks", () => {
    const fs = doctorFindings(healthy());
    assert.deepEqual(bad(fs), []);
    assert.equal(blocks(fs), false);
    assert.deepEqual(
      [...new Set(fs.map((f) => f.check))],
      ["apiserver", "crd", "controller", "rbac", "pool", "registry"],
    );
    assert.match(renderFindings(fs), /nothing blocks a deploy\n?$/);
  });

  const cases: {
    name: string;
    change: (f: DoctorFacts) => void;
    severity: "error" | "warn";
    line: RegExp;
  }[] = [
    {
      name: "the API server does not answer",
      change: (f) => (f.apiServer = { error: "connect ECONNREFUSED" }),
      severity: "error",
      line: /does not answer \(connect ECONNREFUSED\): check the kubeconfig/,
    },
    {
      name: "an old Kubernetes",
      change: (f) => (f.apiServer = { version: "v1.27.4-eks-1" }),
      severity: "error",
      line: /Kubernetes v1.27.4-eks-1: the CRDs' validation rules need 1.29 or newer/,
    },
    {
      name: "no CRD",
      change: (f) => (f.crds[0].state = "missing"),
      severity: "error",
      line: /cocoonsets.cocoonset.cocoonstack.io is not installed \(a Fleet needs the CocoonSet CRD.*cocoonset manifests/,
    },
    {
      name: "another version's CRD",
      change: (f) => (f.crds[1].state = "differs"),
      severity: "warn",
      line: /cocoonhibernations.* differs from this version's/,
    },
    {
      name: "no controller",
      change: (f) => (f.controllers = { deployments: [] }),
      severity: "warn",
      line: /no controller Deployment/,
    },
    {
      name: "a controller not ready",
      change: (f) => {
        if ("deployments" in f.controllers) f.controllers.deployments[0].readyReplicas = 0;
      },
      severity: "warn",
      line: /cocoonset-system\/cocoonset-controller 0\/1 ready, image r.example\/c@sha256:ab.*describe deploy/,
    },
    {
      name: "a caller without pods/create",
      change: (f) => {
        const a = f.access.find((x) => x.check.resource === "pods" && x.check.verb === "create")!;
        a.allowed = false;
      },
      severity: "error",
      line: /you cannot create pods in namespace agents: pulumi up creates the agents' pods.*verb create on pods/,
    },
    {
      name: "a caller who cannot install CRDs (only an Operator needs it)",
      change: (f) => {
        const a = f.access.find(
          (x) => x.check.resource === "customresourcedefinitions" && x.check.verb === "create",
        )!;
        a.allowed = false;
      },
      severity: "warn",
      line: /you cannot create customresourcedefinitions.apiextensions.k8s.io \(cluster-wide\), which only a program that deploys an Operator needs/,
    },
    {
      name: "a caller who cannot list nodes (preview makes no forecast)",
      change: (f) => {
        f.access.find((x) => x.check.resource === "nodes")!.allowed = false;
      },
      severity: "warn",
      line: /you cannot list nodes \(cluster-wide\): preview forecasts room on the nodes/,
    },
    {
      name: "no node in the pool",
      change: (f) => (f.pools = [{ pool: "gpu", nodes: [] }]),
      severity: "error",
      line: /no node in pool gpu \(label cocoonstack.io\/pool=gpu\).*kubectl label node NODE cocoonstack.io\/pool=gpu/,
    },
    {
      name: "a pool of ordinary kubelets",
      change: (f) => (f.pools = [{ pool: "default", nodes: [node("w-1", { kind: "kubelet" })] }]),
      severity: "error",
      line: /none runs the node agent \(no virtual-kubelet.io\/provider taint\)/,
    },
    {
      name: "a pool whose node-agent nodes are all cordoned",
      change: (f) =>
        (f.pools = [{ pool: "default", nodes: [node("vk-1", { unschedulable: true })] }]),
      severity: "error",
      line: /none of its 1 node-agent node is Ready and schedulable/,
    },
    {
      name: "a pool that also holds an ordinary kubelet",
      change: (f) => {
        f.pools = [{ pool: "default", nodes: [node("vk-1"), node("w-1", { kind: "kubelet" })] }];
      },
      severity: "warn",
      line: /also holds 1 ordinary kubelet node \(w-1\)/,
    },
    {
      name: "nodes that cannot be listed",
      change: (f) => (f.pools = [{ pool: "default", nodes: { error: "HTTP 403" } }]),
      severity: "warn",
      line: /the nodes of pool default cannot be listed \(HTTP 403\)/,
    },
    {
      name: "a registry that does not answer",
      change: (f) => (f.registry!.ping = { ok: false, status: 0, error: "ECONNREFUSED" }),
      severity: "error",
      line: /does not answer \(ECONNREFUSED\)/,
    },
    {
      name: "a registry refusing the keychain's credentials",
      change: (f) =>
        (f.registry!.pull = { ok: false, status: 401, error: "HTTP 401 unauthorized" }),
      severity: "error",
      line: /refuses the Docker keychain's credentials to read tags.*docker login r.example/,
    },
    {
      name: "a registry asking for credentials the keychain lacks",
      change: (f) => {
        f.registry!.credentials = false;
        f.registry!.pull = { ok: false, status: 401, error: "HTTP 401" };
      },
      severity: "error",
      line: /asks for credentials to read tags and the Docker keychain has none for it/,
    },
    {
      name: "credentials without the push right",
      change: (f) => (f.registry!.push = { ok: false, status: 403, error: "HTTP 403 denied" }),
      severity: "error",
      line: /denies push to these credentials \(HTTP 403\)/,
    },
  ];
  for (const c of cases)
    it(c.name, () => {
      const facts = healthy();
      c.change(facts);
      const fs = doctorFindings(facts);
      const found = bad(fs);
      assert.equal(found.length, 1, renderFindings(fs));
      assert.equal(found[0].severity, c.severity);
      assert.match(found[0].message, c.line);
      assert.equal(blocks(fs), c.severity === "error");
    });

  it("no registry given: one line of information, nothing blocks", () => {
    const facts = healthy();
    delete facts.registry;
    const fs = doctorFindings(facts);
    assert.deepEqual(bad(fs), []);
    assert.match(fs.at(-1)!.message, /no snapshot registry given/);
  });

  it("an Operator's missing rights: one line per resource", () => {
    const facts = healthy();
    for (const a of facts.access) if (a.check.resource === "deployments") a.allowed = false;
    const lines = doctorFindings(facts).filter((f) => f.check === "rbac" && f.severity === "warn");
    assert.equal(lines.length, 1);
    assert.match(
      lines[0].message,
      /^you cannot get, create, patch, delete deployments.apps in namespace cocoonset-system, which only a program that deploys an Operator needs .*verbs get, create, patch, delete on deployments.apps$/,
    );
  });

  it("one line per missing verb", () => {
    const facts = healthy();
    for (const a of facts.access) if (a.check.scope === "fleet") a.allowed = false;
    const fleetChecks = facts.access.filter((a) => a.check.scope === "fleet").length;
    const lines = doctorFindings(facts).filter((f) => f.check === "rbac" && f.severity === "error");
    assert.equal(lines.length, fleetChecks);
    assert.equal(new Set(lines.map((l) => l.message)).size, fleetChecks);
  });
});

describe("doctor's pure helpers", () => {
  it("a node's kind", () => {
    const cases: [Parameters<typeof nodeKind>[0], string][] = [
      [
        { metadata: {}, spec: { taints: [{ key: "virtual-kubelet.io/provider" }] } },
        "virtual-kubelet",
      ],
      [{ metadata: { labels: { type: "virtual-kubelet" } } }, "virtual-kubelet"],
      [{ metadata: { annotations: { "kwok.x-k8s.io/node": "fake" } } }, "simulated"],
      [{ metadata: { labels: { type: "kwok" } }, spec: {} }, "kubelet"],
      [{ metadata: {} }, "kubelet"],
    ];
    for (const [n, kind] of cases) assert.equal(nodeKind(n), kind, JSON.stringify(n));
  });

  it("a Kubernetes version", () => {
    assert.deepEqual(parseKubeVersion("v1.36.3"), { major: 1, minor: 36 });
    assert.deepEqual(parseKubeVersion("v1.30.2-eks-1234"), { major: 1, minor: 30 });
    assert.equal(parseKubeVersion("unknown"), undefined);
  });

  it("the rights a Fleet's up and destroy need include the pass's and the CocoonSet's", () => {
    const names = requiredAccess("agents", "sys")
      .filter((c) => c.scope !== "operator")
      .map((c) => `${c.verb} ${resourceName(c)}${c.namespace ? ` -n ${c.namespace}` : ""}`);
    for (const want of [
      "create pods -n agents",
      "delete pods -n agents",
      "create cocoonsets.cocoonset.cocoonstack.io -n agents",
      "patch cocoonsets.cocoonset.cocoonstack.io/status -n agents",
      "update cocoonsets.cocoonset.cocoonstack.io/finalizers -n agents",
      "delete jobs.batch -n agents",
      "list nodes",
    ])
      assert.ok(names.includes(want), `${want} in ${names.join(", ")}`);
  });
});
