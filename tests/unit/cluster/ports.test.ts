/**
 * Port claims (cluster/ports.ts): a port handed out is claimed machine-wide, so two callers
 * picking at once are never handed the same one; a claim older than its hold is taken over.
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync, utimesSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import {
  claimPort,
  freePort,
  PORT_CLAIM_MS,
  PORT_CLAIMS_DIR,
  portFree,
} from "../../../cluster/ports.js";

const dir = mkdtempSync(join(tmpdir(), "port-claims-"));
after(() => rmSync(dir, { recursive: true, force: true }));

test("a port is claimed once; the claim holds until it is older than its hold, then is taken over", () => {
  const now = Date.now();
  assert.equal(claimPort(40_001, dir, now), true, "the first claim");
  assert.equal(claimPort(40_001, dir, now), false, "a second caller is refused");
  assert.equal(claimPort(40_002, dir, now), true, "another port is not held by it");
  assert.equal(claimPort(40_001, dir, now + PORT_CLAIM_MS - 1000), false, "still held");
  assert.equal(claimPort(40_001, dir, now + PORT_CLAIM_MS + 1000), true, "an old claim is taken");
  // The claim taken over is stamped with the time it was taken (the file's mtime).
  assert.equal(claimPort(40_001, dir), false, "and held again");
});

test("a stale claim left on disk is pruned or taken over, never a refusal", () => {
  const old = (Date.now() - PORT_CLAIM_MS - 60_000) / 1000;
  assert.equal(claimPort(40_010, dir), true);
  utimesSync(join(dir, "40010"), old, old);
  assert.equal(claimPort(40_010, dir), true);
});

test("freePort hands out ports that are free and claimed, each once", async () => {
  const ports = [];
  for (let i = 0; i < 20; i++) ports.push(await freePort());
  assert.equal(new Set(ports).size, ports.length, `no port twice: ${ports.join(" ")}`);
  for (const port of ports) {
    assert.ok(await portFree(port), `${port} is free`);
    assert.ok(existsSync(join(PORT_CLAIMS_DIR, String(port))), `${port} is claimed`);
    assert.equal(claimPort(port), false, `${port} is not handed to another caller`);
  }
  // A port something listens on is never handed out, claimed or not.
  const srv = createServer();
  await new Promise<void>((resolve) => srv.listen(0, "127.0.0.1", resolve));
  const { port } = srv.address() as { port: number };
  assert.equal(await portFree(port), false);
  srv.close();
});
