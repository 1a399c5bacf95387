/**
 * The README's "from the root" block, run as written: the block is read from README.md (the
 * fenced block after its `tests/e2e/readme-root.test.ts` marker) and run by bash, from a copy
 * of the repository root made of links, with a HOME of its own, so the embedded cluster it
 * starts (the default state folder) and the `~/.pulumi-local` backend are private to the
 * test. Then the fleet it deployed is read from that cluster, and `pulumi destroy` and
 * `cocoonset-dev cluster down` (what the README says next) leave nothing behind.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, describe, it } from "node:test";
import { KubeClient, paths } from "../../engine/kube/index.js";

const root = fileURLToPath(new URL("../../../", import.meta.url));
const MARKER = "<!-- tests/e2e/readme-root.test.ts runs this block as written -->";

/** The shell block after the marker, its indentation (a list item's) removed. */
export function rootBlock(readme: string): string {
  const at = readme.indexOf(MARKER);
  assert.ok(at >= 0, "README.md marks the block this test runs");
  const m = /\n([ \t]*)```sh\n([\s\S]*?)\n[ \t]*```/.exec(readme.slice(at));
  assert.ok(m, "a ```sh block follows the marker");
  const indent = m[1].length;
  return m[2]
    .split("\n")
    .map((l) => l.slice(Math.min(indent, l.search(/\S|$/))))
    .join("\n");
}

describe("the README's 'from the root' block", { timeout: 900_000 }, () => {
  const home = mkdtempSync(join(tmpdir(), "cocoonset-readme-home-"));
  const work = mkdtempSync(join(tmpdir(), "cocoonset-readme-root-"));
  // The repository root as a clone has it after `npm ci`, its files linked: what the block
  // writes (Pulumi.dev.yaml) lands in the copy.
  for (const entry of ["bin", "dist", "node_modules", "examples", "package.json", "Pulumi.yaml"])
    symlinkSync(join(root, entry), join(work, entry));
  // Only what a new shell has: no kubeconfig, Pulumi or cluster settings of the test run
  // (where the toolchain's binaries are, COCOONSET_TOOLCHAIN_DIR or COCOONSET_BIN_DIR, stays).
  const env: Record<string, string> = {};
  const dropped = /^(KUBECONFIG$|PULUMI_|COCOONSET_(CLUSTER_DIR|TEST_|REGISTRY)|XDG_STATE_HOME$)/;
  for (const [k, v] of Object.entries(process.env))
    if (v !== undefined && !dropped.test(k)) env[k] = v;
  env.HOME = home;
  // The toolchain already built stays where it is (the cache is not under HOME's test copy).
  env.XDG_CACHE_HOME = process.env.XDG_CACHE_HOME || join(homedir(), ".cache");
  const bash = (script: string) =>
    spawnSync("bash", ["-euo", "pipefail", "-c", script], {
      cwd: work,
      env,
      encoding: "utf8",
      timeout: 600_000,
    });
  const stateDir = join(home, ".local", "state", "pulumi-cocoonset", "cluster");

  after(() => {
    // What the README says next, whatever happened above; then the copies.
    const down = bash(
      [
        `if [ -f ${stateDir}/state.json ]; then`,
        '  eval "$(./bin/cocoonset-dev cluster env)"',
        '  eval "$(./bin/cocoonset-dev toolchain env)"',
        "  export PULUMI_BACKEND_URL=file://$HOME/.pulumi-local PULUMI_CONFIG_PASSPHRASE=",
        "  pulumi destroy --yes || true",
        "  ./bin/cocoonset-dev cluster down",
        "fi",
      ].join("\n"),
    );
    rmSync(work, { recursive: true, force: true });
    rmSync(home, { recursive: true, force: true });
    assert.equal(down.status, 0, `${down.stdout}\n${down.stderr}`);
  });

  it("deploys the minimal example on a private cluster, and destroy removes it", async () => {
    const block = rootBlock(readFileSync(join(root, "README.md"), "utf8"));
    const up = bash(block);
    assert.equal(up.status, 0, `${block}\n---\n${up.stdout}\n${up.stderr}`);
    // The cluster the block started, in the default state folder under the test's HOME.
    const kubeconfig = join(stateDir, "kubeconfig");
    assert.ok(existsSync(kubeconfig), up.stdout);
    const client = new KubeClient({ kubeconfig });
    try {
      const pods = await client.list(paths.pods("agents"), {
        labelSelector: "cocoonset.cocoonstack.io/name=coder",
      });
      // The example's default: a main agent and 3 sub-agents.
      assert.equal(pods.items.length, 4, pods.items.map((p) => p.metadata.name).join(" "));
      const destroy = bash(
        [
          'eval "$(./bin/cocoonset-dev cluster env)"',
          'eval "$(./bin/cocoonset-dev toolchain env)"',
          "export PULUMI_BACKEND_URL=file://$HOME/.pulumi-local PULUMI_CONFIG_PASSPHRASE=",
          "pulumi destroy --yes",
        ].join("\n"),
      );
      assert.equal(destroy.status, 0, `${destroy.stdout}\n${destroy.stderr}`);
      const left = await client.list(paths.pods("agents"));
      assert.deepEqual(
        left.items.map((p) => p.metadata.name),
        [],
      );
    } finally {
      client.close();
    }
  });
});
