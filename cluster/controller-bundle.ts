/**
 * The controller's module graph as one file: `dist/controller/main.js` and everything it
 * imports (the engine, commander, pino, prom-client) bundled by esbuild into
 * `dist/controller/main.bundle.js`, which the image runs, `cocoonset controller` runs when it
 * is fresh (cli/launch.ts), and the controller benchmark measures. One module instead of some
 * 300 saves the controller about 10 MiB resident at start (docs/benchmarks.md).
 *
 * Left out of the bundle: `yaml`, which the controller loads only for a kubeconfig file
 * (engine/kube/kubeconfig.ts); the image ships it as a package. The licences of the bundled
 * packages are written beside the bundle (`main.bundle.js.LICENSES.txt`).
 *
 *   node dist/cluster/controller-bundle.js   writes the bundle (after `tsc`; `npm run build` does both)
 */
import { buildSync } from "esbuild";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { CONTROLLER_BUNDLE } from "../cli/launch.js";

const PACKAGE_ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** The entry the bundle is built from, relative to the package root. */
const BUNDLE_SOURCE = "dist/controller/main.js";

/** Packages the controller loads lazily, outside the bundle: the image ships them as packages. */
export const LAZY_PACKAGES = ["yaml"];

/** What {@link bundleController} wrote. */
export interface BundleResult {
  /** The bundle, absolute. */
  file: string;
  bytes: number;
  /** The packages inside it, `name@version`, sorted. */
  packages: string[];
  /** The licence file beside it, absolute. */
  licenses: string;
}

function packageOf(input: string): string | undefined {
  const m = /(?:^|\/)node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(input);
  return m?.[1];
}

/** Builds the bundle from the compiled entry under `root` (run `tsc` first). */
export function bundleController(root = PACKAGE_ROOT): BundleResult {
  const entry = join(root, BUNDLE_SOURCE);
  if (!existsSync(entry)) throw new Error(`${entry} is missing: run tsc first`);
  const file = join(root, CONTROLLER_BUNDLE);
  const result = buildSync({
    absWorkingDir: root,
    entryPoints: [entry],
    outfile: file,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node22",
    // Whitespace and syntax only: names stay, so stack traces and log lines read as before.
    minifyWhitespace: true,
    minifySyntax: true,
    legalComments: "none",
    metafile: true,
    logLevel: "silent",
    // The CommonJS packages inside (pino, prom-client) call `require` for Node's modules.
    banner: {
      js: 'import { createRequire as __bundleRequire } from "node:module"; const require = __bundleRequire(import.meta.url);',
    },
  });
  const packages = new Map<string, string>();
  for (const input of Object.keys(result.metafile.inputs)) {
    const name = packageOf(input);
    if (!name || packages.has(name)) continue;
    const dir = join(
      root,
      input.slice(0, input.indexOf(`node_modules/${name}/`)),
      "node_modules",
      name,
    );
    packages.set(name, dir);
  }
  const licenseText: string[] = [];
  const names: string[] = [];
  for (const [name, dir] of [...packages].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const meta = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as {
      version: string;
      license?: string;
    };
    names.push(`${name}@${meta.version}`);
    const files = readdirSync(dir)
      .filter((f) => /^(licen[cs]e|copying|notice)/i.test(f))
      .sort();
    licenseText.push(
      `${name}@${meta.version} (${meta.license ?? "see below"})\n`,
      ...files.map((f) => `\n${readFileSync(join(dir, f), "utf8").trim()}\n`),
      "\n---\n\n",
    );
  }
  const licenses = `${file}.LICENSES.txt`;
  writeFileSync(
    licenses,
    `The packages bundled into ${CONTROLLER_BUNDLE.split("/").pop()}, and their licences.\n\n${licenseText.join("")}`,
  );
  return { file, bytes: readFileSync(file).length, packages: names, licenses };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const r = bundleController();
  process.stdout.write(
    `wrote ${r.file} (${Math.round(r.bytes / 1024)} KiB; ${r.packages.join(", ")})\n`,
  );
}
