// The project's test command: build, lint (ESLint, Prettier, the import rules of
// .dependency-cruiser.cjs, publint and arethetypeswrong on the packed package), unit tests,
// then integration, differential and e2e tests against one embedded cluster started for the
// run (and stopped after it, pass or fail). `node scripts/test.mjs unit|integration|differential|e2e`
// runs only that tier.
// The differential tier needs the Go peer cocoon-operator (bench/peer.ts builds it); when it
// cannot be built the tier is skipped with the reason printed.
//
// Within a cluster tier, the files in SERIAL change something every test shares (the CRD,
// the apiserver, a node, controllers that watch every namespace; see test-groups.mjs): they
// run first, one at a time. Then the CRD is installed once and the other files run CONCURRENCY at a time, each
// in its own namespaces.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { CONCURRENCY, SERIAL } from "./test-groups.mjs";

const only = process.argv[2];
const tiers = only ? [only] : ["unit", "integration", "differential", "e2e"];
const cli = join("dist", "cluster", "dev-cli.js");

function step(title, cmd, args, env = {}) {
  const t0 = Date.now();
  process.stdout.write(`\n== ${title}\n`);
  const r = spawnSync(cmd, args, { stdio: "inherit", env: { ...process.env, ...env } });
  const secs = ((Date.now() - t0) / 1000).toFixed(1);
  if (r.status !== 0) {
    process.stdout.write(`== ${title}: FAILED after ${secs}s\n`);
    return false;
  }
  process.stdout.write(`== ${title}: ok in ${secs}s\n`);
  return true;
}

function testFiles(dir) {
  if (!existsSync(dir)) return [];
  const out = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...testFiles(p));
    else if (name.endsWith(".test.js")) out.push(p);
  }
  return out.sort();
}

function must(ok) {
  if (!ok) process.exit(1);
}

must(step("build", "npx", ["tsc", "-p", "tsconfig.json"]));
if (!only) {
  must(
    step("generated files are fresh", process.execPath, [
      join("dist", "scripts", "generate-schema.js"),
      "--check",
    ]),
  );
  must(step("lint", "npx", ["eslint", "."]));
  must(step("format", "npx", ["prettier", "--check", "."]));
  must(step("imports: no cycles, no upward layers", "npm", ["run", "--silent", "lint:deps"]));
  must(step("package: publint, arethetypeswrong", "npm", ["run", "--silent", "lint:package"]));
}

const needsCluster = tiers.some((t) => t !== "unit");
let clusterDir;
const env = {};
if (needsCluster) {
  must(step("toolchain", process.execPath, [cli, "toolchain", "ensure"]));
  clusterDir =
    process.env.COCOONSET_TEST_CLUSTER_DIR ??
    mkdtempSync(join(tmpdir(), "cocoonset-test-cluster-"));
  if (
    !step("embedded cluster up", process.execPath, [
      cli,
      "cluster",
      "up",
      "--state-dir",
      clusterDir,
    ])
  ) {
    spawnSync(process.execPath, [cli, "cluster", "down", "--state-dir", clusterDir], {
      stdio: "inherit",
    });
    process.exit(1);
  }
  env.COCOONSET_TEST_CLUSTER_DIR = clusterDir;
  env.COCOONSET_TEST_KUBECONFIG = join(clusterDir, "kubeconfig");
}

let failed = false;
try {
  for (const tier of tiers) {
    if (tier === "differential") {
      process.stdout.write("\n== the peer for the differential tier\n");
      const peer = spawnSync(process.execPath, [join("dist", "bench", "ensure-peer.js")], {
        stdio: ["ignore", "pipe", "inherit"],
        encoding: "utf8",
      });
      if (peer.status === 2) {
        process.stdout.write(
          `== differential tests SKIPPED: the peer cannot be built:\n${peer.stdout}`,
        );
        continue;
      }
      if (peer.status !== 0) {
        process.stdout.write(`== the peer: FAILED (exit ${peer.status})\n${peer.stdout ?? ""}`);
        failed = true;
        break;
      }
      process.stdout.write(`== the peer: ${peer.stdout}`);
    }
    const files = testFiles(join("dist", "tests", tier));
    if (files.length === 0) {
      process.stdout.write(`no ${tier} tests found\n`);
      failed = true;
      break;
    }
    const alone = SERIAL[tier] ?? {};
    const serial = files.filter((f) => Object.hasOwn(alone, basename(f)));
    const rest = files.filter((f) => !serial.includes(f));
    const args = ["--enable-source-maps", "--test", "--test-reporter=spec"];
    if (tier !== "unit") args.push("--test-timeout=900000");
    const t0 = Date.now();
    if (
      serial.length > 0 &&
      !step(
        `${tier} tests, one at a time`,
        process.execPath,
        [...args, "--test-concurrency=1", ...serial],
        env,
      )
    ) {
      failed = true;
      break;
    }
    if (
      tier !== "unit" &&
      !step("the CRD", process.execPath, [join("dist", "scripts", "ensure-crd.js")], env)
    ) {
      failed = true;
      break;
    }
    const n = Number(process.env.COCOONSET_TEST_CONCURRENCY ?? CONCURRENCY[tier] ?? 1);
    if (
      rest.length > 0 &&
      !step(
        `${tier} tests, ${n} at a time`,
        process.execPath,
        [...args, `--test-concurrency=${n}`, ...rest],
        env,
      )
    ) {
      failed = true;
      break;
    }
    process.stdout.write(`== ${tier} tier: ok in ${((Date.now() - t0) / 1000).toFixed(1)}s\n`);
  }
} finally {
  if (clusterDir && !process.env.COCOONSET_TEST_CLUSTER_DIR) {
    spawnSync(process.execPath, [cli, "cluster", "down", "--state-dir", clusterDir], {
      stdio: "inherit",
    });
  }
}
process.exit(failed ? 1 : 0);
