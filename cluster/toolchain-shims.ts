/** The shell shims the toolchain writes next to the binaries it builds. */
import { mkdirSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { sourceDir } from "./toolchain-pins.js";
import { readText } from "./toolchain-lock.js";

/** Writes `text` to `p` (mode 0755) unless it already holds exactly that. */
function writeIfChanged(p: string, text: string): void {
  if (readText(p) === text) return;
  writeFileSync(`${p}.tmp`, text, { mode: 0o755 });
  renameSync(`${p}.tmp`, p);
}

/** Writes the dynamic-provider plugin shim next to the other binaries. */
export function writeDynamicProviderShim(dir: string): string {
  mkdirSync(dir, { recursive: true });
  const p = join(dir, "pulumi-resource-pulumi-nodejs");
  const text = `#!/bin/sh
# Pulumi's plugin for Node dynamic providers: run @pulumi/pulumi's provider host, resolved
# from the program's folder (the working directory), with the node found on PATH.
set -e
host=$(node -p 'require.resolve("@pulumi/pulumi/cmd/dynamic-provider/index.js", { paths: [process.cwd()] })')
exec node "$host" "$@"
`;
  writeIfChanged(p, text);
  return p;
}

/**
 * Writes the Node.js language host shim: it runs `cluster/pulumi-language-host.cjs` of the
 * checkout that wrote it (development tooling: the published package does not ship it).
 */
export function writeLanguageHostShim(dir: string): string {
  mkdirSync(dir, { recursive: true });
  const p = join(dir, "pulumi-language-nodejs");
  const host = join(sourceDir(), "pulumi-language-host.cjs");
  const text = `#!/bin/sh
# Pulumi's Node.js language host (cluster/pulumi-language-host.cjs of pulumi-cocoonset's checkout).
exec node '${host}' "$@"
`;
  writeIfChanged(p, text);
  return p;
}
