/**
 * kubectl's conventions for the commands that talk to a cluster: `--kubeconfig`, `--context`
 * and `-n/--namespace` (the context's namespace when not given), and for those that print
 * objects `-o/--output json|yaml`.
 */
import { Option, type Command } from "commander";
import { stringify } from "yaml";
import { namespaceNameProblem } from "../engine/spec/names.js";
import { KubeClient, KubeConfigError } from "../engine/kube/index.js";
import { CliError, printJson } from "./common.js";

/** The flags {@link addClusterFlags} adds. */
export interface ClusterFlags {
  kubeconfig?: string;
  context?: string;
  namespace?: string;
}

/** What `-o` takes. */
export type OutputFormat = "json" | "yaml";

/** Adds `--kubeconfig`, `--context` and `-n, --namespace` (described by `namespaceHelp`). */
export function addClusterFlags(cmd: Command, namespaceHelp: string): Command {
  return cmd
    .option("-n, --namespace <ns>", namespaceHelp)
    .option(
      "--kubeconfig <path>",
      "kubeconfig file (default: $KUBECONFIG, its files merged as kubectl merges them, else in-cluster credentials, else ~/.kube/config)",
    )
    .option("--context <name>", "kubeconfig context to use (default: its current context)");
}

/** Adds `-o, --output json|yaml` and, kept for scripts, `--json` (the same as `-o json`). */
export function addOutputFlag(cmd: Command, what: string): Command {
  return cmd
    .addOption(
      new Option("-o, --output <format>", `print ${what} as one JSON or YAML document`).choices([
        "json",
        "yaml",
      ]),
    )
    .option("--json", "the same as -o json");
}

/** The format `-o`/`--json` asked for, or undefined for the human-readable text. */
export function outputFormat(flags: { output?: string; json?: boolean }): OutputFormat | undefined {
  if (flags.json && flags.output && flags.output !== "json")
    throw new CliError(`--json and -o ${flags.output} contradict each other`, 2);
  return flags.json ? "json" : (flags.output as OutputFormat | undefined);
}

/** Prints one document in `format`. */
export function printDocument(value: unknown, format: OutputFormat): void {
  if (format === "json") printJson(value);
  else process.stdout.write(stringify(value));
}

/** A client for the flags' kubeconfig and context; a kubeconfig problem is a CliError. */
export function clusterClient(flags: ClusterFlags, requestTimeoutMs = 15_000): KubeClient {
  try {
    return new KubeClient({
      kubeconfig: flags.kubeconfig,
      context: flags.context,
      requestTimeoutMs,
    });
  } catch (e) {
    if (KubeConfigError.isInstance(e)) throw new CliError(e.message);
    throw e;
  }
}

/** A namespace that could never exist is refused here, before any request. */
export function checkedNamespace(ns: string, from: string): string {
  const problem = namespaceNameProblem(ns);
  if (problem) throw new CliError(`[${from}] ${problem} (got ${JSON.stringify(ns)})`);
  return ns;
}
