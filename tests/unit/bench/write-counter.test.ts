import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { reads, requestKey, writes } from "../../../bench/write-counter.js";

describe("the counting proxy's keys", () => {
  const table: [string, string, string][] = [
    ["GET", "/api/v1/namespaces/a/pods?labelSelector=x%3Dy", "LIST pods"],
    ["GET", "/api/v1/pods?labelSelector=x&watch=true&resourceVersion=5", "WATCH pods"],
    ["GET", "/api/v1/watch/namespaces/a/pods", "WATCH pods"],
    ["GET", "/api/v1/namespaces/a/pods/p-1", "GET pods"],
    ["GET", "/apis/cocoonset.cocoonstack.io/v1/namespaces/a/cocoonsets/f", "GET cocoonsets"],
    ["GET", "/apis/cocoonset.cocoonstack.io/v1/cocoonsets?watch=1", "WATCH cocoonsets"],
    ["GET", "/apis/cocoonset.cocoonstack.io/v1/cocoonsets?watch=false", "LIST cocoonsets"],
    ["GET", "/apis/coordination.k8s.io/v1/namespaces/a/leases/l", "GET leases"],
    ["GET", "/api/v1/namespaces/a", "GET namespaces"],
    ["GET", "/api/v1/namespaces", "LIST namespaces"],
    ["GET", "/apis/cocoonset.cocoonstack.io/v1", "GET apis/cocoonset.cocoonstack.io/v1"],
    ["GET", "/version", "GET version"],
    [
      "PATCH",
      "/apis/cocoonset.cocoonstack.io/v1/namespaces/a/cocoonsets/f/status",
      "PATCH cocoonsets/status",
    ],
    ["POST", "/api/v1/namespaces/a/pods", "POST pods"],
  ];
  for (const [method, url, key] of table)
    it(`${method} ${url} → ${key}`, () => assert.equal(requestKey(method, url), key));

  it("sums reads by verb, leaving discovery out, and writes apart", () => {
    const counts = {
      "GET pods": 2,
      "LIST pods": 3,
      "WATCH pods": 1,
      "LIST cocoonsets": 1,
      "GET apis/cocoonset.cocoonstack.io/v1": 4,
      "GET version": 1,
      "POST pods": 5,
    };
    assert.deepEqual(reads(counts), { GET: 2, LIST: 4, WATCH: 1 });
    assert.equal(writes(counts), 5);
  });
});
