import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { backoffDelayMs, backoffRemainingMs } from "../../../engine/pods/backoff.js";
import {
  parseRebuildHistory,
  readRebuildHistory,
  serializeRebuildHistory,
} from "../../../engine/pods/rebuild-history.js";
import { NOW, cocoonSet, withHistory } from "./fixtures.js";

const T = "2025-06-01T11:59:58.000Z";

describe("parseRebuildHistory is tolerant", () => {
  const empty: [string, string | undefined | null][] = [
    ["missing", undefined],
    ["null value", null],
    ["empty string", ""],
    ["JSON null", "null"],
    ["not JSON", "{count: 1"],
    ["a JSON array", "[1,2]"],
    ["a JSON number", "3"],
  ];
  for (const [title, raw] of empty) {
    it(`reads ${title} as an empty history`, () => assert.equal(parseRebuildHistory(raw).size, 0));
  }

  it("reads well-formed entries by slot number", () => {
    const history = parseRebuildHistory(
      JSON.stringify({ "3": { count: 2, lastDeleted: T }, "12": { count: 1, lastDeleted: T } }),
    );
    assert.deepEqual(
      [...history.entries()],
      [
        [3, { count: 2, lastDeleted: T }],
        [12, { count: 1, lastDeleted: T }],
      ],
    );
  });

  it("drops malformed entries and keeps the rest", () => {
    const history = parseRebuildHistory(
      JSON.stringify({
        "1": { count: 1, lastDeleted: T },
        "2": { count: "1", lastDeleted: T },
        "3": { count: -1, lastDeleted: T },
        "4": { count: 1.5, lastDeleted: T },
        "5": { count: 1, lastDeleted: "yesterday" },
        "6": { count: 1 },
        "7": null,
        x: { count: 1, lastDeleted: T },
        "0": { count: 1, lastDeleted: T },
        "08": { count: 1, lastDeleted: T },
        "9": { count: 4, lastDeleted: T, extra: true },
      }),
    );
    assert.deepEqual([...history.keys()], [1, 9]);
    assert.deepEqual(history.get(9), { count: 4, lastDeleted: T });
  });

  it("reads the annotation of a CocoonSet", () => {
    const cs = withHistory(cocoonSet(), JSON.stringify({ "2": { count: 3, lastDeleted: T } }));
    assert.equal(readRebuildHistory(cs).get(2)?.count, 3);
    assert.equal(readRebuildHistory(cocoonSet()).size, 0);
  });
});

describe("serializeRebuildHistory", () => {
  it("drops slots above replicas and orders keys by slot", () => {
    const history = new Map([
      [12, { count: 1, lastDeleted: T }],
      [3, { count: 2, lastDeleted: T }],
      [5, { count: 4, lastDeleted: T }],
    ]);
    assert.equal(
      serializeRebuildHistory(history, 5),
      `{"3":{"count":2,"lastDeleted":"${T}"},"5":{"count":4,"lastDeleted":"${T}"}}`,
    );
  });

  it("writes an empty object when nothing is left", () => {
    assert.equal(serializeRebuildHistory(new Map([[2, { count: 1, lastDeleted: T }]]), 0), "{}");
  });

  it("round-trips through the parser", () => {
    const history = new Map([
      [1, { count: 1, lastDeleted: T }],
      [7, { count: 3, lastDeleted: T }],
    ]);
    assert.deepEqual(parseRebuildHistory(serializeRebuildHistory(history, 10)), history);
  });
});

describe("backoff", () => {
  const table: [number, number][] = [
    [0, 0],
    [1, 1_000],
    [2, 5_000],
    [3, 30_000],
    [4, 30_000],
    [10, 30_000],
  ];
  for (const [count, ms] of table) {
    it(`waits ${ms / 1000}s after ${count} rebuilds`, () =>
      assert.equal(backoffDelayMs(count), ms));
  }

  it("counts the remaining wait from lastDeleted and the injected now", () => {
    const lastDeleted = new Date(NOW - 2_000).toISOString();
    assert.equal(backoffRemainingMs({ count: 2, lastDeleted }, NOW), 3_000);
    assert.equal(backoffRemainingMs({ count: 3, lastDeleted }, NOW), 28_000);
    assert.equal(backoffRemainingMs({ count: 1, lastDeleted }, NOW), 0);
    assert.equal(backoffRemainingMs({ count: 2, lastDeleted }, NOW + 3_000), 0);
  });

  it("has no wait without an entry", () => assert.equal(backoffRemainingMs(undefined, NOW), 0));

  it("never waits longer than the backoff when lastDeleted is in the future", () => {
    const lastDeleted = new Date(NOW + 3_600_000).toISOString();
    assert.equal(backoffRemainingMs({ count: 2, lastDeleted }, NOW), 5_000);
  });
});
