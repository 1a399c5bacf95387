/**
 * Finds or builds the Go peer `cocoon-operator` (see ./peer.ts) and says where it is.
 * Exit 0 with the binary's path on stdout; exit 2 with the reason when it cannot be had.
 * `scripts/test.mjs` runs this before the differential tier and skips the tier on exit 2.
 *
 * Usage: `node dist/bench/ensure-peer.js`.
 */
import { ensurePeer } from "./peer.js";

const peer = await ensurePeer((line) => process.stderr.write(`${line}\n`));
if (peer.ok) {
  process.stdout.write(`${peer.binary}\n`);
} else {
  process.stdout.write(`${peer.reason}\n`);
  process.exitCode = 2;
}
