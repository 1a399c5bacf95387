/**
 * `cocoonset doctor`: a preflight of the current context before a first deploy. The reading
 * and the judgement live in engine/preflight/ (facts, then findings); this file parses the flags,
 * opens the registry as the controller would, and prints.
 */
import type { Command } from "commander";
import { DEFAULT_NODE_POOL } from "../engine/spec/schema-source.js";
import { dockerKeychain } from "../engine/registry/keychain.js";
import { CaBundleError } from "../engine/registry/ca.js";
import { RegistryError } from "../engine/registry/oci.js";
import { OptionsError, resolveControllerOptions } from "../controller/options.js";
import { registryClientOf } from "../controller/cocoonset-controller.js";
import { operatorNamespace } from "../sdk/operator-objects.js";
import { gatherDoctorFacts, type RegistryTarget } from "../engine/preflight/gather.js";
import { blocks, doctorFindings, renderFindings } from "../engine/preflight/findings.js";
import { action, CliError } from "./common.js";
import {
  addClusterFlags,
  addOutputFlag,
  checkedNamespace,
  clusterClient,
  outputFormat,
  printDocument,
  type ClusterFlags,
} from "./cluster-flags.js";
import { readCocoonSetFile } from "./plan-command.js";

/** `cocoonset doctor` flags as commander parses them. */
interface DoctorFlags extends ClusterFlags {
  file?: string[];
  operatorNamespace?: string;
  ociRegistry?: string;
  ociRegistryCaFile?: string;
  ociRegistryInsecure?: string | boolean;
  ociRegistryDockerConfig?: string;
  output?: string;
  json?: boolean;
}

const collect = (value: string, previous: string[] = []): string[] => [...previous, value];

/** Opens a registry as the controller would, with the flags' CA, insecure flag and keychain. */
function opener(flags: DoctorFlags): (address: string) => Omit<RegistryTarget, "from"> {
  return (address) => {
    try {
      const options = resolveControllerOptions(
        {
          ociRegistry: address,
          ociRegistryCaFile: flags.ociRegistryCaFile,
          ociRegistryInsecure: flags.ociRegistryInsecure,
          ociRegistryDockerConfig: flags.ociRegistryDockerConfig,
        },
        {
          OCI_REGISTRY_CA_FILE: process.env.OCI_REGISTRY_CA_FILE,
          OCI_REGISTRY_INSECURE: process.env.OCI_REGISTRY_INSECURE,
          DOCKER_CONFIG: process.env.DOCKER_CONFIG,
        },
      );
      const keychain = dockerKeychain(
        options.ociRegistryDockerConfig
          ? { env: { ...process.env, DOCKER_CONFIG: options.ociRegistryDockerConfig } }
          : {},
      );
      return { address, client: registryClientOf(options)!, keychain };
    } catch (e) {
      if (OptionsError.isInstance(e) || CaBundleError.isInstance(e) || RegistryError.isInstance(e))
        throw new CliError(e.message, 2);
      throw e;
    }
  };
}

/** Registers `cocoonset doctor`. */
export function registerDoctor(program: Command): void {
  const cmd = program
    .command("doctor")
    .description(
      "check the current context before a deploy: the API server and its version, the CRDs (this version's or not), the controller Deployments (image, readiness), your rights for what `pulumi up` and `destroy` do, the nodes of each pool the fleet selects, and the snapshot registry with the Docker keychain's credentials; one line per finding with what to do, exit 1 when one blocks a deploy",
    )
    .option(
      "-f, --file <path>",
      "a CocoonSet manifest whose namespace and node pool are checked (repeatable; default: pool `default` in the namespace of -n)",
      collect,
    );
  addClusterFlags(
    cmd,
    "namespace the fleet would be deployed to (default: the file's, else the kubeconfig context's, else default)",
  );
  addOutputFlag(cmd, "the findings and the facts behind them");
  cmd
    .option(
      "--operator-namespace <ns>",
      "namespace an Operator would install its controller in (default: cocoonset-system)",
    )
    .option(
      "--oci-registry <host[:port][/prefix]>",
      "the snapshot registry to check (env: OCI_REGISTRY; default: the controller Deployment's --oci-registry)",
    )
    .option(
      "--oci-registry-ca-file <path>",
      "PEM CA bundle trusted for the registry's https (env: OCI_REGISTRY_CA_FILE)",
    )
    .option(
      "--oci-registry-insecure [bool]",
      "plain http to a registry host that is not loopback (env: OCI_REGISTRY_INSECURE)",
    )
    .option(
      "--oci-registry-docker-config <dir>",
      "folder of the Docker config.json with the registry's credentials (env: DOCKER_CONFIG; default: ~/.docker)",
    )
    .action(
      action(async (flags: DoctorFlags) => {
        const format = outputFormat(flags);
        const files = (flags.file ?? []).map((f) => readCocoonSetFile(f));
        const flagNs =
          flags.namespace === undefined
            ? undefined
            : checkedNamespace(flags.namespace.trim(), "--namespace");
        const opNs = operatorNamespace({
          namespace:
            flags.operatorNamespace === undefined
              ? undefined
              : checkedNamespace(flags.operatorNamespace.trim(), "--operator-namespace"),
        });
        const open = opener(flags);
        const address = flags.ociRegistry ?? process.env.OCI_REGISTRY;
        const registry = address
          ? {
              ...open(address),
              from: flags.ociRegistry ? "--oci-registry" : "OCI_REGISTRY",
            }
          : undefined;
        const client = clusterClient(flags);
        try {
          const namespace =
            flagNs ??
            files.find((f) => f.namespaceGiven)?.namespace ??
            client.contextNamespace ??
            "default";
          const pools = [
            ...new Set(
              files.length === 0
                ? [DEFAULT_NODE_POOL]
                : files.map((f) => f.cocoonSet.spec.nodePool || DEFAULT_NODE_POOL),
            ),
          ];
          const facts = await gatherDoctorFacts(client, {
            namespace,
            operatorNamespace: opNs,
            pools,
            registry,
            open,
          });
          const findings = doctorFindings(facts);
          if (blocks(findings)) process.exitCode = 1;
          if (format) return printDocument({ blocking: blocks(findings), findings, facts }, format);
          process.stdout.write(renderFindings(findings) + "\n");
        } finally {
          client.close();
        }
      }),
    );
}
