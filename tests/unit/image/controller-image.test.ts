/**
 * The controller image's recipe, without building it: the entry point's import graph (no
 * Pulumi SDK, only production packages, checked statically and by loading it), the parsers
 * the stager uses, and controller/Dockerfile against the constants the build and the Operator
 * share.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import {
  CONTROLLER_ENTRY,
  IMAGE_APP_DIR,
  IMAGE_NODE_PATH,
  PACKAGE_ROOT,
  importGraph,
  importSpecifiers,
  packageName,
  parseLdd,
  runtimePackages,
  skippedPackageFile,
} from "../../../cluster/image.js";
import { CONTROLLER_BUNDLE } from "../../../cli/launch.js";
import { LAZY_PACKAGES } from "../../../cluster/controller-bundle.js";
import {
  CONTROLLER_IMAGE_REPOSITORY,
  CONTROLLER_UID,
  METRICS_PORT,
  PROBE_PORT,
  defaultControllerImage,
} from "../../../controller/image.js";

const pkg = JSON.parse(readFileSync(join(PACKAGE_ROOT, "package.json"), "utf8")) as {
  version: string;
  license: string;
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};
const dockerfile = readFileSync(join(PACKAGE_ROOT, "controller", "Dockerfile"), "utf8");

/**
 * Runs `fn` with a module hook file that prints `LOADED <url>` on stderr for each file a Node
 * process loads (given to it with `--import`); the hook's folder is removed after.
 */
function withLoadHook(fn: (hooks: string) => void): void {
  const dir = mkdtempSync(join(tmpdir(), "cocoonset-hooks-"));
  try {
    const hooks = join(dir, "hooks.mjs");
    writeFileSync(
      hooks,
      'import { registerHooks } from "node:module";\n' +
        "registerHooks({ load(url, context, next) {\n" +
        '  if (url.startsWith("file:")) process.stderr.write("LOADED " + url + "\\n");\n' +
        "  return next(url, context);\n} });\n",
    );
    fn(hooks);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** `controller --help` run from `entry` under the hook: the files it loaded, after its checks. */
function loadedByHelp(hooks: string, entry: string): string[] {
  const r = spawnSync(
    process.execPath,
    ["--import", hooks, join(PACKAGE_ROOT, entry), "controller", "--help"],
    {
      encoding: "utf8",
    },
  );
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /--leader-elect/);
  return r.stderr
    .split("\n")
    .filter((l) => l.startsWith("LOADED "))
    .map((l) => l.slice(7));
}

describe("the controller entry point's import graph", () => {
  it("reaches no Pulumi SDK, no TypeScript and only production dependencies", () => {
    const graph = importGraph(join(PACKAGE_ROOT, CONTROLLER_ENTRY));
    assert.deepEqual(
      graph.packages.filter((p) => p.startsWith("@pulumi/") || p === "typescript"),
      [],
    );
    for (const p of graph.packages)
      assert.ok(p in pkg.dependencies, `${p} is a production dependency of the package`);
    const folders = new Set(graph.files.map((f) => f.slice(PACKAGE_ROOT.length + 1).split("/")[1]));
    assert.deepEqual([...folders].sort(), ["controller", "engine"]);
    const packages = runtimePackages(graph.packages, PACKAGE_ROOT).map((d) =>
      d.slice(d.lastIndexOf("node_modules/") + "node_modules/".length),
    );
    // The project's own kubeconfig loader needs no Kubernetes client library: none ships;
    // and it loads yaml only for a kubeconfig file that needs it (the image ships it apart).
    assert.ok(!packages.includes("yaml"), packages.join(" "));
    assert.deepEqual(LAZY_PACKAGES, ["yaml"]);
    assert.ok(!packages.some((p) => p.startsWith("@kubernetes/")), packages.join(" "));
    for (const p of packages) {
      assert.ok(!p.startsWith("@pulumi/") && !p.startsWith("@types/"), p);
      assert.ok(!(p in pkg.devDependencies), `${p} is a dev dependency`);
    }
  });

  it("the walker sees the Pulumi SDK where it is imported: the development CLI reaches it, the product CLI does not", () => {
    const dev = importGraph(join(PACKAGE_ROOT, "dist", "cluster", "dev-cli.js"));
    assert.ok(dev.packages.includes("@pulumi/pulumi"), dev.packages.join(" "));
    const product = importGraph(join(PACKAGE_ROOT, "dist", "cli", "main.js"));
    assert.ok(!product.packages.includes("@pulumi/pulumi"), product.packages.join(" "));
  });

  it("never ships the node-agent simulator (a test fixture of the embedded cluster)", () => {
    const simulator = (files: string[]) =>
      files.filter((f) => /\/dist\/cluster\/node-agent(-main)?\.js$/.test(f));
    assert.deepEqual(simulator(importGraph(join(PACKAGE_ROOT, CONTROLLER_ENTRY)).files), []);
    // `cluster up` starts it as a script of its own; the walker follows it from there, so
    // the check can fail.
    const own = importGraph(join(PACKAGE_ROOT, "dist", "cluster", "node-agent-main.js")).files;
    assert.equal(simulator(own).length, 2, own.join(" "));
  });

  it("loading it (controller --help) loads no module of @pulumi, typescript, client-node or the cluster code", () => {
    withLoadHook((hooks) => {
      const loaded = loadedByHelp(hooks, CONTROLLER_ENTRY);
      assert.ok(loaded.length > 50, `${loaded.length} modules loaded`);
      const bad = loaded.filter((u) =>
        /\/node_modules\/(@pulumi\/|typescript\/|@kubernetes\/client-node\/)|\/dist\/(cluster|sdk|bench|tests)\//.test(
          u,
        ),
      );
      assert.deepEqual(bad, []);
      // The full CLI loads neither either: @pulumi/pulumi is imported on first use only
      // (cluster/pulumi.ts), and no Kubernetes client library is imported at all.
      const cli = spawnSync(
        process.execPath,
        ["--import", hooks, join(PACKAGE_ROOT, "dist", "cli", "main.js"), "controller", "--help"],
        { encoding: "utf8" },
      );
      assert.equal(cli.status, 0, cli.stderr);
      assert.doesNotMatch(cli.stderr, /LOADED file:.*\/node_modules\/(@pulumi\/|@kubernetes\/)/);
      // The same hook sees the SDK when the components load: the check can fail.
      const full = spawnSync(
        process.execPath,
        ["--import", hooks, join(PACKAGE_ROOT, "dist", "sdk", "index.js")],
        { encoding: "utf8" },
      );
      assert.match(full.stderr, /LOADED file:.*\/node_modules\/@pulumi\/pulumi\//);
    });
  });
});

describe("the controller's bundle", () => {
  it("is one module: `controller --help` from it loads no other project file and no package", () => {
    withLoadHook((hooks) => {
      const loaded = loadedByHelp(hooks, CONTROLLER_BUNDLE);
      assert.deepEqual(
        loaded.filter((u) => !u.endsWith(`/${CONTROLLER_BUNDLE}`)),
        [],
        "nothing but the bundle",
      );
      assert.equal(loaded.length, 1);
      const licences = readFileSync(
        join(PACKAGE_ROOT, `${CONTROLLER_BUNDLE}.LICENSES.txt`),
        "utf8",
      );
      for (const p of ["commander", "pino", "prom-client"])
        assert.match(licences, new RegExp(`^${p}@`, "m"), `${p}'s licence is listed`);
    });
  });
});

describe("stager helpers", () => {
  it("importSpecifiers finds static imports, re-exports, side-effect and literal dynamic imports", () => {
    const src = [
      'import { a } from "./a.js";',
      'import * as b from "@scope/b/sub";',
      'export * from "./c.js";',
      'export { d } from "d";',
      'import "./side.js";',
      'const m = await import("pino");',
      'import data from "./x.json" with { type: "json" };',
      'const s = "import x from nowhere";',
    ].join("\n");
    assert.deepEqual(importSpecifiers(src).sort(), [
      "./a.js",
      "./c.js",
      "./side.js",
      "./x.json",
      "@scope/b/sub",
      "d",
      "pino",
    ]);
    assert.equal(packageName("@scope/b/sub"), "@scope/b");
    assert.equal(packageName("pino/file"), "pino");
  });

  it("parseLdd keeps the libraries and the loader, not the vDSO", () => {
    const out = [
      "\tlinux-vdso.so.1 (0x00007ffd)",
      "\tlibdl.so.2 => /lib/x86_64-linux-gnu/libdl.so.2 (0x00007f)",
      "\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)",
      "\t/lib64/ld-linux-x86-64.so.2 (0x00007f)",
    ].join("\n");
    assert.deepEqual(parseLdd(out), [
      "/lib/x86_64-linux-gnu/libc.so.6",
      "/lib/x86_64-linux-gnu/libdl.so.2",
      "/lib64/ld-linux-x86-64.so.2",
    ]);
  });

  it("skippedPackageFile drops declarations, maps and docs but keeps code and licences", () => {
    for (const f of ["index.d.ts", "x.d.mts", "a.js.map", "README.md", "src.ts", "CHANGELOG.md"])
      assert.equal(skippedPackageFile(f), true, f);
    for (const f of ["index.js", "x.mjs", "x.cjs", "LICENSE", "LICENSE.md", "package.json"])
      assert.equal(skippedPackageFile(f), false, f);
  });
});

describe("controller/Dockerfile", () => {
  const finalStage = dockerfile.slice(dockerfile.lastIndexOf("\nFROM "));

  it("builds from scratch with the tree `image stage` writes", () => {
    assert.match(dockerfile, /^RUN node dist\/cluster\/dev-cli\.js image stage --out \/rootfs$/m);
    assert.match(finalStage, /^FROM scratch$/m);
    assert.match(finalStage, /^COPY --from=build \/rootfs \/$/m);
    assert.equal((finalStage.match(/^(RUN|COPY|ADD) /gm) ?? []).length, 1, "one COPY, no RUN");
  });

  it("runs the entry point as the Operator's UID, with the Operator's ports and labels from package.json", () => {
    assert.match(
      finalStage,
      new RegExp(
        // The young-generation cap: docs/controller.md, "The controller image".
        `^ENTRYPOINT \\["${IMAGE_NODE_PATH}", "--max-semi-space-size=2", "--lite-mode", "${IMAGE_APP_DIR}/${CONTROLLER_BUNDLE}"\\]$`,
        "m",
      ),
    );
    assert.match(finalStage, /^CMD \["controller"\]$/m);
    assert.match(finalStage, new RegExp(`^USER ${CONTROLLER_UID}:${CONTROLLER_UID}$`, "m"));
    assert.match(finalStage, new RegExp(`^EXPOSE ${METRICS_PORT} ${PROBE_PORT}$`, "m"));
    assert.match(
      finalStage,
      new RegExp(`^ARG VERSION=${pkg.version.replaceAll(".", "\\.")}$`, "m"),
    );
    assert.match(
      finalStage,
      new RegExp(`org\\.opencontainers\\.image\\.licenses="${pkg.license}"`),
    );
    for (const label of ["version", "revision", "source", "licenses"])
      assert.match(finalStage, new RegExp(`org\\.opencontainers\\.image\\.${label}=`), label);
  });

  it("names the Operator's default image", () => {
    assert.equal(
      defaultControllerImage(pkg.version),
      `${CONTROLLER_IMAGE_REPOSITORY}:${pkg.version}`,
    );
    assert.ok(dockerfile.includes(`-t ${CONTROLLER_IMAGE_REPOSITORY}:<package version>`));
  });
});
