/**
 * Validation of the Operator's arguments before anything is registered. The values that
 * become controller flags go through the controller's own parsers (controller/options.ts), so
 * the component refuses exactly what the controller would refuse at start (where a bad value
 * would make the Deployment restart forever while `pulumi up` waits for it). Only type
 * imports from the Pulumi SDK: `cocoonset manifests` runs the same check without it.
 */
import type * as k8s from "@pulumi/kubernetes";
import type * as pulumi from "@pulumi/pulumi";
import {
  parseCountOption,
  parseLogLevelOption,
  parseNamespaceOption,
  parseReapIntervalOption,
  parseRegistryOption,
  parseTransitionTimeoutOption,
} from "../controller/options.js";
import { MAX_SHARDS } from "../controller/shard.js";
import { CRD_NAME, describeValue, namespaceNameProblem } from "../engine/spec/index.js";
import { InvalidValueError } from "../engine/kube/branded-error.js";
import { plainHttpProblem } from "../engine/registry/address.js";
import { parseCaBundle } from "../engine/registry/ca.js";

/** Arguments of the `Operator` component (sdk/operator.ts). */
export interface OperatorArgs {
  /**
   * Namespace of the controller (created unless `createNamespace` is false).
   * @default "cocoonset-system"
   */
  namespace?: string;
  /** @default true */
  createNamespace?: boolean;
  /**
   * Controller image: build it with `cocoonset-dev image build --tag REGISTRY/...` and push it
   * where the cluster can pull from (docs/controller.md, "Deploying to a real cluster").
   * @default `pulumi-cocoonset/controller:<package version>` (the default tag of `cocoonset-dev image build`)
   */
  image?: pulumi.Input<string>;
  /** `imagePullPolicy` of the controller container (Kubernetes' default when unset). */
  imagePullPolicy?: pulumi.Input<"Always" | "IfNotPresent" | "Never">;
  /** Names of Secrets (in the controller's namespace) holding registry credentials. */
  imagePullSecrets?: pulumi.Input<string>[];
  /** `nodeSelector` of the controller pod. */
  nodeSelector?: pulumi.Input<Record<string, pulumi.Input<string>>>;
  /** `tolerations` of the controller pod. */
  tolerations?: pulumi.Input<pulumi.Input<k8s.types.input.core.v1.Toleration>[]>;
  /** `priorityClassName` of the controller pod. */
  priorityClassName?: pulumi.Input<string>;
  /**
   * Controller replicas; more than one needs leader election.
   * @default 1
   */
  replicas?: number;
  /**
   * The controller as this many shards, each reconciling a disjoint share of the CocoonSets
   * (by a stable hash of namespace/name) with `replicas` pods of its own (a leader and its
   * standbys, on a Lease per shard): shard 0 is the `<name>-controller` Deployment, shard i
   * `<name>-controller-shard-<i>`. Changing it hands CocoonSets over without two shards
   * reconciling one at once. More than one needs leader election. At most 256.
   * @default 1
   */
  shards?: number;
  /**
   * A Service `<name>-controller-metrics` for the controller's metrics port (8080, named
   * `metrics`), for a Prometheus that scrapes Services.
   * @default false
   */
  metricsService?: boolean;
  /**
   * A `monitoring.coreos.com/v1` ServiceMonitor for that Service (implies `metricsService`).
   * Needs the Prometheus Operator's ServiceMonitor CRD in the cluster: `pulumi preview` and
   * `up` ask the cluster's discovery, and refuse with a message naming the CRD
   * (`servicemonitors.monitoring.coreos.com`) when the cluster does not serve the kind.
   * @default false
   */
  serviceMonitor?: boolean;
  /** Container resources of the controller. */
  resources?: pulumi.Input<k8s.types.input.core.v1.ResourceRequirements>;
  /**
   * Leader election on a `coordination.k8s.io` Lease.
   * @default true
   */
  leaderElect?: boolean;
  /**
   * Namespaces the controller watches (a Role per namespace); all when empty (a ClusterRole).
   * @default []
   */
  watchNamespaces?: string[];
  /** @default 4 */
  concurrency?: number;
  /** @default 8 */
  fanoutConcurrency?: number;
  /** @default "5m" */
  reapInterval?: string;
  /** @default "info" */
  logLevel?: string;
  /**
   * The snapshot registry of the VMs, `host[:port][/prefix]` (the node agent's
   * `OCI_REGISTRY`): the controller gets `--oci-registry` and then acts on `spec.suspend`
   * and drops snapshot tags at a CocoonSet's deletion. A Fleet given this Operator takes it
   * as its `registry` unless it names its own.
   * @default none: `suspend` is stored and not acted on
   */
  ociRegistry?: string;
  /**
   * PEM CA bundle trusted for the snapshot registry's https, besides the system's roots:
   * the Operator puts it into a ConfigMap, mounts it into the controller and passes
   * `--oci-registry-ca-file`. A Fleet given this Operator takes it as its `registryCa`
   * unless it names its own `registry`.
   * @default none: the system's roots only
   */
  ociRegistryCa?: string;
  /**
   * Plain http to an `ociRegistry` host that is not loopback (`--oci-registry-insecure`).
   * A Fleet given this Operator takes it as its `registryInsecure` unless it names its own
   * `registry`.
   * @default false
   */
  ociRegistryInsecure?: boolean;
  /**
   * A `kubernetes.io/dockerconfigjson` Secret in the controller's namespace holding the
   * snapshot registry's credentials (as `kubectl create secret docker-registry` makes it):
   * the Operator mounts its `.dockerconfigjson` as `config.json` into the controller and
   * points `DOCKER_CONFIG` at it, so the controller's Docker keychain reads it. Needs
   * `ociRegistry`. The same Secret can be in `imagePullSecrets` when the controller image
   * comes from that registry.
   * @default none: the controller asks the registry anonymously
   */
  ociRegistryCredentialsSecret?: string;
  /**
   * How long a CocoonHibernation may stay `Hibernating` before it is `Failed`
   * (`HibernateTimedOut`): a duration such as `90s`, `10m` or `1h` (the controller's
   * `--hibernate-timeout`).
   * @default "3m"
   */
  hibernateTimeout?: string;
  /**
   * How long a CocoonHibernation may stay `Waking` before it is `Failed` (`WakeTimedOut`): a
   * duration such as `90s`, `10m` or `1h` (the controller's `--wake-timeout`).
   * @default "5m"
   */
  wakeTimeout?: string;
  /**
   * Kubeconfig text the Operator's guards use (kept as a secret). Leave it out: they then use
   * the kubeconfig of the Kubernetes provider the Operator is given, so they reach the same
   * cluster as its CRD.
   * @default the provider's `kubeconfig` (and `context`); with the default provider, the
   * stack's `kubernetes:kubeconfig` config, else `$KUBECONFIG`, else `~/.kube/config`
   */
  kubeconfig?: pulumi.Input<string>;
  /**
   * Keep the CocoonSet CRD (and so every CocoonSet in the cluster) when the Operator is
   * destroyed. Without it, destroying the Operator while any CocoonSet is left fails with a
   * message naming them, and changes nothing.
   * @default false
   */
  retainCrdOnDelete?: boolean;
  /**
   * Adopt a CocoonSet CRD that exists and that no Operator installed (applied by hand or by
   * another tool): the CRD's name, `cocoonsets.cocoonset.cocoonstack.io`. Without it, `up`
   * refuses such a CRD. An Operator with `adoptCrd` never deletes the CRD: destroy keeps it.
   */
  adoptCrd?: string;
  /**
   * Do not wait for the controller Deployment to become available (for clusters with no
   * nodes that can run it). When waiting, `pulumi up` fails at once, naming the image, when
   * the cluster cannot pull it.
   * @default false
   */
  skipAwait?: boolean;
  /**
   * How long `pulumi up` waits for the controller Deployment to roll out.
   * @default 600
   */
  rolloutTimeoutSeconds?: number;
}

const WHITESPACE = /[ \t\n\v\f\r]/;

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** Why `name` cannot name a Secret (a DNS subdomain), or undefined. */
function secretNameProblem(name: string): string | undefined {
  if (name.length > 253 || !DNS_SUBDOMAIN.test(name))
    return "must be a Secret name: lowercase letters, digits, '-' and '.', at most 253 characters";
  return undefined;
}

/** Collects `[field] rule (got value)` lines; `parsed` runs a controller flag's own parser. */
function problemList() {
  const lines: string[] = [];
  const bad = (field: string, rule: string, value: unknown) =>
    lines.push(`[${field}] ${rule} (got ${describeValue(value)})`);
  const parsed = (field: string, value: unknown, parser: (text: string) => unknown) => {
    try {
      parser(String(value));
    } catch (e) {
      if (!InvalidValueError.isInstance(e)) throw e;
      bad(field, e.message, value);
    }
  };
  return { lines, bad, parsed };
}

type Problems = ReturnType<typeof problemList>;

/** Every problem with the arguments, one `[field] rule (got value)` line each. */
export function operatorArgumentProblems(args: OperatorArgs): string[] {
  const p = problemList();
  flagValueProblems(args, p);
  replicaProblems(args, p);
  registryProblems(args, p);
  watchNamespaceProblems(args, p);
  return p.lines;
}

/** The plain values: the namespace, the booleans, the image and the controller's flags. */
function flagValueProblems(args: OperatorArgs, { bad, parsed }: Problems): void {
  if (args.namespace !== undefined) {
    const problem = namespaceNameProblem(args.namespace);
    if (problem) bad("namespace", problem, args.namespace);
  }
  for (const field of [
    "createNamespace",
    "leaderElect",
    "skipAwait",
    "metricsService",
    "serviceMonitor",
  ] as const) {
    const v = args[field];
    if (v !== undefined && typeof v !== "boolean") bad(field, "must be true or false", v);
  }
  if (typeof args.image === "string" && (args.image === "" || WHITESPACE.test(args.image))) {
    bad("image", "must be an image reference with no whitespace", args.image);
  }
  for (const field of ["concurrency", "fanoutConcurrency"] as const) {
    const v = args[field];
    if (v === undefined) continue;
    if (typeof v !== "number") bad(field, "must be a number", v);
    else parsed(field, v, parseCountOption);
  }
  const durations = [
    ["reapInterval", parseReapIntervalOption],
    ["hibernateTimeout", parseTransitionTimeoutOption],
    ["wakeTimeout", parseTransitionTimeoutOption],
  ] as const;
  for (const [field, parser] of durations) {
    const v = args[field];
    if (v === undefined) continue;
    if (typeof v !== "string") bad(field, "must be a string such as 5m", v);
    else parsed(field, v, parser);
  }
  if (args.logLevel !== undefined) {
    if (typeof args.logLevel !== "string") bad("logLevel", "must be a string", args.logLevel);
    else parsed("logLevel", args.logLevel, parseLogLevelOption);
  }
  if (args.ociRegistry !== undefined) {
    if (typeof args.ociRegistry !== "string")
      bad("ociRegistry", "must be a string host[:port][/prefix]", args.ociRegistry);
    else parsed("ociRegistry", args.ociRegistry, parseRegistryOption);
  }
}

/** Replicas and shards (and the leader election both need), and the adopted CRD. */
function replicaProblems(args: OperatorArgs, { bad }: Problems): void {
  const replicas = args.replicas ?? 1;
  if (typeof replicas !== "number" || !Number.isInteger(replicas) || replicas < 1) {
    bad("replicas", "must be an integer >= 1", replicas);
  } else if (replicas > 1 && args.leaderElect === false) {
    bad("leaderElect", "must be true when [replicas] > 1: two controllers would fight", false);
  }
  const shards = args.shards ?? 1;
  if (
    typeof shards !== "number" ||
    !Number.isInteger(shards) ||
    shards < 1 ||
    shards > MAX_SHARDS
  ) {
    bad("shards", `must be an integer from 1 to ${MAX_SHARDS}`, shards);
  } else if (shards > 1 && args.leaderElect === false) {
    bad(
      "leaderElect",
      "must be true when [shards] > 1: shards hand CocoonSets over through their Leases",
      false,
    );
  }
  if (args.adoptCrd !== undefined && args.adoptCrd !== CRD_NAME) {
    bad("adoptCrd", `must be the name of the CocoonSet CRD, "${CRD_NAME}"`, args.adoptCrd);
  }
}

/** The snapshot registry's transport, CA bundle and credentials. */
function registryProblems(args: OperatorArgs, { bad, parsed }: Problems): void {
  if (args.ociRegistryInsecure !== undefined && typeof args.ociRegistryInsecure !== "boolean")
    bad("ociRegistryInsecure", "must be true or false", args.ociRegistryInsecure);
  if (typeof args.ociRegistry === "string") {
    const plain = plainHttpProblem(args.ociRegistry, args.ociRegistryInsecure === true);
    if (plain)
      bad(
        "ociRegistry",
        plain.replace("the registry's insecure flag", "ociRegistryInsecure: true"),
        args.ociRegistry,
      );
  }
  if (args.ociRegistryCa !== undefined) {
    if (typeof args.ociRegistryCa !== "string")
      bad("ociRegistryCa", "must be PEM text", args.ociRegistryCa);
    else parsed("ociRegistryCa", args.ociRegistryCa, parseCaBundle);
  }
  if (args.ociRegistryCredentialsSecret !== undefined) {
    const v: unknown = args.ociRegistryCredentialsSecret;
    const problem = typeof v === "string" ? secretNameProblem(v) : "must be a Secret name";
    if (problem) bad("ociRegistryCredentialsSecret", problem, v);
    else if (args.ociRegistry === undefined)
      bad("ociRegistryCredentialsSecret", "needs [ociRegistry]: the registry it opens", v);
  }
}

function watchNamespaceProblems(args: OperatorArgs, { bad, parsed }: Problems): void {
  if (args.watchNamespaces === undefined) return;
  if (!Array.isArray(args.watchNamespaces)) {
    bad("watchNamespaces", "must be a list of namespace names", args.watchNamespaces);
    return;
  }
  args.watchNamespaces.forEach((ns: unknown, i) => {
    if (typeof ns !== "string") bad(`watchNamespaces[${i}]`, "must be a string", ns);
    else parsed(`watchNamespaces[${i}]`, ns, parseNamespaceOption);
  });
}
