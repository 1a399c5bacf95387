/**
 * `cocoonset manifests` prints the objects the Operator registers for the same arguments:
 * the Operator under `pulumi.runtime.setMocks` (what it would send to the Kubernetes
 * provider) against the real CLI's YAML output. The only differences allowed are the two
 * Pulumi-only annotations (the install stamp on the CRDs and the Deployment's skipAwait).
 */
import * as pulumi from "@pulumi/pulumi";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { writeFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { before, after, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";
import { createClientCa } from "../../../cluster/pki.js";
import type { OperatorArgs } from "../../../sdk/operator-args.js";

const CLI = fileURLToPath(new URL("../../../cli/main.js", import.meta.url));

interface Registered {
  type: string;
  name: string;
  inputs: Record<string, unknown>;
}
const registered: Registered[] = [];
let sdk: typeof import("../../../sdk/index.js");
let dir: string;
let caPem: string;

before(async () => {
  await pulumi.runtime.setMocks(
    {
      newResource(args) {
        registered.push({
          type: args.type,
          name: args.name,
          inputs: args.inputs as Record<string, unknown>,
        });
        return { id: `${args.name}-id`, state: args.inputs as Record<string, unknown> };
      },
      call: (args) => args.inputs as Record<string, unknown>,
    },
    "project",
    "stack",
    false,
  );
  sdk = await import("../../../sdk/index.js");
  dir = mkdtempSync(join(tmpdir(), "manifests-"));
  caPem = createClientCa("manifests test CA").certPem;
  writeFileSync(join(dir, "ca.crt"), caPem);
});
after(() => rmSync(dir, { recursive: true, force: true }));

type Obj = { kind: string; metadata: { name: string; namespace?: string } };
const key = (o: Obj) => `${o.kind} ${o.metadata.namespace ?? ""}/${o.metadata.name}`;

/** The Kubernetes objects the Operator `name` registered, without its Pulumi-only annotations. */
async function operatorObjects(name: string, args: OperatorArgs): Promise<Map<string, Obj>> {
  const op = new sdk.Operator(name, { ...args, kubeconfig: "apiVersion: v1\nkind: Config\n" });
  await new Promise((resolve) => op.crdGuard.urn.apply(resolve));
  const out = new Map<string, Obj>();
  for (const r of registered) {
    if (!r.type.startsWith("kubernetes:") || !r.name.startsWith(`${name}-`)) continue;
    const o = JSON.parse(JSON.stringify(r.inputs)) as Obj & {
      metadata: { annotations?: Record<string, string> };
    };
    const a = o.metadata.annotations ?? {};
    delete a["cocoonset.cocoonstack.io/installed-by"];
    delete a["pulumi.com/skipAwait"];
    if (Object.keys(a).length === 0) delete o.metadata.annotations;
    out.set(key(o), o);
  }
  return out;
}

/** What `cocoonset manifests` prints for these flags, in its order. */
function printed(flags: string[]): Obj[] {
  const yaml = execFileSync(process.execPath, [CLI, "manifests", ...flags], { encoding: "utf8" });
  return parseAllDocuments(yaml).map((d) => (d as { toJS(): Obj }).toJS());
}

const cases: { name: string; args: () => OperatorArgs; flags: () => string[] }[] = [
  { name: "defaults", args: () => ({}), flags: () => [] },
  {
    name: "watch namespaces, registry with CA, image by digest, pull secret, replicas",
    args: () => ({
      namespace: "ops-system",
      image: "registry.example:5000/cocoonset/controller@sha256:" + "a".repeat(64),
      imagePullPolicy: "IfNotPresent",
      imagePullSecrets: ["pull"],
      replicas: 2,
      serviceMonitor: true,
      watchNamespaces: ["team-a", "team-b"],
      concurrency: 6,
      fanoutConcurrency: 3,
      reapInterval: "10m",
      logLevel: "debug",
      ociRegistry: "registry.example:5000/snapshots",
      ociRegistryCa: caPem,
      ociRegistryCredentialsSecret: "registry-auth",
      hibernateTimeout: "4m",
      wakeTimeout: "6m",
    }),
    flags: () => [
      ...["-n", "ops-system"],
      ...["--image", "registry.example:5000/cocoonset/controller@sha256:" + "a".repeat(64)],
      ...["--image-pull-policy", "IfNotPresent", "--image-pull-secret", "pull"],
      ...["--replicas", "2", "--watch-namespace", "team-a", "--watch-namespace", "team-b"],
      "--service-monitor",
      ...["--concurrency", "6", "--fanout-concurrency", "3", "--reap-interval", "10m"],
      ...["--log-level", "debug", "--oci-registry", "registry.example:5000/snapshots"],
      ...["--oci-registry-ca-file", join(dir, "ca.crt")],
      ...["--oci-registry-credentials-secret", "registry-auth"],
      ...["--hibernate-timeout", "4m", "--wake-timeout", "6m"],
    ],
  },
  {
    name: "no namespace, no leader election, insecure registry",
    args: () => ({
      createNamespace: false,
      leaderElect: false,
      metricsService: true,
      ociRegistry: "registry.internal:5000",
      ociRegistryInsecure: true,
    }),
    flags: () => [
      ...["--no-create-namespace", "--no-leader-elect", "--metrics-service"],
      ...["--oci-registry", "registry.internal:5000", "--oci-registry-insecure"],
    ],
  },
  {
    name: "three shards of two replicas, metrics Service",
    args: () => ({ shards: 3, replicas: 2, metricsService: true }),
    flags: () => ["--shards", "3", "--replicas", "2", "--metrics-service"],
  },
];

describe("cocoonset manifests", () => {
  it("shards: a Deployment and a PodDisruptionBudget per shard, each with its share; one metrics Service for all", () => {
    const objs = printed(["--shards", "3", "--replicas", "2", "--metrics-service"]) as unknown as {
      kind: string;
      metadata: { name: string };
      spec: {
        selector?: Record<string, unknown>;
        template?: {
          metadata: { labels: Record<string, string> };
          spec: { containers: { args: string[] }[] };
        };
      };
    }[];
    const deployments = objs.filter((o) => o.kind === "Deployment");
    assert.deepEqual(
      deployments.map((d) => [
        d.metadata.name,
        d.spec.template!.spec.containers[0].args.filter((a) => a.startsWith("--shard")),
      ]),
      [
        ["cocoonset-controller", ["--shard=0/3"]],
        ["cocoonset-controller-shard-1", ["--shard=1/3"]],
        ["cocoonset-controller-shard-2", ["--shard=2/3"]],
      ],
    );
    for (const d of deployments)
      assert.equal(
        d.spec.template!.metadata.labels["cocoonset.cocoonstack.io/controller"],
        "cocoonset",
      );
    assert.deepEqual(
      objs.filter((o) => o.kind === "PodDisruptionBudget").map((o) => o.metadata.name),
      ["cocoonset-controller", "cocoonset-controller-shard-1", "cocoonset-controller-shard-2"],
    );
    const svc = objs.find((o) => o.kind === "Service")!;
    assert.deepEqual(svc.spec.selector, { "cocoonset.cocoonstack.io/controller": "cocoonset" });
    // One shard: nothing changes from an unsharded Operator.
    const one = printed(["--shards", "1"]).filter((o) => o.kind === "Deployment") as typeof objs;
    assert.equal(one.length, 1);
    assert.ok(!one[0].spec.template!.spec.containers[0].args.some((a) => a.startsWith("--shard")));
  });

  it("refuses shards that are not 1 to 256, and shards without leader election, naming the flag", () => {
    for (const [flags, re] of [
      [["--shards", "0"], /^cocoonset: \[--shards\] must be an integer from 1 to 256 \(got 0\)/],
      [["--shards", "257"], /^cocoonset: \[--shards\] must be an integer from 1 to 256/],
      [
        ["--shards", "2", "--no-leader-elect"],
        /\[--no-leader-elect\] must be true when \[--shards\] > 1/,
      ],
    ] as const)
      assert.throws(
        () => printed([...flags]),
        (e: { stderr?: string }) => re.test(String(e.stderr)),
      );
  });

  cases.forEach((c, i) => {
    it(`prints what the Operator registers: ${c.name}`, async () => {
      const name = `m${i}`;
      const want = await operatorObjects(name, c.args());
      const got = printed(["--name", name, ...c.flags()]);
      assert.deepEqual(got.map(key).sort(), [...want.keys()].sort(), "the same objects");
      for (const o of got) assert.deepEqual(o, want.get(key(o)), key(o));
      // Apply order: the namespace and CRDs first, the Deployment after the RBAC.
      const at = (kind: string) => got.findIndex((o) => o.kind === kind);
      assert.ok(
        at("Deployment") > at("RoleBinding") || at("Deployment") > at("ClusterRoleBinding"),
      );
      const crds = got.findIndex((o) => o.kind === "CustomResourceDefinition");
      assert.ok(crds <= 1 && got.findIndex((o) => o.kind === "ServiceAccount") > crds);
    });
  });

  it("the metrics Service, ServiceMonitor and PodDisruptionBudget come as asked", async () => {
    const kinds = (flags: string[]) => printed(flags).map((o) => o.kind);
    assert.deepEqual(kinds(["--replicas", "2", "--service-monitor"]).slice(-3), [
      "Service",
      "ServiceMonitor",
      "PodDisruptionBudget",
    ]);
    const plain = kinds([]);
    for (const k of ["Service", "ServiceMonitor", "PodDisruptionBudget"])
      assert.ok(!plain.includes(k), `no ${k} by default`);
    const [svc, monitor, pdb] = printed(["--replicas", "3", "--service-monitor"]).slice(
      -3,
    ) as unknown as {
      spec: Record<string, unknown>;
    }[];
    assert.deepEqual(svc.spec, {
      selector: { "app.kubernetes.io/name": "cocoonset-controller" },
      ports: [{ name: "metrics", port: 8080, targetPort: "metrics", protocol: "TCP" }],
    });
    assert.deepEqual(monitor.spec, {
      selector: {
        matchLabels: {
          "app.kubernetes.io/name": "cocoonset-controller",
          "app.kubernetes.io/component": "metrics",
        },
      },
      endpoints: [{ port: "metrics", path: "/metrics" }],
    });
    assert.deepEqual(pdb.spec, {
      minAvailable: 1,
      selector: { matchLabels: { "app.kubernetes.io/name": "cocoonset-controller" } },
    });
  });

  it("prints a v1 List with -o json", () => {
    const out = JSON.parse(
      execFileSync(process.execPath, [CLI, "manifests", "-o", "json"], { encoding: "utf8" }),
    ) as { kind: string; items: Obj[] };
    assert.equal(out.kind, "List");
    assert.deepEqual(out.items, printed([]));
  });

  it("refuses bad arguments with the Operator's own check, naming the flags, and prints nothing", () => {
    const r = spawnSync(
      process.execPath,
      [CLI, "manifests", "--log-level", "loud", "--replicas", "2", "--no-leader-elect"],
      { encoding: "utf8" },
    );
    assert.equal(r.status, 2);
    assert.equal(r.stdout, "");
    assert.match(r.stderr, /\[--log-level\] must be one of/);
    assert.match(r.stderr, /\[--no-leader-elect\] must be true when \[--replicas\] > 1/);
  });
});
