/**
 * `cocoonset plan -f cocoonset.yaml`: what the engine would do now if this file were applied,
 * one line per slot that would change. It only reads from the cluster.
 */
import type { Command } from "commander";
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";
import {
  forecastLive,
  freshReader,
  previewPlan,
  readPolicyForecast,
} from "../engine/execute/index.js";
import { policyForecastToJSON, renderPolicyForecast } from "../engine/idle/index.js";
import { forecastToJSON, renderForecast } from "../engine/capacity/index.js";
import { OciRegistry } from "../engine/registry/oci.js";
import {
  OptionsError,
  resolveControllerOptions,
  type ControllerFlags,
} from "../controller/options.js";
import { registryClientOf } from "../controller/cocoonset-controller.js";
import { CaBundleError } from "../engine/registry/ca.js";
import { API_VERSION } from "../engine/spec/constants.js";
import {
  KIND,
  cocoonSetNameProblem,
  formatFailure,
  namespaceNameProblem,
  validateCocoonSetSpec,
  type CocoonSet,
} from "../engine/spec/index.js";
import { planToJSON, renderPlan } from "../engine/plan/index.js";
import { KubeApiError, type KubeClient, paths } from "../engine/kube/index.js";
import { action, CliError } from "./common.js";
import { errorMessage } from "../engine/kube/branded-error.js";
import {
  addClusterFlags,
  addOutputFlag,
  checkedNamespace,
  clusterClient,
  outputFormat,
  printDocument,
  type ClusterFlags,
} from "./cluster-flags.js";

/** The CocoonSet a file declares, checked before any request. */
export interface PlanInputFile {
  namespace: string;
  /** False when the file names no namespace ("default", or the kubeconfig context's). */
  namespaceGiven: boolean;
  name: string;
  cocoonSet: CocoonSet;
}

/**
 * Reads and checks one CocoonSet manifest: YAML syntax, kind, metadata.name and the spec
 * (with the CRD's own rules). Every failure names the field.
 * @throws CliError listing every failure, one per line
 */
export function readCocoonSetFile(file: string): PlanInputFile {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why =
      code === "ENOENT"
        ? "no such file"
        : code === "EISDIR"
          ? "it is a directory"
          : code === "EACCES"
            ? "permission denied"
            : (code ?? errorMessage(e));
    throw new CliError(`[-f] cannot read ${file}: ${why}`);
  }
  const docs = parseAllDocuments(text).filter((d) => !Array.isArray(d) && d.contents !== null);
  if (docs.length !== 1) {
    throw new CliError(`${file}: expected exactly one CocoonSet document, found ${docs.length}`);
  }
  const doc = docs[0];
  if (Array.isArray(doc) || doc.errors.length > 0) {
    const err = Array.isArray(doc) ? undefined : doc.errors[0];
    throw new CliError(`${file}: not valid YAML: ${err?.message ?? "unreadable document"}`);
  }
  let obj: Partial<CocoonSet> | null;
  try {
    obj = doc.toJS() as Partial<CocoonSet> | null;
  } catch (e) {
    // Aliases that expand without bound (a "billion laughs" file) are refused by the parser.
    throw new CliError(`${file}: not valid YAML: ${errorMessage(e)}`);
  }
  if (typeof obj !== "object" || obj === null || Array.isArray(obj)) {
    throw new CliError(`${file}: expected a CocoonSet object`);
  }
  const failures: string[] = [];
  if (obj.kind !== undefined && obj.kind !== KIND) failures.push(`[kind] must be ${KIND}`);
  if (obj.apiVersion !== undefined && obj.apiVersion !== API_VERSION) {
    failures.push(`[apiVersion] must be ${API_VERSION}`);
  }
  const meta = obj.metadata ?? {};
  const name = meta.name;
  if (typeof name !== "string" || name === "") failures.push("[metadata.name] is required");
  else {
    const problem = cocoonSetNameProblem(name);
    if (problem) failures.push(`[metadata.name] ${problem}`);
  }
  const namespace = meta.namespace ?? "default";
  const nsProblem = namespaceNameProblem(namespace);
  if (nsProblem) failures.push(`[metadata.namespace] ${nsProblem}`);
  const checked = validateCocoonSetSpec(obj.spec);
  if (obj.spec === undefined) failures.push("[spec] is required");
  else if (!checked.ok)
    failures.push(
      ...checked.failures.map((f) => formatFailure({ ...f, property: `spec.${f.property}` })),
    );
  if (failures.length > 0 || !checked.ok) {
    throw new CliError(`${file} is not a valid CocoonSet:\n  ${failures.join("\n  ")}`);
  }
  return {
    namespace,
    namespaceGiven: meta.namespace !== undefined,
    name: name as string,
    cocoonSet: {
      apiVersion: API_VERSION,
      kind: KIND,
      metadata: { ...meta, name: name, namespace },
      spec: checked.spec,
    },
  };
}

/**
 * The CocoonSet to plan against: the live object with the file's spec (what applying the
 * file would store), or the file's object when none exists yet. `exists` says which.
 */
async function plannedObject(
  client: KubeClient,
  input: PlanInputFile,
): Promise<{ cocoonSet: CocoonSet; exists: boolean }> {
  const live = await client.getOrUndefined<CocoonSet>(paths.cocoonSet(input.namespace, input.name));
  if (!live) return { cocoonSet: input.cocoonSet, exists: false };
  const recheck = validateCocoonSetSpec(input.cocoonSet.spec, live.spec);
  if (!recheck.ok) {
    const lines = recheck.failures.map((f) =>
      formatFailure({ ...f, property: `spec.${f.property}` }),
    );
    throw new CliError(
      `the file cannot be applied over the live CocoonSet:\n  ${lines.join("\n  ")}`,
    );
  }
  const changed = JSON.stringify(live.spec) !== JSON.stringify(recheck.spec);
  const generation = (live.metadata.generation ?? 1) + (changed ? 1 : 0);
  return {
    cocoonSet: { ...live, metadata: { ...live.metadata, generation }, spec: recheck.spec },
    exists: true,
  };
}

/** Registers `plan`. */
export function registerPlan(program: Command): void {
  const planCmd = program
    .command("plan")
    .description(
      "show what the engine would do now if the CocoonSet in the file were applied: one line per slot that would be created, deleted, rebuilt, dead-lettered or waited on; with spec.idle or spec.expiry, which members the policy hibernates next and when the fleet is suspended or expires if nobody is active; then the capacity forecast: per node that would receive pods, what is free, what the plan requests there and the slots the node would refuse (read-only)",
    )
    .requiredOption("-f, --file <path>", "CocoonSet manifest (YAML, one document)");
  addClusterFlags(
    planCmd,
    "namespace of the CocoonSet when the file names none (default: the namespace of the kubeconfig's context); one the file names must agree",
  );
  addOutputFlag(planCmd, "the plan");
  planCmd
    .option(
      "--oci-registry <host[:port][/prefix]>",
      "the snapshot registry the controller is given (env: OCI_REGISTRY); with it a suspend (retain or release), a release wake and a migration to spec.nodeName are planned as the controller would carry them out; without it a retain `suspend` and a migration are shown as not acted on and a release suspend as an error. Credentials from the Docker keychain ($DOCKER_CONFIG/config.json, else ~/.docker/config.json, and its credential helpers)",
    )
    .option(
      "--oci-registry-ca-file <path>",
      "PEM CA bundle trusted for the registry's https, besides the system's roots (env: OCI_REGISTRY_CA_FILE)",
    )
    .option(
      "--oci-registry-insecure [bool]",
      "plain http to a registry host that is not loopback (env: OCI_REGISTRY_INSECURE)",
    )
    .option(
      "--oci-registry-docker-config <dir>",
      "folder of the Docker config.json the registry's credentials come from (env: DOCKER_CONFIG; default: ~/.docker)",
    )
    .action(
      action(
        async (
          opts: ClusterFlags & {
            file: string;
            output?: string;
            json?: boolean;
            ociRegistry?: string;
            ociRegistryCaFile?: string;
            ociRegistryInsecure?: string | boolean;
            ociRegistryDockerConfig?: string;
          },
        ) => {
          const format = outputFormat(opts);
          const registry = registryOf(opts, process.env);
          const input = readCocoonSetFile(opts.file);
          // As kubectl: -n fills in a file without metadata.namespace and must agree with one.
          const flagNs =
            opts.namespace === undefined
              ? undefined
              : checkedNamespace(opts.namespace.trim(), "--namespace");
          if (flagNs && input.namespaceGiven && flagNs !== input.namespace)
            throw new CliError(
              `the namespace of the file (${input.namespace}) does not match --namespace ${flagNs}`,
            );
          const client = clusterClient(opts);
          // A file without metadata.namespace means -n, else the context's namespace.
          const ns = flagNs ?? client.contextNamespace;
          if (!input.namespaceGiven && ns) {
            input.namespace = ns;
            input.cocoonSet.metadata = { ...input.cocoonSet.metadata, namespace: ns };
          }
          try {
            const { cocoonSet, exists } = await plannedObject(client, input);
            // The engine's own reading of the cluster, as a pass would read it.
            const nowMs = Date.now();
            const plan = await previewPlan(client, cocoonSet, { exists, registry, nowMs });
            // Room on the nodes for the pods the deploy creates (docs/behaviour.md §8).
            const capacity = await forecastLive(client, cocoonSet, { exists, nowMs });
            // What the idle and expiry policies do next if nobody is active (docs/lifecycle.md).
            const policy = await readPolicyForecast(freshReader(client), cocoonSet, {
              exists,
              now: new Date(nowMs),
            });
            if (format)
              return printDocument(
                {
                  ...planToJSON(plan),
                  ...(policy ? { policy: policyForecastToJSON(policy) } : {}),
                  capacity:
                    "forecast" in capacity
                      ? forecastToJSON(capacity.forecast)
                      : { unavailable: capacity.unavailable },
                },
                format,
              );
            const table =
              "forecast" in capacity
                ? renderForecast(capacity.forecast)
                : `capacity forecast: not made (${capacity.unavailable})`;
            const policyLines = policy ? renderPolicyForecast(policy) : [];
            process.stdout.write(
              renderPlan(plan) +
                "\n" +
                (policyLines.length > 0 ? `\n${policyLines.join("\n")}\n` : "") +
                (table ? `\n${table}\n` : ""),
            );
          } catch (e) {
            if (KubeApiError.isInstance(e) && e.status === 0) {
              throw new CliError(`${e.message}; kubeconfig: ${client.source}`);
            }
            if (KubeApiError.isInstance(e) && e.status === 401) {
              throw new CliError(`${e.message}; the credentials in ${client.source} were rejected`);
            }
            throw e;
          } finally {
            client.close();
          }
        },
      ),
    );
}

/**
 * The registry of `--oci-registry` (else `OCI_REGISTRY`) with its CA bundle and insecure
 * flag, validated as the controller validates them (the controller's own resolver, given
 * only these options).
 */
function registryOf(
  flags: Pick<
    ControllerFlags,
    "ociRegistry" | "ociRegistryCaFile" | "ociRegistryInsecure" | "ociRegistryDockerConfig"
  >,
  env: Record<string, string | undefined>,
): OciRegistry | undefined {
  try {
    const options = resolveControllerOptions(
      {
        ociRegistry: flags.ociRegistry,
        ociRegistryCaFile: flags.ociRegistryCaFile,
        ociRegistryInsecure: flags.ociRegistryInsecure,
        ociRegistryDockerConfig: flags.ociRegistryDockerConfig,
      },
      {
        OCI_REGISTRY: env.OCI_REGISTRY,
        OCI_REGISTRY_CA_FILE: env.OCI_REGISTRY_CA_FILE,
        OCI_REGISTRY_INSECURE: env.OCI_REGISTRY_INSECURE,
        DOCKER_CONFIG: env.DOCKER_CONFIG,
      },
    );
    return registryClientOf(options);
  } catch (e) {
    if (OptionsError.isInstance(e) || CaBundleError.isInstance(e)) throw new CliError(e.message, 2);
    throw e;
  }
}
