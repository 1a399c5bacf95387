// Launches the Node.js language host of the `pulumi` CLI (cluster/language-host.ts, compiled
// into dist/) for the `pulumi-language-nodejs` shim the toolchain writes. The shim runs this
// file from the program's own copy of pulumi-cocoonset when it has one (the package exports
// this path), else from the checkout that wrote it. It stays CommonJS so any `node` can start
// it; the host itself checks what it needs.
"use strict";

const path = require("node:path");
const { pathToFileURL } = require("node:url");

const host = path.join(__dirname, "..", "dist", "cluster", "language-host.js");
import(pathToFileURL(host).href).then(
  (mod) => mod.main(process.argv.slice(2)),
  (err) => {
    process.stderr.write(
      `language host: cannot load ${host} (build pulumi-cocoonset with \`npm run build\`): ${err.message}\n`,
    );
    process.exit(1);
  },
);
