import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { isZeroQuantity, parseQuantity, quantitiesEqual } from "../../../engine/spec/quantity.js";

describe("quantities", () => {
  const equal: [string | number, string | number][] = [
    ["1Gi", "1024Mi"],
    ["1", "1000m"],
    [2, "2"],
    ["0.5", "500m"],
    ["1k", "1000"],
    ["1e3", "1k"],
    ["1E3", "1000"],
    ["1.5Gi", "1536Mi"],
    ["100u", "100000n"],
    ["1Ei", "1024Pi"],
    ["+1", "1"],
    [".5", "0.5"],
  ];
  for (const [a, b] of equal) {
    it(`${a} equals ${b}`, () => assert.equal(quantitiesEqual(a, b), true));
  }

  const different: [string | number | undefined, string | number | undefined][] = [
    ["1G", "1Gi"],
    ["1", "1001m"],
    ["1", undefined],
    [undefined, "0"],
    ["1E", "1e1"],
  ];
  for (const [a, b] of different) {
    it(`${String(a)} differs from ${String(b)}`, () => assert.equal(quantitiesEqual(a, b), false));
  }

  it("treats two absent quantities as equal", () =>
    assert.equal(quantitiesEqual(undefined, undefined), true));

  it("compares unparsable text literally", () => {
    assert.equal(quantitiesEqual("lots", "lots"), true);
    assert.equal(quantitiesEqual("lots", "1"), false);
  });

  it("rejects what is not a quantity", () => {
    for (const bad of ["", "Gi", "1.2.3", "1 Gi", "1GB", "1e", "--1", "1Ki2"]) {
      assert.equal(parseQuantity(bad), undefined, bad);
    }
  });

  it("parses exact fractions", () => {
    assert.deepEqual(parseQuantity("250m"), { numerator: 250n, denominator: 1000n });
    assert.deepEqual(parseQuantity("-1.5Ki"), { numerator: -15360n, denominator: 10n });
  });

  it("knows zero in any spelling", () => {
    assert.equal(isZeroQuantity("0Gi"), true);
    assert.equal(isZeroQuantity(0), true);
    assert.equal(isZeroQuantity("0.000"), true);
    assert.equal(isZeroQuantity("1m"), false);
    assert.equal(isZeroQuantity("none"), false);
  });
});
