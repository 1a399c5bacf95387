/**
 * The language host's pure parts: reading `runtime.options`, splitting `nodeargs`, picking
 * the package manager and its install command, the config the runner reads, the runner's
 * command line, and how a program's end or a startup problem becomes the `Run` answer.
 * The host itself runs under the real `pulumi` CLI in the e2e tier.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import {
  configEnv,
  explainExit,
  installCommand,
  locateRunner,
  parseRuntimeOptions,
  resolvePackageManager,
  runArguments,
  RuntimeOptionsError,
  splitArgs,
  startupProblem,
  typeScriptHint,
} from "../../../cluster/language-host.js";

describe("parseRuntimeOptions", () => {
  it("defaults to TypeScript on, no node arguments, the package manager chosen per folder", () => {
    assert.deepEqual(parseRuntimeOptions({}), {
      typescript: true,
      nodeargs: [],
      packagemanager: "auto",
      production: false,
    });
    assert.deepEqual(parseRuntimeOptions(), parseRuntimeOptions({}));
  });

  it("reads every option Pulumi's Node.js host reads", () => {
    assert.deepEqual(
      parseRuntimeOptions({
        typescript: false,
        tsconfig: "tsconfig.pulumi.json",
        nodeargs: "--import tsx --max-old-space-size=4096",
        packagemanager: "pnpm",
        production: true,
      }),
      {
        typescript: false,
        tsconfig: "tsconfig.pulumi.json",
        nodeargs: ["--import", "tsx", "--max-old-space-size=4096"],
        packagemanager: "pnpm",
        production: true,
      },
    );
  });

  it("names the option of a bad value", () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [
        { typescript: "yes" },
        /^\[runtime\.options\.typescript\] must be true or false, got "yes"$/,
      ],
      [{ production: 1 }, /^\[runtime\.options\.production\] must be true or false/],
      [{ nodeargs: ["--a"] }, /^\[runtime\.options\.nodeargs\] must be a string/],
      [
        { nodeargs: "--title 'open" },
        /^\[runtime\.options\.nodeargs\] has an unterminated ' quote$/,
      ],
      [{ tsconfig: false }, /^\[runtime\.options\.tsconfig\] must be a string/],
      [
        { packagemanager: "deno" },
        /^\[runtime\.options\.packagemanager\] must be one of auto, npm, yarn, pnpm, bun, got "deno"$/,
      ],
    ];
    for (const [raw, message] of cases) {
      assert.throws(
        () => parseRuntimeOptions(raw),
        (e: unknown) => e instanceof RuntimeOptionsError && message.test(e.message),
        JSON.stringify(raw),
      );
    }
  });
});

describe("splitArgs", () => {
  it("splits like a shell, without expansions", () => {
    assert.deepEqual(splitArgs(""), []);
    assert.deepEqual(splitArgs("  --a   b\t--c=d  "), ["--a", "b", "--c=d"]);
    assert.deepEqual(splitArgs(`--title 'a b' --x="c \\"d\\" e" f\\ g`), [
      "--title",
      "a b",
      '--x=c "d" e',
      "f g",
    ]);
    assert.deepEqual(splitArgs(`'' "" x`), ["", "", "x"]);
    assert.deepEqual(splitArgs(`'$HOME \\n'`), ["$HOME \\n"]);
  });

  it("refuses unterminated quotes and a trailing backslash", () => {
    assert.throws(() => splitArgs(`--a "b`), /unterminated " quote/);
    assert.throws(() => splitArgs(`--a \\`), /lone backslash/);
  });
});

describe("resolvePackageManager", () => {
  const files =
    (...names: string[]) =>
    (p: string) =>
      names.some((n) => p.endsWith(`/${n}`));

  it("uses the option when set", () => {
    assert.equal(resolvePackageManager("yarn", "/p", {}, files()), "yarn");
    assert.equal(resolvePackageManager("npm", "/p", {}, files("yarn.lock")), "npm");
  });

  it("otherwise goes by the lock file in the program folder, then npm", () => {
    assert.equal(resolvePackageManager("auto", "/p", {}, files()), "npm");
    assert.equal(resolvePackageManager("auto", "/p", {}, files("package-lock.json")), "npm");
    assert.equal(resolvePackageManager("auto", "/p", {}, files("yarn.lock")), "yarn");
    assert.equal(resolvePackageManager("auto", "/p", {}, files("pnpm-lock.yaml")), "pnpm");
    assert.equal(resolvePackageManager("auto", "/p", {}, files("bun.lockb")), "bun");
    assert.equal(resolvePackageManager("auto", "/p", {}, files("bun.lock")), "bun");
    assert.equal(
      resolvePackageManager("auto", "/p", { PULUMI_PREFER_YARN: "true" }, files()),
      "yarn",
    );
  });
});

describe("installCommand", () => {
  it("installs everything, or without devDependencies for production", () => {
    assert.deepEqual(installCommand("npm", false), {
      command: "npm",
      args: ["install", "--loglevel=error"],
    });
    assert.deepEqual(installCommand("npm", true).args, [
      "install",
      "--loglevel=error",
      "--omit=dev",
    ]);
    assert.deepEqual(installCommand("yarn", true), {
      command: "yarn",
      args: ["install", "--production"],
    });
    assert.deepEqual(installCommand("pnpm", true), {
      command: "pnpm",
      args: ["install", "--prod"],
    });
    assert.deepEqual(installCommand("bun", false), { command: "bun", args: ["install"] });
  });
});

describe("configEnv", () => {
  it("keys the config the way the runner reads it and passes the secret keys on", () => {
    const env = configEnv(
      [
        ["proj:replicas", "3"],
        ["kubernetes:context", "kind"],
        ["proj:config:legacy", "x"],
        ["proj:a:b", "nested"],
      ],
      ["proj:token"],
    );
    assert.deepEqual(JSON.parse(env.PULUMI_CONFIG), {
      "proj:config:replicas": "3",
      "kubernetes:config:context": "kind",
      "proj:config:legacy": "x",
      "proj:config:a:b": "nested",
    });
    assert.deepEqual(JSON.parse(env.PULUMI_CONFIG_SECRET_KEYS), ["proj:token"]);
    assert.throws(() => configEnv([["nonamespace", "v"]], []), /no namespace/);
  });
});

describe("runArguments", () => {
  it("builds the runner's command line, leaving empty values out", () => {
    const args = runArguments({
      runner: "/p/node_modules/@pulumi/pulumi/cmd/run/index.js",
      monitor: "127.0.0.1:1",
      engine: "127.0.0.1:2",
      organization: "",
      project: "proj",
      stack: "dev",
      rootDirectory: "/p",
      programDirectory: "/p/src",
      entryPoint: "index.ts",
      dryRun: true,
      parallel: 16,
      args: ["extra"],
    });
    assert.deepEqual(args, [
      "/p/node_modules/@pulumi/pulumi/cmd/run/index.js",
      "--monitor",
      "127.0.0.1:1",
      "--engine",
      "127.0.0.1:2",
      "--project",
      "proj",
      "--root-directory",
      "/p",
      "--stack",
      "dev",
      "--pwd",
      "/p/src",
      "--dry-run",
      "--parallel",
      "16",
      "index.ts",
      "extra",
    ]);
  });
});

describe("explainExit", () => {
  it("reports success, an error the runner showed, a signal and other exit codes", () => {
    assert.deepEqual(explainExit(0, null, ""), {});
    assert.deepEqual(explainExit(32, null, "error: boom"), { bail: true });
    assert.deepEqual(explainExit(3, null, ""), {
      error: "Program exited with non-zero exit code: 3",
    });
    assert.deepEqual(explainExit(null, "SIGINT", ""), { error: "Program was stopped by SIGINT" });
  });

  it("turns what Node's type stripping refuses into a hint", () => {
    const stderr =
      "SyntaxError [ERR_UNSUPPORTED_TYPESCRIPT_SYNTAX]: TypeScript enum is not supported in strip-only mode\n";
    const r = explainExit(32, null, stderr);
    assert.match(r.error ?? "", /TypeScript enum is not supported in strip-only mode/);
    assert.match(r.error ?? "", /--import tsx/);
    assert.equal(r.bail, undefined);
  });

  it("explains a .js specifier that only exists as .ts", (t) => {
    const dir = mkdtempSync(join(tmpdir(), "langhost-unit-"));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(join(dir, "lib.ts"), "export const x = 1;\n");
    const stderr = `Error [ERR_MODULE_NOT_FOUND]: Cannot find module '${dir}/lib.js' imported from ${dir}/index.ts`;
    assert.match(typeScriptHint(stderr) ?? "", /exists only as .*lib\.ts.*--import tsx/);
    // A module that is really missing gets no TypeScript hint.
    assert.equal(typeScriptHint(`Cannot find module '${dir}/other.js'`), undefined);
  });
});

describe("startupProblem and locateRunner", () => {
  it("names a missing folder, a missing entry point and a TypeScript entry Node cannot run", (t) => {
    const dir = mkdtempSync(join(tmpdir(), "langhost-unit-"));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(join(dir, "index.ts"), "export {};\n");
    const opts = parseRuntimeOptions({});
    assert.equal(startupProblem(dir, "index.ts", opts, { typescript: "strip" }), undefined);
    assert.equal(startupProblem(dir, ".", opts, { typescript: false }), undefined);
    assert.match(
      startupProblem(join(dir, "nope"), ".", opts) ?? "",
      /^the program folder .*nope does not exist$/,
    );
    assert.match(
      startupProblem(dir, "main.ts", opts) ?? "",
      /^the program's entry point .*main\.ts does not exist \(Pulumi\.yaml `main`\)$/,
    );
    assert.match(
      startupProblem(dir, "index.ts", opts, { typescript: false }) ?? "",
      /Node ≥ 22\.18/,
    );
    const withLoader = parseRuntimeOptions({ nodeargs: "--import tsx" });
    assert.equal(startupProblem(dir, "index.ts", withLoader, { typescript: false }), undefined);
  });

  it("finds the program's @pulumi/pulumi runner, or says to install it", (t) => {
    const dir = mkdtempSync(join(tmpdir(), "langhost-unit-"));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    assert.throws(
      () => locateRunner(dir),
      /@pulumi\/pulumi is not installed .* run `pulumi install`/,
    );
    const runDir = join(dir, "node_modules", "@pulumi", "pulumi", "cmd", "run");
    mkdirSync(runDir, { recursive: true });
    writeFileSync(
      join(dir, "node_modules", "@pulumi", "pulumi", "package.json"),
      '{"name":"@pulumi/pulumi"}',
    );
    writeFileSync(join(runDir, "index.js"), "");
    assert.equal(locateRunner(dir), join(runDir, "index.js"));
  });
});
