/**
 * `scripts/test.mjs` runs most files of a cluster tier concurrently and the files in
 * `SERIAL` (scripts/test-groups.mjs) alone. A file that removes the CRD (or runs an Operator
 * that installs it: its destroy deletes it), restarts the apiserver or changes one of the
 * cluster's nodes while others run breaks them at random, so every such file
 * must be listed; and every listed file must exist. Pure: reads the test sources only.
 */
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = fileURLToPath(new URL("../../../../", import.meta.url));

/** What makes a file change something every concurrent test shares. */
const SHARED: [(text: string) => boolean, string][] = [
  [(t) => /\bremoveCrd\(/.test(t), "removes the CRD"],
  [(t) => /\brestartApiserver\(/.test(t), "restarts the apiserver"],
  // An Operator that does not adopt the tier's CRD installs its own, and its destroy deletes it.
  [
    (t) =>
      /withOperator|cocoonset:index:Operator|\bnew Operator\(|\btemplateLifecycle\(/.test(t) &&
      !/\badoptCrd\b|\badoptTierCrd\(/.test(t),
    "runs an Operator that installs the CRD",
  ],
  // The cluster's own nodes (a test that adds a node of its own may change that one).
  [
    (t) =>
      /\.(patch|replace|delete)\(\s*`\$\{paths\.nodes\(\)\}\//.test(t) && t.includes('"kwok-node-'),
    "changes a node of the cluster",
  ],
];

const groups = (await import(pathToFileURL(join(root, "scripts", "test-groups.mjs")).href)) as {
  SERIAL: Record<string, Record<string, string>>;
};

for (const tier of ["integration", "e2e", "differential"]) {
  void describe(`the ${tier} tier's serial group`, () => {
    const dir = join(root, "tests", tier);
    const serial = groups.SERIAL[tier] ?? {};
    for (const name of readdirSync(dir).filter((n) => n.endsWith(".test.ts"))) {
      const text = readFileSync(join(dir, name), "utf8");
      const why = SHARED.filter(([does]) => does(text)).map(([, what]) => what);
      if (why.length === 0) continue;
      it(`lists ${name}, which ${why.join(" and ")}`, () => {
        assert.ok(
          Object.hasOwn(serial, name.replace(/\.ts$/, ".js")),
          `${name} ${why.join(" and ")}: add it to SERIAL.${tier} in scripts/test-groups.mjs`,
        );
      });
    }
    it("names only files that exist", () => {
      const missing = Object.keys(serial).filter(
        (js) => !existsSync(join(dir, js.replace(/\.js$/, ".ts"))),
      );
      assert.deepEqual(missing, []);
    });
  });
}
