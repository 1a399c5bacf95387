/**
 * LineSplitter: however a stream is cut into chunks, the lines are the text's lines; the text
 * after the last newline is held until its line ends.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { LineSplitter } from "../../../engine/kube/lines.js";

/** `text` cut at `cuts` (offsets, any order, repeats allowed). */
function chunksOf(text: string, cuts: number[]): string[] {
  const at = [...new Set(cuts.map((c) => c % (text.length + 1)))].sort((a, b) => a - b);
  const out: string[] = [];
  let from = 0;
  for (const c of [...at, text.length]) {
    if (c > from) out.push(text.slice(from, c));
    from = Math.max(from, c);
  }
  return out;
}

describe("LineSplitter", () => {
  const table: [string, string[], string[]][] = [
    ["one line in one chunk", ['{"a":1}\n'], ['{"a":1}']],
    ["two lines in one chunk", ["a\nb\n"], ["a", "b"]],
    ["a line across three chunks", ['{"a', '":', "1}\n"], ['{"a":1}']],
    ["a chunk that is only the newline", ["abc", "\n"], ["abc"]],
    ["empty lines are kept (the watch skips them)", ["\n\na\n"], ["", "", "a"]],
    ["an unended line is held", ["a\nb"], ["a"]],
  ];
  for (const [name, chunks, want] of table)
    test(name, () => {
      const s = new LineSplitter();
      assert.deepEqual(
        chunks.flatMap((c) => s.push(c)),
        want,
      );
    });

  test("the held text ends up in the line its newline ends", () => {
    const s = new LineSplitter();
    assert.deepEqual(s.push("par"), []);
    assert.deepEqual(s.push("tial"), []);
    assert.deepEqual(s.push("\nnext"), ["partial"]);
    assert.deepEqual(s.push("\n"), ["next"]);
  });

  test("any chunking gives the text's lines", () => {
    fc.assert(
      fc.property(
        fc.array(fc.string({ unit: fc.constantFrom("a", "é", "{", '"', "\n", " ") }), {
          maxLength: 8,
        }),
        fc.array(fc.nat(), { maxLength: 12 }),
        (parts, cuts) => {
          const text = parts.join("");
          const s = new LineSplitter();
          const got = chunksOf(text, cuts).flatMap((c) => s.push(c));
          const want = text.split("\n").slice(0, -1);
          assert.deepEqual(got, want);
        },
      ),
      { numRuns: 2000 },
    );
  });
});
