/** The controller's JSON log lines carry each key once, even when a hook repeats a bound key. */
import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { test } from "node:test";
import { createLogger, logWithFields, reconcileLogger } from "../../../controller/logger.js";
import { duplicateKeys, topLevelKeys } from "../../support/log-keys.js";

function capture() {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, cb) {
      lines.push(...chunk.toString().split("\n").filter(Boolean));
      cb();
    },
  });
  return { lines, log: createLogger({ level: "debug", destination }) };
}

test("topLevelKeys sees a duplicated key that JSON.parse hides", () => {
  assert.deepEqual(topLevelKeys('{"a":1,"b":{"a":2,"c":[{"d":3}]},"a":"x,\\"y"}'), ["a", "b", "a"]);
});

test("a hook's fields never repeat the keys a reconcile logger binds", async () => {
  const { lines, log } = capture();
  const ctx = reconcileLogger(log, { namespace: "ns1", name: "fleet" });
  logWithFields(ctx, "info", "reaped pod", { namespace: "ns1", name: "fleet", reason: "Expired" });
  logWithFields(ctx, "warn", "best-effort delete failed", { namespace: "ns1", name: "cm-1" });
  logWithFields(log.child({ reapId: "r", namespace: "ns2" }), "info", "x", { namespace: "ns2" });
  await new Promise((r) => setImmediate(r));
  assert.equal(lines.length, 3);
  for (const l of lines) assert.deepEqual(duplicateKeys(l), [], l);
  const second = JSON.parse(lines[1]) as Record<string, unknown>;
  assert.equal(second.name, "fleet", "the bound key keeps its value");
  assert.deepEqual(second.detail, { name: "cm-1" }, "a disagreeing field is kept under detail");
});

test("no log line is longer than a few kilobytes, whatever a caller passes", async () => {
  const { lines, log } = capture();
  const ctx = reconcileLogger(log, { namespace: "ns1", name: "fleet" });
  const huge = "e".repeat(172_000);
  ctx.error({ err: huge, attempt: 3 }, "reconcile failed; requeued with backoff");
  logWithFields(ctx, "warn", huge, {
    pods: Array.from({ length: 5000 }, (_, i) => `fleet-${i}`),
    deep: { a: { b: { c: { d: { e: huge } } } } },
    error: new Error(huge),
  });
  await new Promise((r) => setImmediate(r));
  assert.equal(lines.length, 2);
  for (const line of lines) assert.ok(line.length < 16_384, `line of ${line.length} characters`);
  const first = JSON.parse(lines[0]) as { err: string; attempt: number };
  assert.match(first.err, /^e{2048}… \(172000 characters\)$/, "cut, saying how long it was");
  assert.equal(first.attempt, 3, "the small fields are kept");
});
