/**
 * The Operator and Fleet components under `pulumi.runtime.setMocks`: which children they
 * register (type token, name, parent) and with which inputs. No engine, no cluster.
 */
import * as pulumi from "@pulumi/pulumi";
import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import { controllerRules, leaderElectionRules, namespacedRules } from "../../../controller/rbac.js";
import {
  CONTROLLER_UID,
  defaultControllerImage,
  deploymentControllerArgs,
} from "../../../controller/image.js";
import crdJson from "../../../engine/spec/generated/crd.json" with { type: "json" };
import { readFileSync } from "node:fs";
import { LABELS, shardBucketOf } from "../../../engine/spec/index.js";

// Read, not imported: a JSON import would make tsc emit dist/package.json, which then passes
// for the repository root.
const pkgVersion = (
  JSON.parse(readFileSync(new URL("../../../../package.json", import.meta.url), "utf8")) as {
    version: string;
  }
).version;

/** What the mock monitor saw of one resource. */
interface Registered {
  type: string;
  name: string;
  /** Inputs as the engine would receive them (outputs resolved, secrets unwrapped). */
  inputs: Record<string, unknown>;
  /** The type of its parent, read from its URN (`parentType$type`). */
  parentType?: string;
}

const registered: Registered[] = [];
let sdk: typeof import("../../../sdk/index.js");

/** Everything the mocks saw under a component name (children are named `<name>-...`). */
function childrenOf(component: string): Registered[] {
  return registered.filter((r) => r.name.startsWith(`${component}-`));
}

function one(component: string, type: string, name: string): Registered {
  const found = registered.filter((r) => r.type === type && r.name === name);
  assert.equal(found.length, 1, `${type} ${name} registered once under ${component}`);
  return found[0];
}

/** Waits until an output resolves (children register asynchronously). */
function settle<T>(o: pulumi.Output<T>): Promise<T> {
  return new Promise((resolve) => o.apply(resolve));
}

/** The URN of every resource the mock monitor registered. */
function registeredUrns(): string[] {
  const monitor = pulumi.runtime.getMonitor() as unknown as {
    getRegisteredResources(): Map<string, unknown>;
  };
  return [...monitor.getRegisteredResources().keys()];
}

/** Fills `parentType` from the URNs the monitor assigned. */
function withParents(): void {
  for (const urn of registeredUrns()) {
    const [qualified, name] = urn.split("::").slice(2);
    const types = qualified.split("$");
    const r = registered.find((x) => x.name === name && x.type === types[types.length - 1]);
    if (r && types.length > 1) r.parentType = types[types.length - 2];
  }
}

before(async () => {
  await pulumi.runtime.setMocks(
    {
      newResource(args) {
        const inputs = args.inputs as Record<string, unknown>;
        registered.push({ type: args.type, name: args.name, inputs });
        const state: Record<string, unknown> = { ...inputs };
        // A guard's check draws its ownership token; the mock stands in for it.
        if (args.type.endsWith("Guard") && args.type !== "pulumi-nodejs:dynamic/cocoonset:CrdGuard")
          state.ownerToken = TOKEN;
        if (args.type.startsWith("kubernetes:cocoonset.cocoonstack.io/")) {
          state.metadata = { ...(inputs.metadata as object), uid: `uid-of-${args.name}` };
        }
        return { id: `${args.name}-id`, state };
      },
      call: (args) => args.inputs as Record<string, unknown>,
    },
    "project",
    "stack",
    false,
  );
  // Components are imported only now: setMocks must run before any resource module loads.
  sdk = await import("../../../sdk/index.js");
});

/** A kubeconfig text for the install guard (never used to connect under mocks). */
const KUBECONFIG = "apiVersion: v1\nkind: Config\n";
/** The ownership token the mocks give every guard (a guard's check draws one). */
const TOKEN = "0123456789abcdef".repeat(2);

describe("Operator", () => {
  it("registers the namespace, CRD, ServiceAccount, ClusterRole, binding and controller Deployment as its children", async () => {
    const op = new sdk.Operator("ops", { namespace: "ops-system", kubeconfig: KUBECONFIG });
    await settle(op.deploymentName);
    await settle(op.rollout!.urn);
    await settle(op.crdGuard.urn);
    withParents();
    const kids = childrenOf("ops");
    assert.deepEqual(kids.map((k) => `${k.type} ${k.name}`).sort(), [
      "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition ops-crd",
      "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition ops-hibernation-crd",
      "kubernetes:apps/v1:Deployment ops-controller",
      "kubernetes:core/v1:Namespace ops-ns",
      "kubernetes:core/v1:ServiceAccount ops-sa",
      "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole ops-role",
      "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding ops-binding",
      "kubernetes:rbac.authorization.k8s.io/v1:Role ops-lease-role",
      "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding ops-lease-binding",
      "pulumi-nodejs:dynamic/cocoonset:ControllerRollout ops-rollout",
      "pulumi-nodejs:dynamic/cocoonset:CrdGuard ops-crd-guard",
      "pulumi-nodejs:dynamic/cocoonset:OperatorGuard ops-guard",
    ]);
    for (const k of kids) assert.equal(k.parentType, "cocoonset:index:Operator", k.name);

    const ns = one("ops", "kubernetes:core/v1:Namespace", "ops-ns");
    assert.equal((ns.inputs.metadata as { name: string }).name, "ops-system");

    const crd = one(
      "ops",
      "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition",
      "ops-crd",
    );
    assert.equal(
      (crd.inputs.metadata as { name: string }).name,
      "cocoonsets.cocoonset.cocoonstack.io",
    );
    assert.deepEqual(crd.inputs.spec, crdJson.spec, "the CRD spec is the generated schema");
    const hibernationCrd = one(
      "ops",
      "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition",
      "ops-hibernation-crd",
    );
    assert.equal(
      (hibernationCrd.inputs.metadata as { name: string }).name,
      "cocoonhibernations.cocoonset.cocoonstack.io",
    );

    const sa = one("ops", "kubernetes:core/v1:ServiceAccount", "ops-sa");
    assert.deepEqual(
      [
        (sa.inputs.metadata as { name: string }).name,
        (sa.inputs.metadata as { namespace: string }).namespace,
      ],
      ["ops-controller", "ops-system"],
    );

    const role = one("ops", "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole", "ops-role");
    assert.deepEqual(role.inputs.rules, controllerRules());
    const binding = one(
      "ops",
      "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
      "ops-binding",
    );
    assert.deepEqual(binding.inputs.roleRef, {
      apiGroup: "rbac.authorization.k8s.io",
      kind: "ClusterRole",
      name: "ops-cocoonset-controller",
    });
    assert.deepEqual(binding.inputs.subjects, [
      { kind: "ServiceAccount", name: "ops-controller", namespace: "ops-system" },
    ]);
    assert.deepEqual(
      (role.inputs.rules as { resources: string[]; verbs: string[] }[])
        .filter((r) => r.resources.includes("leases"))
        .flatMap((r) => r.verbs),
      ["list", "watch"],
      "the ClusterRole only reads the members' activity Leases",
    );
    // Leases: a Role in the controller's own namespace only, the one it elects in.
    const leaseRole = one("ops", "kubernetes:rbac.authorization.k8s.io/v1:Role", "ops-lease-role");
    assert.equal((leaseRole.inputs.metadata as { namespace: string }).namespace, "ops-system");
    assert.deepEqual(leaseRole.inputs.rules, leaderElectionRules());
    const leaseBinding = one(
      "ops",
      "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding",
      "ops-lease-binding",
    );
    assert.equal((leaseBinding.inputs.metadata as { namespace: string }).namespace, "ops-system");
    assert.deepEqual(leaseBinding.inputs.roleRef, {
      apiGroup: "rbac.authorization.k8s.io",
      kind: "Role",
      name: "ops-cocoonset-controller-lease",
    });
    assert.deepEqual(leaseBinding.inputs.subjects, [
      { kind: "ServiceAccount", name: "ops-controller", namespace: "ops-system" },
    ]);

    const deployment = one("ops", "kubernetes:apps/v1:Deployment", "ops-controller");
    const spec = deployment.inputs.spec as {
      replicas: number;
      template: {
        spec: {
          serviceAccountName: string;
          securityContext: { runAsNonRoot: boolean };
          containers: {
            args: string[];
            livenessProbe: { httpGet: { path: string } };
            readinessProbe: { httpGet: { path: string } };
            securityContext: {
              readOnlyRootFilesystem: boolean;
              allowPrivilegeEscalation: boolean;
            };
          }[];
        };
      };
    };
    const pod = spec.template.spec;
    const container = pod.containers[0];
    assert.equal(spec.replicas, 1);
    assert.equal(pod.serviceAccountName, "ops-controller");
    assert.equal(container.args[0], "controller");
    assert.ok(container.args.includes("--leader-elect=true"), container.args.join(" "));
    assert.ok(
      container.args.includes("--leader-election-namespace=ops-system"),
      "the controller elects in the namespace of its Lease Role",
    );
    assert.ok(container.args.includes("--health-probe-bind-address=:8081"));
    assert.equal(container.livenessProbe.httpGet.path, "/healthz");
    assert.equal(container.readinessProbe.httpGet.path, "/readyz");
    assert.equal(pod.securityContext.runAsNonRoot, true);
    assert.equal(container.securityContext.readOnlyRootFilesystem, true);
    assert.equal(container.securityContext.allowPrivilegeEscalation, false);
  });

  it("with watchNamespaces grants a Role and RoleBinding per namespace (and the Lease namespace) instead of a ClusterRole", async () => {
    const op = new sdk.Operator("scoped", {
      kubeconfig: KUBECONFIG,
      namespace: "scoped-system",
      watchNamespaces: ["team-a", "team-b"],
    });
    await settle(op.deploymentName);
    const kids = childrenOf("scoped");
    assert.equal(kids.filter((k) => k.type.endsWith(":ClusterRole")).length, 0);
    assert.equal(kids.filter((k) => k.type.endsWith(":ClusterRoleBinding")).length, 0);
    const roles = kids.filter((k) => k.type === "kubernetes:rbac.authorization.k8s.io/v1:Role");
    const bindings = kids.filter(
      (k) => k.type === "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding",
    );
    const ns = (r: Registered) => (r.inputs.metadata as { namespace: string }).namespace;
    assert.deepEqual(roles.map(ns).sort(), ["scoped-system", "team-a", "team-b"]);
    assert.deepEqual(bindings.map(ns).sort(), ["scoped-system", "team-a", "team-b"]);
    assert.deepEqual(
      roles.find((r) => ns(r) === "team-a")?.inputs.rules,
      namespacedRules(),
      "a watched namespace gets the namespaced rules only",
    );
    assert.deepEqual(
      roles.find((r) => ns(r) === "scoped-system")?.inputs.rules,
      leaderElectionRules(),
      "the controller's own namespace gets the Lease rules",
    );
    const deployment = one("scoped", "kubernetes:apps/v1:Deployment", "scoped-controller");
    const args = (
      deployment.inputs.spec as { template: { spec: { containers: { args: string[] }[] } } }
    ).template.spec.containers[0].args;
    assert.deepEqual(
      args.filter((a) => a.startsWith("--namespace=")),
      ["--namespace=team-a", "--namespace=team-b"],
    );
  });

  it("deploys the default image `cocoonset-dev image build` tags, with the image's UID and the args the image tests use", async () => {
    const op = new sdk.Operator("dflt", { kubeconfig: KUBECONFIG });
    await settle(op.deploymentName);
    await settle(op.rollout!.urn);
    const deployment = one("dflt", "kubernetes:apps/v1:Deployment", "dflt-controller");
    const pod = (
      deployment.inputs.spec as {
        template: {
          spec: {
            securityContext: { runAsUser: number };
            containers: { image: string; args: string[]; imagePullPolicy?: string }[];
          };
        };
      }
    ).template.spec;
    assert.equal(pod.containers[0].image, defaultControllerImage(pkgVersion));
    assert.equal(pod.containers[0].image, `pulumi-cocoonset/controller:${pkgVersion}`);
    assert.equal(pod.containers[0].imagePullPolicy, undefined);
    assert.equal(pod.securityContext.runAsUser, CONTROLLER_UID);
    assert.deepEqual(
      pod.containers[0].args,
      deploymentControllerArgs({
        leaderElect: true,
        leaderElectionNamespace: "cocoonset-system",
        concurrency: 4,
        fanoutConcurrency: 8,
        reapInterval: "5m",
        logLevel: "info",
        watchNamespaces: [],
      }),
    );
    assert.deepEqual((deployment.inputs.metadata as { annotations: unknown }).annotations, {
      "cocoonset.cocoonstack.io/owner-token": TOKEN,
      "pulumi.com/skipAwait": "true",
    });
    const rollout = one(
      "dflt",
      "pulumi-nodejs:dynamic/cocoonset:ControllerRollout",
      "dflt-rollout",
    );
    assert.deepEqual(
      [rollout.inputs.namespace, rollout.inputs.deployment, rollout.inputs.image],
      ["cocoonset-system", "dflt-controller", `pulumi-cocoonset/controller:${pkgVersion}`],
    );
    assert.equal(rollout.inputs.timeoutSeconds, 600);
    assert.equal(
      (rollout.inputs.kubeconfig as { value: string }).value,
      KUBECONFIG,
      "the rollout check gets the kubeconfig, as a secret",
    );
  });

  it("passes image, pull policy, pull secrets, resources, node selector, tolerations and priority class to the pod", async () => {
    const op = new sdk.Operator("real", {
      kubeconfig: KUBECONFIG,
      image: "registry.example.com/team/pulumi-cocoonset/controller:0.1.0",
      imagePullPolicy: "Always",
      imagePullSecrets: ["regcred", "mirror"],
      resources: { requests: { cpu: "50m", memory: "96Mi" }, limits: { memory: "256Mi" } },
      nodeSelector: { "kubernetes.io/os": "linux", pool: "system" },
      tolerations: [
        { key: "virtual-kubelet.io/provider", operator: "Exists", effect: "NoSchedule" },
      ],
      priorityClassName: "system-cluster-critical",
      rolloutTimeoutSeconds: 120,
    });
    await settle(op.deploymentName);
    await settle(op.rollout!.urn);
    const deployment = one("real", "kubernetes:apps/v1:Deployment", "real-controller");
    const pod = (
      deployment.inputs.spec as {
        template: {
          spec: {
            imagePullSecrets: { name: string }[];
            nodeSelector: Record<string, string>;
            tolerations: unknown[];
            priorityClassName: string;
            containers: { image: string; imagePullPolicy: string; resources: unknown }[];
          };
        };
      }
    ).template.spec;
    const c = pod.containers[0];
    assert.equal(c.image, "registry.example.com/team/pulumi-cocoonset/controller:0.1.0");
    assert.equal(c.imagePullPolicy, "Always");
    assert.deepEqual(c.resources, {
      requests: { cpu: "50m", memory: "96Mi" },
      limits: { memory: "256Mi" },
    });
    assert.deepEqual(pod.imagePullSecrets, [{ name: "regcred" }, { name: "mirror" }]);
    assert.deepEqual(pod.nodeSelector, { "kubernetes.io/os": "linux", pool: "system" });
    assert.deepEqual(pod.tolerations, [
      { key: "virtual-kubelet.io/provider", operator: "Exists", effect: "NoSchedule" },
    ]);
    assert.equal(pod.priorityClassName, "system-cluster-critical");
    const rollout = one(
      "real",
      "pulumi-nodejs:dynamic/cocoonset:ControllerRollout",
      "real-rollout",
    );
    assert.equal(rollout.inputs.image, c.image);
    assert.equal(rollout.inputs.timeoutSeconds, 120);
  });

  it("with skipAwait registers no rollout check", async () => {
    const op = new sdk.Operator("nowait", { kubeconfig: KUBECONFIG, skipAwait: true });
    await settle(op.deploymentName);
    assert.equal(op.rollout, undefined);
    assert.equal(
      childrenOf("nowait").filter((k) => k.type.endsWith(":ControllerRollout")).length,
      0,
    );
  });

  it("without leader election grants no Lease Role and passes no Lease namespace", async () => {
    const op = new sdk.Operator("solo", {
      kubeconfig: KUBECONFIG,
      namespace: "solo-system",
      leaderElect: false,
    });
    await settle(op.deploymentName);
    const kids = childrenOf("solo");
    assert.equal(kids.filter((k) => k.type.endsWith(":Role")).length, 0);
    assert.equal(kids.filter((k) => k.type.endsWith(":RoleBinding")).length, 0);
    const deployment = one("solo", "kubernetes:apps/v1:Deployment", "solo-controller");
    const args = (
      deployment.inputs.spec as { template: { spec: { containers: { args: string[] }[] } } }
    ).template.spec.containers[0].args;
    assert.ok(args.includes("--leader-elect=false"));
    assert.ok(!args.some((a) => a.startsWith("--leader-election-namespace")), args.join(" "));
  });

  it("refuses two replicas without leader election, naming both fields", () => {
    assert.throws(
      () => new sdk.Operator("racy", { replicas: 2, leaderElect: false, kubeconfig: KUBECONFIG }),
      /\[leaderElect\] must be true when \[replicas\] > 1/,
    );
    assert.throws(
      () => new sdk.Operator("none", { replicas: 0, kubeconfig: KUBECONFIG }),
      /\[replicas\]/,
    );
  });
});

describe("Operator arguments are refused before anything is registered", () => {
  // Each value would otherwise reach the controller's flags and make the Deployment restart
  // forever while `pulumi up` waits for it; the messages are the controller's own rules.
  const table: [string, Record<string, unknown>, RegExp][] = [
    [
      "concurrency 2.5",
      { concurrency: 2.5 },
      /\[concurrency\] must be an integer between 1 and 10000 \(got 2\.5\)/,
    ],
    [
      "concurrency NaN",
      { concurrency: NaN },
      /\[concurrency\] must be an integer between 1 and 10000 \(got NaN\)/,
    ],
    [
      "fanoutConcurrency 0",
      { fanoutConcurrency: 0 },
      /\[fanoutConcurrency\] must be an integer between 1 and 10000/,
    ],
    [
      "reapInterval 5 minutes",
      { reapInterval: "5 minutes" },
      /\[reapInterval\] must be a duration such as 30s, 5m or 1h/,
    ],
    ["reapInterval 10ms", { reapInterval: "10ms" }, /\[reapInterval\] must be at least 1s/],
    ["logLevel loud", { logLevel: "loud" }, /\[logLevel\] must be one of /],
    [
      "ociRegistry with a path in upper case",
      { ociRegistry: "127.0.0.1:5000/Snaps" },
      /\[ociRegistry\] must be host\[:port\]\[\/prefix\]/,
    ],
    [
      "ociRegistry port 0",
      { ociRegistry: "reg:0" },
      /\[ociRegistry\] must have a port between 1 and 65535/,
    ],
    [
      "ociRegistry http:// to a host that is not loopback without ociRegistryInsecure",
      { ociRegistry: "http://reg.example.com" },
      /\[ociRegistry\] asks for plain http to a host that is not loopback: give ociRegistryInsecure: true too/,
    ],
    [
      "ociRegistryCa that is not PEM",
      { ociRegistry: "reg.example.com", ociRegistryCa: "not pem" },
      /\[ociRegistryCa\] must be PEM text holding at least one CERTIFICATE/,
    ],
    [
      "ociRegistryCredentialsSecret that is no Secret name",
      { ociRegistry: "reg.example.com", ociRegistryCredentialsSecret: "Reg_Auth" },
      /\[ociRegistryCredentialsSecret\] must be a Secret name/,
    ],
    [
      "ociRegistryCredentialsSecret without ociRegistry",
      { ociRegistryCredentialsSecret: "reg-auth" },
      /\[ociRegistryCredentialsSecret\] needs \[ociRegistry\]/,
    ],
    [
      "ociRegistryInsecure a string",
      { ociRegistry: "reg.example.com", ociRegistryInsecure: "yes" },
      /\[ociRegistryInsecure\] must be true or false/,
    ],
    [
      "watchNamespaces Bad_NS",
      { watchNamespaces: ["ok", "Bad_NS"] },
      /\[watchNamespaces\[1\]\] must be namespace names/,
    ],
    ["namespace Bad_NS", { namespace: "Bad_NS" }, /\[namespace\] must be a DNS-1123 label/],
    [
      "hibernateTimeout soon",
      { hibernateTimeout: "soon" },
      /\[hibernateTimeout\] must be a duration/,
    ],
    [
      "wakeTimeout a number",
      { wakeTimeout: 300 },
      /\[wakeTimeout\] must be a string such as 5m \(got 300\)/,
    ],
    [
      "image blank",
      { image: " " },
      /\[image\] must be an image reference with no whitespace \(got " "\)/,
    ],
    ["replicas 0", { replicas: 0 }, /\[replicas\] must be an integer >= 1 \(got 0\)/],
    ["replicas 1.5", { replicas: 1.5 }, /\[replicas\] must be an integer >= 1 \(got 1\.5\)/],
    [
      "replicas 2 without leader election",
      { replicas: 2, leaderElect: false },
      /\[leaderElect\] must be true when \[replicas\] > 1: two controllers would fight/,
    ],
    [
      "adoptCrd not the CRD's name",
      { adoptCrd: "cocoonsets" },
      /\[adoptCrd\] must be the name of the CocoonSet CRD, "cocoonsets\.cocoonset\.cocoonstack\.io" \(got "cocoonsets"\)/,
    ],
  ];
  for (const [title, args, message] of table) {
    it(title, () => {
      const before = registered.length;
      assert.throws(
        () =>
          new sdk.Operator(`bad-${title.replace(/\W+/g, "-")}`, {
            ...args,
            kubeconfig: KUBECONFIG,
          }),
        (e: unknown) => {
          assert.ok(pulumi.RunError.isInstance(e), "a clean program error, no stack trace");
          assert.match(e.message, message);
          return true;
        },
      );
      assert.equal(registered.length, before, "nothing registered");
    });
  }

  it("hands the guard the namespaces it needs but does not create", async () => {
    const op = new sdk.Operator("byo", {
      namespace: "byo-system",
      createNamespace: false,
      watchNamespaces: ["team-a"],
      kubeconfig: KUBECONFIG,
    });
    await settle(op.deploymentName);
    const guard = one("byo", "pulumi-nodejs:dynamic/cocoonset:OperatorGuard", "byo-guard");
    assert.deepEqual(guard.inputs.requiredNamespaces, [
      { field: "namespace", namespace: "byo-system" },
      { field: "watchNamespaces[0]", namespace: "team-a" },
    ]);
  });

  it("hands the guard the ServiceMonitor kind to look for only when serviceMonitor is on", async () => {
    const mon = new sdk.Operator("mon", { serviceMonitor: true, kubeconfig: KUBECONFIG });
    const plain = new sdk.Operator("plain", { metricsService: true, kubeconfig: KUBECONFIG });
    await settle(mon.deploymentName);
    await settle(plain.deploymentName);
    const guard = one("mon", "pulumi-nodejs:dynamic/cocoonset:OperatorGuard", "mon-guard");
    assert.deepEqual(
      (
        guard.inputs.requiredKinds as {
          field: string;
          apiVersion: string;
          kind: string;
          crd: string;
        }[]
      ).map(({ field, apiVersion, kind, crd }) => ({ field, apiVersion, kind, crd })),
      [
        {
          field: "serviceMonitor",
          apiVersion: "monitoring.coreos.com/v1",
          kind: "ServiceMonitor",
          crd: "servicemonitors.monitoring.coreos.com",
        },
      ],
    );
    const none = one("plain", "pulumi-nodejs:dynamic/cocoonset:OperatorGuard", "plain-guard");
    assert.equal(none.inputs.requiredKinds, undefined);
  });
});

describe("resource options under Pulumi's mocks", () => {
  it("an Operator passes retainOnDelete to its children and maps ignoreChanges onto its Deployments and rollout checks", async () => {
    const seen = new Map<string, pulumi.ResourceOptions>();
    const op = new sdk.Operator(
      "keep",
      { namespace: "keep-system", kubeconfig: KUBECONFIG, shards: 2 },
      {
        retainOnDelete: true,
        ignoreChanges: ["image", "replicas"],
        transformations: [
          (args) => {
            seen.set(args.name, args.opts);
            return undefined;
          },
        ],
      },
    );
    await settle(op.deploymentName);
    for (const name of ["keep-controller", "keep-controller-shard-1"]) {
      assert.deepEqual(seen.get(name)?.ignoreChanges, [
        "spec.template.spec.containers[0].image",
        "spec.replicas",
      ]);
      assert.equal(seen.get(name)?.retainOnDelete, true, name);
    }
    for (const name of ["keep-rollout", "keep-rollout-shard-1"])
      assert.deepEqual(seen.get(name)?.ignoreChanges, ["image"], name);
    assert.equal(seen.get("keep-crd")?.retainOnDelete, true);
  });
});

describe("aliases under Pulumi's mocks", () => {
  /** Each child's aliases, resolved, by child name (the component itself left out). */
  async function childAliasesOf(
    make: (t: pulumi.ResourceTransformation) => pulumi.Resource,
    component: string,
  ): Promise<Map<string, unknown[]>> {
    const seen = new Map<string, pulumi.ResourceOptions>();
    const c = make((args) => {
      if (args.name !== component) seen.set(args.name, args.opts);
      return undefined;
    });
    await settle(c.urn);
    const out = new Map<string, unknown[]>();
    for (const [name, opts] of seen)
      out.set(
        name,
        await Promise.all(
          (opts.aliases ?? []).map((a) => settle(pulumi.output(a as pulumi.Alias))),
        ),
      );
    return out;
  }

  it("every child of an aliased Operator (shards, metrics, budgets, registry CA) gets its old identity under the Operator's old name and parent", async () => {
    const pem = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
    const kids = await childAliasesOf(
      (t) =>
        new sdk.Operator(
          "moved-op",
          {
            namespace: "moved-system",
            kubeconfig: KUBECONFIG,
            shards: 2,
            replicas: 2,
            metricsService: true,
            serviceMonitor: true,
            ociRegistry: "registry.example:5000",
            ociRegistryCa: pem,
          },
          { aliases: [{ name: "old-op", parent: pulumi.rootStackResource }], transformations: [t] },
        ),
      "moved-op",
    );
    assert.ok(kids.size >= 18, [...kids.keys()].join(", "));
    const old = "urn:pulumi:stack::project::cocoonset:index:Operator::old-op";
    for (const [name, aliases] of kids) {
      assert.ok(name.startsWith("moved-op-"), name);
      // The Kubernetes SDK adds aliases of its own (a CRD's older apiVersions): those name no parent.
      assert.deepEqual(
        aliases.filter((a) => (a as { parent?: unknown }).parent !== undefined),
        [
          {
            name: `old-op${name.slice("moved-op".length)}`,
            parent: old,
            project: "project",
            stack: "stack",
          },
        ],
        name,
      );
    }
  });

  it("every child of an aliased Fleet gets its old identity; a Fleet without aliases gives none", async () => {
    const make = (name: string, aliases: pulumi.Alias[]) => (t: pulumi.ResourceTransformation) =>
      new sdk.Fleet(
        name,
        {
          namespace: "agents",
          kubeconfig: KUBECONFIG,
          spec: { agent: { replicas: 1, image: "agents/coder:1" } },
        },
        { aliases, transformations: [t] },
      );
    const kids = await childAliasesOf(make("moved-fleet", [{ name: "old-fleet" }]), "moved-fleet");
    assert.deepEqual([...kids.keys()].sort(), [
      "moved-fleet-cocoonset",
      "moved-fleet-guard",
      "moved-fleet-slots",
    ]);
    for (const [name, aliases] of kids)
      assert.deepEqual(
        aliases,
        [
          {
            name: name.replace("moved-fleet", "old-fleet"),
            parent: "urn:pulumi:stack::project::cocoonset:index:Fleet::old-fleet",
            project: "project",
            stack: "stack",
          },
        ],
        name,
      );
    for (const [name, aliases] of await childAliasesOf(make("plain-fleet", []), "plain-fleet"))
      assert.deepEqual(aliases, [], name);
  });
});

describe("Fleet", () => {
  it("passes retainOnDelete and its ignoreChanges, mapped, on to its children (Pulumi's mocks; Pulumi itself hands protect and dependsOn down; the real CLI's lifecycle is tests/e2e/resource-options.test.ts)", async () => {
    const dep = new sdk.Operator("dep-op", { namespace: "dep-system", kubeconfig: KUBECONFIG });
    const seen = new Map<string, pulumi.ResourceOptions>();
    const fleet = new sdk.Fleet(
      "opts",
      {
        namespace: "agents",
        kubeconfig: KUBECONFIG,
        adoptCocoonSet: true,
        spec: { agent: { replicas: 1, image: "agents/coder:1" } },
      },
      {
        protect: true,
        retainOnDelete: true,
        ignoreChanges: ["spec.agent.image", "fanOut"],
        dependsOn: [dep],
        transformations: [
          (args) => {
            seen.set(args.name, args.opts);
            return undefined;
          },
        ],
      },
    );
    await settle(fleet.podNames);
    const cocoonSet = seen.get("opts-cocoonset");
    const slots = seen.get("opts-slots");
    assert.ok(cocoonSet && slots, [...seen.keys()].join(", "));
    assert.deepEqual(cocoonSet.ignoreChanges, ["spec.agent.image"]);
    assert.deepEqual(slots.ignoreChanges, ["spec.agent.image", "fanOut"]);
    for (const o of [cocoonSet, slots]) {
      assert.equal(o.retainOnDelete, true);
      assert.equal(o.parent, fleet);
    }
  });

  it("registers its CocoonSet after the operator and a Slots resource keyed by slot and toolbox, with a secret kubeconfig", async () => {
    const op = new sdk.Operator("shared", { namespace: "shared-system", kubeconfig: KUBECONFIG });
    const seen: pulumi.ResourceTransformationArgs[] = [];
    const fleet = new sdk.Fleet(
      "coder",
      {
        namespace: "agents",
        operator: op,
        kubeconfig: "apiVersion: v1\nkind: Config\n",
        spec: {
          agent: { replicas: 3, image: "agents/coder:1" },
          toolboxes: [{ name: "browser", image: "tools/browser:1" }],
        },
      },
      {
        transformations: [
          (args) => {
            seen.push(args);
            return undefined;
          },
        ],
      },
    );
    await settle(fleet.podNames);
    withParents();
    const kids = childrenOf("coder");
    assert.deepEqual(kids.map((k) => `${k.type} ${k.name}`).sort(), [
      "kubernetes:cocoonset.cocoonstack.io/v1:CocoonSet coder-cocoonset",
      "pulumi-nodejs:dynamic/cocoonset:FleetGuard coder-guard",
      "pulumi-nodejs:dynamic/cocoonset:Slots coder-slots",
    ]);
    for (const k of kids) assert.equal(k.parentType, "cocoonset:index:Fleet", k.name);

    const guard = one("coder", "pulumi-nodejs:dynamic/cocoonset:FleetGuard", "coder-guard");
    assert.deepEqual(
      { ...guard.inputs, kubeconfig: undefined, __provider: undefined },
      {
        kubeconfig: undefined,
        __provider: undefined,
        namespace: "agents",
        name: "coder",
        owner: "project/stack/coder",
        requireCrd: false,
        spec: {
          agent: { replicas: 3, image: "agents/coder:1" },
          toolboxes: [{ name: "browser", image: "tools/browser:1" }],
        },
        fanOut: 8,
        capacityCheck: "refuse",
      },
      "the guard claims the CocoonSet for this Fleet (with an Operator the CRD may come in the same deploy) and dry-runs the spec's pods before it is written",
    );

    const cs = one("coder", "kubernetes:cocoonset.cocoonstack.io/v1:CocoonSet", "coder-cocoonset");
    assert.equal(cs.inputs.apiVersion, "cocoonset.cocoonstack.io/v1");
    assert.equal(cs.inputs.kind, "CocoonSet");
    assert.deepEqual(cs.inputs.metadata, {
      name: "coder",
      namespace: "agents",
      // Its shard bucket, so a sharded controller's shard selects it from the start.
      labels: { [LABELS.shardBucket]: String(shardBucketOf("agents", "coder")) },
      annotations: {
        "cocoonset.cocoonstack.io/created-by": "project/stack/coder",
        "cocoonset.cocoonstack.io/owner-token": TOKEN,
        "pulumi.com/patchForce": "true",
      },
    });
    assert.deepEqual(cs.inputs.spec, {
      agent: { replicas: 3, image: "agents/coder:1" },
      toolboxes: [{ name: "browser", image: "tools/browser:1" }],
    });
    const csOpts = seen.find((s) => s.name === "coder-cocoonset")?.opts;
    assert.ok(csOpts?.parent === fleet, "the CocoonSet's parent is the Fleet");
    const guardOpts = seen.find((s) => s.name === "coder-guard");
    assert.deepEqual(
      csOpts.dependsOn,
      [guardOpts?.resource, op.crd, op.deployment, op.crdGuard, op.rollout],
      "the CocoonSet waits for the claim guard, the CRD and the controller's rollout, and is destroyed before them and before the CRD guard checks what is left",
    );

    const slots = one("coder", "pulumi-nodejs:dynamic/cocoonset:Slots", "coder-slots");
    assert.deepEqual(Object.keys(slots.inputs.slots as object).sort(), [
      "0",
      "1",
      "2",
      "3",
      "browser",
    ]);
    assert.equal(
      (slots.inputs.slots as Record<string, { pod: string }>)["3"].pod,
      "coder-3",
      "slot keys map to pod names",
    );
    assert.equal(slots.inputs.uid, "uid-of-coder-cocoonset", "the uid comes from the CocoonSet");
    assert.equal(slots.inputs.ownerToken, TOKEN, "the slots act under the guard's token");
    assert.equal(csOpts.retainOnDelete, true, "the CocoonSet resource never deletes");
    assert.equal(slots.inputs.providerVersion, sdk.PROVIDER_VERSION);
    assert.match(sdk.PROVIDER_VERSION, /^\d+\.\d+\.\d+.*\+slots\.\d+$/);
    assert.deepEqual(
      [slots.inputs.namespace, slots.inputs.name, slots.inputs.fanOut, slots.inputs.capacityCheck],
      ["agents", "coder", 8, "refuse"],
    );
    const slotsOpts = seen.find((s) => s.name === "coder-slots");
    assert.ok(slotsOpts?.opts.parent === fleet, "the Slots resource's parent is the Fleet");
    assert.equal(
      await pulumi.isSecret(slotsOpts.props.kubeconfig as pulumi.Output<string>),
      true,
      "the kubeconfig input is a secret",
    );

    // The provider object is serialized even under mocks: it must stay small and load the
    // engine by package name instead of capturing it.
    const provider = slots.inputs.__provider;
    assert.equal(typeof provider, "string");
    assert.ok((provider as string).includes('import("pulumi-cocoonset/provider")'));
    assert.ok(
      (provider as string).length < 4000,
      `provider is ${(provider as string).length} chars`,
    );
  });

  it("resolves Outputs anywhere in the spec instead of throwing DataCloneError", async () => {
    const image = pulumi.output(Promise.resolve("agents/coder:2"));
    const fleet = new sdk.Fleet("outputs", {
      namespace: pulumi.output("agents"),
      kubeconfig: KUBECONFIG,
      spec: { agent: { replicas: pulumi.output(1), image } },
    });
    await settle(fleet.podNames);
    const slots = one("outputs", "pulumi-nodejs:dynamic/cocoonset:Slots", "outputs-slots");
    assert.deepEqual(slots.inputs.spec, { agent: { replicas: 1, image: "agents/coder:2" } });
    assert.deepEqual(Object.keys(slots.inputs.slots as object).sort(), ["0", "1"]);
    assert.equal(
      slots.inputs.checkNamespace,
      false,
      "a namespace from an Output may be created by this deploy",
    );
    const cs = one(
      "outputs",
      "kubernetes:cocoonset.cocoonstack.io/v1:CocoonSet",
      "outputs-cocoonset",
    );
    assert.deepEqual(cs.inputs.spec, { agent: { replicas: 1, image: "agents/coder:2" } });
  });

  it("refuses a name that breaks the pods' name label, and a fanOut p-limit cannot take", () => {
    const spec = { agent: { image: "agents/coder:1" } };
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ name: "a".repeat(64) }, /\[name\] must be at most 63 characters/],
      [{ fanOut: 2.5 }, /\[fanOut\] must be an integer between 1 and 10000 \(got 2\.5\)/],
      [{ fanOut: NaN }, /\[fanOut\] must be an integer between 1 and 10000 \(got NaN\)/],
      [{ timeoutSeconds: -1 }, /\[timeoutSeconds\] must be a number of seconds/],
      [{ suspendTimeoutSeconds: 0 }, /\[suspendTimeoutSeconds\] must be a number of seconds/],
      [
        { registry: "registry.example.com/Snapshots" },
        /\[registry\] must be host\[:port\]\[\/prefix\].*the prefix is lower-case .*\(got "registry\.example\.com\/Snapshots"\)/,
      ],
      [{ registry: "a b:5000" }, /\[registry\] must be host\[:port\]\[\/prefix\]/],
      [
        { capacityCheck: "strict" },
        /\[capacityCheck\] must be one of "refuse", "warn", "off" \(got "strict"\)/,
      ],
      [{ skipAwait: "yes" }, /\[skipAwait\] must be true or false \(got "yes"\)/],
    ];
    for (const [args, message] of cases) {
      const before = registered.length;
      assert.throws(
        () =>
          new sdk.Fleet("refused", { namespace: "agents", kubeconfig: KUBECONFIG, spec, ...args }),
        (e: unknown) => pulumi.RunError.isInstance(e) && message.test(e.message),
      );
      assert.equal(registered.length, before, "nothing registered");
    }
  });

  it("refuses a second Fleet of the program declaring the same CocoonSet, naming the first, before it registers anything", () => {
    const spec = { agent: { image: "agents/coder:1" } };
    new sdk.Fleet("first-claim", {
      namespace: "dup",
      name: "shared",
      kubeconfig: KUBECONFIG,
      spec,
    });
    const before = registered.length;
    assert.throws(
      () =>
        new sdk.Fleet("second-claim", {
          namespace: "dup",
          name: "shared",
          kubeconfig: KUBECONFIG,
          spec,
        }),
      (e: unknown) =>
        pulumi.RunError.isInstance(e) &&
        e.message ===
          "Fleet second-claim: [name] the CocoonSet dup/shared is already declared by the Fleet first-claim of this program; each Fleet needs a CocoonSet of its own (give one of them another `name` or namespace)",
    );
    assert.equal(registered.length, before, "nothing registered");
    // Another namespace, or another name, is another CocoonSet.
    new sdk.Fleet("third-claim", {
      namespace: "dup2",
      name: "shared",
      kubeconfig: KUBECONFIG,
      spec,
    });
    new sdk.Fleet("fourth-claim", {
      namespace: "dup",
      name: "other",
      kubeconfig: KUBECONFIG,
      spec,
    });
  });

  it("refuses an adoptCocoonSet that is not a boolean, and a Fleet without an Operator asks for the CRD", async () => {
    assert.throws(
      () =>
        new sdk.Fleet("adopt-bad", {
          namespace: "agents",
          name: "adopt-bad",
          kubeconfig: KUBECONFIG,
          spec: { agent: { image: "agents/coder:1" } },
          adoptCocoonSet: "yes" as unknown as boolean,
        }),
      /\[adoptCocoonSet\] must be a boolean \(got "yes"\)/,
    );
    const fleet = new sdk.Fleet("adopter", {
      namespace: "agents",
      kubeconfig: KUBECONFIG,
      spec: { agent: { image: "agents/coder:1" } },
      adoptCocoonSet: true,
    });
    await settle(fleet.podNames);
    const guard = one("adopter", "pulumi-nodejs:dynamic/cocoonset:FleetGuard", "adopter-guard");
    assert.equal(guard.inputs.adopt, true);
    assert.equal(guard.inputs.requireCrd, true, "no Operator and no dependsOn: the CRD must exist");
  });

  it("refuses a spec of plain values naming the field, before anything is registered", () => {
    const cases: [unknown, RegExp][] = [
      [
        { agent: { image: " " } },
        /\[spec\.agent\.image\] must be an image reference: printable ASCII without whitespace, control or non-ASCII characters \(got " "\)/,
      ],
      [{ agent: { image: "a:1", replicas: -1 } }, /\[spec\.agent\.replicas\]/],
      ["agents/coder:1", /\[spec\] must be an object/],
    ];
    for (const [spec, message] of cases) {
      const before = registered.length;
      assert.throws(
        () =>
          new sdk.Fleet("refused", {
            namespace: "agents",
            kubeconfig: KUBECONFIG,
            spec: spec as { agent: { image: string } },
          }),
        (e: unknown) => pulumi.RunError.isInstance(e) && message.test(e.message),
      );
      assert.equal(registered.length, before, "nothing registered");
    }
  });

  it("hands the controller its hibernate and wake timeouts", async () => {
    const op = new sdk.Operator("timeouts", {
      namespace: "timeouts-system",
      kubeconfig: KUBECONFIG,
      hibernateTimeout: " 10m ",
      wakeTimeout: "90s",
    });
    await settle(op.deploymentName);
    const deployment = one("timeouts", "kubernetes:apps/v1:Deployment", "timeouts-controller");
    const args = (
      deployment.inputs.spec as { template: { spec: { containers: { args: string[] }[] } } }
    ).template.spec.containers[0].args;
    assert.deepEqual(
      args.filter((a) => /^--(hibernate|wake)-timeout/.test(a)),
      ["--hibernate-timeout=10m", "--wake-timeout=90s"],
    );
  });

  it("takes the Operator's ociRegistry as its registry unless it names its own, and a suspend timeout", async () => {
    const op = new sdk.Operator("snap", {
      namespace: "snap-system",
      kubeconfig: KUBECONFIG,
      ociRegistry: "127.0.0.1:5000/snaps",
    });
    const spec = { agent: { image: "agents/coder:1" } };
    const inherits = new sdk.Fleet("inherits", {
      namespace: "agents",
      operator: op,
      spec,
      kubeconfig: KUBECONFIG,
    });
    const own = new sdk.Fleet("own", {
      namespace: "agents",
      operator: op,
      spec,
      registry: "registry.example.com/other",
      suspendTimeoutSeconds: 30,
      kubeconfig: KUBECONFIG,
    });
    const none = new sdk.Fleet("none", { namespace: "agents", spec, kubeconfig: KUBECONFIG });
    await Promise.all([settle(inherits.podNames), settle(own.podNames), settle(none.podNames)]);
    const deployment = one("snap", "kubernetes:apps/v1:Deployment", "snap-controller");
    const args = (
      deployment.inputs.spec as { template: { spec: { containers: { args: string[] }[] } } }
    ).template.spec.containers[0].args;
    assert.ok(args.includes("--oci-registry=127.0.0.1:5000/snaps"), args.join(" "));
    const slotsOf = (n: string) => one(n, SLOTS, `${n}-slots`).inputs;
    assert.equal(slotsOf("inherits").registry, "127.0.0.1:5000/snaps");
    assert.equal(slotsOf("inherits").suspendTimeoutSeconds, 300);
    assert.equal(slotsOf("own").registry, "registry.example.com/other");
    assert.equal(slotsOf("own").suspendTimeoutSeconds, 30);
    assert.equal(slotsOf("none").registry, undefined);
  });

  it("gives the slots resource skipAwait only when it is set, so a stack deployed before it sees no new input", async () => {
    const spec = { agent: { image: "agents/coder:1" } };
    const waits = new sdk.Fleet("waits", { namespace: "agents", spec, kubeconfig: KUBECONFIG });
    const returns = new sdk.Fleet("returns", {
      namespace: "agents",
      spec,
      kubeconfig: KUBECONFIG,
      skipAwait: true,
    });
    await Promise.all([settle(waits.podNames), settle(returns.podNames)]);
    const slotsOf = (n: string) => one(n, SLOTS, `${n}-slots`).inputs;
    assert.equal("skipAwait" in slotsOf("waits"), false);
    assert.equal(slotsOf("returns").skipAwait, true);
  });

  it("mounts the Operator's ociRegistryCa into the controller, and a Fleet takes it and ociRegistryInsecure along", async () => {
    const pem = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
    const op = new sdk.Operator("tls", {
      namespace: "tls-system",
      kubeconfig: KUBECONFIG,
      ociRegistry: "http://reg.internal:5000/snaps",
      ociRegistryCa: pem,
      ociRegistryInsecure: true,
    });
    const spec = { agent: { image: "agents/coder:1" } };
    const inherits = new sdk.Fleet("tls-inherits", {
      namespace: "agents",
      operator: op,
      spec,
      kubeconfig: KUBECONFIG,
    });
    const own = new sdk.Fleet("tls-own", {
      namespace: "agents",
      operator: op,
      spec,
      registry: "registry.example.com/other",
      kubeconfig: KUBECONFIG,
    });
    await Promise.all([settle(inherits.podNames), settle(own.podNames), settle(op.deploymentName)]);
    const cm = one("tls", "kubernetes:core/v1:ConfigMap", "tls-registry-ca");
    assert.deepEqual(cm.inputs.data, { "ca.crt": pem });
    const pod = (
      one("tls", "kubernetes:apps/v1:Deployment", "tls-controller").inputs.spec as {
        template: {
          spec: {
            volumes: { name: string; configMap: { name: string } }[];
            containers: { args: string[]; volumeMounts: { name: string; mountPath: string }[] }[];
          };
        };
      }
    ).template.spec;
    const c = pod.containers[0];
    assert.ok(c.args.includes("--oci-registry-ca-file=/etc/cocoonset/registry-ca/ca.crt"));
    assert.ok(c.args.includes("--oci-registry-insecure=true"));
    assert.deepEqual(pod.volumes, [
      { name: "registry-ca", configMap: { name: "tls-registry-ca" } },
    ]);
    assert.equal(c.volumeMounts[0].mountPath, "/etc/cocoonset/registry-ca");
    const slotsOf = (n: string) => one(n, SLOTS, `${n}-slots`).inputs;
    assert.equal(slotsOf("tls-inherits").registryCa, pem);
    assert.equal(slotsOf("tls-inherits").registryInsecure, true);
    assert.equal(
      slotsOf("tls-own").registryCa,
      undefined,
      "a Fleet's own registry takes no CA of the Operator's",
    );
    assert.equal(slotsOf("tls-own").registryInsecure, undefined);
  });

  it("mounts the Operator's ociRegistryCredentialsSecret as the controller's Docker config, without the Secret's content", async () => {
    const op = new sdk.Operator("auth", {
      namespace: "auth-system",
      kubeconfig: KUBECONFIG,
      ociRegistry: "registry.example.com/snaps",
      ociRegistryCredentialsSecret: "registry-auth",
      imagePullSecrets: ["registry-auth"],
    });
    await settle(op.deploymentName);
    const pod = (
      one("auth", "kubernetes:apps/v1:Deployment", "auth-controller").inputs.spec as {
        template: {
          spec: {
            imagePullSecrets: { name: string }[];
            volumes: unknown[];
            containers: {
              env: { name: string; value?: string }[];
              volumeMounts: { name: string; mountPath: string; readOnly: boolean }[];
            }[];
          };
        };
      }
    ).template.spec;
    assert.deepEqual(pod.volumes, [
      {
        name: "registry-auth",
        secret: {
          secretName: "registry-auth",
          items: [{ key: ".dockerconfigjson", path: "config.json" }],
        },
      },
    ]);
    assert.deepEqual(pod.containers[0].volumeMounts, [
      { name: "registry-auth", mountPath: "/etc/cocoonset/registry-auth", readOnly: true },
    ]);
    assert.deepEqual(
      pod.containers[0].env.find((e) => e.name === "DOCKER_CONFIG"),
      { name: "DOCKER_CONFIG", value: "/etc/cocoonset/registry-auth" },
    );
    assert.deepEqual(pod.imagePullSecrets, [{ name: "registry-auth" }]);
    assert.equal(
      registered.filter((r) => r.type === "kubernetes:core/v1:Secret").length,
      0,
      "the Operator only names the Secret: its content never enters the program or the state",
    );
  });

  it("passes the Fleet's registryCredentials to the slots resource as a secret, and refuses bad ones without showing them", async () => {
    const fleet = new sdk.Fleet("cred", {
      namespace: "agents",
      spec: { agent: { image: "agents/coder:1" } },
      registry: "registry.example.com/snaps",
      registryCredentials: { username: "robot", password: "s3cret-pw" },
      kubeconfig: KUBECONFIG,
    });
    await settle(fleet.podNames);
    const inputs = one("cred", SLOTS, "cred-slots").inputs;
    assert.deepEqual(secretValue(inputs.registryCredentials), {
      username: "robot",
      password: "s3cret-pw",
    });
    assert.throws(
      () =>
        new sdk.Fleet("cred-bad", {
          namespace: "agents",
          spec: { agent: { image: "agents/coder:1" } },
          registry: "registry.example.com/snaps",
          registryCredentials: { username: "robot", password: "", extra: "s3cret-pw" } as never,
          kubeconfig: KUBECONFIG,
        }),
      (e: Error) =>
        /\[registryCredentials\] must be \{ username, password \} or \{ identityToken \}/.test(
          e.message,
        ) && !e.message.includes("s3cret-pw"),
    );
    assert.throws(
      () =>
        new sdk.Fleet("cred-noreg", {
          namespace: "agents",
          spec: { agent: { image: "agents/coder:1" } },
          registryCredentials: { identityToken: "tok" },
          kubeconfig: KUBECONFIG,
        }),
      /\[registryCredentials\] needs \[registry\]/,
    );
    // The Operator's ociRegistry is a registry too.
    const op = new sdk.Operator("credop", {
      kubeconfig: KUBECONFIG,
      ociRegistry: "registry.example.com/snaps",
    });
    const inherits = new sdk.Fleet("cred-op", {
      namespace: "agents",
      operator: op,
      spec: { agent: { image: "agents/coder:1" } },
      registryCredentials: { identityToken: "tok" },
      kubeconfig: KUBECONFIG,
    });
    await settle(inherits.podNames);
    const opInputs = one("cred-op", SLOTS, "cred-op-slots").inputs;
    assert.equal(opInputs.registry, "registry.example.com/snaps");
    assert.deepEqual(secretValue(opInputs.registryCredentials), { identityToken: "tok" });
  });

  it("an invalid spec holding Outputs gets no desired slots (the resource's check reports it)", async () => {
    const fleet = new sdk.Fleet("broken", {
      namespace: "agents",
      kubeconfig: "apiVersion: v1\nkind: Config\n",
      spec: { agent: { replicas: pulumi.output(-1), image: "" } },
    });
    await settle(fleet.podNames);
    const slots = one("broken", "pulumi-nodejs:dynamic/cocoonset:Slots", "broken-slots");
    assert.deepEqual(slots.inputs.slots, {});
    assert.deepEqual(slots.inputs.spec, { agent: { replicas: -1, image: "" } });
  });
});

const SLOTS = "pulumi-nodejs:dynamic/cocoonset:Slots";

/** The value of a secret as the mock monitor receives it; fails when it is not a secret. */
function secretValue(v: unknown): unknown {
  const sig = "4dabf18193072939515e22adb298388d";
  assert.ok(v && typeof v === "object" && sig in v, "a secret");
  return (v as unknown as { value: unknown }).value;
}

/** A kubeconfig with two contexts, as a cluster resource's output would give it. */
const TWO_CONTEXTS = [
  "apiVersion: v1",
  "kind: Config",
  "clusters:",
  "  - name: a",
  "    cluster: { server: https://a.example:6443 }",
  "  - name: b",
  "    cluster: { server: https://b.example:6443 }",
  "users:",
  "  - name: u",
  "    user: { token: t }",
  "contexts:",
  "  - name: a",
  "    context: { cluster: a, user: u }",
  "  - name: b",
  "    context: { cluster: b, user: u }",
  "current-context: a",
  "",
].join("\n");

describe("one kubeconfig, given once", () => {
  it("a Fleet and an Operator given a Kubernetes provider take its kubeconfig (and context) for their dynamic resources, as secrets", async () => {
    const k8s = await import("@pulumi/kubernetes");
    const saved = process.env.KUBECONFIG;
    // Nothing to fall back on: the kubeconfig can only come from the provider.
    process.env.KUBECONFIG = "/nonexistent/kubeconfig";
    try {
      const provider = new k8s.Provider("target", { kubeconfig: TWO_CONTEXTS });
      const op = new sdk.Operator("viaprov", { namespace: "viaprov-system" }, { provider });
      const fleet = new sdk.Fleet(
        "viaprov-fleet",
        { namespace: "agents", operator: op, spec: { agent: { replicas: 1, image: "a:1" } } },
        { provider },
      );
      await settle(fleet.podNames);
      const slots = one("viaprov-fleet", SLOTS, "viaprov-fleet-slots");
      assert.equal(secretValue(slots.inputs.kubeconfig), TWO_CONTEXTS);
      await settle(op.crdGuard.urn);
      const guard = one(
        "viaprov",
        "pulumi-nodejs:dynamic/cocoonset:OperatorGuard",
        "viaprov-guard",
      );
      assert.equal(secretValue(guard.inputs.kubeconfig), TWO_CONTEXTS);
      const crdGuard = one(
        "viaprov",
        "pulumi-nodejs:dynamic/cocoonset:CrdGuard",
        "viaprov-crd-guard",
      );
      assert.equal(secretValue(crdGuard.inputs.kubeconfig), TWO_CONTEXTS);
      assert.equal(crdGuard.inputs.retain, "", "by default the CRD is not kept");

      // The provider's `context` picks the cluster: the slots resource must use the same one.
      const other = new k8s.Provider("target-b", { kubeconfig: TWO_CONTEXTS, context: "b" });
      const fleetB = new sdk.Fleet(
        "viactx",
        { namespace: "agents", spec: { agent: { replicas: 1, image: "a:1" } } },
        { provider: other },
      );
      await settle(fleetB.podNames);
      const text = secretValue(one("viactx", SLOTS, "viactx-slots").inputs.kubeconfig) as string;
      assert.match(text, /current-context: b/);
      assert.match(text, /b\.example/);
    } finally {
      if (saved === undefined) delete process.env.KUBECONFIG;
      else process.env.KUBECONFIG = saved;
    }
  });

  it("an explicit kubeconfig argument still wins over the provider's", async () => {
    const k8s = await import("@pulumi/kubernetes");
    const provider = new k8s.Provider("explicit-target", { kubeconfig: TWO_CONTEXTS });
    const fleet = new sdk.Fleet(
      "explicit",
      {
        namespace: "agents",
        kubeconfig: KUBECONFIG,
        spec: { agent: { replicas: 1, image: "a:1" } },
      },
      { provider },
    );
    await settle(fleet.podNames);
    assert.equal(
      secretValue(one("explicit", SLOTS, "explicit-slots").inputs.kubeconfig),
      KUBECONFIG,
    );
  });
});

describe("the Operator's CRD on destroy", () => {
  it("retainCrdOnDelete and adoptCrd keep the CRD and tell both guards why; adoptCrd must name the CRD", async () => {
    const crdOpts = new Map<string, pulumi.ResourceOptions>();
    const record: pulumi.ResourceTransformation = (args) => {
      if (args.name.endsWith("-crd")) crdOpts.set(args.name, args.opts);
      return undefined;
    };
    const unkept = new sdk.Operator(
      "unkept",
      { kubeconfig: KUBECONFIG },
      { transformations: [record] },
    );
    const kept = new sdk.Operator(
      "kept",
      { kubeconfig: KUBECONFIG, retainCrdOnDelete: true },
      { transformations: [record] },
    );
    const adopting = new sdk.Operator(
      "adopting",
      { kubeconfig: KUBECONFIG, adoptCrd: "cocoonsets.cocoonset.cocoonstack.io" },
      { transformations: [record] },
    );
    for (const op of [unkept, kept, adopting]) await settle(op.crdGuard.urn);
    // The CRD resources never delete: the install guard, deleted last, deletes the CRD when it
    // carries its token and `retain` is empty.
    for (const n of ["unkept-crd", "kept-crd", "adopting-crd"])
      assert.equal(crdOpts.get(n)?.retainOnDelete, true, n);
    assert.equal(
      one("unkept", "pulumi-nodejs:dynamic/cocoonset:OperatorGuard", "unkept-guard").inputs.retain,
      "",
    );
    assert.equal(
      one("kept", "pulumi-nodejs:dynamic/cocoonset:OperatorGuard", "kept-guard").inputs.retain,
      "retainCrdOnDelete",
    );
    assert.equal(
      one("kept", "pulumi-nodejs:dynamic/cocoonset:CrdGuard", "kept-crd-guard").inputs.retain,
      "retainCrdOnDelete",
    );
    assert.match(
      one("adopting", "pulumi-nodejs:dynamic/cocoonset:CrdGuard", "adopting-crd-guard").inputs
        .retain as string,
      /adopted/,
    );
    assert.equal(
      one("adopting", "pulumi-nodejs:dynamic/cocoonset:OperatorGuard", "adopting-guard").inputs
        .adoptCrd,
      "cocoonsets.cocoonset.cocoonstack.io",
    );
    assert.throws(
      () => new sdk.Operator("typo", { kubeconfig: KUBECONFIG, adoptCrd: "cocoonsets" }),
      /\[adoptCrd\] must be the name of the CocoonSet CRD, "cocoonsets\.cocoonset\.cocoonstack\.io"/,
    );
  });
});
