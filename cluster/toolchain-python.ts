/**
 * The Python side of the toolchain: a virtualenv holding the `pulumi` package from PyPI, at
 * the version `toolchain.json` pins (`python.pulumi`), for Python programs run by Pulumi's
 * Python language host. Cached under `<cacheRoot>/python/venv-<key>`, the key a hash of the
 * pinned version and the Python that made it; reused once complete.
 */
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { cacheRoot, loadPins, ToolchainError, type ToolchainPins } from "./toolchain-pins.js";

/** The file a complete virtualenv holds (written last). */
const COMPLETE = ".cocoonset-complete";

/** The `python3` on PATH and its version, or a ToolchainError saying it is missing. */
function python3(): { cmd: string; version: string } {
  const r = spawnSync("python3", ["--version"], { encoding: "utf8" });
  if (r.error || r.status !== 0)
    throw new ToolchainError(
      "python3 (with its venv module) is required for the toolchain's Python virtualenv, and was not found on PATH",
    );
  return { cmd: "python3", version: `${r.stdout}${r.stderr}`.trim() };
}

/** The pinned `pulumi` version of PyPI. */
function pythonPulumiVersion(pins: ToolchainPins = loadPins()): string {
  const v = pins.python?.pulumi;
  if (!v) throw new ToolchainError("toolchain.json pins no python.pulumi");
  return v;
}

/** The virtualenv's folder (it may not exist yet). */
function pythonVenvDir(pins: ToolchainPins = loadPins()): string {
  const key = createHash("sha256")
    .update(JSON.stringify([pythonPulumiVersion(pins), python3().version]))
    .digest("hex")
    .slice(0, 12);
  return join(cacheRoot(), "python", `venv-${key}`);
}

/** True when the virtualenv is complete. */
function pythonVenvReady(dir: string): boolean {
  return existsSync(join(dir, COMPLETE)) && existsSync(join(dir, "bin", "python"));
}

/**
 * Makes the virtualenv (`python3 -m venv`, then `pip install pulumi==<pin>` from the
 * package index pip is configured with) unless a complete one is there; returns its folder.
 * A folder left half-made by an interrupted run is made again.
 */
export function ensurePythonVenv(progress: (line: string) => void): string {
  const pins = loadPins();
  const dir = pythonVenvDir(pins);
  if (pythonVenvReady(dir)) return dir;
  const version = pythonPulumiVersion(pins);
  const { cmd, version: py } = python3();
  progress(`toolchain: making a virtualenv with pulumi ${version} from PyPI (${py}) in ${dir}`);
  const started = Date.now();
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(join(dir, ".."), { recursive: true });
  const step = (what: string, command: string, args: string[]) => {
    const r = spawnSync(command, args, { encoding: "utf8", timeout: 600_000 });
    if (r.error || r.status !== 0) {
      const tail = `${r.stdout ?? ""}${r.stderr ?? ""}${r.error?.message ?? ""}`
        .trim()
        .split("\n")
        .slice(-10)
        .join("\n");
      throw new ToolchainError(`python virtualenv: ${what} failed\n${tail}`);
    }
  };
  step("python3 -m venv", cmd, ["-m", "venv", dir]);
  step(`pip install pulumi==${version}`, join(dir, "bin", "python"), [
    "-m",
    "pip",
    "install",
    "--disable-pip-version-check",
    "--quiet",
    `pulumi==${version}`,
  ]);
  writeFileSync(join(dir, COMPLETE), `pulumi==${version}\n`);
  progress(
    `toolchain: virtualenv ready in ${Math.round((Date.now() - started) / 1000)}s (pulumi ${version})`,
  );
  return dir;
}

/** The complete virtualenv's folder, or a ToolchainError saying how to make it. */
export function requirePythonVenv(): string {
  const dir = pythonVenvDir();
  if (!pythonVenvReady(dir))
    throw new ToolchainError(
      `the Python virtualenv is not made yet: run \`cocoonset-dev toolchain ensure\` (looked in ${dir})`,
    );
  return dir;
}
