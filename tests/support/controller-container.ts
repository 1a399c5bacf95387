/**
 * Test support for the controller image: whether podman can run containers here, building
 * the image once per test file, and running it with podman (runc, host network, read-only
 * root, the image's non-root UID) as a {@link ControllerProcess} whose stdout is the
 * container's log.
 */
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { get } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildImage, which, type BuildResult } from "../../cluster/image.js";
import { CONTROLLER_UID } from "../../controller/image.js";
import { Cleanup, ControllerProcess } from "./controller-process.js";
import { suffix } from "./cluster.js";

/** Why containers cannot run here, or undefined when podman, buildah and runc work. */
export function containerSkipReason(): string | undefined {
  const missing = ["podman", "buildah", "runc"].filter((t) => !which(t));
  if (missing.length)
    return `${missing.join(", ")} not installed (apt-get install -y podman buildah runc)`;
  const info = spawnSync(
    "podman",
    ["--runtime", "runc", "info", "--format", "{{.Host.OCIRuntime.Name}}"],
    {
      encoding: "utf8",
    },
  );
  if (info.status !== 0) return `podman cannot run here: ${(info.stderr || info.stdout).trim()}`;
  return undefined;
}

/** Builds the image under a test tag (removed when the file's tests end). */
export function buildTestImage(
  tag = `localhost/cocoonset-test/controller:${suffix()}`,
): BuildResult {
  return buildImage({ tag });
}

/** Removes a local image tag. */
export function removeImage(tag: string): void {
  spawnSync("podman", ["rmi", "--force", tag], { stdio: "ignore" });
}

/** A folder on the host the container may read (world-readable, removed by the cleanup). */
export function sharedDir(cleanup: Cleanup, prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), `${prefix}-`));
  chmodSync(dir, 0o755);
  cleanup.defer(`remove ${dir}`, () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Writes a world-readable file (the container runs as a UID that owns nothing here). */
export function writeShared(dir: string, name: string, text: string | Buffer): string {
  const p = join(dir, name);
  writeFileSync(p, text);
  chmodSync(p, 0o644);
  return p;
}

/** Options of {@link runControllerContainer}. */
export interface ContainerOptions {
  image: string;
  /** Arguments after the image (the Operator's Deployment `args`). */
  args: string[];
  /** Environment of the container. */
  env: Record<string, string>;
  /** Read-only bind mounts, host path → container path. */
  mounts: Record<string, string>;
  label?: string;
}

/**
 * Runs the image as `podman --runtime runc run --network host --read-only --user 65532`.
 * The metrics and probe servers bind to free loopback ports (appended flags win over the
 * Operator's `:8080`/`:8081`, which on the host network may be taken). At cleanup a running
 * container gets SIGTERM and must exit 0; the container is removed either way.
 */
/**
 * The `podman` arguments that run the controller image as the Operator's Deployment does:
 * non-root, read-only root, host network (the embedded apiserver listens on loopback),
 * the given environment and read-only mounts; `image` and its arguments follow.
 */
export function podmanRunArgs(
  name: string,
  env: Record<string, string>,
  mounts: Record<string, string>,
): string[] {
  return [
    "--runtime",
    "runc",
    "run",
    "--rm",
    "--name",
    name,
    "--ulimit",
    "nofile=1024:1024",
    "--ulimit",
    "nproc=1000:1000",
    "--network",
    "host",
    "--read-only",
    "--user",
    String(CONTROLLER_UID),
    ...Object.entries(env).flatMap(([k, v]) => ["--env", `${k}=${v}`]),
    ...Object.entries(mounts).flatMap(([h, c]) => ["--volume", `${h}:${c}:ro`]),
  ];
}

export async function runControllerContainer(
  cleanup: Cleanup,
  opts: ContainerOptions,
): Promise<ControllerProcess & { containerName: string }> {
  const name = `cocoonset-test-${suffix()}`;
  const podmanArgs = [
    ...podmanRunArgs(name, opts.env, opts.mounts),
    opts.image,
    ...opts.args,
    // :0 ports, read back from its log: no two controllers can be handed the same port.
    "--metrics-bind-address=127.0.0.1:0",
    "--health-probe-bind-address=127.0.0.1:0",
  ];
  // podman proxies signals it receives to the container (--sig-proxy is on by default).
  const child = spawn("podman", podmanArgs, { stdio: ["ignore", "pipe", "pipe"] });
  const proc = new ControllerProcess(opts.label ?? "container", child);
  cleanup.defer(`stop container ${name}`, async () => {
    try {
      if (!proc.running) return;
      const exit = await proc.stop("SIGTERM", 30_000);
      assert.deepEqual(exit, { code: 0, signal: null }, `${name} exits 0\n${proc.tail()}`);
    } finally {
      spawnSync("podman", ["rm", "--force", "--ignore", name], { stdio: "ignore" });
    }
  });
  return Object.assign(proc, { containerName: name });
}

/** Status of a GET on loopback, or 0 when nothing answers. */
function status(port: number, path: string): Promise<number> {
  return new Promise((resolve) => {
    const req = get({ host: "127.0.0.1", port, path, timeout: 2000 }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(0));
  });
}

/**
 * Waits until `/readyz` answers 200 (checked every 100 ms: the condition is the probe's
 * answer) and returns the milliseconds since `sinceMs`. Fails when the container exits.
 */
export async function waitForReadyz(
  proc: ControllerProcess,
  sinceMs: number,
  timeoutMs = 120_000,
): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  const { probes } = await proc.ports();
  for (;;) {
    if (!proc.running)
      throw new Error(`the container exited before /readyz was 200\n${proc.tail()}`);
    if ((await status(probes, "/readyz")) === 200) return Date.now() - sinceMs;
    if (Date.now() > deadline)
      throw new Error(`/readyz was not 200 within ${timeoutMs} ms\n${proc.tail()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Resident memory (kB) of the container's main process, read from its /proc on the host. */
export function containerRssKiB(containerName: string): number | undefined {
  const r = spawnSync("podman", ["inspect", "--format", "{{.State.Pid}}", containerName], {
    encoding: "utf8",
  });
  const pid = r.stdout.trim();
  if (r.status !== 0 || !/^\d+$/.test(pid) || pid === "0") return undefined;
  const st = spawnSync("cat", [`/proc/${pid}/status`], { encoding: "utf8" }).stdout;
  const m = /VmRSS:\s+(\d+) kB/.exec(st);
  return m ? Number(m[1]) : undefined;
}
