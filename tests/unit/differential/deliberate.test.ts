import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { DELIBERATE } from "../../differential/snapshot.js";

const readme = readFileSync(new URL("../../../../README.md", import.meta.url), "utf8");

describe("README: Differences from cocoon-operator", () => {
  it("lists exactly the deliberate differences the differential tier folds away", () => {
    const section =
      /<!-- deliberate differences: start -->\n([\s\S]*?)<!-- deliberate differences: end -->/.exec(
        readme,
      );
    assert.ok(section, "README has the marked list");
    const items = section[1].split("\n").filter((l) => l.startsWith("- "));
    assert.deepEqual(
      items,
      DELIBERATE.map((d) => `- ${d.what} Why: ${d.reason}.`),
    );
  });
});
