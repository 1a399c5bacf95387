/**
 * How the package's commands start: `bin/cocoonset`, `bin/pulumi-resource-cocoonset` (the
 * plugin the Pulumi engine runs by that name) and, in a clone, `bin/cocoonset-dev` are Node
 * scripts (`#!/usr/bin/env node`), so npm links them on every platform. The code they run
 * needs Node >= 22. Started by such a Node, a command runs its entry in the same process;
 * started by an older one (the first `node` on PATH), it runs the entry in a child process on
 * the Node the project installs from the npm registry (the `node` package, whose
 * `node_modules/.bin/node` is in the package's folder or in the project that depends on it),
 * passing on its arguments, standard streams, signals and exit status; with no such Node it
 * says what it needs and exits 1.
 *
 * An older Node loads this module, so it uses nothing newer than Node 18 has.
 */
import { spawn } from "node:child_process";
import { existsSync, statSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

/** The oldest Node the package runs on (package.json `engines`). */
export const MIN_NODE_MAJOR = 22;

/** The major version of a Node version string (`v24.1.0` or `24.1.0`). */
export function nodeMajor(version: string): number {
  return Number(/^v?(\d+)/.exec(version)?.[1] ?? 0);
}

/**
 * Where a Node from the npm registry may be, for the package at `root`: its own
 * `node_modules` (a clone of the repository) and the `node_modules` it is installed in.
 */
export function nodeCandidates(root: string): string[] {
  return [join(root, "node_modules", ".bin", "node"), join(root, "..", ".bin", "node")];
}

/** The CLI's entry, relative to the package root. */
export const CLI_ENTRY = "dist/cli/main.js";
/** The controller bundled into one module (cluster/controller-bundle.ts), relative to the root. */
export const CONTROLLER_BUNDLE = "dist/controller/main.bundle.js";
/** What the bundle is built from: a bundle older than it is stale. */
const BUNDLED_ENTRY = "dist/controller/main.js";

/**
 * The entry `cocoonset ARGS` runs, for the package at `root`: `cocoonset controller` runs the
 * bundled controller, one module that starts smaller than the CLI's graph, when the bundle is
 * there and not older than the compiled controller (a `tsc` without the bundle step leaves it
 * stale, and then the CLI's own modules run); every other command runs the CLI.
 */
export function entryFor(root: string, args: readonly string[]): string {
  if (args[0] !== "controller") return CLI_ENTRY;
  const bundle = join(root, CONTROLLER_BUNDLE);
  const source = join(root, BUNDLED_ENTRY);
  if (!existsSync(bundle) || !existsSync(source)) return CLI_ENTRY;
  return statSync(bundle).mtimeMs >= statSync(source).mtimeMs ? CONTROLLER_BUNDLE : CLI_ENTRY;
}

/** The signals a terminal or the Pulumi engine sends, passed on to the child. */
const FORWARDED = ["SIGINT", "SIGTERM", "SIGHUP"] as const;

/**
 * Runs `entry` (a path under the package root) for the command at `binUrl` (the bin
 * script's `import.meta.url`), on this Node when it is new enough, else on the project's.
 */
export async function launch(binUrl: string, entry: string): Promise<void> {
  const bin = fileURLToPath(binUrl);
  const root = dirname(dirname(bin));
  const main = join(root, entry);
  if (nodeMajor(process.version) >= MIN_NODE_MAJOR) {
    await import(pathToFileURL(main).href);
    return;
  }
  const node = nodeCandidates(root).find((p) => existsSync(p));
  if (node === undefined) {
    process.stderr.write(
      `${basename(bin)}: needs Node >= ${MIN_NODE_MAJOR}, and the node on PATH is ${process.version} (${process.execPath}); put a newer node first on PATH, or add one to the project from the npm registry: npm install --save-dev node@24\n`,
    );
    process.exit(1);
  }
  const child = spawn(node, [...process.execArgv, main, ...process.argv.slice(2)], {
    stdio: "inherit",
  });
  const forward = (signal: NodeJS.Signals) => child.kill(signal);
  for (const signal of FORWARDED) process.on(signal, forward);
  child.on("error", (e) => {
    process.stderr.write(`${basename(bin)}: could not start ${node}: ${e.message}\n`);
    process.exit(1);
  });
  child.on("exit", (code, signal) => {
    for (const s of FORWARDED) process.off(s, forward);
    if (signal) process.kill(process.pid, signal);
    else process.exit(code ?? 1);
  });
}
