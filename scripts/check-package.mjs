// The published package as npm and TypeScript users meet it, checked by maintained tools on
// the tarball `npm pack` makes (as built: no scripts run): publint (package.json fields,
// exports, files) and @arethetypeswrong/cli (the types each module resolution finds: node10
// for the `moduleResolution: node` tsconfig `pulumi new typescript` writes, node16 from
// CommonJS and from ES modules, bundlers).
//
// One rule is left out: `cjs-resolves-to-esm`. The package is ES modules only; a CommonJS
// program (the one `pulumi new typescript` writes) loads it with `require`, which Node does
// for ES modules without top-level await since 22.12 (tests/unit/package/install.test.ts
// type-checks such a program against the packed package).
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const out = mkdtempSync(join(tmpdir(), "cocoonset-package-check-"));
try {
  const [packed] = JSON.parse(
    execFileSync("npm", ["pack", "--ignore-scripts", "--json", "--pack-destination", out], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "inherit"],
    }),
  );
  const tarball = join(out, packed.filename);
  const run = (cmd, args) => execFileSync(cmd, args, { stdio: "inherit" });
  run("npx", ["publint", "run", tarball, "--strict"]);
  run("npx", ["attw", tarball, "--ignore-rules", "cjs-resolves-to-esm", "--format", "ascii"]);
} catch (e) {
  process.exitCode = 1;
  if (e.status === undefined) throw e;
} finally {
  rmSync(out, { recursive: true, force: true });
}
