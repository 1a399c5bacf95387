/**
 * The Node.js language host of the `pulumi` CLI (the `pulumi-language-nodejs` plugin), run
 * by the shim the toolchain writes through `cluster/pulumi-language-host.cjs`.
 *
 * Pulumi's own host is a Go program whose module the Go module proxy does not serve here,
 * so this one serves the same gRPC `LanguageRuntime` and behaves like it:
 *
 * - `Run` starts `node [nodeargs] <the program's @pulumi/pulumi/cmd/run> --monitor ... <entry>`
 *   in a child process, with the stack config in `PULUMI_CONFIG`. Pulumi's own runner then
 *   loads the program exactly as it does under Pulumi's host (ESM or CommonJS, a default
 *   export, an exported function, `process.exit`, uncaught errors, exit code 32 for errors
 *   it already showed).
 * - `runtime.options`: `typescript` (default true) sets `PULUMI_NODEJS_TYPESCRIPT` as Pulumi
 *   does; on Node ≥ 22.18 an ES-module `.ts` entry point then runs through Node's own type
 *   stripping, and a CommonJS one through ts-node (the project's, else the one
 *   `@pulumi/pulumi` ships). `tsconfig`, `nodeargs` (split like a shell would) and
 *   `packagemanager` (`auto`, `npm`, `yarn`, `pnpm`, `bun`) and `production` are honoured too.
 * - `InstallDependencies` (`pulumi install`, `pulumi new`) runs the package manager in the
 *   program's folder and streams its output.
 * - SIGINT/SIGTERM to the host and the `Cancel` call interrupt the running program (then
 *   kill it after 5 s) and shut the server down.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { delimiter, extname, isAbsolute, join, resolve } from "node:path";
import type * as grpcTypes from "@grpc/grpc-js";
import type * as langTypes from "@pulumi/pulumi/proto/language_pb.js";
import { BrandedError, errorMessage, InvalidValueError } from "../engine/kube/branded-error.js";

/** The package managers `InstallDependencies` can run. */
export type PackageManager = "npm" | "yarn" | "pnpm" | "bun";

/** `runtime.options` of a `nodejs` project, checked. */
export interface NodeRuntimeOptions {
  /** Run TypeScript as Pulumi does (`PULUMI_NODEJS_TYPESCRIPT`). @default true */
  typescript: boolean;
  /** The tsconfig file ts-node reads (`PULUMI_NODEJS_TSCONFIG_PATH`). */
  tsconfig?: string;
  /** Extra arguments for `node`, before the runner. */
  nodeargs: string[];
  /** Which package manager installs dependencies. @default "auto" */
  packagemanager: PackageManager | "auto";
  /** Install without devDependencies. @default false */
  production: boolean;
}

/** A bad `runtime.options` value; the message names the option. */
export class RuntimeOptionsError extends BrandedError {
  constructor(message: string) {
    super(message);
  }
}

const PACKAGE_MANAGERS: readonly (PackageManager | "auto")[] = [
  "auto",
  "npm",
  "yarn",
  "pnpm",
  "bun",
];

/** Checks `runtime.options` the way Pulumi's Node.js host reads them. */
export function parseRuntimeOptions(raw: Record<string, unknown> = {}): NodeRuntimeOptions {
  const opts: NodeRuntimeOptions = {
    typescript: true,
    nodeargs: [],
    packagemanager: "auto",
    production: false,
  };
  const bool = (key: string): boolean => {
    const v = raw[key];
    if (typeof v !== "boolean") {
      throw new RuntimeOptionsError(
        `[runtime.options.${key}] must be true or false, got ${JSON.stringify(v)}`,
      );
    }
    return v;
  };
  const str = (key: string): string => {
    const v = raw[key];
    if (typeof v !== "string") {
      throw new RuntimeOptionsError(
        `[runtime.options.${key}] must be a string, got ${JSON.stringify(v)}`,
      );
    }
    return v;
  };
  if (raw.typescript !== undefined) opts.typescript = bool("typescript");
  if (raw.production !== undefined) opts.production = bool("production");
  if (raw.tsconfig !== undefined) opts.tsconfig = str("tsconfig");
  if (raw.nodeargs !== undefined) {
    try {
      opts.nodeargs = splitArgs(str("nodeargs"));
    } catch (e) {
      if (!InvalidValueError.isInstance(e)) throw e;
      throw new RuntimeOptionsError(`[runtime.options.nodeargs] ${e.message}`);
    }
  }
  if (raw.packagemanager !== undefined) {
    const pm = str("packagemanager");
    if (!PACKAGE_MANAGERS.includes(pm as PackageManager)) {
      throw new RuntimeOptionsError(
        `[runtime.options.packagemanager] must be one of ${PACKAGE_MANAGERS.join(", ")}, got ${JSON.stringify(pm)}`,
      );
    }
    opts.packagemanager = pm as PackageManager | "auto";
  }
  return opts;
}

/**
 * Splits a command line into words as a POSIX shell would, without expansions: blanks
 * separate words, single quotes keep everything, double quotes keep all but `\"` and `\\`,
 * and a backslash outside quotes escapes the next character.
 */
export function splitArgs(line: string): string[] {
  const words: string[] = [];
  let word = "";
  let inWord = false;
  let quote: "'" | '"' | undefined;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quote === "'") {
      if (c === "'") quote = undefined;
      else word += c;
    } else if (quote === '"') {
      if (c === '"') quote = undefined;
      else if (c === "\\" && (line[i + 1] === '"' || line[i + 1] === "\\")) word += line[++i];
      else word += c;
    } else if (c === "'" || c === '"') {
      quote = c;
      inWord = true;
    } else if (c === "\\") {
      if (i + 1 >= line.length) throw new InvalidValueError("ends with a lone backslash");
      word += line[++i];
      inWord = true;
    } else if (/\s/.test(c)) {
      if (inWord) words.push(word);
      word = "";
      inWord = false;
    } else {
      word += c;
      inWord = true;
    }
  }
  if (quote) throw new InvalidValueError(`has an unterminated ${quote} quote`);
  if (inWord) words.push(word);
  return words;
}

/**
 * The package manager for a program folder: the option when set, else (as Pulumi does)
 * yarn when `PULUMI_PREFER_YARN` is truthy or `yarn.lock` exists, pnpm for
 * `pnpm-lock.yaml`, bun for `bun.lock`/`bun.lockb`, else npm.
 */
export function resolvePackageManager(
  option: PackageManager | "auto",
  dir: string,
  env: NodeJS.ProcessEnv = process.env,
  exists: (p: string) => boolean = existsSync,
): PackageManager {
  if (option !== "auto") return option;
  const preferYarn = /^(1|true|yes)$/i.test(env.PULUMI_PREFER_YARN ?? "");
  if (preferYarn || exists(join(dir, "yarn.lock"))) return "yarn";
  if (exists(join(dir, "pnpm-lock.yaml"))) return "pnpm";
  if (exists(join(dir, "bun.lock")) || exists(join(dir, "bun.lockb"))) return "bun";
  return "npm";
}

/** The install command of a package manager. */
export function installCommand(
  pm: PackageManager,
  production: boolean,
): { command: string; args: string[] } {
  switch (pm) {
    case "npm":
      // --loglevel=error: no warnings about a template's missing repository/license fields.
      return {
        command: "npm",
        args: ["install", "--loglevel=error", ...(production ? ["--omit=dev"] : [])],
      };
    case "yarn":
      return { command: "yarn", args: ["install", ...(production ? ["--production"] : [])] };
    case "pnpm":
      return { command: "pnpm", args: ["install", ...(production ? ["--prod"] : [])] };
    case "bun":
      return { command: "bun", args: ["install", ...(production ? ["--production"] : [])] };
  }
}

/**
 * The stack config as `@pulumi/pulumi`'s runner reads it: `PULUMI_CONFIG` holds a JSON
 * object keyed `<namespace>:config:<name>` (the runner accepts that older form from every
 * SDK version), `PULUMI_CONFIG_SECRET_KEYS` the secret keys as the engine sent them.
 */
export function configEnv(
  config: Iterable<[string, string]>,
  secretKeys: string[],
): { PULUMI_CONFIG: string; PULUMI_CONFIG_SECRET_KEYS: string } {
  const out: Record<string, string> = {};
  for (const [key, value] of config) {
    const parts = key.split(":");
    if (parts.length === 3 && parts[1] === "config") out[key] = value;
    else if (parts.length >= 2) out[`${parts[0]}:config:${parts.slice(1).join(":")}`] = value;
    // Plain Error: a message for the person running `pulumi`; the host sends it as the run's error.
    else throw new Error(`config key ${JSON.stringify(key)} has no namespace`);
  }
  return {
    PULUMI_CONFIG: JSON.stringify(out),
    PULUMI_CONFIG_SECRET_KEYS: JSON.stringify(secretKeys),
  };
}

/** What `Run` needs to start the program. */
export interface RunPlan {
  runner: string;
  monitor: string;
  engine: string;
  organization: string;
  project: string;
  stack: string;
  rootDirectory: string;
  programDirectory: string;
  entryPoint: string;
  dryRun: boolean;
  parallel: number;
  args: string[];
}

/** The runner's command line, as Pulumi's host builds it (empty values are left out). */
export function runArguments(plan: RunPlan): string[] {
  const args = [plan.runner];
  const flag = (name: string, value: string) => {
    if (value) args.push(`--${name}`, value);
  };
  flag("monitor", plan.monitor);
  flag("engine", plan.engine);
  flag("organization", plan.organization);
  flag("project", plan.project);
  flag("root-directory", plan.rootDirectory);
  flag("stack", plan.stack);
  flag("pwd", plan.programDirectory);
  if (plan.dryRun) args.push("--dry-run");
  flag("parallel", String(plan.parallel));
  args.push(plan.entryPoint || ".", ...plan.args);
  return args;
}

/** The exit code `@pulumi/pulumi`'s runner uses after it has shown the error itself. */
export const EXIT_ERROR_SHOWN = 32;

/**
 * Turns the program process's end into the `Run` answer: nothing on success, `bail` when the
 * runner already showed the error, a message otherwise. A failure Node's type stripping
 * causes gets a hint on what to do instead.
 */
export function explainExit(
  code: number | null,
  signal: NodeJS.Signals | null,
  stderr: string,
): { error?: string; bail?: boolean } {
  if (code === 0) return {};
  const hint = typeScriptHint(stderr);
  if (hint) return { error: hint };
  if (code === EXIT_ERROR_SHOWN) return { bail: true };
  if (signal) return { error: `Program was stopped by ${signal}` };
  return { error: `Program exited with non-zero exit code: ${code}` };
}

/** A hint for TypeScript that Node's type stripping cannot run, found in the program's stderr. */
export function typeScriptHint(stderr: string): string | undefined {
  const loader =
    "add tsx to the project's devDependencies and set `runtime.options.nodeargs: --import tsx` in Pulumi.yaml";
  if (stderr.includes("ERR_UNSUPPORTED_TYPESCRIPT_SYNTAX")) {
    const what = /ERR_UNSUPPORTED_TYPESCRIPT_SYNTAX\]: (.*)/.exec(stderr)?.[1]?.trim();
    return (
      `Node's type stripping cannot run this program (${what ?? "unsupported TypeScript syntax"}): ` +
      `use only erasable TypeScript (no enum, namespace or parameter properties), or ${loader}`
    );
  }
  const missing = /Cannot find module '([^']+\.js)'/.exec(stderr)?.[1];
  if (missing && isAbsolute(missing) && existsSync(missing.replace(/\.js$/, ".ts"))) {
    return (
      `the program imports ${missing}, which exists only as ${missing.replace(/\.js$/, ".ts")}: ` +
      `Node's type stripping does not map .js specifiers to .ts files; import the .ts file ` +
      `(tsconfig "allowImportingTsExtensions" with "noEmit"), or ${loader}`
    );
  }
  return undefined;
}

/**
 * What Node's type stripping says of a `.ts` entry point, as the runner would have shown it
 * (`[ERR_UNSUPPORTED_TYPESCRIPT_SYNTAX]: ...`), or "" when it strips cleanly or is not
 * TypeScript. The runner reports its errors to the engine, not on stderr, so after a failed
 * run the host asks again in a short child of its own.
 */
export function strippingProblem(programDirectory: string, entryPoint: string): string {
  let entry = resolve(programDirectory, entryPoint || ".");
  if (existsSync(entry) && statSync(entry).isDirectory()) entry = join(entry, "index.ts");
  if (!/^\.[mc]?ts$/.test(extname(entry)) || !existsSync(entry)) return "";
  const check = spawnSync(
    process.execPath,
    [
      "--no-warnings",
      "-e",
      `const { stripTypeScriptTypes } = require("node:module");
try { stripTypeScriptTypes(require("node:fs").readFileSync(process.argv[1], "utf8")); }
catch (e) { if (e.code) console.log("[" + e.code + "]: " + e.message); }`,
      entry,
    ],
    { encoding: "utf8", timeout: 30_000 },
  );
  return check.stdout ?? "";
}

/** Why a program cannot start, before anything is spawned; undefined when it can. */
export function startupProblem(
  programDirectory: string,
  entryPoint: string,
  opts: NodeRuntimeOptions,
  features: { typescript?: string | false } = process.features,
): string | undefined {
  if (!existsSync(programDirectory) || !statSync(programDirectory).isDirectory()) {
    return `the program folder ${programDirectory} does not exist`;
  }
  if (entryPoint && entryPoint !== ".") {
    const entry = resolve(programDirectory, entryPoint);
    if (!existsSync(entry)) {
      return `the program's entry point ${entry} does not exist (Pulumi.yaml \`main\`)`;
    }
    const hasLoader = opts.nodeargs.some((a) =>
      /^--(import|loader|require|experimental-loader)\b/.test(a),
    );
    if (/^\.[mc]?ts$/.test(extname(entry)) && !features.typescript && !hasLoader) {
      return (
        `the entry point ${entry} is TypeScript, which Node ${process.version} cannot run by ` +
        `itself: use Node ≥ 22.18, or add tsx to the project and set ` +
        "`runtime.options.nodeargs: --import tsx`"
      );
    }
  }
  return undefined;
}

/** Finds the program's own `@pulumi/pulumi` runner, as `node` would from the program folder. */
export function locateRunner(programDirectory: string): string {
  try {
    return createRequire(join(programDirectory, "__pulumi_program__.js")).resolve(
      "@pulumi/pulumi/cmd/run",
    );
  } catch {
    // Plain Error: a message for the person running `pulumi`, sent as the run's error text.
    throw new Error(
      `@pulumi/pulumi is not installed for the program in ${programDirectory}: ` +
        "run `pulumi install` (or your package manager's install) there first",
    );
  }
}

/** The gRPC and protobuf modules, from this package's own `@pulumi/pulumi`. */
function loadRpc() {
  const req = createRequire(import.meta.url);
  const pulumiRequire = createRequire(req.resolve("@pulumi/pulumi/package.json"));
  return {
    grpc: pulumiRequire("@grpc/grpc-js") as typeof grpcTypes,
    langrpc: req("@pulumi/pulumi/proto/language_grpc_pb.js") as {
      LanguageRuntimeService: grpcTypes.ServiceDefinition;
    },
    langproto: req("@pulumi/pulumi/proto/language_pb.js") as typeof langTypes,
    plugproto: req(
      "@pulumi/pulumi/proto/plugin_pb.js",
    ) as typeof import("@pulumi/pulumi/proto/plugin_pb.js"),
    emptyproto: pulumiRequire("google-protobuf/google/protobuf/empty_pb.js") as {
      Empty: new () => unknown;
    },
    pulumiVersion: (req("@pulumi/pulumi/package.json") as { version: string }).version,
  };
}

/** Is `name` an executable on PATH? */
function onPath(name: string): boolean {
  return (process.env.PATH ?? "").split(delimiter).some((d) => d && existsSync(join(d, name)));
}

type Callback<T> = (err: grpcTypes.ServiceError | null, value?: T) => void;
type Unary<Req, Res> = (call: grpcTypes.ServerUnaryCall<Req, Res>, callback: Callback<Res>) => void;

/** Starts the host: serves on a free port of 127.0.0.1 and prints the port on stdout. */
export function main(argv: string[] = process.argv.slice(2)): void {
  const { grpc, langrpc, langproto, plugproto, emptyproto, pulumiVersion } = loadRpc();
  const positional = argv.filter((a) => !a.startsWith("-"));
  let engineAddress = positional[positional.length - 1] ?? "";
  const children = new Set<ChildProcess>();
  let stopping = false;

  const optionsOf = (info: langTypes.ProgramInfo | undefined): NodeRuntimeOptions =>
    parseRuntimeOptions(info?.getOptions()?.toJavaScript() ?? {});

  /** Once stopping and no child runs: stop serving (answers in flight still go out), then exit. */
  const maybeShutdown = () => {
    if (!stopping || children.size > 0) return;
    server.tryShutdown(() => process.exit(0));
    setTimeout(() => {
      server.forceShutdown();
      process.exit(0);
    }, 5000).unref();
  };
  const forget = (child: ChildProcess) => {
    children.delete(child);
    // After the answer is queued: shutting down waits for calls in flight.
    setImmediate(maybeShutdown);
  };

  /** Interrupts every child; kills what is still there after 5 s. */
  const interruptChildren = () => {
    for (const child of children) child.kill("SIGINT");
    if (children.size > 0) {
      setTimeout(() => {
        for (const child of children) child.kill("SIGKILL");
      }, 5000).unref();
    }
  };

  const run: Unary<langTypes.RunRequest, langTypes.RunResponse> = (call, callback) => {
    const req = call.request;
    const resp = new langproto.RunResponse();
    const answer = (r: { error?: string; bail?: boolean }) => {
      if (r.error) resp.setError(r.error);
      if (r.bail) resp.setBail(true);
      callback(null, resp);
    };
    const info = req.getInfo();
    const programDirectory = info?.getProgramDirectory() || req.getPwd() || process.cwd();
    const entryPoint = info?.getEntryPoint() || req.getProgram() || ".";
    let opts: NodeRuntimeOptions;
    let runner: string;
    try {
      opts = optionsOf(info);
      const problem = startupProblem(programDirectory, entryPoint, opts);
      if (problem) return answer({ error: problem });
      runner = locateRunner(programDirectory);
    } catch (e) {
      return answer({ error: errorMessage(e) });
    }
    const args = runArguments({
      runner,
      monitor: req.getMonitorAddress(),
      engine: engineAddress,
      organization: req.getOrganization(),
      project: req.getProject(),
      stack: req.getStack(),
      rootDirectory: info?.getRootDirectory() ?? "",
      programDirectory,
      entryPoint,
      dryRun: req.getDryrun(),
      parallel: req.getParallel(),
      args: req.getArgsList(),
    });
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      ...configEnv(
        req.getConfigMap().entries() as Iterable<[string, string]>,
        req.getConfigsecretkeysList(),
      ),
    };
    if (opts.typescript) env.PULUMI_NODEJS_TYPESCRIPT = "true";
    if (opts.tsconfig) env.PULUMI_NODEJS_TSCONFIG_PATH = opts.tsconfig;
    let child: ChildProcess;
    try {
      child = spawn(process.execPath, [...opts.nodeargs, ...args], {
        cwd: programDirectory,
        env,
        stdio: ["ignore", "inherit", "pipe"],
      });
    } catch (e) {
      return answer({ error: `could not start node for the program: ${errorMessage(e)}` });
    }
    children.add(child);
    // The program's stderr goes on to the engine as it comes; its tail is kept for hints.
    let tail = "";
    child.stderr?.on("data", (chunk: Buffer) => {
      process.stderr.write(chunk);
      tail = (tail + chunk.toString("utf8")).slice(-65536);
    });
    let answered = false;
    child.on("error", (e) => {
      forget(child);
      if (answered) return;
      answered = true;
      answer({ error: `could not start node for the program: ${e.message}` });
    });
    child.on("close", (code, signal) => {
      forget(child);
      if (answered) return;
      answered = true;
      if (code === EXIT_ERROR_SHOWN && opts.typescript) {
        tail += strippingProblem(programDirectory, entryPoint);
      }
      answer(explainExit(code, signal, tail));
    });
  };

  const installDependencies = (
    call: grpcTypes.ServerWritableStream<
      langTypes.InstallDependenciesRequest,
      langTypes.InstallDependenciesResponse
    >,
  ) => {
    const req = call.request;
    const info = req.getInfo();
    const dir = info?.getProgramDirectory() || req.getDirectory() || process.cwd();
    const out = (text: string | Buffer, stream: "stdout" | "stderr" = "stdout") => {
      const r = new langproto.InstallDependenciesResponse();
      const bytes = typeof text === "string" ? Buffer.from(text) : text;
      if (stream === "stdout") r.setStdout(bytes);
      else r.setStderr(bytes);
      call.write(r);
    };
    const fail = (message: string): void => {
      call.emit("error", { code: grpc.status.UNKNOWN, details: message, message });
    };
    let pm: PackageManager;
    let opts: NodeRuntimeOptions;
    try {
      opts = optionsOf(info);
      pm = resolvePackageManager(opts.packagemanager, dir);
    } catch (e) {
      return fail(errorMessage(e));
    }
    const { command, args } = installCommand(pm, opts.production);
    out(`Installing dependencies with ${command} ${args.join(" ")} in ${dir}...\n\n`);
    const child = spawn(command, args, {
      cwd: dir,
      env: process.env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    children.add(child);
    child.stdout?.on("data", (b: Buffer) => out(b));
    child.stderr?.on("data", (b: Buffer) => out(b, "stderr"));
    let done = false;
    child.on("error", (e) => {
      forget(child);
      if (done) return;
      done = true;
      fail(
        (e as NodeJS.ErrnoException).code === "ENOENT"
          ? `${command} is not on PATH: install it, or set runtime.options.packagemanager to one that is`
          : `${command} could not start: ${e.message}`,
      );
    });
    child.on("close", (code, signal) => {
      forget(child);
      if (done) return;
      done = true;
      if (code === 0) {
        out("Finished installing dependencies\n\n");
        call.end();
      } else {
        fail(
          `\`${command} ${args.join(" ")}\` in ${dir} failed (${signal ?? `exit code ${code}`})`,
        );
      }
    });
  };

  const runtimeOptionsPrompts: Unary<
    langTypes.RuntimeOptionsRequest,
    langTypes.RuntimeOptionsResponse
  > = (call, callback) => {
    const resp = new langproto.RuntimeOptionsResponse();
    const raw = (call.request.getInfo()?.getOptions()?.toJavaScript() ?? {}) as Record<
      string,
      unknown
    >;
    if (raw.packagemanager === undefined) {
      const T = langproto.RuntimeOptionPrompt.RuntimeOptionType.STRING;
      const value = (s: string) => {
        const v = new langproto.RuntimeOptionPrompt.RuntimeOptionValue();
        v.setPrompttype(T);
        v.setStringvalue(s);
        return v;
      };
      const prompt = new langproto.RuntimeOptionPrompt();
      prompt.setKey("packagemanager");
      prompt.setDescription("The package manager to use for installing dependencies");
      prompt.setPrompttype(T);
      prompt.setChoicesList(
        ["npm", "pnpm", "yarn", "bun"].filter((pm) => pm === "npm" || onPath(pm)).map(value),
      );
      prompt.setDefault(value("npm"));
      resp.setPromptsList([prompt]);
    }
    callback(null, resp);
  };

  const about: Unary<langTypes.AboutRequest, langTypes.AboutResponse> = (call, callback) => {
    const resp = new langproto.AboutResponse();
    resp.setExecutable(process.execPath);
    resp.setVersion(process.version);
    try {
      const info = call.request.getInfo();
      const dir = info?.getProgramDirectory() || process.cwd();
      resp
        .getMetadataMap()
        .set("packagemanager", resolvePackageManager(optionsOf(info).packagemanager, dir));
    } catch {
      // About describes what it can; a bad option is reported by the commands that use it.
    }
    callback(null, resp);
  };

  const handlers: Record<string, grpcTypes.UntypedHandleCall> = {
    handshake: ((
      call: grpcTypes.ServerUnaryCall<langTypes.LanguageHandshakeRequest, unknown>,
      callback: Callback<unknown>,
    ) => {
      engineAddress = call.request.getEngineAddress() || engineAddress;
      callback(null, new langproto.LanguageHandshakeResponse());
    }) as grpcTypes.UntypedHandleCall,
    run: run as grpcTypes.UntypedHandleCall,
    getPluginInfo: ((_call: unknown, callback: Callback<unknown>) => {
      const resp = new plugproto.PluginInfo();
      resp.setVersion(pulumiVersion);
      callback(null, resp);
    }) as grpcTypes.UntypedHandleCall,
    // Resource plugins come from the toolchain on PATH; listing the packages' plugins here
    // would make `pulumi install` and `pulumi new` try to download them.
    getRequiredPackages: ((_call: unknown, callback: Callback<unknown>) =>
      callback(null, new langproto.GetRequiredPackagesResponse())) as grpcTypes.UntypedHandleCall,
    getRequiredPlugins: ((_call: unknown, callback: Callback<unknown>) =>
      callback(null, new langproto.GetRequiredPluginsResponse())) as grpcTypes.UntypedHandleCall,
    installDependencies: installDependencies as grpcTypes.UntypedHandleCall,
    runtimeOptionsPrompts: runtimeOptionsPrompts as grpcTypes.UntypedHandleCall,
    template: ((_call: unknown, callback: Callback<unknown>) =>
      callback(null, new langproto.TemplateResponse())) as grpcTypes.UntypedHandleCall,
    about: about as grpcTypes.UntypedHandleCall,
    getProgramDependencies: ((_call: unknown, callback: Callback<unknown>) =>
      callback(
        null,
        new langproto.GetProgramDependenciesResponse(),
      )) as grpcTypes.UntypedHandleCall,
    cancel: ((_call: unknown, callback: Callback<unknown>) => {
      interruptChildren();
      callback(null, new emptyproto.Empty());
    }) as grpcTypes.UntypedHandleCall,
  };
  const service = langrpc.LanguageRuntimeService;
  const implemented = Object.fromEntries(
    Object.entries(handlers).filter(([name]) => name in service),
  );

  const server = new grpc.Server({ "grpc.max_receive_message_length": 400 * 1024 * 1024 });
  server.addService(service, implemented);
  server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, port) => {
    if (err) {
      process.stderr.write(`language host: cannot listen: ${err.message}\n`);
      process.exit(1);
    }
    // The engine reads the port from the first line of stdout.
    process.stdout.write(`${port}\n`);
  });

  // Ctrl-C or a stop: interrupt the program (its Run answers the engine), then stop serving.
  const stop = () => {
    if (stopping) {
      interruptChildren();
      return;
    }
    stopping = true;
    interruptChildren();
    maybeShutdown();
  };
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
}
