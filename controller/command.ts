/**
 * `cocoonset controller`: the long-running reconcile process (docs/controller.md). Both
 * command lines register it: the `cocoonset` CLI (cli/main.ts) and the controller image's
 * own entry point (main.ts), which loads nothing of the CLI. The error reporting every
 * command shares lives here for that reason; cli/common.ts re-exports it.
 */
import type { Command } from "commander";
import { readFileSync } from "node:fs";
import {
  CONTROLLER_OPTIONS,
  controllerSockets,
  detectPodNamespace,
  OptionsError,
  resolveControllerOptions,
  runController,
  type ControllerDeps,
  type ControllerFlags,
  type ControllerOptions,
} from "./index.js";
import { KubeClient, KubeConfigError } from "../engine/kube/index.js";
import { BrandedError, errorMessage } from "../engine/kube/branded-error.js";

/** A user-facing failure: printed to stderr without a stack, exit code 1 (or `code`). */
export class CliError extends BrandedError {
  constructor(
    message: string,
    readonly code = 1,
  ) {
    super(message);
  }
}

/** Wraps a command action: any error goes to stderr and sets a non-zero exit code. */
export function action<A extends unknown[]>(
  fn: (...args: A) => Promise<void>,
): (...args: A) => Promise<void> {
  return async (...args: A) => {
    try {
      await fn(...args);
    } catch (e) {
      const msg = e instanceof Error ? e.message : String(e);
      process.stderr.write(`cocoonset: ${msg}\n`);
      if (process.env.COCOONSET_DEBUG && e instanceof Error && e.stack)
        process.stderr.write(e.stack + "\n");
      process.exitCode = CliError.isInstance(e) ? e.code : 1;
    }
  };
}

/** What the deps factory receives: the resolved options and a client that answered. */
export interface ControllerDepsContext {
  options: ControllerOptions;
  client: KubeClient;
}

/** Builds the reconciler (and reaper) once options are valid and the apiserver answers. */
export type ControllerDepsFactory = (ctx: ControllerDepsContext) => Promise<ControllerDeps>;

function readOptional(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return undefined;
  }
}

const collect = (value: string, previous: string[] = []): string[] => [...previous, value];

/** Checks that the apiserver answers, naming its URL and where the kubeconfig came from. */
async function ensureReachable(client: KubeClient): Promise<void> {
  const probe = new KubeClient({ config: client.config, requestTimeoutMs: 10_000 });
  try {
    await probe.get("/version");
  } catch (e) {
    throw new CliError(
      `cannot reach the apiserver at ${client.server} (kubeconfig: ${client.source}): ${errorMessage(e)}`,
    );
  } finally {
    probe.close();
  }
}

/** Registers `cocoonset controller`. */
export function registerController(program: Command, deps: ControllerDepsFactory): void {
  const cmd = program
    .command("controller")
    .description(
      "run the CocoonSet controller: keep every CocoonSet converged, reap expired objects, serve metrics and probes (each flag also reads an env var; the flag wins)",
    );
  for (const o of CONTROLLER_OPTIONS) {
    const help = `${o.description} (default: ${o.defaultText}; env: ${o.env})`;
    const flags = `${o.short ? `${o.short}, ` : ""}${o.flag} ${o.valueName}`;
    if (o.key === "namespace") cmd.option(flags, help, collect);
    else cmd.option(flags, help);
  }
  cmd.option("--no-leader-elect", "run without leader election (same as --leader-elect=false)");
  cmd.action(
    action(async (flags: ControllerFlags) => {
      let options: ControllerOptions;
      try {
        options = resolveControllerOptions(
          flags,
          process.env,
          detectPodNamespace(process.env, readOptional),
        );
      } catch (e) {
        if (OptionsError.isInstance(e)) throw new CliError(e.message, 2);
        throw e;
      }
      let client: KubeClient;
      try {
        client = new KubeClient({
          kubeconfig: options.kubeconfig,
          context: options.context,
          maxSockets: controllerSockets(options.namespaces.length),
        });
      } catch (e) {
        if (KubeConfigError.isInstance(e)) throw new CliError(e.message);
        throw e;
      }
      try {
        await ensureReachable(client);
        const d = await deps({ options, client });
        try {
          await runController(options, d, { client });
        } finally {
          // Requests to a hung registry that no reconcile waits for must not hold the exit.
          d.registry?.close();
        }
      } finally {
        client.close();
      }
    }),
  );
}
