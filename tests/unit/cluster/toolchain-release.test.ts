/**
 * The official release downloads of the toolchain, against a local HTTP server standing in
 * for the release hosts (as a mirror, `COCOONSET_RELEASE_BASE_URL`): a verified archive is
 * taken and its binary runs; a wrong checksum, a 404, a host that never answers and a binary
 * of another version are refused with one line saying why, and the group goes to the build
 * (which fails at once here, there being no Go on PATH: the sign the build was reached).
 * Binaries on PATH at the pinned version are used without a download; others are not.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, beforeEach, describe, test } from "node:test";
import { ensureToolchainReport } from "../../../cluster/toolchain.js";
import {
  groupDir,
  loadPins,
  locate,
  ToolchainError,
  type ToolchainPins,
} from "../../../cluster/toolchain-pins.js";
import { assetUrl, mirrored, releasePlatform } from "../../../cluster/toolchain-release.js";

const pins = loadPins();
const platform = releasePlatform();
const etcdAsset = pins.groups.etcd.release!.etcd;
/** The etcd archive's published URL for this platform, and its path under a mirror. */
const published = assetUrl(etcdAsset, platform);
const mirrorPath = new URL(mirrored(published, "http://mirror")).pathname;

const root = mkdtempSync(join(tmpdir(), "cocoonset-release-"));
after(() => rmSync(root, { recursive: true, force: true }));

/** A `.tar.gz` holding etcd's path of the real archive: a script printing `version`. */
function etcdArchive(name: string, version: string): { bytes: Buffer; sha256: string } {
  const stage = join(root, `stage-${name}`);
  const member = assetUrl(etcdAsset, platform, etcdAsset.path);
  mkdirSync(dirname(join(stage, member)), { recursive: true });
  writeFileSync(join(stage, member), `#!/bin/sh\necho 'etcd Version: ${version}'\n`, {
    mode: 0o755,
  });
  const out = join(root, `${name}.tar.gz`);
  const r = spawnSync("tar", ["-czf", out, "-C", stage, member.split("/")[0]]);
  assert.equal(r.status, 0, String(r.stderr));
  const bytes = readFileSync(out);
  return { bytes, sha256: createHash("sha256").update(bytes).digest("hex") };
}

const good = etcdArchive("good", "3.6.13");
const older = etcdArchive("older", "3.6.12");

/** What the server answers for the etcd archive's path, and how often it was asked. */
let answer: "good" | "older" | "404" | "hang" = "good";
let asked = 0;
let server: Server;
let base = "";
before(async () => {
  server = createServer((req, res) => {
    if (req.url !== mirrorPath) return void res.writeHead(404).end();
    asked++;
    if (answer === "hang") return; // never answers
    if (answer === "404") return void res.writeHead(404).end("not found");
    res.writeHead(200, { "content-type": "application/gzip" });
    res.end(answer === "good" ? good.bytes : older.bytes);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => {
  server.closeAllConnections();
  server.close();
});

/** The pins with etcd's archive checksum for this platform set to `sha256`. */
function pinning(sha256: string): ToolchainPins {
  const p = JSON.parse(JSON.stringify(pins)) as ToolchainPins;
  p.groups.etcd.release!.etcd.sha256 = { [platform]: sha256 };
  return p;
}

/** tar and gzip of this machine, for the archives (GNU tar runs gzip). */
const tools = Object.fromEntries(
  ["tar", "gzip"].map((tool) => {
    const found = spawnSync("sh", ["-c", `command -v ${tool}`], { encoding: "utf8" }).stdout.trim();
    assert.ok(found, `${tool} is on this machine's PATH`);
    return [tool, realpathSync(found)];
  }),
);

/**
 * A PATH with Node, tar and gzip and no Go (a build fails at once), plus `extra` (binary name
 * → what it prints), and a cache of its own.
 */
function machine(extra: Record<string, string> = {}): string {
  const d = mkdtempSync(join(root, "machine-"));
  const bin = join(d, "path");
  mkdirSync(bin);
  symlinkSync(process.execPath, join(bin, "node"));
  for (const [tool, path] of Object.entries(tools)) symlinkSync(path, join(bin, tool));
  for (const [name, output] of Object.entries(extra))
    writeFileSync(join(bin, name), `#!/bin/sh\necho '${output}'\n`, { mode: 0o755 });
  process.env.PATH = bin;
  process.env.XDG_CACHE_HOME = join(d, "cache");
  process.env.COCOONSET_TOOLCHAIN_DIR = join(d, "toolchain");
  process.env.PULUMI_HOME = join(d, "pulumi-home");
  return d;
}

const savedEnv = { ...process.env };
beforeEach(() => {
  process.env = { ...savedEnv };
  delete process.env.COCOONSET_BIN_DIR;
  delete process.env.KUBEBUILDER_ASSETS;
  delete process.env.COCOONSET_RELEASE_BASE_URL;
  answer = "good";
  asked = 0;
});
after(() => {
  process.env = savedEnv;
});

/** `ensure --only etcd` through the mirror; its progress lines and its error, if any. */
async function ensureEtcd(p: ToolchainPins, timeoutMs = 5_000) {
  const lines: string[] = [];
  try {
    const report = await ensureToolchainReport({
      only: ["etcd"],
      pins: p,
      progress: (l) => lines.push(l),
      release: { baseUrl: base, timeoutMs },
    });
    return { lines, report, error: undefined };
  } catch (e) {
    return { lines, report: undefined, error: e as Error };
  }
}

/** The error of a build reached with no Go on PATH. */
const NO_GO = /Go 1\.26\.0 or newer is required to build the toolchain, and `go` was not found/;

describe("URLs", () => {
  test("a template takes the platform, in the project's own names where they differ", () => {
    const pulumi = pins.groups.pulumi.release!.pulumi;
    assert.equal(
      assetUrl(pulumi, "linux-amd64"),
      "https://github.com/pulumi/pulumi/releases/download/v3.274.1/pulumi-v3.274.1-linux-x64.tar.gz",
    );
    assert.equal(
      assetUrl(pins.groups.kubernetes.release!.kubectl, "linux-arm64"),
      "https://dl.k8s.io/v1.36.3/bin/linux/arm64/kubectl",
    );
  });

  test("a mirror serves each archive under the host and path of its published URL", () => {
    assert.equal(
      mirrored("https://dl.k8s.io/v1.36.3/bin/linux/amd64/kubectl", "http://127.0.0.1:8080/m/"),
      "http://127.0.0.1:8080/m/dl.k8s.io/v1.36.3/bin/linux/amd64/kubectl",
    );
    assert.equal(mirrored(published, undefined), published);
  });
});

describe("ensure takes a verified release archive instead of building", () => {
  test("a good archive: its binary is placed, runs, and reports the pinned version", async () => {
    machine();
    const p = pinning(good.sha256);
    const { lines, report, error } = await ensureEtcd(p);
    assert.equal(error, undefined, lines.join("\n"));
    assert.deepEqual(report.placed, ["etcd"]);
    assert.equal(asked, 1);
    const said = lines.filter((l) => l.includes("etcd:"));
    assert.equal(said.length, 1, said.join("\n"));
    assert.ok(
      said[0].startsWith(
        `toolchain: etcd: took etcd from the release archive ${base}${mirrorPath} (sha256 checked, version checked) in `,
      ),
      said[0],
    );
    const etcd = locate("etcd", p);
    assert.equal(etcd.source, "cache");
    const run = spawnSync(etcd.path!, ["--version"], { encoding: "utf8" });
    assert.equal(run.stdout, "etcd Version: 3.6.13\n");
    assert.equal(
      readFileSync(join(groupDir("etcd", p), "source"), "utf8"),
      `etcd: release archive ${published}\n`,
    );
    // No scratch folder is left beside the group's bin.
    assert.deepEqual(existsSync(join(groupDir("etcd", p), `.release-${process.pid}`)), false);
  });

  test("a wrong checksum: refused, naming the group, the URL and both checksums; then the build", async () => {
    machine();
    const wrong = "0".repeat(64);
    const p = pinning(wrong);
    const { lines, error } = await ensureEtcd(p);
    assert.ok(error instanceof ToolchainError);
    assert.match(error.message, NO_GO);
    assert.ok(
      lines.includes(
        `toolchain: etcd: building etcd from source (the release archive ${base}${mirrorPath} was not used: refused: its sha256 is ${good.sha256}, toolchain.json pins ${wrong} for ${platform})`,
      ),
      lines.join("\n"),
    );
    assert.equal(locate("etcd", p).path, undefined);
    assert.equal(existsSync(join(groupDir("etcd", p), "bin", "etcd")), false);
  });

  test("a missing archive (404): the build", async () => {
    machine();
    answer = "404";
    const { lines, error } = await ensureEtcd(pinning(good.sha256));
    assert.match(error?.message ?? "", NO_GO);
    assert.ok(
      lines.includes(
        `toolchain: etcd: building etcd from source (the release archive ${base}${mirrorPath} was not used: HTTP 404)`,
      ),
      lines.join("\n"),
    );
  });

  test("a host that never answers: given up after the timeout, then the build", async () => {
    machine();
    answer = "hang";
    const started = Date.now();
    const { lines, error } = await ensureEtcd(pinning(good.sha256), 300);
    assert.ok(Date.now() - started < 5_000, `took ${Date.now() - started} ms`);
    assert.equal(asked, 1);
    assert.match(error?.message ?? "", NO_GO);
    assert.ok(
      lines.includes(
        `toolchain: etcd: building etcd from source (the release archive ${base}${mirrorPath} was not used: no answer in 0.3s)`,
      ),
      lines.join("\n"),
    );
  });

  test("an archive whose binary reports another version: refused, then the build", async () => {
    machine();
    answer = "older";
    const { lines, error } = await ensureEtcd(pinning(older.sha256));
    assert.match(error?.message ?? "", NO_GO);
    assert.ok(
      lines.some((l) =>
        l.endsWith("was not used: refused: etcd does not report etcd Version: 3.6.13)"),
      ),
      lines.join("\n"),
    );
  });

  test("no checksum pinned for this platform: nothing is downloaded, the build says why", async () => {
    machine();
    const p = pinning(good.sha256);
    p.groups.etcd.release!.etcd.sha256 = {};
    const { lines, error } = await ensureEtcd(p);
    assert.match(error?.message ?? "", NO_GO);
    assert.equal(asked, 0);
    assert.ok(
      lines.includes(
        `toolchain: etcd: building etcd from source (no release checksum is pinned for ${platform})`,
      ),
      lines.join("\n"),
    );
  });

  test("COCOONSET_RELEASE_BASE_URL=none: nothing is downloaded", async () => {
    machine();
    process.env.COCOONSET_RELEASE_BASE_URL = "none";
    const lines: string[] = [];
    await assert.rejects(
      ensureToolchainReport({
        only: ["etcd"],
        pins: pinning(good.sha256),
        progress: (l) => lines.push(l),
      }),
      NO_GO,
    );
    assert.equal(asked, 0);
    assert.deepEqual(lines, []);
  });
});

describe("binaries already on PATH", () => {
  test("at the pinned version: used as they are, nothing downloaded or built", async () => {
    const d = machine({ etcd: "etcd Version: 3.6.13" });
    const { lines, report, error } = await ensureEtcd(pinning(good.sha256));
    assert.equal(error, undefined, lines.join("\n"));
    assert.deepEqual(report.placed, []);
    assert.deepEqual(report.located, [
      { name: "etcd", path: join(d, "path", "etcd"), source: "path" },
    ]);
    assert.equal(asked, 0);
  });

  test("at another version: not used; the release archive is taken instead", async () => {
    const d = machine({ etcd: "etcd Version: 3.6.12" });
    const p = pinning(good.sha256);
    const { lines, report, error } = await ensureEtcd(p);
    assert.equal(error, undefined, lines.join("\n"));
    assert.deepEqual(report.placed, ["etcd"]);
    assert.notEqual(report.located[0].path, join(d, "path", "etcd"));
    assert.equal(report.located[0].source, "cache");
  });

  test("Pulumi's Node.js host beside a pulumi of the pinned version: used; beside another, not", () => {
    for (const [version, used] of [
      ["v3.274.1", true],
      ["v3.274.0", false],
    ] as const) {
      const d = machine({
        pulumi: version,
        "pulumi-language-nodejs": "a host",
        "pulumi-resource-pulumi-nodejs": "a script",
      });
      for (const name of ["pulumi-language-nodejs", "pulumi-resource-pulumi-nodejs"] as const)
        assert.deepEqual(
          locate(name, pins),
          used ? { name, path: join(d, "path", name), source: "path" } : { name },
          `${name} beside pulumi ${version}`,
        );
    }
  });

  test("the Kubernetes provider in Pulumi's plugin cache: used at the pinned version only, and not while Pulumi still fills it", () => {
    const name = "pulumi-resource-kubernetes";
    for (const [folder, partial, used] of [
      ["resource-kubernetes-v4.25.0", false, true],
      ["resource-kubernetes-v4.25.0", true, false],
      ["resource-kubernetes-v4.24.0", false, false],
    ] as const) {
      machine();
      const plugins = join(process.env.PULUMI_HOME!, "plugins");
      mkdirSync(join(plugins, folder), { recursive: true });
      writeFileSync(join(plugins, folder, name), "#!/bin/sh\n", { mode: 0o755 });
      if (partial) writeFileSync(join(plugins, `${folder}.partial`), "");
      assert.deepEqual(
        locate(name, pins),
        used ? { name, path: join(plugins, folder, name), source: "pulumi-plugins" } : { name },
        `${folder}${partial ? " (partial)" : ""}`,
      );
    }
  });
});
