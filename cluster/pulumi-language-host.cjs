// The Node.js language host for the `pulumi` CLI, run by the `pulumi-language-nodejs` shim
// that `cocoonset toolchain ensure` writes next to the pulumi binary.
//
// Why it exists: the Go language host (module
// github.com/pulumi/pulumi/sdk/nodejs/cmd/pulumi-language-nodejs/v3) has no version the Go
// module proxy serves here, so it cannot be built. This host serves the same gRPC
// LanguageRuntime with the program's own @pulumi/pulumi: `Run` loads the program's main
// module in this process (as the Automation API does for inline programs) instead of
// spawning `node @pulumi/pulumi/cmd/run`. Programs are plain JavaScript (ESM or CommonJS):
// compile TypeScript first and set `runtime.options.typescript: false`.
"use strict";

const { createRequire } = require("node:module");
const { existsSync, readFileSync } = require("node:fs");
const path = require("node:path");
const { pathToFileURL } = require("node:url");

/** Resolves a module from the program's folder, so the program and host share one copy. */
function programRequire(dir) {
  return createRequire(path.join(dir, "__cocoonset_language_host__.js"));
}

/** The entry module of a program folder: Pulumi.yaml `main`, else package.json `main`, else index.js. */
function entryPoint(programDir, entry) {
  if (entry && entry !== ".") return path.resolve(programDir, entry);
  const pkg = path.join(programDir, "package.json");
  if (existsSync(pkg)) {
    const main = JSON.parse(readFileSync(pkg, "utf8")).main;
    if (main) return path.resolve(programDir, main);
  }
  return path.join(programDir, "index.js");
}

function main() {
  const args = process.argv.slice(2);
  const positional = args.filter((a) => !a.startsWith("-"));
  const engineAddress = positional[positional.length - 1] ?? "";
  const req = programRequire(process.cwd());
  const grpc = req("@grpc/grpc-js");
  const langrpc = req("@pulumi/pulumi/proto/language_grpc_pb.js");
  const langproto = req("@pulumi/pulumi/proto/language_pb.js");
  const plugproto = req("@pulumi/pulumi/proto/plugin_pb.js");
  const { LanguageServer } = req("@pulumi/pulumi/automation/server.js");
  const pulumiVersion = req("@pulumi/pulumi/package.json").version;

  class ProgramServer extends LanguageServer {
    constructor() {
      super(async () => undefined);
    }

    run(call, callback) {
      const request = call.request;
      // The base class reads the engine address from the first program argument, as the
      // CLI sends it to Automation API hosts; a plugin host gets it on its command line.
      if (request.getArgsList().length === 0 && engineAddress) request.setArgsList([engineAddress]);
      const info = request.getInfo();
      const programDir = info?.getProgramDirectory() || request.getPwd() || process.cwd();
      const entry = entryPoint(programDir, info?.getEntryPoint() || request.getProgram());
      this.program = async () => {
        process.chdir(request.getPwd() || programDir);
        const mod = await import(pathToFileURL(entry).href);
        const exported =
          mod.default !== undefined && Object.keys(mod).length === 1 ? mod.default : mod;
        // A default export that is a function is the program; its result holds the outputs.
        if (typeof exported === "function") return await exported();
        return { ...exported };
      };
      return super.run(call, callback);
    }

    getPluginInfo(call, callback) {
      const resp = new plugproto.PluginInfo();
      resp.setVersion(pulumiVersion);
      callback(undefined, resp);
    }

    getRequiredPackages(call, callback) {
      callback(undefined, new langproto.GetRequiredPackagesResponse());
    }

    installDependencies(call) {
      // Dependencies come from the repository's own `npm ci`.
      call.end();
    }

    about(call, callback) {
      const resp = new langproto.AboutResponse();
      resp.setExecutable(process.execPath);
      resp.setVersion(process.version);
      callback(undefined, resp);
    }

    getProgramDependencies(call, callback) {
      callback(undefined, new langproto.GetProgramDependenciesResponse());
    }
  }

  const server = new grpc.Server({
    "grpc.max_receive_message_length": 400 * 1024 * 1024,
  });
  const impl = new ProgramServer();
  const handlers = {};
  for (const name of Object.keys(langrpc.LanguageRuntimeService)) {
    const method = name.charAt(0).toLowerCase() + name.slice(1);
    if (typeof impl[method] === "function") handlers[name] = impl[method].bind(impl);
  }
  server.addService(langrpc.LanguageRuntimeService, handlers);
  server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, port) => {
    if (err) {
      process.stderr.write(`language host: cannot listen: ${err.message}\n`);
      process.exit(1);
    }
    // The engine reads the port from the first line of stdout.
    process.stdout.write(`${port}\n`);
  });
}

main();
