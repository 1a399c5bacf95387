/** Helpers shared by the CLI commands: error reporting and JSON output. */
import { Command, InvalidArgumentError } from "commander";
import { readFileSync } from "node:fs";
import { MAX_TIMER_MS, parseDuration as parseDurationMs } from "../controller/duration.js";
import { action, CliError } from "../controller/command.js";
import { InvalidValueError } from "../engine/kube/branded-error.js";

export { action, CliError, MAX_TIMER_MS };

/**
 * A command line program of the package's version, `name` and `description`; a closed pipe
 * on stdout (`cocoonset ... | head`) ends it quietly instead of with a stack trace.
 */
export function newProgram(name: string, description: string): Command {
  const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
    version: string;
  };
  process.stdout.on("error", (e: NodeJS.ErrnoException) => {
    if (e.code === "EPIPE") process.exit(0);
    throw e;
  });
  return new Command()
    .name(name)
    .description(description)
    .version(pkg.version)
    .showHelpAfterError();
}

/** Prints one JSON document on stdout. */
export function printJson(value: unknown): void {
  process.stdout.write(JSON.stringify(value, null, 2) + "\n");
}

/** Parses a duration such as `90s`, `5m`, `1h30m`, `250ms` (a bare number means seconds). */
function parseDuration(text: string): number {
  try {
    return parseDurationMs(text);
  } catch (e) {
    if (!InvalidValueError.isInstance(e)) throw e;
    throw new InvalidArgumentError(e.message);
  }
}

/** Parses a positive integer option value. */
export function parsePositiveInt(text: string): number {
  if (!/^\d+$/.test(text.trim()) || parseInt(text, 10) < 1) {
    throw new InvalidArgumentError(`"${text}" must be an integer >= 1`);
  }
  return parseInt(text, 10);
}

/** Parses a timeout: a duration above zero that a timer can wait (under about 24 days). */
export function parseTimeout(text: string): number {
  const ms = parseDuration(text);
  if (ms <= 0) throw new InvalidArgumentError(`"${text}" must be longer than 0`);
  if (ms > MAX_TIMER_MS)
    throw new InvalidArgumentError(
      `"${text}" is too long (at most ${Math.floor(MAX_TIMER_MS / 3_600_000)}h)`,
    );
  return ms;
}
