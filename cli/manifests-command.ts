/**
 * `cocoonset manifests`: the objects an `Operator` would install (CRDs, namespace,
 * ServiceAccount, RBAC, Deployment), printed as YAML for GitOps (Argo CD, Flux) or
 * `kubectl apply --server-side`. They come from the Operator's own pure function
 * (sdk/operator-objects.ts), so both install the same objects; the options are the Operator's
 * arguments. It talks to no cluster.
 */
import type { Command } from "commander";
import { readFileSync } from "node:fs";
import { stringify } from "yaml";
import { operatorArgumentProblems, type OperatorArgs } from "../sdk/operator-args.js";
import { operatorObjectList, operatorObjects } from "../sdk/operator-objects.js";
import { action, CliError } from "./common.js";
import { errorMessage } from "../engine/kube/branded-error.js";

/** `cocoonset manifests` flags as commander parses them. */
export interface ManifestsFlags {
  name: string;
  namespace?: string;
  createNamespace: boolean;
  image?: string;
  imagePullPolicy?: string;
  imagePullSecret?: string[];
  replicas?: string;
  shards?: string;
  leaderElect: boolean;
  metricsService?: boolean;
  serviceMonitor?: boolean;
  watchNamespace?: string[];
  concurrency?: string;
  fanoutConcurrency?: string;
  reapInterval?: string;
  logLevel?: string;
  ociRegistry?: string;
  ociRegistryCaFile?: string;
  ociRegistryInsecure?: boolean;
  ociRegistryCredentialsSecret?: string;
  hibernateTimeout?: string;
  wakeTimeout?: string;
  output: string;
}

/** Each Operator argument's flag, for the messages of the argument check. */
const FLAG_OF: Record<string, string> = {
  namespace: "--namespace",
  image: "--image",
  replicas: "--replicas",
  shards: "--shards",
  leaderElect: "--no-leader-elect",
  watchNamespaces: "--watch-namespace",
  concurrency: "--concurrency",
  fanoutConcurrency: "--fanout-concurrency",
  reapInterval: "--reap-interval",
  logLevel: "--log-level",
  ociRegistry: "--oci-registry",
  ociRegistryCa: "--oci-registry-ca-file",
  ociRegistryInsecure: "--oci-registry-insecure",
  ociRegistryCredentialsSecret: "--oci-registry-credentials-secret",
  hibernateTimeout: "--hibernate-timeout",
  wakeTimeout: "--wake-timeout",
};

const collect = (value: string, previous: string[] = []): string[] => [...previous, value];

function integer(flag: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  if (!/^[0-9]+$/.test(text)) throw new CliError(`[${flag}] must be a whole number (got ${text})`);
  return Number(text);
}

/** The Operator arguments the flags stand for (no check yet). */
function operatorArgsOfFlags(flags: ManifestsFlags): OperatorArgs {
  let ociRegistryCa: string | undefined;
  if (flags.ociRegistryCaFile !== undefined) {
    try {
      ociRegistryCa = readFileSync(flags.ociRegistryCaFile, "utf8");
    } catch (e) {
      throw new CliError(
        `[--oci-registry-ca-file] cannot read ${flags.ociRegistryCaFile}: ${errorMessage(e)}`,
      );
    }
  }
  const pullPolicy = flags.imagePullPolicy;
  if (pullPolicy !== undefined && !["Always", "IfNotPresent", "Never"].includes(pullPolicy)) {
    throw new CliError(
      `[--image-pull-policy] must be Always, IfNotPresent or Never (got ${pullPolicy})`,
    );
  }
  const args: OperatorArgs = {
    namespace: flags.namespace,
    createNamespace: flags.createNamespace,
    image: flags.image,
    imagePullPolicy: pullPolicy as OperatorArgs["imagePullPolicy"],
    imagePullSecrets: flags.imagePullSecret,
    replicas: integer("--replicas", flags.replicas),
    shards: integer("--shards", flags.shards),
    leaderElect: flags.leaderElect,
    metricsService: flags.metricsService,
    serviceMonitor: flags.serviceMonitor,
    watchNamespaces: flags.watchNamespace,
    concurrency: integer("--concurrency", flags.concurrency),
    fanoutConcurrency: integer("--fanout-concurrency", flags.fanoutConcurrency),
    reapInterval: flags.reapInterval,
    logLevel: flags.logLevel,
    ociRegistry: flags.ociRegistry,
    ociRegistryCa,
    ociRegistryInsecure: flags.ociRegistryInsecure,
    ociRegistryCredentialsSecret: flags.ociRegistryCredentialsSecret,
    hibernateTimeout: flags.hibernateTimeout,
    wakeTimeout: flags.wakeTimeout,
  };
  // Unset flags leave the Operator's defaults.
  return Object.fromEntries(Object.entries(args).filter(([, v]) => v !== undefined));
}

/** The objects as plain JSON values (no undefined fields), in apply order. */
function manifestObjects(name: string, args: OperatorArgs): Record<string, unknown>[] {
  return operatorObjectList(operatorObjects(name, args)).map(
    (o) => JSON.parse(JSON.stringify(o.object)) as Record<string, unknown>,
  );
}

/** Registers `cocoonset manifests`. */
export function registerManifests(program: Command): void {
  program
    .command("manifests")
    .description(
      "print the objects an Operator installs (CocoonSet and CocoonHibernation CRDs, namespace, ServiceAccount, RBAC, controller Deployment (one per shard with --shards); a PodDisruptionBudget per shard with --replicas > 1, the metrics Service and ServiceMonitor when asked) for GitOps or `kubectl apply --server-side -f -`; the options are the Operator's arguments, and the objects come from the same code",
    )
    .option(
      "--name <name>",
      "the Operator's name: objects are named <name>-controller, <name>-cocoonset-controller",
      "cocoonset",
    )
    .option("-n, --namespace <ns>", "namespace of the controller (default: cocoonset-system)")
    .option("--no-create-namespace", "leave the namespace out (it exists already)")
    .option(
      "--image <ref>",
      "controller image, e.g. REGISTRY/controller@sha256:... (default: pulumi-cocoonset/controller:<version>)",
    )
    .option("--image-pull-policy <policy>", "Always, IfNotPresent or Never (default: Kubernetes')")
    .option(
      "--image-pull-secret <name>",
      "a Secret of the controller's namespace the kubelet pulls the image with (repeatable)",
      collect,
    )
    .option(
      "--replicas <n>",
      "controller replicas; more than one needs leader election (default: 1)",
    )
    .option(
      "--shards <n>",
      "the controller as this many shards (a Deployment each, with --replicas pods), each reconciling a disjoint share of the CocoonSets; more than one needs leader election (default: 1)",
    )
    .option("--no-leader-elect", "run the controller without leader election")
    .option("--metrics-service", "a Service <name>-controller-metrics for the metrics port")
    .option(
      "--service-monitor",
      "a monitoring.coreos.com/v1 ServiceMonitor for it (implies --metrics-service; needs the Prometheus Operator's CRD)",
    )
    .option(
      "--watch-namespace <ns>",
      "a namespace the controller watches, with a Role there (repeatable; default: all, with a ClusterRole)",
      collect,
    )
    .option("--concurrency <n>", "CocoonSets reconciled at once (default: 4)")
    .option("--fanout-concurrency <n>", "pod requests at once per pass (default: 8)")
    .option("--reap-interval <duration>", "orphan reaper interval (default: 5m)")
    .option("--log-level <level>", "controller log level (default: info)")
    .option("--oci-registry <host[:port][/prefix]>", "the VMs' snapshot registry (default: none)")
    .option(
      "--oci-registry-ca-file <path>",
      "PEM CA bundle for the registry's https, put into a ConfigMap the controller mounts",
    )
    .option("--oci-registry-insecure", "plain http to a registry host that is not loopback")
    .option(
      "--oci-registry-credentials-secret <name>",
      "a kubernetes.io/dockerconfigjson Secret of the controller's namespace with the registry's credentials, mounted for the controller (DOCKER_CONFIG)",
    )
    .option("--hibernate-timeout <duration>", "controller --hibernate-timeout (default: 3m)")
    .option("--wake-timeout <duration>", "controller --wake-timeout (default: 5m)")
    .option(
      "-o, --output <format>",
      "yaml (documents separated by ---) or json (a v1 List)",
      "yaml",
    )
    .action(
      action(async (flags: ManifestsFlags) => {
        if (flags.output !== "yaml" && flags.output !== "json") {
          throw new CliError(`[--output] must be yaml or json (got ${flags.output})`, 2);
        }
        const args = operatorArgsOfFlags(flags);
        // The Operator's own check.
        const problems = operatorArgumentProblems(args).map((p) =>
          p.replace(/\[([A-Za-z]+)(?=[\][])/g, (_, field: string) => `[${FLAG_OF[field] ?? field}`),
        );
        if (problems.length > 0) throw new CliError(problems.join("\n"), 2);
        const objects = manifestObjects(flags.name, args);
        process.stdout.write(
          flags.output === "json"
            ? JSON.stringify({ apiVersion: "v1", kind: "List", items: objects }, null, 2) + "\n"
            : objects.map((o) => stringify(o, { lineWidth: 0 })).join("---\n"),
        );
      }),
    );
}
