import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { DELIBERATE } from "../../differential/snapshot.js";

const page = readFileSync(new URL("../../../../docs/differences.md", import.meta.url), "utf8");

describe("docs/differences.md: Differences from cocoon-operator", () => {
  it("lists exactly the deliberate differences the differential tier folds away", () => {
    const section =
      /<!-- deliberate differences: start -->\n([\s\S]*?)<!-- deliberate differences: end -->/.exec(
        page,
      );
    assert.ok(section, "docs/differences.md has the marked list");
    const items = section[1].split("\n").filter((l) => l.startsWith("- "));
    assert.deepEqual(
      items,
      DELIBERATE.map((d) => `- ${d.what} Why: ${d.reason}.`),
    );
  });
});
