/**
 * engine/spec/frozen.ts: a result is kept only for a frozen object and only while its context
 * is the same; a content token is shared by objects of equal content, and refused to an object
 * that could still change.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { contentToken, frozen, FrozenMemo } from "../../../engine/spec/frozen.js";

describe("FrozenMemo", () => {
  test("a frozen object's result is kept while the context is the same", () => {
    const memo = new FrozenMemo<object, { n: number }>();
    const o = frozen({ a: 1 });
    let calls = 0;
    const compute = () => ({ n: ++calls });
    assert.equal(memo.get(o, ["x"], compute).n, 1);
    assert.equal(memo.get(o, ["x"], compute).n, 1);
    assert.equal(memo.get(o, ["y"], compute).n, 2, "another context computes again");
    assert.equal(memo.get(frozen({ a: 1 }), ["y"], compute).n, 3, "another object computes again");
    assert.ok(Object.isFrozen(memo.get(o, ["y"], compute)), "a kept result is frozen");
    assert.equal(memo.get(o, undefined, compute).n, 4, "no context: never kept");
  });

  test("an object that is not frozen is never kept", () => {
    const memo = new FrozenMemo<object, number>();
    const o = { a: 1 };
    let calls = 0;
    memo.get(o, ["x"], () => ++calls);
    memo.get(o, ["x"], () => ++calls);
    assert.equal(calls, 2);
  });
});

describe("contentToken", () => {
  test("objects of equal content share one token; another content has another", () => {
    const a = contentToken(frozen({ image: "a", replicas: 2 }));
    const b = contentToken(frozen({ image: "a", replicas: 2 }));
    const c = contentToken(frozen({ image: "b", replicas: 2 }));
    assert.ok(a !== undefined && a === b);
    assert.notEqual(a, c);
  });

  test("an object that is not frozen has none", () => {
    assert.equal(contentToken({ image: "a" }), undefined);
  });
});
