/**
 * What `npm pack` ships: the code users run (the components, the provider, the plugin, the
 * controller, the CLI) and nothing of the development tooling (the toolchain, the embedded
 * cluster, the demo, the image builder: `cocoonset-dev`), the tests, benchmarks, examples or
 * build scripts, and every relative import of a shipped file resolves to another shipped file.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join, normalize } from "node:path";
import { describe, it } from "node:test";
import { repositoryRoot } from "../../../scripts/generate-schema.js";

const root = repositoryRoot();

/** The file list of `npm pack`, without running the package's build scripts. */
function packedFiles(): string[] {
  const out = execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], {
    cwd: root,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
  });
  const [pack] = JSON.parse(out) as { files: { path: string }[] }[];
  return pack.files.map((f) => f.path).sort();
}

/** Relative module specifiers of a compiled ES module (static and dynamic imports). */
function relativeImports(source: string): string[] {
  const specs: string[] = [];
  const patterns = [/\bfrom\s+"(\.{1,2}\/[^"]+)"/g, /\bimport\(\s*"(\.{1,2}\/[^"]+)"\s*\)/g];
  for (const re of patterns) for (const m of source.matchAll(re)) specs.push(m[1]);
  return specs;
}

describe("the published package", () => {
  const files = packedFiles();
  const packed = new Set(files);

  it("ships no development tooling, tests, benchmarks, examples or build scripts", () => {
    const extra = files.filter((f) =>
      /^dist\/(cluster|tests|bench|examples|scripts)\/|^(cluster|tests|bench|examples|scripts|docs)\/|^bin\/cocoonset-dev$/.test(
        f,
      ),
    );
    assert.deepEqual(extra, []);
    // A ceiling, not a count: a folder shipped by mistake (the tests alone are hundreds of
    // files) crosses it; a few new product modules (three files each: .js, .d.ts, .map) do not.
    assert.ok(files.length < 600, `${files.length} files packed`);
  });

  it("ships the command and every export target", () => {
    const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
      exports: Record<string, string | Record<string, string>>;
      bin: Record<string, string>;
    };
    const targets = Object.values(pkg.exports).flatMap((t) =>
      typeof t === "string" ? [t] : Object.values(t),
    );
    const needed = [
      ...targets.map((p) => normalize(p)),
      ...Object.values(pkg.bin).map((p) => normalize(p)),
      "dist/cli/main.js",
      "dist/controller/main.js",
    ];
    assert.deepEqual(
      needed.filter((p) => !packed.has(p)),
      [],
    );
  });

  it("ships its LICENSE, a main and types for `moduleResolution: node`, and source maps that carry their sources", () => {
    const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
      license: string;
      main: string;
      types: string;
      exports: Record<string, { types: string; default: string }>;
    };
    assert.ok(packed.has("LICENSE"), "LICENSE is packed");
    assert.match(readFileSync(join(root, "LICENSE"), "utf8"), /Apache License\s+Version 2\.0/);
    assert.equal(pkg.license, "Apache-2.0");
    assert.equal(normalize(pkg.main), normalize(pkg.exports["."].default));
    assert.equal(normalize(pkg.types), normalize(pkg.exports["."].types));
    assert.ok(packed.has(normalize(pkg.types)), `${pkg.types} is packed`);
    const maps = files.filter((f) => f.endsWith(".js.map"));
    assert.ok(maps.length > 0);
    const bare = maps.filter((f) => {
      const map = JSON.parse(readFileSync(join(root, f), "utf8")) as { sourcesContent?: unknown[] };
      return !Array.isArray(map.sourcesContent) || map.sourcesContent.length === 0;
    });
    assert.deepEqual(bare, [], "a shipped source map points at sources that are not shipped");
  });

  it("has bins that are Node scripts, whose imports are shipped", () => {
    const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
      bin: Record<string, string>;
    };
    for (const bin of Object.values(pkg.bin).map((p) => normalize(p))) {
      const source = readFileSync(join(root, bin), "utf8");
      assert.equal(source.split("\n")[0], "#!/usr/bin/env node", bin);
      const imports = relativeImports(source);
      assert.ok(imports.length > 0, `${bin} imports its entry`);
      for (const spec of imports) {
        const target = normalize(join(dirname(bin), spec));
        assert.ok(packed.has(target), `${bin} imports ${spec}, which is not packed`);
      }
    }
  });

  it("has every relative import of a shipped module inside the package", () => {
    const missing: string[] = [];
    for (const file of files.filter((f) => f.endsWith(".js"))) {
      const source = readFileSync(join(root, file), "utf8");
      for (const spec of relativeImports(source)) {
        const target = normalize(join(dirname(file), spec));
        if (!packed.has(target)) missing.push(`${file} imports ${spec}`);
      }
    }
    assert.deepEqual(missing, []);
  });
});
